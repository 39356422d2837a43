"""Retention: finished runs are forgotten once a replay of their records cannot reach them."""

from __future__ import annotations

import itertools

from schedulerstream.dispatcher import records as rk
from schedulerstream.dispatcher.context import PartitionContext
from schedulerstream.dispatcher.states import TERMINAL

# Finished runs are remembered (to drop replays) longer than cron.runs keeps records (7 d).
DEDUPE_RETENTION_US = 8 * 86_400 * 1_000_000
PRUNE_EVERY_US = 1_000_000


class Retention:
    """Deletes the ``done/`` entries older than ``retention_us`` and their run records, at most
    ``budget`` per partition every ``PRUNE_EVERY_US``."""

    def __init__(self, retention_us: int = DEDUPE_RETENTION_US, budget: int = 1000) -> None:
        self.retention_us = retention_us
        self.budget = budget
        self._from: dict[int, bytes] = {}  # per partition: where the last prune stopped
        self._at: dict[int, int] = {}  # per partition: when to prune next

    def tick(self, pc: PartitionContext, now_us: int) -> None:
        if now_us >= self._at.get(pc.partition, 0):
            self._at[pc.partition] = now_us + PRUNE_EVERY_US
            self.prune(pc, now_us)

    def restart(self, partition: int) -> None:
        """The partition's store was restored: scan from the start again."""
        self._from.pop(partition, None)

    def prune(self, pc: PartitionContext, now_us: int) -> None:
        """Drop finished runs older than the retention (a replay cannot reach them any more).

        The scan starts where the last one stopped: the keys before it are deleted, and a
        seek from the prefix start would skip all of them again until compaction."""
        store = pc.store
        start = self._from.get(pc.partition, b"done/")
        old = store.range(start, rk.done_key(now_us - self.retention_us, ""))
        for key, _ in list(itertools.islice(old, self.budget)):
            self._from[pc.partition] = key
            run = rk.load(store, rk.done_run_id(key))
            at = rk.done_at(key)
            # a derived key (its run's finished_us) is not in the changelog; one format 2
            # logged, or one left by a run re-armed since, is deleted there too
            store.delete(key, logged=run is None or run.finished_us != at)
            if run is not None and run.status in TERMINAL and run.finished_us in (0, at):
                store.delete(rk.run_key(run.run_id))
