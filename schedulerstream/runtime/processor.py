"""The Processor: one consumer loop driving the tasks of one topology, with exactly-once
commits (consume → process → produce + changelog + offsets in one Kafka transaction).

Single thread. Each ``step``: consume a batch, dispatch it to RUNNING tasks, advance
restores by one bounded chunk, punctuate every ``tick_ms`` and commit every
``commit_interval_ms`` when the transaction holds anything. ``commit`` is the one place a
transaction ends well; ``_recover`` the one place it ends badly.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from schedulerstream.clock import Clock, SystemClock
from schedulerstream.errors import FencedError, StateError
from schedulerstream.histogram import Histogram
from schedulerstream.kafka import clients
from schedulerstream.runtime.changelog import Restorer, topic_id
from schedulerstream.runtime.charges import admin_lookup
from schedulerstream.runtime.committer import Committer
from schedulerstream.runtime.context import TaskContext
from schedulerstream.runtime.holds import Holds
from schedulerstream.runtime.quarantine import Quarantine
from schedulerstream.runtime.store import StoreCorrupted, StoreWriteFailed
from schedulerstream.runtime.task import Task, TaskState
from schedulerstream.runtime.topology import Topology
from schedulerstream.runtime.transaction import (
    Failure,
    TransactionalProducer,
    TransactionFailed,
    classify,
)
from schedulerstream.settings import Settings

log = logging.getLogger(__name__)

StateListener = Callable[[int, TaskState], None]
Sampler = Callable[[list[TaskContext]], None]
SETTLE_RETRY_S = 0.2
STORE_RETRY_S = 5.0  # a failed store write (disk full): retry the task's restore after this
SAMPLE_INTERVAL_S = 5.0


class Processor:
    """Runs ``topology`` for the partitions this member owns.

    ``run()`` blocks until ``stop()`` (signal-safe) and then shuts down cleanly; tests may
    drive ``start()`` / ``step()`` / ``close()`` themselves.
    """

    def __init__(
        self,
        settings: Settings,
        topology: Topology,
        *,
        clock: Clock | None = None,
        rejected_topic: str | None = None,
        batch_size: int = 1000,
        restore_chunk: int = 10_000,
        timeout_s: float = 30.0,
        on_state_change: StateListener | None = None,
    ) -> None:
        self.settings = settings
        self.topology = topology
        self.clock: Clock = clock or SystemClock()
        self.rejected_topic = rejected_topic or settings.topic("rejected")
        self.group_id = f"{settings.topic_prefix}{topology.name}"
        self.transactional_id = f"{self.group_id}-{settings.instance_id}"
        self.input_topics = tuple(topology.input_topics)
        self.metrics: dict[str, float] = dict.fromkeys(
            (
                "records_processed", "records_rejected", "punctuate_errors", "commits",
                "aborts", "producer_recreations", "group_fenced", "lost", "restores",
                "restored_records", "restore_rate", "changelog_records", "corrupt_stores",
                "store_write_failures",
            ),
            0,
        )  # fmt: skip
        self.lag: dict[tuple[str, int], int] = {}  # owned input partition → records behind
        # called on the loop thread every SAMPLE_INTERVAL_S with the RUNNING tasks' contexts
        self.samplers: list[Sampler] = []
        self._next_sample = 0.0
        self._batch = batch_size
        self._restore_chunk = restore_chunk
        self._timeout_s = timeout_s
        self._listener = on_state_change
        self._tick_s = settings.tick_ms / 1000
        self._commit_s = settings.commit_interval_ms / 1000
        copartitioned = len(self.input_topics) > 1
        # a short fetch long-poll: group requests (committed offsets) share its connection
        self._consumer_config = clients.consumer_config(
            settings, self.group_id, copartitioned=copartitioned, **{"fetch.wait.max.ms": 100}
        )
        strategy = self._consumer_config.get("partition.assignment.strategy", "")
        self._eager = strategy in ("range", "roundrobin")
        # A short transaction timeout bounds how long a crashed member's open transaction
        # blocks read_committed readers (and the restore of its successor).
        txn = TransactionalProducer(
            clients.transactional_producer_config(
                settings,
                self.transactional_id,
                **{
                    "transaction.timeout.ms": 10_000,
                    # a missing topic (a job's Kafka target) fails its record within a second
                    "topic.metadata.propagation.max.ms": 1000,
                    # our own size check (max_record_bytes) speaks first, naming the origin
                    "message.max.bytes": settings.max_record_bytes + 64 * 1024,
                },
            ),
            timeout_s,
        )
        self.committer = Committer(
            txn,
            topology,
            rejected_topic=self.rejected_topic,
            group_id=self.group_id,
            max_record_bytes=settings.max_record_bytes,
            metrics=self.metrics,
            lookup=admin_lookup(lambda: AdminClient(clients.base_config(settings))),
        )
        self._txn = txn
        self._max_record = settings.max_record_bytes
        self._holds = Holds(self.clock)
        self._consumer: Consumer | None = None
        self._restorer: Restorer | None = None
        self._tasks: dict[int, Task] = {}
        self._contexts: dict[int, TaskContext] = {}
        self._assigned: set[tuple[str, int]] = set()
        self._awaiting: dict[int, float] = {}  # caught up, waiting to settle: retry time
        self._unstarted: dict[int, float] = {}  # restore could not start yet: retry time
        self._rebuilt: set[int] = set()  # rebuilt in place (on_rebuild), not running yet
        self._commit_requested = False  # by a task context: commit at the end of this step
        self._stopping = False
        self._started = False
        self._next_tick = 0.0
        self._next_commit = 0.0

    # -- public API ---------------------------------------------------------------------
    @property
    def tasks(self) -> dict[int, Task]:
        """The current tasks by partition (read only)."""
        return dict(self._tasks)

    @property
    def quarantine(self) -> Quarantine:
        """Origins refused by the broker, and the isolated failures by kind."""
        return self.committer.quarantine

    @property
    def commit_seconds(self) -> Histogram:
        return self.committer.commit_seconds

    def running_partitions(self) -> list[int]:
        return sorted(p for p, t in self._tasks.items() if t.state is TaskState.RUNNING)

    def start(self) -> None:
        """Create the producer (fencing older instances), the restorer and the consumer."""
        self._txn.start()
        changelog = self.topology.changelog_topic
        self._restorer = Restorer(
            clients.restore_consumer_config(self.settings, f"{self.group_id}-restore"),
            clients.restore_consumer_config(
                self.settings, f"{self.group_id}-restore", committed=False
            ),
            changelog,
            topic_id(clients.base_config(self.settings), changelog, self._timeout_s),
            self.topology.restore_record,
            self._restore_chunk,
            self._timeout_s,
        )
        self._consumer = Consumer(self._consumer_config)
        self._consumer.subscribe(
            list(self.input_topics),
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )
        now = self.clock.monotonic()
        self._next_tick = now + self._tick_s
        self._next_commit = now + self._commit_s
        self._started = True

    def run(self) -> None:
        """Process until ``stop()``; then commit, leave the group and close the stores."""
        if not self._started:
            self.start()
        try:
            while not self._stopping:
                self.step()
        finally:
            self.close()

    def stop(self) -> None:
        """Ask ``run()`` to finish after the current step (safe from a signal handler)."""
        self._stopping = True

    def close(self) -> None:
        """Commit the open transaction, leave the group cleanly, close every store."""
        if not self._started:
            return
        self._started = False
        try:
            self.commit()
        except Exception:  # what it did not commit is processed again by the next owner
            log.exception("the last commit failed while closing")
        finally:
            try:
                if self._consumer is not None:
                    self._consumer.close()  # revokes (nothing left to commit), leaves the group
            finally:
                for partition in list(self._tasks):
                    try:
                        self._close_task(partition)
                    except Exception:  # best effort: the others still close
                        log.exception("task %d: close failed", partition)
                if self._restorer is not None:
                    self._restorer.close()
                self._txn.close()

    def step(self) -> None:
        """One loop iteration: consume and process, restore a chunk, punctuate, commit."""
        consumer = self._require_consumer()
        restoring = self._restoring()
        now = self.clock.monotonic()
        wait = 0.0 if restoring else max(0.0, min(self._next_tick, self._next_commit) - now)
        messages = consumer.consume(self._batch, wait)
        self._holds.resume_due(consumer, self._is_running)
        try:
            self._dispatch(messages)
        except KafkaException as exc:
            self._recover(classify(exc))
        if restoring:
            self._restore(
                max(0.0, min(self._next_tick, self._next_commit) - self.clock.monotonic())
            )
        now = self.clock.monotonic()
        if now >= self._next_tick:
            self._punctuate()
            self._next_tick = now + self._tick_s
        if now >= self._next_commit or self._commit_requested:
            self._commit_now()
        if now >= self._next_sample:
            self._sample()
            self._next_sample = now + SAMPLE_INTERVAL_S
        self._txn.poll()

    def _sample(self) -> None:
        """Consumer lag of the RUNNING tasks' inputs (high watermark from the last fetch minus
        the position: local, no request), then the samplers."""
        consumer = self._require_consumer()
        running = [t for t in self._tasks.values() if t.state is TaskState.RUNNING]
        lag: dict[tuple[str, int], int] = {}
        try:
            tps = [tp for task in running for tp in self._input_tps(task.partition)]
            positions = {(tp.topic, tp.partition): tp.offset for tp in consumer.position(tps)}
            for task in running:
                for topic, offset in task.input_offsets.items():
                    _, high = consumer.get_watermark_offsets(
                        TopicPartition(topic, task.partition), cached=True
                    )
                    if high >= 0:
                        position = max(offset, positions.get((topic, task.partition), -1))
                        lag[(topic, task.partition)] = max(0, high - position)
        except KafkaException as exc:
            log.debug("lag sample failed: %s", exc)
        self.lag = lag
        contexts = [self._contexts[t.partition] for t in running if t.partition in self._contexts]
        for sampler in self.samplers:
            try:
                sampler(contexts)
            except Exception:
                log.exception("sampler failed")

    def _request_commit(self) -> None:
        self._commit_requested = True

    def _commit_now(self) -> None:
        self._commit_requested = False
        self.commit()
        self._next_commit = self.clock.monotonic() + self._commit_s

    def commit(self) -> bool:
        """Commit the open transaction (``Committer.commit``: steps 0–6); True when something
        was committed."""
        running = self._running()
        contexts = [self._contexts[t.partition] for t in running if t.partition in self._contexts]
        return self.committer.commit(
            running, contexts, self._require_consumer(), self._recover, self._write_failed
        )

    def _recover(self, failure: TransactionFailed) -> None:
        """Abort (or, when fatal, replace the producer), drop every overlay, and rebuild the
        RUNNING tasks: re-restore from the changelog, then seek inputs to the group's
        committed offsets. The changelog and the group are the truth, never local state."""
        self.committer.abort(failure)
        self._rebuild(self._running())

    def _write_failed(self, task: Task) -> None:
        self._rebuild([task])

    def _running(self) -> list[Task]:
        return [t for t in self._tasks.values() if t.state is TaskState.RUNNING]

    def _is_running(self, partition: int) -> bool:
        task = self._tasks.get(partition)
        return task is not None and task.state is TaskState.RUNNING

    def _store_corrupted(self, task: Task, exc: StoreCorrupted) -> None:
        """A read of ``task``'s store failed: wipe it and restore it cold from the changelog.

        The open transaction is aborted (it may hold output computed from the damaged store)
        and every RUNNING task rebuilt, as after any failed transaction."""
        log.error("task %d: %s; wiping it and restoring from the changelog", task.partition, exc)
        self.metrics["corrupt_stores"] += 1
        self._require_restorer().stop(task)
        task.store = task.require_store().wipe()
        if task.state is TaskState.RUNNING:
            self._recover(TransactionFailed(Failure.ABORTABLE, f"task {task.partition}: {exc}"))
            return
        if task.state is TaskState.RESTORING:
            task.transition(TaskState.SUSPENDED)
        self._awaiting.pop(task.partition, None)
        self._begin_restore(task)

    def _store_write_failed(self, task: Task, exc: Exception) -> None:
        """The store could not be written during restore (the disk is full, say): pause the
        task and start its restore again later, from what the store holds; it runs again once
        the writes succeed. Nothing is lost: the changelog and the inputs hold it all."""
        log.error("task %d: %s; retrying its restore in %.0f s", task.partition, exc,
                  STORE_RETRY_S)  # fmt: skip
        self.metrics["store_write_failures"] += 1
        self._require_restorer().stop(task)
        if task.state is TaskState.RESTORING:
            task.transition(TaskState.SUSPENDED)
        task.close_store()  # RocksDB refuses every write after one failed: reopen it later
        self._awaiting.pop(task.partition, None)
        self._unstarted[task.partition] = self.clock.monotonic() + STORE_RETRY_S

    def _rebuild(self, tasks: list[Task]) -> None:
        consumer = self._require_consumer()
        for task in tasks:
            if task.state is TaskState.RUNNING:
                self.topology.on_rebuild(task.partition)
                self._rebuilt.add(task.partition)
            task.suspend()
            self._holds.forget(task.partition)  # the restore seeks and resumes every input
            consumer.pause(self._input_tps(task.partition))
            self._begin_restore(task)

    def _begin_restore(self, task: Task) -> None:
        try:
            self._require_restorer().start(task)
            self._unstarted.pop(task.partition, None)
        except KafkaException as exc:
            log.warning("task %d: restore cannot start yet: %s", task.partition, exc)
            self._unstarted[task.partition] = self.clock.monotonic() + SETTLE_RETRY_S
        except StateError as exc:  # its store cannot be opened or written (disk full)
            log.error("task %d: restore cannot start: %s; retrying in %.0f s", task.partition,
                      exc, STORE_RETRY_S)  # fmt: skip
            self._unstarted[task.partition] = self.clock.monotonic() + STORE_RETRY_S

    # -- processing ---------------------------------------------------------------------
    def _dispatch(self, messages: list[Any]) -> None:
        for msg in messages:
            err = msg.error()
            if err is not None:
                if err.fatal():  # e.g. a fenced static member: nothing to recover here
                    raise FencedError(f"consumer failed: {err}")
                log.warning("consumer: %s", err)
                continue
            task = self._tasks.get(msg.partition())
            if task is None or task.state is not TaskState.RUNNING:
                continue  # prefetched for a partition that is not (or no longer) ours
            if (msg.topic(), msg.partition()) in self._holds:
                continue  # prefetched behind a held record: it comes again after it
            expected = task.input_offsets.get(msg.topic())
            if expected is None or msg.offset() < expected:
                continue
            self._process(task, msg)
            if self.clock.monotonic() >= self._next_commit:  # a slow batch still commits on time
                self._commit_now()

    def _process(self, task: Task, msg: Any) -> None:
        ctx = self._contexts[task.partition]
        store = task.require_store()
        origin = f"{msg.topic()}[{msg.partition()}]@{msg.offset()}"  # for untagged outputs
        for replay in (False, True):
            store.savepoint()
            try:
                self.topology.process(ctx, msg)
                until_us, ctx.held_until_us = ctx.held_until_us, None
                if until_us is not None:
                    store.rollback()
                    ctx.outputs.clear()
                    self._holds.hold(self._require_consumer(), msg, until_us)
                    return
            except StoreCorrupted as exc:  # the record is fine, the local store is not
                store.rollback()
                ctx.outputs.clear()
                ctx.held_until_us = None
                self._store_corrupted(task, exc)
                return
            except Exception as exc:
                store.rollback()
                ctx.outputs.clear()
                ctx.held_until_us = None
                self.committer.reject(msg, f"{type(exc).__name__}: {exc}")
                break
            outputs = ctx.take_outputs()
            oversized = [o for o in outputs if o.size() > self._max_record]
            if not oversized:
                store.release()
                self.committer.produce(task.partition, outputs, origin)
                break
            store.rollback()  # told of its refused records, the topology processes it again
            for output in oversized:
                self.quarantine.add(task.partition, output.origin or origin,
                                    self.committer.too_large(output),
                                    "record_too_large")  # fmt: skip
            if replay:
                self.committer.reject(msg, self.committer.too_large(oversized[0]))
        task.input_offsets[msg.topic()] = msg.offset() + 1
        self.metrics["records_processed"] += 1
        self.committer.dirty = True

    def _invoke(self, task: Task, callback: Callable[[TaskContext], None]) -> None:
        """Run a task callback (punctuate, on_running) atomically: on error, undo it."""
        ctx = self._contexts[task.partition]
        store = task.require_store()
        store.savepoint()
        try:
            callback(ctx)
        except StoreCorrupted as exc:
            store.rollback()
            ctx.outputs.clear()
            self._store_corrupted(task, exc)
            return
        except Exception:
            store.rollback()
            ctx.outputs.clear()
            self.metrics["punctuate_errors"] += 1
            log.exception("task %d: callback failed; its changes were dropped", task.partition)
            return
        store.release()
        outputs = ctx.take_outputs()
        self.committer.produce(task.partition, outputs)
        if outputs or store.has_pending():
            self.committer.dirty = True

    def _punctuate(self) -> None:
        now_us = self.clock.now_us()
        try:
            for task in list(self._tasks.values()):
                if task.state is TaskState.RUNNING:
                    self._invoke(task, lambda ctx: self.topology.punctuate(ctx, now_us))
                # A long round (a burst due on many partitions) commits as it goes, so
                # the first partitions' runs become visible without waiting for the last.
                if self.clock.monotonic() >= self._next_commit:
                    self.commit()
                    self._next_commit = self.clock.monotonic() + self._commit_s
        except KafkaException as exc:
            self._recover(classify(exc))

    # -- restoring ----------------------------------------------------------------------
    def _restoring(self) -> bool:
        return bool(self._awaiting or self._unstarted) or self._require_restorer().restoring()

    def _restore(self, timeout_s: float) -> None:
        restorer = self._require_restorer()
        for partition, not_before in list(self._unstarted.items()):
            waiting = self._tasks.get(partition)
            if waiting is None:
                self._unstarted.pop(partition, None)
            elif self.clock.monotonic() >= not_before:
                self._begin_restore(waiting)
        try:
            caught_up = restorer.poll(min(timeout_s, self._tick_s))
        except StoreCorrupted as exc:
            caught_up = []
            for damaged in list(self._tasks.values()):
                if damaged.store is not None and damaged.store.path == exc.path:
                    self._store_corrupted(damaged, exc)
        except StoreWriteFailed as exc:
            caught_up = []
            for stuck in list(self._tasks.values()):
                if stuck.store is not None and stuck.store.path == exc.path:
                    self._store_write_failed(stuck, exc)
        for ready in caught_up:
            self._awaiting.setdefault(ready.partition, 0.0)
        now = self.clock.monotonic()
        for partition, not_before in list(self._awaiting.items()):
            if now < not_before:
                continue
            task = self._tasks.get(partition)
            if task is None or task.state is not TaskState.RESTORING or self._try_run(task):
                self._awaiting.pop(partition, None)
            else:
                self._awaiting[partition] = self.clock.monotonic() + SETTLE_RETRY_S

    def _try_run(self, task: Task) -> bool:
        """Caught up: fetch the committed input offsets (stable: waits out open
        transactions), re-check the changelog end, seek, resume, and run."""
        restorer = self._require_restorer()
        consumer = self._require_consumer()
        tps = self._input_tps(task.partition)
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
            for topic, offset in offsets.items():
                consumer.seek(TopicPartition(topic, task.partition, offset))
            consumer.resume(tps)
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
        self._contexts[task.partition] = TaskContext(
            task.partition,
            task.require_store(),
            self.clock,
            self.rejected_topic,
            self.group_id,
            self._request_commit,
            self.quarantine,
            self._max_record,
        )
        self._invoke(task, self.topology.on_running)
        return True

    # -- ownership ----------------------------------------------------------------------
    def _input_tps(self, partition: int) -> list[TopicPartition]:
        return [TopicPartition(topic, partition) for topic in self.input_topics]

    def _reconcile(self) -> None:
        """Create a task for each partition whose every input topic is owned; close the
        tasks that lost one (a task never runs on part of its inputs)."""
        partitions = {p for _, p in self._assigned}
        for partition in partitions:
            complete = all((t, partition) in self._assigned for t in self.input_topics)
            if complete and partition not in self._tasks:
                path = self.settings.data_dir / self.topology.name / str(partition)
                task = Task(partition, self.input_topics, path, self._listener)
                self._tasks[partition] = task
                self._begin_restore(task)
        for partition in list(self._tasks):
            if not all((t, partition) in self._assigned for t in self.input_topics):
                self._close_task(partition)

    def _close_task(self, partition: int) -> None:
        task = self._tasks.pop(partition, None)
        if task is None:
            return
        self._awaiting.pop(partition, None)
        self._unstarted.pop(partition, None)
        self._contexts.pop(partition, None)
        self._holds.forget(partition)
        self.quarantine.forget(partition)
        if self._restorer is not None:
            self._restorer.stop(task)
        self._stopped(task)
        task.close()

    def _stopped(self, task: Task) -> None:
        rebuilt = task.partition in self._rebuilt  # stopped before it ran again
        self._rebuilt.discard(task.partition)
        if task.state is TaskState.RUNNING or rebuilt:
            self.topology.on_stopped(task.partition)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if self._eager:
            consumer.assign(partitions)
        else:
            consumer.incremental_assign(partitions)
        if partitions:
            consumer.pause(partitions)  # until restored
        log.info("assigned %s", _names(partitions))
        self._assigned |= {(tp.topic, tp.partition) for tp in partitions}
        self._reconcile()

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Revoked: commit first (the revoked partitions' offsets included), then close."""
        log.info("revoked %s", _names(partitions))
        revoked = {(tp.topic, tp.partition) for tp in partitions}
        if any(p in self._tasks for _, p in revoked):
            self.commit()
        self._release(consumer, partitions, revoked)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Lost (session expired, fenced): abort; nothing of these partitions is committed."""
        log.warning("lost %s", _names(partitions))
        self.metrics["lost"] += 1
        lost = {(tp.topic, tp.partition) for tp in partitions}
        for partition in {p for _, p in lost}:
            self._close_task(partition)
        if self._txn.begun or self.committer.dirty:
            self._recover(TransactionFailed(Failure.ABORTABLE, "partitions lost"))
        self._release(consumer, partitions, lost)

    def _release(
        self, consumer: Consumer, partitions: list[TopicPartition], gone: set[tuple[str, int]]
    ) -> None:
        self._assigned -= gone
        self._reconcile()
        if self._eager:
            consumer.unassign()
        else:
            consumer.incremental_unassign(partitions)

    def _require_consumer(self) -> Consumer:
        if self._consumer is None:
            raise StateError("processor not started")
        return self._consumer

    def _require_restorer(self) -> Restorer:
        if self._restorer is None:
            raise StateError("processor not started")
        return self._restorer


def _names(partitions: list[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}[{tp.partition}]" for tp in partitions) or "nothing"
