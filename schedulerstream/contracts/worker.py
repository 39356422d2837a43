"""The worker wire format: the JSON records between the dispatcher and a worker pool.

The dispatcher (schedulerstream/dispatcher) writes offers and cancels and reads events; the
worker SDK (schedulerstream/worker) reads offers and cancels and writes events.

Dispatcher → ``{prefix}work.{pool}`` (key = run id; the default partitioner, so a run's offer
and cancel share a partition and arrive in order):

- offer: the webhook envelope of the attempt plus ``kind: "offer"``, ``pool``, ``lease_ms``,
  ``offered_at_us``, ``deadline_at_us`` and ``dispatcher_partition``;
- cancel: ``{kind: "cancel", run_id, attempt, reason, dispatcher_partition}``.

Worker → ``{prefix}worker-events`` (key = run id, partition = murmur2(job key) % P, so it
reaches the dispatcher task that owns the run): ``{kind, run_id, attempt, worker, at_us}``
with ``kind`` one of claimed, heartbeat, succeeded, failed; ``failed`` adds ``reason`` and
``retryable``; outcomes may add ``duration_us``. The attempt number is the fencing token.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from pydantic import JsonValue

from schedulerstream.errors import RejectedRecord
from schedulerstream.jsontext import compact

OFFER, CANCEL = "offer", "cancel"
EVENT_KINDS = frozenset({"claimed", "heartbeat", "succeeded", "failed"})
OUTCOME_KINDS = frozenset({"succeeded", "failed"})
MAX_REASON = 2000


@dataclass(frozen=True, slots=True)
class WorkOffer:
    """One attempt of one run, offered to a pool; claim it before ``claim_until_us``."""

    run_id: str
    tenant: str
    job_id: str
    scheduled_at: str
    attempt: int
    trigger: str
    payload: JsonValue
    pool: str
    lease_ms: int
    offered_at_us: int
    deadline_at_us: int
    dispatcher_partition: int

    @property
    def job_key(self) -> str:
        return f"{self.tenant}/{self.job_id}"

    @property
    def claim_until_us(self) -> int:
        """After this the dispatcher has expired the offer's lease (and re-offers the run)."""
        return min(self.deadline_at_us, self.offered_at_us + self.lease_ms * 1000)


@dataclass(frozen=True, slots=True)
class WorkCancel:
    """Stop ``attempt`` of ``run_id`` (cancelled, replaced, timed out or lease expired)."""

    run_id: str
    attempt: int
    reason: str
    dispatcher_partition: int


@dataclass(frozen=True, slots=True)
class WorkerEvent:
    """A worker's report on one attempt."""

    kind: str
    run_id: str
    attempt: int
    worker: str
    at_us: int
    reason: str | None = None
    retryable: bool = True
    duration_us: int | None = None

    @property
    def job_key(self) -> str:
        return self.run_id.partition("@")[0]

    def to_bytes(self) -> bytes:
        data = {k: v for k, v in asdict(self).items() if v is not None}
        return compact(data).encode()


def offer_value(envelope: str, pool: str, lease_ms: int, offered_at_us: int,
                deadline_at_us: int, dispatcher_partition: int) -> bytes:  # fmt: skip
    """The offer record's value (its key is the run id): the attempt's webhook envelope
    (``targets.envelope``, as ASCII JSON text) plus ``kind`` and the lease terms."""
    terms = compact({"pool": pool, "lease_ms": lease_ms, "offered_at_us": offered_at_us,
                     "deadline_at_us": deadline_at_us,
                     "dispatcher_partition": dispatcher_partition})  # fmt: skip
    return f'{{"kind":"{OFFER}",{envelope[1:-1]},{terms[1:]}'.encode("ascii")


def cancel_value(run_id: str, attempt: int, reason: str, dispatcher_partition: int) -> bytes:
    """The cancel record's value (its key is the run id)."""
    value = asdict(WorkCancel(run_id, attempt, reason[:MAX_REASON], dispatcher_partition))
    return compact({"kind": CANCEL, **value}).encode("ascii")


def _object(key: bytes | None, value: bytes | None, what: str) -> tuple[str, dict[str, Any]]:
    if not key:
        raise RejectedRecord(f"{what} has no key (expected the run id)")
    try:
        run_id = key.decode()
        data = json.loads(value or b"")
    except (UnicodeDecodeError, ValueError) as exc:
        raise RejectedRecord(f"{what} is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise RejectedRecord(f"{what} must be a JSON object")
    if data.get("run_id") != run_id:
        raise RejectedRecord(f"{what} run_id {data.get('run_id')!r} differs from its key")
    return run_id, data


def _field(data: dict[str, Any], name: str, kind: type | tuple[type, ...], what: str) -> Any:
    found = data.get(name)
    if not isinstance(found, kind) or (isinstance(found, bool) and kind is int):
        raise RejectedRecord(f"{what}: field {name!r} is missing or of the wrong type")
    return found


def decode_work(key: bytes | None, value: bytes | None) -> WorkOffer | WorkCancel:
    """An offer or a cancel of a work topic; RejectedRecord when malformed."""
    _, data = _object(key, value, "work record")
    kind = data.get("kind")
    what = f"work record ({kind})"
    if kind == CANCEL:
        return WorkCancel(
            data["run_id"], _field(data, "attempt", int, what), str(data.get("reason") or ""),
            _field(data, "dispatcher_partition", int, what),
        )  # fmt: skip
    if kind != OFFER:
        raise RejectedRecord(f"work record kind {kind!r} is neither offer nor cancel")
    ints = ("attempt", "lease_ms", "offered_at_us", "deadline_at_us", "dispatcher_partition")
    strs = ("tenant", "job_id", "scheduled_at", "trigger", "pool")
    fields: dict[str, Any] = {n: _field(data, n, int, what) for n in ints}
    fields.update({n: _field(data, n, str, what) for n in strs})
    return WorkOffer(run_id=data["run_id"], payload=data.get("payload"), **fields)


def decode_worker_event(key: bytes | None, value: bytes | None) -> WorkerEvent:
    """A worker-events record; RejectedRecord (to the rejected topic) when malformed."""
    run_id, data = _object(key, value, "worker event")
    kind = data.get("kind")
    if kind not in EVENT_KINDS:
        raise RejectedRecord(f"worker event kind {kind!r} is not one of {sorted(EVENT_KINDS)}")
    what = f"worker event ({kind})"
    attempt = _field(data, "attempt", int, what)
    if attempt < 1:
        raise RejectedRecord(f"{what}: attempt must be at least 1")
    worker = _field(data, "worker", str, what)
    reason = data.get("reason")
    duration = data.get("duration_us")
    retryable = data.get("retryable", True)
    if reason is not None and not isinstance(reason, str):
        raise RejectedRecord(f"{what}: reason must be a string")
    if duration is not None and (not isinstance(duration, int) or isinstance(duration, bool)):
        raise RejectedRecord(f"{what}: duration_us must be an integer")
    if not isinstance(retryable, bool):
        raise RejectedRecord(f"{what}: retryable must be true or false")
    return WorkerEvent(
        kind, run_id, attempt, worker, _field(data, "at_us", int, what),
        None if reason is None else reason[:MAX_REASON], retryable, duration,
    )  # fmt: skip
