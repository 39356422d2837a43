"""Standby tasks: warm copies of partitions another member owns (Kafka Streams'
``num.standby.replicas``).

A standby task opens the partition's store where its active task would (``data_dir/<name>/
<partition>``) and follows the changelog with a Restorer of its own, committed records only,
flushing each chunk with its offset. When the partition is assigned here the standby is
closed first and the task's restore starts warm from that offset: a takeover replays only
the tail. Which partitions to follow comes from ``membership.choose_standbys``.
"""

from __future__ import annotations

import logging

from confluent_kafka import KafkaException

from schedulerstream.clock import Clock
from schedulerstream.errors import StateError
from schedulerstream.runtime.changelog import Restorer
from schedulerstream.runtime.store import StoreCorrupted
from schedulerstream.runtime.task import Task, TaskState
from schedulerstream.settings import Settings

log = logging.getLogger(__name__)

RETRY_S = 5.0  # a standby that could not start (or failed a write) is tried again after this


class Standbys:
    """The standby tasks of one member, by partition."""

    def __init__(self, settings: Settings, name: str, restorer: Restorer, clock: Clock) -> None:
        self._settings = settings
        self._name = name
        self._restorer = restorer
        self._clock = clock
        self.tasks: dict[int, Task] = {}
        self._retry_at: dict[int, float] = {}
        self._caught_up: set[int] = set()  # reported once per start

    def want(self, partitions: set[int]) -> None:
        """Follow exactly ``partitions`` (callers leave out the ones owned here)."""
        for partition in set(self.tasks) - partitions:
            self.release(partition)
        now = self._clock.monotonic()
        for partition in sorted(partitions - set(self.tasks)):
            if self._retry_at.get(partition, 0.0) <= now:
                self._open(partition)

    def _open(self, partition: int) -> None:
        path = self._settings.data_dir / self._name / str(partition)
        task = Task(partition, (), path)
        try:
            self._restorer.start(task, TaskState.STANDBY)
        except (KafkaException, StateError) as exc:
            log.warning("standby %d cannot start yet: %s", partition, exc)
            task.close_store()
            self._retry_at[partition] = self._clock.monotonic() + RETRY_S
            return
        self._retry_at.pop(partition, None)
        self.tasks[partition] = task
        log.info("standby %d following the changelog from offset %d (%s)", partition,
                 task.restore.start_offset, "cold" if task.restore.cold else "warm")  # fmt: skip

    def release(self, partition: int) -> None:
        """Stop following ``partition`` and close its store (its task may open it now)."""
        task = self.tasks.pop(partition, None)
        self._caught_up.discard(partition)
        if task is None:
            return
        self._restorer.stop(task)
        task.close()

    def poll(self) -> None:
        """Apply what the changelog consumer has fetched (never waits)."""
        if not self.tasks:
            return
        try:
            for task in self._restorer.poll(0.0):
                if task.partition not in self._caught_up:
                    self._caught_up.add(task.partition)
                    log.info("standby %d caught up at offset %d (%d records applied)",
                             task.partition, task.restore_position - 1,
                             task.restore.records)  # fmt: skip
        except StateError as exc:  # StoreCorrupted (wiped), StoreUnavailable, StoreWriteFailed:
            path = getattr(exc, "path", None)  # drop the standby, start it again later
            for partition, task in list(self.tasks.items()):
                if path is None or (task.store is not None and task.store.path == path):
                    log.warning("standby %d: %s; starting it again later", partition, exc)
                    if isinstance(exc, StoreCorrupted) and task.store is not None:
                        task.store = task.store.wipe()
                    self.release(partition)
                    self._retry_at[partition] = self._clock.monotonic() + RETRY_S

    def lag(self) -> dict[int, int]:
        """Changelog records each standby is behind the end it saw when it started."""
        return {p: max(0, t.restore.end_offset - t.restore_position) for p, t in self.tasks.items()}

    def close(self) -> None:
        for partition in list(self.tasks):
            self.release(partition)
        self._restorer.close()
