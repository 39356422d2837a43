"""An in-memory StateStore and a driver that feeds events through the Projection (no Kafka)."""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import Any

from schedulerstream.codec import default_codec
from schedulerstream.ids import job_key_of_run
from schedulerstream.partitioner import partition_for_job_key
from schedulerstream.projector.events import decode_run_event
from schedulerstream.projector.logic import Effects, Projection
from schedulerstream.projector.staged import Staged
from schedulerstream.readmodel import Changes
from schedulerstream.runtime.store import prefix_end

PARTITIONS = 4


class MemoryStore:
    """A StateStore over a dict (logged flags are kept, to check what is changelogged)."""

    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}
        self.logged: dict[bytes, bytes | None] = {}

    def get(self, key: bytes) -> bytes | None:
        return self.data.get(key)

    def put(self, key: bytes, value: bytes, *, logged: bool = True) -> None:
        self.data[key] = value
        if logged:
            self.logged[key] = value

    def delete(self, key: bytes, *, logged: bool = True) -> None:
        self.data.pop(key, None)
        if logged:
            self.logged[key] = None

    def range(self, start: bytes, end: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        ordered = sorted(self.data)
        lo = bisect.bisect_left(ordered, start)
        hi = len(ordered) if end is None else bisect.bisect_left(ordered, end)
        return iter([(k, self.data[k]) for k in ordered[lo:hi]])

    def prefix(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        return self.range(prefix, prefix_end(prefix))


class Driver:
    """Feeds (name, record) events and schedule records through a Projection; collects what
    the read model and cron.run-state would receive, as final tables."""

    def __init__(self, keep_per_job: int = 100) -> None:
        self.store = MemoryStore()
        self.projection = Projection(default_codec(), keep_per_job)
        self.jobs: dict[tuple[str, str], Any] = {}
        self.runs: dict[str, Any] = {}
        self.attempts: dict[tuple[str, int, str, int], Any] = {}
        self.run_state: dict[str, bytes | None] = {}
        self.seq = 0

    def _take(self, effects: Effects, staged: Staged) -> Effects:
        self.apply(effects.changes)
        staged.apply()
        self.run_state.update(effects.run_state)
        return effects

    def apply(self, changes: Changes) -> None:
        self.runs.update(changes.runs)
        for a in changes.attempts:
            self.attempts[(a.run_id, a.attempt, a.kind, a.at_us)] = a
        self.jobs.update(changes.jobs)
        for run_id in changes.deleted_runs:
            self.runs.pop(run_id, None)
            for key in [k for k in self.attempts if k[0] == run_id]:
                del self.attempts[key]

    def event(self, event: tuple[str, dict[str, Any]]) -> Effects:
        name, record = event
        codec = default_codec()
        partition = partition_for_job_key(job_key_of_run(record["run_id"]), PARTITIONS)
        expected = ("AttemptEvent",) if name == "AttemptEvent" else ("RunTriggered", "RunRevoked")
        decoded = decode_run_event(
            codec, record["run_id"].encode(), codec.encode(name, record), partition, PARTITIONS,
            expected,
        )  # fmt: skip
        self.seq += 1
        staged = Staged(self.store)
        return self._take(self.projection.on_run_event(staged, decoded, self.seq), staged)

    def schedule(self, key: str, value: bytes | None, stamp_us: int) -> Effects:
        staged = Staged(self.store)
        effects = self.projection.on_schedule(staged, key.encode(), value, stamp_us)
        return self._take(effects, staged)

    def tables(self) -> tuple[Any, ...]:
        return (
            sorted(self.jobs.items()),
            sorted(self.runs.items()),
            sorted(self.attempts.values(), key=lambda a: (a.run_id, a.attempt, a.kind, a.at_us)),
            {k: v for k, v in self.run_state.items() if v is not None},
        )
