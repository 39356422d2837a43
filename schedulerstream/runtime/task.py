"""A task: one owned partition's state store, input offsets and lifecycle."""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from schedulerstream.errors import StateError
from schedulerstream.runtime.store import NO_OFFSET, RocksStore

log = logging.getLogger(__name__)


class TaskState(enum.Enum):
    """Lifecycle of a task (as in Kafka Streams), with the restore's steps as states.

    CREATED → RESTORING → SETTLING → RUNNING → SUSPENDED → CLOSED:
    - WAITING: its restore could not start yet (the log end unknown, the store not
      writable); retried at ``Task.retry_at``;
    - RESTORING: replaying its changelog into its store;
    - SETTLING: caught up, still following the changelog, until the group's committed input
      offsets are read and the changelog end is stable (retried at ``Task.retry_at``);
    - SUSPENDED: its open transaction dropped (an abort, a failed local write); it restores
      again or closes;
    - STANDBY: a warm copy of a partition another member owns, following its changelog
      (``standby.Standbys``); it never runs, it is closed before the partition's task opens.
    """

    CREATED = "created"
    WAITING = "waiting"
    RESTORING = "restoring"
    SETTLING = "settling"
    RUNNING = "running"
    SUSPENDED = "suspended"
    CLOSED = "closed"
    STANDBY = "standby"


_ALLOWED: dict[TaskState, frozenset[TaskState]] = {
    TaskState.CREATED: frozenset(
        {TaskState.RESTORING, TaskState.WAITING, TaskState.SUSPENDED, TaskState.STANDBY}
    ),
    TaskState.WAITING: frozenset({TaskState.RESTORING, TaskState.SUSPENDED}),
    TaskState.RESTORING: frozenset({TaskState.SETTLING, TaskState.SUSPENDED}),
    TaskState.SETTLING: frozenset({TaskState.RUNNING, TaskState.SUSPENDED}),
    TaskState.RUNNING: frozenset({TaskState.SUSPENDED}),
    TaskState.SUSPENDED: frozenset({TaskState.RESTORING, TaskState.WAITING, TaskState.CLOSED}),
    TaskState.CLOSED: frozenset(),
    TaskState.STANDBY: frozenset({TaskState.SUSPENDED}),
}


@dataclass
class RestoreStats:
    """Progress of the latest restore of one task."""

    start_offset: int = 0
    end_offset: int = 0
    records: int = 0
    bytes: int = 0
    cold: bool = False
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None

    @property
    def seconds(self) -> float:
        return (self.finished or time.monotonic()) - self.started

    @property
    def rate(self) -> float:
        """Records restored per second."""
        return self.records / self.seconds if self.seconds > 0 else 0.0


class Task:
    """The unit of ownership: partition ``partition`` of every input topic, its store and
    the position of each input partition (the next offset to process)."""

    def __init__(
        self,
        partition: int,
        input_topics: tuple[str, ...],
        store_path: Path,
        listener: Callable[[int, TaskState], None] | None = None,
        max_logged_bytes: int | None = None,
    ) -> None:
        self.partition = partition
        self.input_topics = input_topics
        self.store_path = store_path
        self.max_logged_bytes = max_logged_bytes  # of its store's changelog records
        self.state = TaskState.CREATED
        self._listener = listener
        self.store: RocksStore | None = None
        self.input_offsets: dict[str, int] = {}
        self.restore = RestoreStats()
        self.restore_position = 0
        self.retry_at = 0.0  # WAITING or SETTLING: when to try again (monotonic seconds)
        # changelog offsets seen in delivery reports of the open transaction
        self.committed_changelog_offset = NO_OFFSET
        self.pending_changelog_offset = NO_OFFSET
        self.changelog_error: str | None = None

    def __repr__(self) -> str:
        return f"Task(partition={self.partition}, state={self.state.value})"

    def transition(self, target: TaskState) -> None:
        """Move to ``target``; an illegal move is a bug and raises StateError."""
        if target not in _ALLOWED[self.state]:
            raise StateError(f"task {self.partition}: illegal {self.state.value} → {target.value}")
        self.state = target
        if self.store is not None:  # restoring writes what the changelog held, as it was
            running = target is TaskState.RUNNING
            self.store.max_logged_bytes = self.max_logged_bytes if running else None
        if self._listener is not None:
            self._listener(self.partition, target)

    def open_store(self) -> RocksStore:
        if self.store is None:
            self.store = RocksStore.open(self.store_path)
        return self.store

    def require_store(self) -> RocksStore:
        if self.store is None:
            raise StateError(f"task {self.partition} has no open store")
        return self.store

    def on_changelog_delivery(self, err: object, msg: object) -> None:
        """Delivery report of one changelog record of this task."""
        if err is not None:
            self.changelog_error = str(err)
            return
        offset = msg.offset()  # type: ignore[attr-defined]
        if offset > self.pending_changelog_offset:
            self.pending_changelog_offset = offset

    def reset_transaction(self) -> None:
        """Forget the open transaction's changelog bookkeeping and overlay."""
        self.pending_changelog_offset = self.committed_changelog_offset
        self.changelog_error = None
        if self.store is not None:
            self.store.discard()

    def wait_until(self, retry_at: float) -> None:
        """WAITING (or still SETTLING): try again at ``retry_at``."""
        if self.state is not TaskState.SETTLING and self.state is not TaskState.WAITING:
            self.transition(TaskState.WAITING)
        self.retry_at = retry_at

    def suspend(self) -> None:
        """Drop uncommitted work and stop processing (the store stays open)."""
        if self.state is not TaskState.SUSPENDED:
            self.transition(TaskState.SUSPENDED)
        self.reset_transaction()
        self.input_offsets.clear()

    def close(self) -> None:
        """Close the store; the task is gone."""
        if self.state is not TaskState.SUSPENDED:
            self.suspend()
        self.transition(TaskState.CLOSED)
        self.close_store()

    def close_store(self) -> None:
        """Close the store (best effort: one that failed a write may fail to close too); the
        next ``open_store`` opens it again."""
        if self.store is not None:
            try:
                self.store.close()
            except Exception as exc:
                log.warning("task %d: closing its store: %s", self.partition, exc)
            self.store = None
