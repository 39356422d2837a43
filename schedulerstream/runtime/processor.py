"""The Processor: one consumer loop driving the tasks of one topology, with exactly-once
commits (consume → process → produce + changelog + offsets in one Kafka transaction).

Single thread. Each ``step``: consume a batch, dispatch it to RUNNING tasks, advance
restores by one bounded chunk, punctuate every ``tick_ms`` (and at a due time a punctuation
asked for) and commit every ``commit_interval_ms`` when the transaction holds anything. The
parts, as in Kafka Streams: the loop here; the tasks and their lifecycle in
``tasks.TaskManager``; a record or callback applied to a task all or nothing in
``invoker.Invoker``; the commit protocol in ``committer.Committer`` (``commit`` ends a
transaction well, ``_recover`` badly); delay-topic holds in ``holds.Holds``; consumer lag and
samplers in ``sampling.Sampling``. Loop time comes from the injected ``Clock``.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import AdminClient

from schedulerstream.clock import Clock, SystemClock
from schedulerstream.errors import FencedError, StateError
from schedulerstream.histogram import Histogram
from schedulerstream.kafka import clients
from schedulerstream.runtime.changelog import Restorer, describe
from schedulerstream.runtime.charges import admin_lookup
from schedulerstream.runtime.committer import Committer
from schedulerstream.runtime.holds import Holds
from schedulerstream.runtime.invoker import Invoker
from schedulerstream.runtime.quarantine import Quarantine
from schedulerstream.runtime.sampling import SAMPLE_INTERVAL_S, Sampling
from schedulerstream.runtime.takeover import build_takeover
from schedulerstream.runtime.task import Task, TaskState
from schedulerstream.runtime.tasks import Loop, StateListener, TaskManager
from schedulerstream.runtime.topology import Topology
from schedulerstream.runtime.transaction import TransactionalProducer, TransactionFailed, classify
from schedulerstream.settings import Settings

log = logging.getLogger(__name__)

# a tick falls this long after its grid point: one that wakes a little early (the poll's
# timeout is in ms) still sees the work due on the point as due
TICK_GRID_OFFSET_US = 1_000


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
        self.rejected_topic = rejected_topic or settings.topics.rejected
        self.group_id = f"{settings.topic_prefix}{topology.name}"
        self.transactional_id = f"{self.group_id}-{settings.instance_id}"
        self.input_topics = tuple(topology.input_topics)
        self.metrics: dict[str, float] = dict.fromkeys(
            (
                "records_processed", "records_rejected", "punctuate_errors", "commits",
                "aborts", "producer_recreations", "group_fenced", "lost", "restores",
                "restored_records", "restore_rate", "changelog_records",
                "changelog_records_skipped", "corrupt_stores", "stores_unavailable",
                "store_write_failures", "standby_tasks", "fenced_predecessors",
                "fetchers_restarted",
            ),
            0,
        )  # fmt: skip
        self._next_sample = 0.0
        self._batch = batch_size
        self._restore_chunk = restore_chunk
        self._timeout_s = timeout_s
        self._tick_s = settings.tick_ms / 1000
        self._tick_us = settings.tick_ms * 1000
        self._punctuations = 0  # ticks so far: each starts from another task
        self._commit_s = settings.commit_interval_ms / 1000
        copartitioned = len(self.input_topics) > 1
        # a short fetch long-poll: group requests (committed offsets) share its connection
        self._consumer_config = clients.consumer_config(
            settings, self.group_id, copartitioned=copartitioned,
            **{"fetch.wait.max.ms": 100, "client.id": self.transactional_id},
        )  # fmt: skip
        strategy = self._consumer_config.get("partition.assignment.strategy", "")
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
            clock=self.clock,
        )
        self._txn = txn
        self._holds = Holds(self.clock)
        self.task_manager = TaskManager(
            settings, topology, self.clock, self.committer, self._holds, self.metrics,
            eager=strategy in ("range", "roundrobin"), timeout_s=timeout_s,
            listener=on_state_change,
        )  # fmt: skip
        self._tasks = self.task_manager.tasks
        self._contexts = self.task_manager.contexts
        self.invoker = Invoker(
            topology, self.task_manager, self.committer, self._holds, self.metrics,
            settings.max_record_bytes, self._require_consumer,
        )  # fmt: skip
        self._process = self.invoker.process  # bound once: it is called per record
        self.sampling = Sampling(self.task_manager)
        self._consumer: Consumer | None = None
        self._restorer: Restorer | None = None
        self._commit_requested = False  # by a task context: commit at the end of this step
        self._tick_requested = False  # by a punctuation that left due work: tick again now
        self._wake = math.inf  # a punctuation asked for at a due time (monotonic)
        self._punctuated = 0.0  # when the last punctuation began (monotonic)
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
            describe(clients.base_config(self.settings), changelog, self._timeout_s),
            self.topology.restore_record,
            self.clock,
            self._restore_chunk,
            self._timeout_s,
            self.metrics,
        )
        self.takeover = build_takeover(
            self.settings, self.topology, self.group_id, self.transactional_id, self.clock,
            self.metrics, self._restore_chunk, self._timeout_s,
        )  # fmt: skip
        self.task_manager.takeover = self.takeover
        self._consumer = Consumer(self._consumer_config)
        self._consumer.subscribe(
            list(self.input_topics),
            on_assign=self.task_manager.on_assign,
            on_revoke=self.task_manager.on_revoke,
            on_lost=self.task_manager.on_lost,
        )
        self.task_manager.start(
            self._consumer,
            self._restorer,
            Loop(
                self.commit,
                self._recover,
                self._request_commit,
                self.invoker.invoke,
                self._request_tick,
            ),
        )
        now = self.clock.monotonic()
        self._next_tick = self._tick_after()
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
        log.info("stopping: the last commit, then leaving the group")
        try:
            self.commit()
        except Exception:  # what it did not commit is processed again by the next owner
            log.exception("the last commit failed while closing")
        finally:
            try:
                if self._consumer is not None:
                    self._consumer.close()  # revokes (nothing left to commit), leaves the group
            finally:
                self.task_manager.close()
                self.takeover.close()
                self._txn.close()
                log.info("stopped: left the group, stores closed")

    def step(self) -> None:
        """One loop iteration: consume and process, restore a chunk, punctuate, commit."""
        consumer = self._require_consumer()
        restoring = self.task_manager.restoring()
        now = self.clock.monotonic()
        wait = (
            0.0
            if restoring or self._tick_requested
            else max(0.0, min(self._next_tick, self._next_commit) - now)
        )
        messages = consumer.consume(self._batch, wait)
        self._holds.resume_due(consumer, self.task_manager.is_running)
        try:
            self._dispatch(messages)
        except KafkaException as exc:
            self._recover(classify(exc))
        if restoring:
            next_due = min(self._next_tick, self._next_commit)
            try:
                self.task_manager.restore(max(0.0, next_due - self.clock.monotonic()),
                                          self._tick_s)  # fmt: skip
            except KafkaException as exc:  # a task starting to run met a fenced producer
                self._recover(classify(exc))
        self.takeover.maintain(set(self._tasks))
        now = self.clock.monotonic()
        if now >= self._next_tick or self._tick_requested:
            self._tick_requested = False
            self._wake = math.inf
            self._punctuated = now
            self._punctuate()
            self._next_tick = self._woken_tick()
        if now >= self._next_commit or self._commit_requested:
            self._commit_now()
        if now >= self._next_sample:
            self.sampling.sample(self._require_consumer())
            self._next_sample = now + SAMPLE_INTERVAL_S
        try:
            self._txn.poll()
        except KafkaException as exc:  # a fatal error (fenced) surfaces here too
            self._recover(classify(exc))

    def _tick_after(self) -> float:
        """The next tick (monotonic): just past the next point of a ``tick_ms`` grid on the
        wall clock, so work due on a whole second (cron's instants) finds a tick at its due
        time rather than up to a tick later."""
        tick_us = self._tick_us
        wall_us, now = self.clock.now_us(), self.clock.monotonic()
        return now + (tick_us - wall_us % tick_us + TICK_GRID_OFFSET_US) / 1e6

    def _woken_tick(self) -> float:
        """The next tick: on the grid, or sooner at a due time asked for during the punctuation
        just made, but at least half a tick after that one began: work due close together
        shares a tick and its commit, and a loop punctuates at most twice per tick."""
        return min(self._tick_after(), max(self._wake, self._punctuated + self._tick_s / 2))

    def _request_commit(self) -> None:
        self._commit_requested = True

    def _request_tick(self, at_us: int | None = None) -> None:
        if at_us is None:
            self._tick_requested = True
            return
        wake = self.clock.monotonic() + (at_us - self.clock.now_us() + TICK_GRID_OFFSET_US) / 1e6
        self._wake = min(self._wake, wake)

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
        self.task_manager.rebuild(self._running())

    def _write_failed(self, task: Task) -> None:
        self.task_manager.rebuild([task])

    def _running(self) -> list[Task]:
        return self.task_manager.running()

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

    def _punctuate(self) -> None:
        """Punctuate every running task, from a different one each tick: the first takes
        what the process shares (the dispatcher's limits), so a fixed order would let the
        first partitions' backlog starve the last ones."""
        now_us = self.clock.now_us()
        tasks = list(self._tasks.values())
        if tasks:
            first = self._punctuations % len(tasks)
            tasks = tasks[first:] + tasks[:first]
        self._punctuations += 1
        try:
            for task in tasks:
                if task.state is TaskState.RUNNING:
                    self.invoker.invoke(task, lambda ctx: self.topology.punctuate(ctx, now_us))
                # A long round (a burst due on many partitions) commits as it goes, so
                # the first partitions' runs become visible without waiting for the last.
                if self.clock.monotonic() >= self._next_commit:
                    self.commit()
                    self._next_commit = self.clock.monotonic() + self._commit_s
        except KafkaException as exc:
            self._recover(classify(exc))

    def _require_consumer(self) -> Consumer:
        if self._consumer is None:
            raise StateError("processor not started")
        return self._consumer
