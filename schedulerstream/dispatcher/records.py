"""The dispatcher's per-partition state: run records and the keys of its indexes.

Keys (logged to the changelog unless marked derived: those are rebuilt from the run records
on restore):

- ``run/{run id}`` → a ``RunRecord`` (a JSON array)
- ``q/{tenant}/{due µs, 16 hex}{seq, 16 hex}`` → run id (derived): the tenant's queue, earliest
  due first
  (due = not_before for a first attempt, retry_at for a retry kept locally)
- ``active/{job key}/{run id}`` (derived) → runs of the job that started and are not finished
- ``buf/{job key}`` → the run waiting behind an active one (``buffer_one``)
- ``gone/{job key}`` → ``{version, reason}``: the target answered 410 for that job version
- ``done/{finished µs, 16 hex}/{run id}`` (derived from a run record's ``finished_us``; logged
  by format 2, read back from older changelogs) → finished runs, pruned after the dedupe
  retention
- ``ctr/seq`` → the queue sequence counter
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import orjson

from schedulerstream.dispatch_spec import DispatchSpec
from schedulerstream.dispatcher.states import (
    BUFFERED,
    OUTCOME_OF,
    QUEUED,
    STATUS_OF,
    TERMINAL,
    AttemptOutcome,
    RunStatus,
)
from schedulerstream.errors import StateError, UndecodableRecord
from schedulerstream.jsontext import compact
from schedulerstream.runtime.store import StateStore

log = logging.getLogger(__name__)

SEQ_KEY = b"ctr/seq"
FORMAT = 3  # of a RunRecord's bytes (a JSON array starting with it); 2 is read too
_FIELDS = {2: 18, 3: 19}  # fields of each format


_DECODED_LIMIT = 20_000
# bytes of the run records saved last (not yet ended) → their fields: a record is read back
# (to start it, to end its attempt) as the bytes it was saved as, so it is not parsed again
_decoded: OrderedDict[bytes, tuple[Any, ...]] = OrderedDict()  # (a dict's oldest key is
# found by skipping the slots of every key deleted before it: slow as a FIFO)


def _dumps(value: Any) -> bytes:
    """Compact JSON; orjson (several times faster) unless a string holds a lone surrogate."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return compact(value).encode()


def _loads(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:  # a lone surrogate escape, which json reads
        return json.loads(raw)


@dataclass(slots=True)
class RunRecord:
    """One run as the dispatcher knows it; ``attempt`` is the last attempt started (0: none).
    Its ``status`` changes only through ``states.move`` and ``states.end``.

    ``spec`` is what the dispatcher needs of the job's definition (it and ``payload_json`` are
    None once the run ended);
    ``finished_us`` when it ended (0: it has not, or it ended in format 2, which logged its
    ``done/`` key instead).
    """

    run_id: str
    tenant: str
    job_id: str
    scheduled_at_us: int
    not_before_us: int
    accepted_at_us: int
    trigger: str
    payload_json: str | None
    job_version: int
    spec: DispatchSpec | None
    status: RunStatus = QUEUED
    attempt: int = 0
    due_us: int = 0
    seq: int = 0
    deadline_us: int = 0
    last_error: str | None = None
    outcome: AttemptOutcome | None = None  # once it ended
    finished_us: int = 0

    @property
    def not_started(self) -> bool:
        return self.attempt == 0 and self.status in (QUEUED, BUFFERED)

    @property
    def job_key(self) -> str:
        return f"{self.tenant}/{self.job_id}"

    def to_bytes(self) -> bytes:
        """A JSON array (format 3): cheaper to write and read than an object per field."""
        spec = None if self.spec is None else self.spec.to_list()
        fields = [
            FORMAT, self.run_id, self.tenant, self.job_id, self.scheduled_at_us,
            self.not_before_us, self.accepted_at_us, self.trigger, self.payload_json,
            self.job_version, spec, self.status, self.attempt, self.due_us, self.seq,
            self.deadline_us, self.last_error, self.outcome, self.finished_us,
        ]  # fmt: skip
        raw = _dumps(fields)
        if self.spec is not None:  # it has not ended: it will be read again
            if len(_decoded) >= _DECODED_LIMIT:
                _decoded.popitem(last=False)  # the oldest
            _decoded[raw] = (
                self.run_id, self.tenant, self.job_id, self.scheduled_at_us, self.not_before_us,
                self.accepted_at_us, self.trigger, self.payload_json, self.job_version,
                self.spec, self.status, self.attempt, self.due_us, self.seq, self.deadline_us,
                self.last_error, self.outcome, self.finished_us,
            )  # fmt: skip
        return raw

    @classmethod
    def from_bytes(cls, raw: bytes) -> RunRecord:
        known = _decoded.pop(raw, None)
        if known is not None:  # each save is read back once, or it is dropped as the oldest
            return cls(*known)
        data = _loads(raw)
        if not isinstance(data, list) or not data or _FIELDS.get(data[0]) != len(data):
            raise StateError(f"run record of an unknown format (want a {FORMAT}-format array "
                             f"of {_FIELDS[FORMAT]} fields): {raw[:80]!r}")  # fmt: skip
        spec = None if data[10] is None else DispatchSpec.from_list(data[10])
        (_, run_id, tenant, job_id, scheduled, not_before, accepted, trigger, payload, version,
         _, status, attempt, due, seq, deadline, error, outcome) = data[:18]  # fmt: skip
        return cls(
            run_id, tenant, job_id, scheduled, not_before, accepted, trigger, payload, version,
            spec, STATUS_OF.get(status) or _status(status), attempt, due, seq, deadline, error,
            outcome if outcome is None else OUTCOME_OF.get(outcome) or _outcome(outcome),
            data[18] if len(data) > 18 else 0,
        )  # fmt: skip

    def run_view(self) -> dict[str, Any]:
        """The fields of the ``RunTriggered`` record, for ``Delivery.from_run``."""
        return {
            "run_id": self.run_id,
            "tenant": self.tenant,
            "job_id": self.job_id,
            "scheduled_at_us": self.scheduled_at_us,
            "trigger": self.trigger,
            "payload_json": self.payload_json,
        }


def _status(value: str) -> RunStatus:
    return STATUS_OF.get(value) or RunStatus(value)  # an unknown one raises ValueError


def _outcome(value: str | None) -> AttemptOutcome | None:
    return None if value is None else OUTCOME_OF.get(value) or AttemptOutcome(value)


def load(store: StateStore, run_id: str) -> RunRecord | None:
    raw = store.get(run_key(run_id))
    return None if raw is None else RunRecord.from_bytes(raw)


def save(store: StateStore, run: RunRecord) -> None:
    store.put(run_key(run.run_id), run.to_bytes())


def save_finished(store: StateStore, run: RunRecord, now_us: int) -> None:
    """Save ``run``, which ended (or was revoked) at ``now_us``, with its ``done/`` key (derived:
    the changelog carries the run record alone). It is kept for the dedupe retention only to
    drop replays, so it keeps neither spec nor payload (a payload of up to
    ``max_payload_bytes``, kept for days in the store and its changelog)."""
    run.finished_us = now_us
    run.spec = run.payload_json = None
    save(store, run)
    store.put(done_key(now_us, run.run_id), b"", logged=False)


def next_seq(store: StateStore) -> int:
    """The next queue sequence number, saved. A counter that is not an integer counts as
    absent (logged): one bad value must not fail every arrival of its partition."""
    raw = store.get(SEQ_KEY)
    try:
        seq = int(raw) + 1 if raw else 1
    except ValueError:
        log.error("queue counter %r holds %r, not an integer: counting again from 1",
                  SEQ_KEY, (raw or b"")[:80])  # fmt: skip
        seq = 1
    store.put(SEQ_KEY, str(seq).encode())
    return seq


def unindex(store: StateStore, run: RunRecord) -> None:
    """Remove ``run`` from its tenant queue and the job's buffer slot (the in-memory queue
    entry is dropped when it reaches the head)."""
    if run.status == QUEUED:
        store.delete(queue_key(run.tenant, run.due_us, run.seq), logged=False)
    elif run.status == BUFFERED:
        store.delete(buffer_key(run.job_key))


def restore(store: StateStore, key: bytes, value: bytes | None) -> None:
    """Apply one changelog record while restoring, rebuilding the derived keys; a run record
    or sequence counter that cannot be read raises ``UndecodableRecord`` before anything is
    written (the restore skips it).

    ``q/``, ``active/`` and (format 3) ``done/`` keys are derived from run records, never
    changelogged: a run record puts or deletes the queue key of its (tenant, due, seq), its
    active key and its done key; the tombstone of a finished run deletes its done key. (A queue
    key of an earlier position compacted away stays behind: it is dropped when it reaches the
    head of its queue; a done key left by a run that ended, was re-armed and ended again is
    dropped by the prune.)"""
    run = None if value is None else _restored(key, value)
    if value is None:
        if key.startswith(RUN_PREFIX):
            _forget_done(store, key)
        store.delete(key, logged=False)
    else:
        store.put(key, value, logged=False)
    if run is None:
        return
    if run.finished_us and run.status in TERMINAL:
        store.put(done_key(run.finished_us, run.run_id), b"", logged=False)
    qkey = queue_key(run.tenant, run.due_us, run.seq)
    if run.status == QUEUED:
        store.put(qkey, run.run_id.encode(), logged=False)
    else:
        store.delete(qkey, logged=False)
    akey = active_key(run.job_key, run.run_id)
    if run.attempt > 0 and run.status not in TERMINAL:
        store.put(akey, b"", logged=False)
    else:
        store.delete(akey, logged=False)


RUN_PREFIX = b"run/"


def _restored(key: bytes, value: bytes) -> RunRecord | None:
    """The run record ``value`` holds (None for another key), or ``UndecodableRecord``."""
    try:
        if key == SEQ_KEY:
            int(value)
            return None
        if not key.startswith(RUN_PREFIX):
            return None
        run = RunRecord.from_bytes(value)
        queue_key(run.tenant, run.due_us, run.seq)  # the keys it derives can be made
        active_key(run.job_key, run.run_id)
        return run
    except Exception as exc:  # a pure decode of bytes: whatever it raises, they are unreadable
        newer = _newer_format(value)
        if newer is not None:  # written by a newer version: skipping it would lose the run
            raise StateError(
                f"key {key[:80]!r}: a run record of format {newer}, newer than this version "
                f"reads ({FORMAT}): upgrade this member before it restores this partition"
            ) from exc
        raise UndecodableRecord.at(key, exc) from exc


def _newer_format(value: bytes) -> int | None:
    """The format of a run record a newer version wrote (a JSON array led by a format number
    above ``FORMAT``), else None."""
    try:
        data = json.loads(value)
    except ValueError:
        return None
    if isinstance(data, list) and data and type(data[0]) is int and data[0] > FORMAT:
        return data[0]
    return None


def _forget_done(store: StateStore, key: bytes) -> None:
    """Delete the derived done key of the run record at ``key`` (about to be deleted)."""
    raw = store.get(key)
    if raw is None:
        return
    run = RunRecord.from_bytes(raw)
    if run.finished_us:
        store.delete(done_key(run.finished_us, run.run_id), logged=False)


def run_key(run_id: str) -> bytes:
    return RUN_PREFIX + run_id.encode()


def queue_prefix(tenant: str) -> bytes:
    return b"q/" + tenant.encode() + b"/"


def queue_key(tenant: str, due_us: int, seq: int) -> bytes:
    return queue_prefix(tenant) + b"%016x%016x" % (max(0, due_us), seq)


def queue_entry(key: bytes) -> tuple[int, int]:
    """(due µs, seq) of a queue key."""
    return int(key[-32:-16], 16), int(key[-16:], 16)


def tenant_of_queue_key(key: bytes) -> str:
    return key[2 : key.rindex(b"/")].decode()


def done_key(finished_us: int, run_id: str) -> bytes:
    return b"done/%016x/" % max(0, finished_us) + run_id.encode()


def done_run_id(key: bytes) -> str:
    return key[len(b"done/0000000000000000/") :].decode()


def done_at(key: bytes) -> int:
    """The finished µs of a done key."""
    return int(key[5:21], 16)


def active_prefix(job_key: str) -> bytes:
    return b"active/" + job_key.encode() + b"/"


def active_key(job_key: str, run_id: str) -> bytes:
    return active_prefix(job_key) + run_id.encode()


def active_run_id(key: bytes) -> str:
    """The run id of an ``active/{tenant}/{job}/{run id}`` key (run ids contain '/')."""
    return key.split(b"/", 3)[3].decode()


def buffer_key(job_key: str) -> bytes:
    return b"buf/" + job_key.encode()


def gone_key(job_key: str) -> bytes:
    return b"gone/" + job_key.encode()


def encode_json(value: dict[str, Any]) -> bytes:
    return _dumps(value)


def decode_json(raw: bytes) -> dict[str, Any]:
    value: dict[str, Any] = _loads(raw)
    return value
