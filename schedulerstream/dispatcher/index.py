"""In-memory mirror of one partition's queue and active-run keys.

The store keeps ``q/…`` and ``active/…`` for restore; serving from them meant a RocksDB seek
per start, and a seek skips every deleted key left at the head of a queue until compaction, so
the cost grew with the number of runs already served. The mirror is rebuilt from those keys
when the task starts running and is only a hint: every entry is checked against the run record
before use (a record's run started in memory this tick: against that run), so entries left by
a rolled-back record are dropped, never acted on.

It also marks the keys of the few jobs that have a ``gone/`` or ``buf/`` key (a rolled-back
write leaves a mark, which costs a read, never a wrong answer), so the many that have none
are not looked up in RocksDB at every start and end.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from schedulerstream.dispatcher import records as rk
from schedulerstream.dispatcher.records import RunRecord
from schedulerstream.dispatcher.states import TERMINAL
from schedulerstream.runtime.store import StateStore, prefix_end

QueueEntry = tuple[int, int, str]  # (due µs, seq, run id)
MARKED = (b"gone/", b"buf/")  # rare keys: a mark says one may be in the store


class PartitionIndex:
    """Per-tenant queues (earliest due first) and the started runs of each job."""

    def __init__(self) -> None:
        self._queues: dict[str, list[QueueEntry]] = {}
        self._active: dict[str, set[str]] = {}
        self._marks: set[bytes] = set()  # ``gone/`` and ``buf/`` keys that may be in the store

    @classmethod
    def restored(cls, store: StateStore) -> tuple[PartitionIndex, list[RunRecord]]:
        """The index of ``store``'s queue and active-run keys, and the started runs that have
        not ended (in key order)."""
        index = cls()
        for key, raw_id in store.range(b"q/", prefix_end(b"q/")):
            due_us, seq = rk.queue_entry(key)
            index.push(rk.tenant_of_queue_key(key), due_us, seq, raw_id.decode())
        for prefix in MARKED:
            for key, _ in store.range(prefix, prefix_end(prefix)):
                index.mark(key)
        active = []
        for key, _ in list(store.range(b"active/", prefix_end(b"active/"))):
            run = rk.load(store, rk.active_run_id(key))
            if run is not None and run.status not in TERMINAL:
                index.activate(run.job_key, run.run_id)
                active.append(run)
        return index, active

    # -- queues ---------------------------------------------------------------------------
    def push(self, tenant: str, due_us: int, seq: int, run_id: str) -> None:
        heapq.heappush(self._queues.setdefault(tenant, []), (due_us, seq, run_id))

    def head(self, tenant: str) -> QueueEntry | None:
        queue = self._queues.get(tenant)
        return queue[0] if queue else None

    def pop(self, tenant: str) -> None:
        queue = self._queues.get(tenant)
        if queue:
            heapq.heappop(queue)
            if not queue:
                del self._queues[tenant]

    def tenants(self) -> Iterable[str]:
        return list(self._queues)

    def queued(self, tenant: str) -> int:
        """Entries in ``tenant``'s queue (stale ones included until they reach the head)."""
        return len(self._queues.get(tenant, ()))

    # -- active runs ----------------------------------------------------------------------
    def activate(self, job_key: str, run_id: str) -> None:
        self._active.setdefault(job_key, set()).add(run_id)

    def deactivate(self, job_key: str, run_id: str) -> None:
        runs = self._active.get(job_key)
        if runs is not None:
            runs.discard(run_id)
            if not runs:
                del self._active[job_key]

    def forget_active(self, run_id: str) -> None:
        """``run_id`` no longer counts as active for its job, whichever it is (rare: a scan)."""
        for job_key in [k for k, runs in self._active.items() if run_id in runs]:
            self.deactivate(job_key, run_id)

    def is_active(self, job_key: str, run_id: str) -> bool:
        return run_id in self._active.get(job_key, ())

    def active(self, job_key: str) -> list[str]:
        return sorted(self._active.get(job_key, ()))

    def active_ids(self, job_key: str) -> frozenset[str] | set[str]:
        """The job's active run ids, unsorted (not to be changed)."""
        return self._active.get(job_key, frozenset())

    # -- rare keys ------------------------------------------------------------------------
    def mark(self, key: bytes) -> None:
        """``key`` (of a ``MARKED`` prefix) is about to be written."""
        self._marks.add(key)

    def may_exist(self, key: bytes) -> bool:
        """False when ``key`` (of a ``MARKED`` prefix) is surely not in the store: a start
        and an end need not look for keys that few jobs ever have."""
        return key in self._marks
