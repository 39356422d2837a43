"""The projector as a topology on the processor runtime (DESIGN.md §6).

Inputs cron.schedules + cron.runs + cron.attempts (co-partitioned); state changelog
``projector-state``. ``process`` stages each record's read-model rows in its partition's
``Batch``; ``pre_commit`` writes every partition's batch in one SQL transaction *before* the
Kafka transaction commits the records' offsets: a crash replays records, never skips them,
and the idempotent upserts make the replay converge. A failed write aborts the Kafka
transaction (the records are processed again); a stopped task drops its unwritten batch.
cron.run-state is produced inside the runtime's transaction, on the record's partition.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from schedulerstream.codec import Codec, default_codec
from schedulerstream.errors import DependencyDown
from schedulerstream.histogram import DURATION_BUCKETS, Histogram
from schedulerstream.ingest import RejectedRecord, job_key_from_record_key
from schedulerstream.projector import keys
from schedulerstream.projector.batch import Batch, combine
from schedulerstream.projector.events import RUN_EVENTS, decode_run_event
from schedulerstream.projector.logic import Projection
from schedulerstream.projector.staged import Staged
from schedulerstream.readmodel import (
    Changes,
    ReadModel,
    ReadModelDataError,
    ReadModelUnavailable,
)
from schedulerstream.runtime.context import TaskContext
from schedulerstream.runtime.copartition import check_home_partition
from schedulerstream.runtime.store import StateStore
from schedulerstream.runtime.topology import Topology
from schedulerstream.settings import Settings

log = logging.getLogger(__name__)

DEFAULT_KEEP_PER_JOB = 100


class ReadModelDown(DependencyDown):
    """The read model stayed unwritable for the whole retry budget (the processor stops)."""


class ProjectorTopology(Topology):
    """Projects runs, attempts and schedules into ``read_model`` and cron.run-state.

    ``keep_per_job``: runs kept per job (older ones are deleted and tombstoned);
    ``retry_s``: how long a read-model outage is retried before the process stops.
    """

    def __init__(
        self,
        settings: Settings,
        read_model: ReadModel,
        *,
        keep_per_job: int = DEFAULT_KEEP_PER_JOB,
        retry_s: float = 30.0,
        codec: Codec | None = None,
        name: str = "projector",
        changelog_topic: str | None = None,
    ) -> None:
        self.settings = settings
        self.read_model = read_model
        self.retry_s = retry_s
        self._name = name
        self.schedules_topic = settings.topics.schedules
        self.runs_topic = settings.topics.runs
        self.attempts_topic = settings.topics.attempts
        self.run_state_topic = settings.topics.run_state
        self._changelog = changelog_topic or settings.topics.projector_state
        self.codec = codec or default_codec()
        self.projection = Projection(self.codec, keep_per_job, limits=settings.record_limits())
        self._batches: dict[int, Batch] = {}
        self.write_seconds = Histogram(DURATION_BUCKETS)  # one per SQL transaction
        self.rows_written = 0
        self.refused = 0  # records whose rows the database refused (sent to rejected)

    @property
    def name(self) -> str:
        return self._name

    @property
    def input_topics(self) -> Sequence[str]:
        return (self.schedules_topic, self.runs_topic, self.attempts_topic)

    @property
    def changelog_topic(self) -> str:
        return self._changelog

    @property
    def owned_topics(self) -> Sequence[str]:
        return (self.run_state_topic,)

    def restore_record(self, store: StateStore, key: bytes, value: bytes | None) -> None:
        self.projection.restore_record(store, key, value)

    def process(self, ctx: TaskContext, message: Any) -> None:
        topic, key, value = message.topic(), message.key(), message.value()
        staged = Staged(ctx.store)
        partitions = self.settings.partitions
        if topic == self.schedules_topic:
            job_key = job_key_from_record_key(key)
            check_home_partition(job_key, ctx.partition, partitions)
            _, timestamp_ms = message.timestamp()
            stamp = timestamp_ms * 1000 if timestamp_ms > 0 else ctx.now_us()
            effects = self.projection.on_schedule(staged, key, value, stamp)
        elif topic in (self.runs_topic, self.attempts_topic):
            expected = RUN_EVENTS if topic == self.runs_topic else ("AttemptEvent",)
            event = decode_run_event(self.codec, key, value, ctx.partition, partitions, expected)
            effects = self.projection.on_run_event(staged, event, message.offset())
        else:
            raise RejectedRecord(f"the projector does not read {topic}")
        staged.apply()
        for run_id, state in effects.run_state.items():
            ctx.produce(self.run_state_topic, run_id.encode(), state, ctx.partition)
        if not effects.changes.empty():
            batch = self._batches.get(ctx.partition)
            if batch is None:
                batch = self._batches[ctx.partition] = Batch()
            batch.add(message, effects.changes)

    def pre_commit(self, contexts: Sequence[TaskContext]) -> None:
        """Write the staged rows of every committing partition in one SQL transaction.

        If the database refuses a value, the records are written one by one and each refused
        one goes to the rejected topic (its store state and cron.run-state stay applied)."""
        staged = [
            (ctx, batch) for ctx in contexts if (batch := self._batches.pop(ctx.partition, None))
        ]
        if not staged:
            return
        try:
            for changes in combine(batch for _, batch in staged):
                self.write(changes)
        except ReadModelDataError as exc:
            log.warning("read model refused a batch (%s); writing its records one by one", exc)
            for ctx, batch in staged:
                for message, changes in batch.records:
                    try:
                        self.write(changes)
                    except ReadModelDataError as refused:
                        self.refused += 1
                        ctx.reject(message, str(refused))

    def on_stopped(self, partition: int) -> None:
        self._batches.pop(partition, None)  # not written: its records are processed again

    def punctuate(self, ctx: TaskContext, now_us: int) -> None:
        return None  # nothing is time-driven: every change comes from an input record

    def on_running(self, ctx: TaskContext) -> None:
        """Copy the partition's state into a read model it was never copied into (a new
        database, or an embedded SQLite file on another machine after a rebalance)."""
        identity = self.read_model.identity().encode()
        if ctx.store.get(keys.SYNCED_KEY) == identity:
            return
        copied = 0
        for changes in self.projection.snapshot(ctx.store):
            self.write(changes)
            copied += len(changes.runs) + len(changes.jobs)
        if copied:
            log.info("task %d: copied %d rows into a new read model", ctx.partition, copied)
        ctx.store.put(keys.SYNCED_KEY, identity)

    def write(self, changes: Changes) -> None:
        """Apply ``changes``, retrying an unavailable read model for ``retry_s``."""
        if changes.empty():
            return
        deadline = time.monotonic() + self.retry_s
        delay = 0.05
        while True:
            try:
                began = time.perf_counter()
                self.read_model.apply(changes)
                self.write_seconds.observe(time.perf_counter() - began)
                self.rows_written += (
                    len(changes.runs) + len(changes.attempts) + len(changes.jobs)
                    + len(changes.deleted_runs)
                )  # fmt: skip
                return
            except ReadModelUnavailable as exc:
                if time.monotonic() + delay > deadline:
                    raise ReadModelDown(
                        f"read model unavailable for {self.retry_s}s: {exc}"
                    ) from exc
                log.warning("read model unavailable (%s); retrying in %.2fs", exc, delay)
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
