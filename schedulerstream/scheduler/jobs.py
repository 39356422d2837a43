"""JobRecords: the jobs of a scheduler task's store, and the indexes kept in step with them.

A job is two logged records (``keys``): its timer state (``job/``, a SchedulerJob rewritten at
each emission) and its definition (``def/``, written when a mutation sets it). The state holds
a reference to the definition (``state.definition_ref``), so an emission does not rewrite the
payload and target. The derived ``due/`` and ``bf/`` keys follow each save and each restored
record.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterator
from typing import Protocol

from schedulerstream.codec import MARKER, Codec
from schedulerstream.errors import CodecError, StateError, UndecodableRecord
from schedulerstream.scheduler import keys
from schedulerstream.scheduler.plan import JobPlan, PlanCache
from schedulerstream.scheduler.records import FastRecords
from schedulerstream.scheduler.state import JobState, definition_ref, is_ref

log = logging.getLogger(__name__)


class Store(Protocol):
    """The part of a task's state store the scheduler uses."""

    def get(self, key: bytes) -> bytes | None: ...

    def put(self, key: bytes, value: bytes, *, logged: bool = True) -> None: ...

    def delete(self, key: bytes, *, logged: bool = True) -> None: ...

    def range(self, start: bytes, end: bytes | None) -> Iterator[tuple[bytes, bytes]]: ...


class JobRecords:
    """Loads and saves job states and definitions; builds plans through ``plans``.

    ``inline_definitions``: save each definition inside its job record, as versions before
    the ``def/`` key did (their schedulers read no reference), and rewrite so, chunk by chunk
    (``inline_chunk``), the records that hold a reference: for a rolling restart beside such
    versions, on an upgrade from them or before a downgrade to them
    (``SCHEDULERSTREAM_SCHEDULER_INLINE_DEFINITIONS``)."""

    def __init__(self, codec: Codec, plans: PlanCache, *, inline_definitions: bool = False) -> None:
        self.codec = codec
        self.records = FastRecords.for_codec(codec)  # None: encode with the codec
        self.plans = plans
        self.inline_definitions = inline_definitions
        # per store: no due key is below this one. The timer scan starts here, not at the
        # prefix start, where the due keys already emitted lie deleted until compaction.
        self.due_floor: weakref.WeakKeyDictionary[Store, bytes] = weakref.WeakKeyDictionary()
        # per store: the job key the next ``inline_chunk`` starts at (None: every one done)
        self._inline_from: weakref.WeakKeyDictionary[Store, bytes | None] = (
            weakref.WeakKeyDictionary()
        )

    def load(self, store: Store, job_key: str) -> JobState | None:
        data = store.get(keys.job_store_key(job_key))
        return None if data is None else self.decode_state(data)

    def _newer_schema(self, data: bytes) -> bool:
        """An Avro single-object record whose schema this codec does not know: a newer
        version's."""
        return (
            data[:2] == MARKER
            and len(data) >= 10
            and (bytes(data[2:10]) not in self.codec.by_fingerprint)
        )

    def decode_state(self, data: bytes) -> JobState:
        if self.records is None:
            return JobState.decode(self.codec, data)
        return self.records.read_job(data)

    def plan_of(self, store: Store, job_key: str, state: JobState) -> JobPlan:
        definition = state.definition
        if is_ref(definition):
            plan = self.plans.cached(job_key, state.version, definition)
            if plan is not None:
                return plan
            definition = self._stored_definition(store, job_key, definition)
        return self.plans.get(job_key, state.version, definition)

    def definition_of(self, store: Store, job_key: str, state: JobState) -> bytes:
        """``state``'s JobDefinition bytes (its plan's, or read from ``def/``, when it holds
        a reference)."""
        ref = state.definition
        if not is_ref(ref):
            return ref
        plan = self.plans.cached(job_key, state.version, ref)
        return plan.definition if plan is not None else self._stored_definition(store, job_key, ref)

    @staticmethod
    def _stored_definition(store: Store, job_key: str, ref: bytes) -> bytes:
        """The definition under ``def/``; CodecError (this job's alone) when it is missing or
        is not the one ``ref`` refers to."""
        data = store.get(keys.def_store_key(job_key))
        if data is None:
            raise CodecError(f"job {job_key!r}: its definition is missing from the state")
        if definition_ref(data) != ref:
            raise CodecError(f"job {job_key!r}: the stored definition is not the one its state "
                             "refers to")  # fmt: skip
        return data

    def save(
        self, store: Store, job_key: str, old: JobState | None, new: JobState | None,
        old_due_key: bytes | None = None,
    ) -> None:  # fmt: skip
        """Write the job's records (logged) and keep the derived indexes in step
        (``old_due_key``: ``old``'s due key, when the caller has it at hand). A definition
        ``new`` carries goes under its own key and ``new`` keeps a reference to it; both
        records are written, or neither."""
        state_key, def_key = keys.job_store_key(job_key), keys.def_store_key(job_key)
        if new is None:
            store.delete(state_key)
            store.delete(def_key)
            self._reindex(store, job_key, old, new, old_due_key)
            return
        definition = new.definition
        if self.inline_definitions and is_ref(definition):
            new.definition = self.definition_of(store, job_key, new)
        carried = not self.inline_definitions and not is_ref(definition)
        if carried:
            new.definition = definition_ref(definition)
        try:
            value = new.encode(self.codec) if self.records is None else self.records.job(new)
        except BaseException:
            new.definition = definition
            raise
        if carried:
            previous = store.get(def_key)
            store.put(def_key, definition)
            try:
                store.put(state_key, value)
            except BaseException:  # too large, say: the job keeps its earlier records (the
                # undo is logged: a tick or a quarantine goes on past this job, no rollback)
                if previous is None:
                    store.delete(def_key)
                else:
                    store.put(def_key, previous)
                new.definition = definition
                raise
        else:
            store.put(state_key, value)
        self._reindex(store, job_key, old, new, old_due_key)

    def _reindex(
        self, store: Store, job_key: str, old: JobState | None, new: JobState | None,
        old_due_key: bytes | None = None,
    ) -> None:  # fmt: skip
        old_due = None if old is None else old.next_emit_us
        new_due = None if new is None else new.next_emit_us
        if old_due != new_due:
            if old_due is not None:
                if old_due_key is None:
                    old_due_key = keys.due_key(old_due, job_key)
                store.delete(old_due_key, logged=False)
            if new_due is not None:
                due_key = (
                    keys.due_key(new_due, job_key)
                    if old_due_key is None
                    else keys.moved_due_key(old_due_key, new_due)
                )
                store.put(due_key, b"", logged=False)
                floor = self.due_floor.get(store)
                if floor is not None and due_key < floor:
                    self.due_floor[store] = due_key
        had = bool(old and old.backfills)
        has = bool(new and new.backfills)
        if had and not has:
            store.delete(keys.backfill_key(job_key), logged=False)
        elif has and not had:
            store.put(keys.backfill_key(job_key), b"", logged=False)

    def restore_record(self, store: Store, key: bytes, value: bytes | None) -> None:
        """Apply one changelog record during restore, rebuilding the derived indexes (a job
        record that cannot be read raises ``UndecodableRecord`` first: the restore skips it)."""
        if key.startswith(keys.DEF_PREFIX):
            if value is None:
                store.delete(key, logged=False)
            else:
                store.put(key, value, logged=False)
            return
        if not key.startswith(keys.JOB_PREFIX):
            return
        job_key = keys.job_key_of(key)
        try:
            new = None if value is None else self.decode_state(value)
        except Exception as exc:  # a pure decode of bytes: whatever it raises, they are unreadable
            if value is not None and self._newer_schema(value):  # skipping it would lose the job
                raise StateError(
                    f"key {key[:80]!r}: a job record of a schema this version does not know "
                    f"(fingerprint {value[2:10].hex()}): upgrade this member before it "
                    "restores this partition"
                ) from exc
            raise UndecodableRecord.at(key, exc) from exc
        old = self.load(store, job_key)
        if value is None:
            store.delete(key, logged=False)
        else:
            store.put(key, value, logged=False)
        self._reindex(store, job_key, old, new)

    def forget_due_floor(self, store: Store) -> None:
        """``store`` was restored or rebuilt: scan its timers from the first due key again
        (and its job records, in inline mode)."""
        self.due_floor.pop(store, None)
        self._inline_from.pop(store, None)

    def inline_chunk(self, store: Store, limit: int) -> int:
        """Rewrite up to ``limit`` job records that hold a reference with their definition,
        from where the last chunk stopped; how many. A job whose definition cannot be read
        keeps its reference (its own failure, logged)."""
        start = self._inline_from.get(store, keys.JOB_PREFIX)
        if start is None:
            return 0
        chunk: list[tuple[bytes, bytes]] = []
        for item in store.range(start, keys.JOB_END):
            if len(chunk) >= limit:
                self._inline_from[store] = item[0]
                break
            chunk.append(item)
        else:
            self._inline_from[store] = None
            log.info("inline definitions: every job record of the store at %s is read; each "
                     "holds its definition but those logged as keeping a reference",
                     getattr(store, "path", "(in memory)"))  # fmt: skip
        rewritten = 0
        for key, value in chunk:
            job_key = keys.job_key_of(key)
            try:
                state = self.decode_state(value)
                if not is_ref(state.definition):
                    continue
                self.save(store, job_key, state, state.copy())
            except CodecError as exc:
                log.error("job %s keeps a reference to its definition: %s", job_key, exc)
                continue
            rewritten += 1
        return rewritten
