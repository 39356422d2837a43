"""Worker leases: which worker-pool attempts are in flight and until when.

Keys in the partition's store (logged: the index survives restarts and moves with the
partition):

- ``lease/{until µs, 16 hex}/{run id}`` → empty: the expiry index; a range scan from
  ``lease/`` up to now yields the expired leases, earliest first (bounded per tick).
- ``lrun/{run id}`` → a ``Lease`` (JSON): the attempt holding it (the fencing token), the
  pool, the claiming worker, ``until_us`` and the attempt's deadline.

An offer sets a lease of ``lease_ms``; ``claimed`` and heartbeats of the current attempt
extend it (never past the deadline); ``succeeded``/``failed`` end it. A lease that runs out
ends the attempt as ``lease_expired`` (retryable: the logic re-offers with the next attempt
number, or ends an ``at_most_once`` run as unknown), or as ``timed_out`` when it ran out at
the attempt's deadline. Worker attempts hold a Limits slot of their tenant (no host slot)
from the start until the lease ends; the slots are tracked here, in memory, per partition.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass

from schedulerstream.contracts.worker import WorkerEvent
from schedulerstream.dispatcher.events import Output
from schedulerstream.dispatcher.limits import Limits
from schedulerstream.dispatcher.logic import DispatchLogic
from schedulerstream.dispatcher.records import RunRecord
from schedulerstream.jsontext import compact
from schedulerstream.runtime.store import StateStore, prefix_end
from schedulerstream.targets.base import Outcome
from schedulerstream.targets.envelope import iso_utc

INDEX = b"lease/"
_INDEX_HEAD = len(b"lease/0000000000000000/")
_NEVER = 1 << 63
# (run id, its step) → the error the step raised, kept to that run, or None
Contain = Callable[[str, Callable[[], None]], Exception | None]


def _run(run_id: str, step: Callable[[], None]) -> Exception | None:
    step()
    return None


@dataclass(slots=True)
class Lease:
    """The lease of one worker attempt."""

    run_id: str
    tenant: str
    pool: str
    attempt: int
    until_us: int
    deadline_us: int
    offered_at_us: int
    lease_ms: int
    worker: str | None = None
    claimed_at_us: int | None = None
    beat_at_us: int | None = None

    def to_bytes(self) -> bytes:
        return compact(asdict(self)).encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> Lease:
        return cls(**json.loads(raw))


def lease_key(run_id: str) -> bytes:
    return b"lrun/" + run_id.encode()


def index_key(until_us: int, run_id: str) -> bytes:
    return INDEX + b"%016x/" % max(0, until_us) + run_id.encode()


class WorkerLeases:
    """Offers, worker events and expiry → lease state, slots and outcomes for the logic."""

    def __init__(self, logic: DispatchLogic, limits: Limits, lease_ms: int,
                 expire_budget: int = 1000) -> None:  # fmt: skip
        self.logic = logic
        self.limits = limits
        self.lease_ms = lease_ms
        self.expire_budget = expire_budget
        self.counters: Counter[str] = Counter()
        self._slots: dict[int, dict[str, str]] = {}  # partition → run id → tenant
        # partition → no lease of it runs out before this (µs); absent: scan at the next tick
        self._next_due: dict[int, int] = {}

    # -- reads ------------------------------------------------------------------------
    @staticmethod
    def get(store: StateStore, run_id: str) -> Lease | None:
        raw = store.get(lease_key(run_id))
        return None if raw is None else Lease.from_bytes(raw)

    def holding(self, partition: int) -> int:
        """Limits slots held for worker attempts of ``partition``."""
        return len(self._slots.get(partition, {}))

    # -- changes ----------------------------------------------------------------------
    def offer(self, store: StateStore, partition: int, run: RunRecord, pool: str,
              now_us: int) -> Lease:  # fmt: skip
        """Attempt ``run.attempt`` was offered (its Limits slot is already held)."""
        old = self.get(store, run.run_id)
        if old is not None:
            store.delete(index_key(old.until_us, old.run_id))
        lease = Lease(run.run_id, run.tenant, pool, run.attempt,
                      min(now_us + self.lease_ms * 1000, run.deadline_us), run.deadline_us,
                      now_us, self.lease_ms)  # fmt: skip
        self._save(store, partition, lease)
        self._slots.setdefault(partition, {})[run.run_id] = run.tenant
        self.counters["offered"] += 1
        return lease

    def on_event(self, store: StateStore, out: Output, partition: int, event: WorkerEvent,
                 now_us: int) -> bool:  # fmt: skip
        """Apply one worker event; False when ignored (another attempt, another worker)."""
        lease = self.get(store, event.run_id)
        if lease is None or lease.attempt != event.attempt:
            self.counters["fenced"] += 1  # a superseded, cancelled or finished attempt
            return False
        if lease.worker is not None and lease.worker != event.worker:
            self.counters["foreign"] += 1  # a second claimer of the same offer
            return False
        if event.kind in ("claimed", "heartbeat"):
            store.delete(index_key(lease.until_us, lease.run_id))
            if lease.worker is None:
                lease.worker, lease.claimed_at_us = event.worker, now_us
            lease.beat_at_us = now_us
            lease.until_us = min(now_us + lease.lease_ms * 1000, lease.deadline_us)
            self._save(store, partition, lease)
            self.counters[event.kind] += 1
            return True
        self.end(store, partition, lease)
        started = lease.claimed_at_us or lease.offered_at_us
        duration = event.duration_us if event.duration_us is not None else now_us - started
        if event.kind == "succeeded":
            reason = event.reason or f"done by worker {event.worker}"
            outcome = Outcome("succeeded", reason, False, duration)
        else:
            reason = f"worker {event.worker}: {event.reason or 'failed'}"
            outcome = Outcome("failed", reason, event.retryable, duration)
        self.counters[event.kind] += 1
        return self.logic.on_outcome(store, out, partition, lease.run_id, lease.attempt,
                                     outcome, now_us)  # fmt: skip

    def expire(self, store: StateStore, out: Output, partition: int, now_us: int,
               contain: Contain = _run) -> list[Lease]:  # fmt: skip
        """End the leases whose time passed (at most ``expire_budget``); returns them, so the
        caller tells their workers to stop. A partition without a lease due costs no scan.
        ``contain`` runs each lease's end, keeping a failure to its run (None: it ended)."""
        if now_us < self._next_due.get(partition, 0):
            return []
        due = list(itertools.islice(store.range(INDEX, index_key(now_us + 1, "")),
                                    self.expire_budget))  # fmt: skip
        expired: list[Lease] = []
        for key, _ in due:
            store.delete(key)
            lease = self.get(store, key[_INDEX_HEAD:].decode())
            if lease is None or index_key(lease.until_us, lease.run_id) != key:
                continue  # a stale index entry

            def end(lease: Lease = lease) -> None:
                self.end(store, partition, lease)
                self.logic.on_outcome(store, out, partition, lease.run_id, lease.attempt,
                                      self._expiry(lease, now_us), now_us)  # fmt: skip

            if contain(lease.run_id, end) is None:
                expired.append(lease)
        if len(due) < self.expire_budget:  # all due ones ended: the earliest left is next
            first = next(store.range(INDEX, prefix_end(INDEX)), None)
            self._next_due[partition] = _NEVER if first is None else int(first[0][6:22], 16)
        return expired

    def end(self, store: StateStore, partition: int, lease: Lease) -> None:
        """Drop the lease and give back its Limits slot."""
        store.delete(index_key(lease.until_us, lease.run_id))
        store.delete(lease_key(lease.run_id))
        tenant = self._slots.get(partition, {}).pop(lease.run_id, None)
        if tenant is not None:
            self.limits.release(tenant, None)

    def adopt(self, store: StateStore, partition: int, run: RunRecord, now_us: int) -> bool:
        """On restart: keep ``run`` in flight when a lease of its attempt exists (a worker may
        be on it) and hold its Limits slot again. The lease gets one more ``lease_ms`` from
        now (never past the deadline): the heartbeats sent while no dispatcher read them are
        still in the topic, behind this moment; a dead worker's lease expires one lease later.
        """
        lease = self.get(store, run.run_id)
        if lease is None:
            return False
        if lease.attempt != run.attempt:
            store.delete(index_key(lease.until_us, lease.run_id))
            store.delete(lease_key(lease.run_id))
            return False
        grace = min(now_us + lease.lease_ms * 1000, lease.deadline_us)
        if grace > lease.until_us:
            store.delete(index_key(lease.until_us, lease.run_id))
            lease.until_us = grace
            self._save(store, partition, lease)
        if not self.limits.acquire(run.tenant, now_us, None):
            self.limits.hold(run.tenant)  # it runs anyway: count it, over the limit
            self.counters["adopted_over_limit"] += 1
        self._slots.setdefault(partition, {})[run.run_id] = run.tenant
        self.counters["adopted"] += 1
        return True

    def slots(self, partition: int) -> list[str]:
        """The runs of ``partition`` whose worker attempt holds a Limits slot."""
        return list(self._slots.get(partition, ()))

    def drop_slot(self, partition: int, run_id: str) -> bool:
        """Give back the slot of ``run_id``'s offer (its lease was undone); False if none."""
        tenant = self._slots.get(partition, {}).pop(run_id, None)
        if tenant is None:
            return False
        self.limits.release(tenant, None)
        return True

    def restart(self, partition: int) -> None:
        """The partition's lease index was undone: look for the next due lease again."""
        self._next_due.pop(partition, None)

    def stopped(self, partition: int) -> None:
        """The partition left this process: give back the slots of its worker attempts."""
        self._next_due.pop(partition, None)
        for tenant in self._slots.pop(partition, {}).values():
            self.limits.release(tenant, None)

    # -- helpers ----------------------------------------------------------------------
    def _save(self, store: StateStore, partition: int, lease: Lease) -> None:
        store.put(lease_key(lease.run_id), lease.to_bytes())
        store.put(index_key(lease.until_us, lease.run_id), b"")
        due = self._next_due.get(partition)
        if due is not None and lease.until_us < due:
            self._next_due[partition] = lease.until_us

    def _expiry(self, lease: Lease, now_us: int) -> Outcome:
        started = lease.claimed_at_us or lease.offered_at_us
        duration = max(0, now_us - started)
        since = iso_utc(lease.beat_at_us or started)
        if lease.until_us >= lease.deadline_us:  # the run's timeout bounds the attempt
            self.counters["timed_out"] += 1
            timeout = (lease.deadline_us - lease.offered_at_us) / 1e6
            detail = (
                f"no worker of pool {lease.pool!r} claimed the offer"
                if lease.worker is None
                else f"worker {lease.worker} last heartbeat at {since}"
            )
            return Outcome("timed_out", f"timed out after {timeout:g} s: {detail}", True, duration)
        self.counters["expired"] += 1
        if lease.worker is None:
            waited = (lease.until_us - lease.offered_at_us) / 1e6
            what = f"no worker of pool {lease.pool!r} claimed the offer within {waited:g} s"
        else:
            what = f"no heartbeat from worker {lease.worker} since {since}"
        return Outcome("lease_expired", f"lease expired: {what}", True, duration)
