"""The TaskManager: which tasks this member owns and where each is in its lifecycle.

It follows the group's assignment (a task per partition whose every input topic is owned),
restores each task from its changelog in bounded chunks, settles it (the group's committed
input offsets read, the changelog end stable), runs it, rebuilds it in place after an abort
and closes it when it leaves. The states are ``TaskState``'s; the processor's loop calls
``restore`` while any task is not running yet.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from schedulerstream.clock import Clock
from schedulerstream.errors import StateError
from schedulerstream.runtime.changelog import Restorer
from schedulerstream.runtime.committer import Committer
from schedulerstream.runtime.context import TaskContext
from schedulerstream.runtime.holds import Holds
from schedulerstream.runtime.store import StoreCorrupted, StoreUnavailable, StoreWriteFailed
from schedulerstream.runtime.takeover import Takeover
from schedulerstream.runtime.task import Task, TaskState
from schedulerstream.runtime.topology import Topology
from schedulerstream.runtime.transaction import Failure, TransactionFailed, kafka_error
from schedulerstream.settings import Settings

log = logging.getLogger(__name__)

StateListener = Callable[[int, TaskState], None]
SETTLE_RETRY_S = 0.2
STORE_RETRY_S = 5.0  # a failed store write (disk full): retry the task's restore after this


@dataclass
class Loop:
    """What the task manager asks of the processor's loop."""

    commit: Callable[[], bool]
    recover: Callable[[TransactionFailed], None]
    request_commit: Callable[[], None]
    invoke: Callable[[Task, Callable[[TaskContext], None]], None]  # a callback, atomically
    request_tick: Callable[[int | None], None] | None = None


class TaskManager:
    """The tasks of one member: ``tasks`` by partition and the RUNNING ones' ``contexts``."""

    def __init__(
        self,
        settings: Settings,
        topology: Topology,
        clock: Clock,
        committer: Committer,
        holds: Holds,
        metrics: dict[str, float],
        *,
        eager: bool,
        timeout_s: float,
        listener: StateListener | None = None,
    ) -> None:
        self.settings = settings
        self.topology = topology
        self.clock = clock
        self.committer = committer
        self.holds = holds
        self.metrics = metrics
        self.input_topics = tuple(topology.input_topics)
        self.tasks: dict[int, Task] = {}
        self.contexts: dict[int, TaskContext] = {}
        self._eager = eager
        self._timeout_s = timeout_s
        self._listener = listener
        self._assigned: set[tuple[str, int]] = set()
        self._rebuilt: set[int] = set()  # rebuilt in place (on_rebuild), not running yet
        self._consumer: Consumer | None = None
        self._restorer: Restorer | None = None
        self._loop: Loop | None = None
        self.takeover: Takeover | None = None  # standbys and predecessor fencing

    def start(self, consumer: Consumer, restorer: Restorer, loop: Loop) -> None:
        self._consumer, self._restorer, self._loop = consumer, restorer, loop

    def running(self) -> list[Task]:
        return [t for t in self.tasks.values() if t.state is TaskState.RUNNING]

    def is_running(self, partition: int) -> bool:
        task = self.tasks.get(partition)
        return task is not None and task.state is TaskState.RUNNING

    def input_tps(self, partition: int) -> list[TopicPartition]:
        return [TopicPartition(topic, partition) for topic in self.input_topics]

    # -- restore, settle, run -----------------------------------------------------------
    def restoring(self) -> bool:
        """Whether any task is on its way to RUNNING (the loop must not block on input)."""
        if self._require_restorer().restoring():
            return True
        return any(t.state in (TaskState.WAITING, TaskState.SETTLING) for t in self.tasks.values())

    def restore(self, timeout_s: float, tick_s: float) -> None:
        """Start the restores whose retry time came, apply one changelog chunk, and try to
        run the tasks that caught up."""
        restorer = self._require_restorer()
        now = self.clock.monotonic()
        for task in list(self.tasks.values()):
            if task.state is TaskState.WAITING and now >= task.retry_at:
                self.begin_restore(task)
        try:
            caught_up = restorer.poll(min(timeout_s, tick_s))
        except StoreCorrupted as exc:
            caught_up = []
            for damaged in list(self.tasks.values()):
                if damaged.store is not None and damaged.store.path == exc.path:
                    self.store_corrupted(damaged, exc)
        except StoreUnavailable as exc:
            caught_up = []
            for stuck in list(self.tasks.values()):
                if stuck.store is not None and stuck.store.path == exc.path:
                    self.metrics["stores_unavailable"] += 1
                    self._retry_later(stuck, exc)
        except StoreWriteFailed as exc:
            caught_up = []
            for stuck in list(self.tasks.values()):
                if stuck.store is not None and stuck.store.path == exc.path:
                    self._store_write_failed(stuck, exc)
        for ready in caught_up:
            if ready.state is TaskState.RESTORING:
                ready.transition(TaskState.SETTLING)
                ready.retry_at = 0.0
        now = self.clock.monotonic()
        for task in list(self.tasks.values()):
            settling = task.state is TaskState.SETTLING and now >= task.retry_at
            if settling and not self._try_run(task):
                task.retry_at = self.clock.monotonic() + SETTLE_RETRY_S

    def _try_run(self, task: Task) -> bool:
        """SETTLING: fetch the committed input offsets (stable: waits out open
        transactions), re-check the changelog end, seek, resume, and run."""
        restorer = self._require_restorer()
        consumer = self._require_consumer()
        tps = self.input_tps(task.partition)
        try:
            if not restorer.settled(task):
                return False
            committed = consumer.committed(tps, timeout=min(self._timeout_s, 5.0))
            if not restorer.settled(task):
                return False
            offsets: dict[str, int] = {}
            for tp in committed:
                offset = tp.offset
                if offset < 0:
                    offset, _ = restorer.watermarks(TopicPartition(tp.topic, tp.partition))
                offsets[tp.topic] = offset
        except KafkaException as exc:
            log.info("task %d: not ready to run yet: %s", task.partition, exc)
            return False
        try:  # the partition may have been taken away while committed() waited
            self._start_fetching(consumer, task, offsets, tps)
        except KafkaException as exc:
            log.info("task %d: not ready to run (seek or resume refused): %s", task.partition, exc)
            with contextlib.suppress(KafkaException):
                consumer.pause(tps)
            return False
        restorer.stop(task)
        task.input_offsets = offsets
        self.metrics["restores"] += 1
        self.metrics["restored_records"] += task.restore.records
        self.metrics["restore_rate"] = task.restore.rate
        log.info(
            "task %d running: restored %d records (%s) in %.3fs, %.0f records/s",
            task.partition, task.restore.records, "cold" if task.restore.cold else "warm",
            task.restore.seconds, task.restore.rate,
        )  # fmt: skip
        task.transition(TaskState.RUNNING)
        self._rebuilt.discard(task.partition)
        loop = self._require_loop()
        self.contexts[task.partition] = TaskContext(
            task.partition,
            task.require_store(),
            self.clock,
            self.committer.rejected_topic,
            self.committer.group_id,
            loop.request_commit,
            self.committer.quarantine,
            self.committer.max_record,
            loop.request_tick,
        )
        loop.invoke(task, self.topology.on_running)
        return True

    def _start_fetching(
        self, consumer: Consumer, task: Task, offsets: dict[str, int], tps: list[TopicPartition]
    ) -> None:
        """Seek the task's inputs to ``offsets`` and resume them. A seek refused with _STATE
        means librdkafka never started the partition's fetcher (seen once: its query of the
        committed offset was lost, and the task waited for minutes): its inputs are then
        assigned again at ``offsets``, which starts the fetcher there."""
        try:
            for topic, offset in offsets.items():
                consumer.seek(TopicPartition(topic, task.partition, offset))
        except KafkaException as exc:
            err = kafka_error(exc)
            if self._eager or err is None or err.code() != KafkaError._STATE:
                raise
            log.warning("task %d: seek refused (%s); assigning its inputs again at %s",
                        task.partition, err.str(), offsets)  # fmt: skip
            self.metrics["fetchers_restarted"] += 1
            consumer.incremental_unassign(tps)
            consumer.incremental_assign(
                [TopicPartition(topic, task.partition, offset) for topic, offset in offsets.items()]
            )
        consumer.resume(tps)

    def begin_restore(self, task: Task) -> None:
        """Start replaying ``task``'s changelog (RESTORING), or WAITING to try again."""
        try:
            self._require_restorer().start(task)
        except KafkaException as exc:
            log.warning("task %d: restore cannot start yet: %s", task.partition, exc)
            task.wait_until(self.clock.monotonic() + SETTLE_RETRY_S)
        except StateError as exc:  # its store cannot be opened, read or written (disk full)
            if isinstance(exc, StoreUnavailable):
                self.metrics["stores_unavailable"] += 1
            log.error("task %d: restore cannot start: %s; retrying in %.0f s", task.partition,
                      exc, STORE_RETRY_S)  # fmt: skip
            if task.state is TaskState.RESTORING:  # it failed past its start (set_source)
                task.suspend()
                task.close_store()
            task.wait_until(self.clock.monotonic() + STORE_RETRY_S)

    def rebuild(self, tasks: list[Task]) -> None:
        """Drop the tasks' uncommitted work and restore them again (in place: they stay)."""
        consumer = self._require_consumer()
        for task in tasks:
            if task.state is TaskState.RUNNING:
                self.topology.on_rebuild(task.partition)
                self._rebuilt.add(task.partition)
            self._require_restorer().stop(task)
            task.suspend()
            self.holds.forget(task.partition)  # the restore seeks and resumes every input
            consumer.pause(self.input_tps(task.partition))
            self.begin_restore(task)

    def store_failed(self, task: Task, exc: StoreCorrupted | StoreUnavailable) -> None:
        """A read of ``task``'s store failed: ``store_corrupted`` or ``store_unavailable``."""
        if isinstance(exc, StoreCorrupted):
            self.store_corrupted(task, exc)
        else:
            self.store_unavailable(task, exc)

    def store_unavailable(self, task: Task, exc: StoreUnavailable) -> None:
        """A read of ``task``'s store failed for want of a resource (too many open files,
        say): its files are kept. As for a damaged store, the open transaction is aborted and
        every RUNNING task rebuilt; this one then waits ``STORE_RETRY_S`` and restores again
        from what its store holds."""
        self.metrics["stores_unavailable"] += 1
        if task.state is TaskState.RUNNING:
            failure = TransactionFailed(Failure.ABORTABLE, f"task {task.partition}: {exc}")
            self._require_loop().recover(failure)
        self._retry_later(task, exc)

    def store_corrupted(self, task: Task, exc: StoreCorrupted) -> None:
        """A read of ``task``'s store failed: wipe it and restore it cold from the changelog.

        The open transaction is aborted (it may hold output computed from the damaged store)
        and every RUNNING task rebuilt, as after any failed transaction."""
        log.error("task %d: %s; wiping it and restoring from the changelog", task.partition, exc)
        self.metrics["corrupt_stores"] += 1
        self._require_restorer().stop(task)
        task.store = task.require_store().wipe()
        if task.state is TaskState.RUNNING:
            failure = TransactionFailed(Failure.ABORTABLE, f"task {task.partition}: {exc}")
            self._require_loop().recover(failure)
            return
        task.suspend()
        self.begin_restore(task)

    def _store_write_failed(self, task: Task, exc: Exception) -> None:
        """The store could not be written during restore (the disk is full, say)."""
        self.metrics["store_write_failures"] += 1
        self._retry_later(task, exc)

    def _retry_later(self, task: Task, exc: Exception) -> None:
        """Pause the task and start its restore again later, from what the store holds; it
        runs again once the store can be used. Nothing is lost: the changelog and the inputs
        hold it all."""
        log.error("task %d: %s; retrying its restore in %.0f s", task.partition, exc,
                  STORE_RETRY_S)  # fmt: skip
        self._require_restorer().stop(task)
        task.suspend()
        task.close_store()  # RocksDB refuses every write after one failed: reopen it later
        task.wait_until(self.clock.monotonic() + STORE_RETRY_S)

    # -- ownership ----------------------------------------------------------------------
    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if self._eager:
            consumer.assign(partitions)
        else:
            consumer.incremental_assign(partitions)
        if partitions:
            consumer.pause(partitions)  # until restored
        log.info("assigned %s", _names(partitions))
        if self.takeover is not None:
            self.takeover.assigned({tp.partition for tp in partitions} - set(self.tasks))
        self._assigned |= {(tp.topic, tp.partition) for tp in partitions}
        self._reconcile()

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Revoked: commit first (the revoked partitions' offsets included), then close."""
        log.info("revoked %s", _names(partitions))
        revoked = {(tp.topic, tp.partition) for tp in partitions}
        closing = {p for _, p in revoked if p in self.tasks and self._ran(self.tasks[p])}
        for partition in closing:
            self.topology.on_revoking(partition)
        if closing:
            self._require_loop().commit()
        self._release(consumer, partitions, revoked)

    def on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Lost (session expired, fenced): abort; nothing of these partitions is committed."""
        log.warning("lost %s", _names(partitions))
        self.metrics["lost"] += 1
        lost = {(tp.topic, tp.partition) for tp in partitions}
        for partition in {p for _, p in lost}:
            self.close_task(partition)
        if self.committer.txn.begun or self.committer.dirty:
            self._require_loop().recover(TransactionFailed(Failure.ABORTABLE, "partitions lost"))
        self._release(consumer, partitions, lost)

    def _release(
        self, consumer: Consumer, partitions: list[TopicPartition], gone: set[tuple[str, int]]
    ) -> None:
        self._assigned -= gone
        self._reconcile()
        if self.takeover is not None:
            self.takeover.released()
        if self._eager:
            consumer.unassign()
        else:
            consumer.incremental_unassign(partitions)

    def _reconcile(self) -> None:
        """Create a task for each partition whose every input topic is owned; close the
        tasks that lost one (a task never runs on part of its inputs)."""
        partitions = {p for _, p in self._assigned}
        for partition in partitions:
            complete = all((t, partition) in self._assigned for t in self.input_topics)
            if complete and partition not in self.tasks:
                path = self.settings.data_dir / self.topology.name / str(partition)
                task = Task(partition, self.input_topics, path, self._listener,
                            self.settings.max_record_bytes)  # fmt: skip
                self.tasks[partition] = task
                self.begin_restore(task)
        for partition in list(self.tasks):
            if not all((t, partition) in self._assigned for t in self.input_topics):
                self.close_task(partition)

    def close_task(self, partition: int) -> None:
        task = self.tasks.pop(partition, None)
        if task is None:
            return
        self.contexts.pop(partition, None)
        self.holds.forget(partition)
        self.committer.quarantine.forget(partition)
        if self._restorer is not None:
            self._restorer.stop(task)
        ran = self._ran(task)
        self._rebuilt.discard(partition)
        if ran:
            self.topology.on_stopped(partition)
        task.close()

    def _ran(self, task: Task) -> bool:
        """Whether ``task`` ran (or is rebuilt in place since it ran): only such a task gets
        ``on_revoking`` and then ``on_stopped``; one restoring for the first time neither."""
        return task.state is TaskState.RUNNING or task.partition in self._rebuilt

    def close(self) -> None:
        for partition in list(self.tasks):
            try:
                self.close_task(partition)
            except Exception:  # best effort: the others still close
                log.exception("task %d: close failed", partition)
        if self._restorer is not None:
            self._restorer.close()

    def _require_consumer(self) -> Consumer:
        if self._consumer is None:
            raise StateError("processor not started")
        return self._consumer

    def _require_restorer(self) -> Restorer:
        if self._restorer is None:
            raise StateError("processor not started")
        return self._restorer

    def _require_loop(self) -> Loop:
        if self._loop is None:
            raise StateError("processor not started")
        return self._loop


def _names(partitions: list[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}[{tp.partition}]" for tp in partitions) or "nothing"
