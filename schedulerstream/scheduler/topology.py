"""The scheduler as a topology on the processor runtime."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from schedulerstream.codec import Codec, default_codec
from schedulerstream.ingest import job_key_from_record_key
from schedulerstream.observability.lateness import TriggerLateness
from schedulerstream.runtime.context import TaskContext
from schedulerstream.runtime.copartition import check_home_partition
from schedulerstream.runtime.store import StateStore
from schedulerstream.runtime.topology import Topology
from schedulerstream.scheduler.logic import SchedulerLogic
from schedulerstream.scheduler.timers import TimerSettings
from schedulerstream.scheduler.writer import Topics
from schedulerstream.settings import Settings

PUNCTUATE_BUDGET_S = 0.2


class ContextOutput:
    """The logic's Output on a task context: a record's origin is its job (the key up to
    '@': run ids and job keys alike)."""

    def __init__(self, ctx: TaskContext) -> None:
        self.ctx = ctx

    def produce(
        self, topic: str, key: bytes, value: bytes | None, partition: int,
        origin: str | None = None,
    ) -> None:  # fmt: skip
        if origin is None:
            origin = key.partition(b"@")[0].decode("utf-8", "replace")
        self.ctx.produce(topic, key, value, partition, origin=origin)

    def failed(self, origin: str) -> str | None:
        return self.ctx.failed(origin)


class SchedulerTopology(Topology):
    """Inputs cron.schedules + cron.commands; state = jobs and the due/ timer index."""

    def __init__(self, settings: Settings, codec: Codec | None = None) -> None:
        self.settings = settings
        self.schedules_topic = settings.topics.schedules
        self.commands_topic = settings.topics.commands
        timers = TimerSettings(
            lookahead_us=settings.lookahead_ms * 1000,
            grace_us=settings.misfire_grace_ms * 1000,
            count_cap=settings.max_catch_up_instants,
            burst_lead_us=settings.burst_lead_ms * 1000,
            sparse_interval_us=settings.burst_min_interval_ms * 1000,
            inline_catch_up=settings.scheduler_inline_catch_up,
        )
        self.logic = SchedulerLogic(
            codec or default_codec(),
            Topics(
                settings.topics.runs,
                settings.topics.attempts,
                settings.topics.rejected,
                schedules=self.schedules_topic,
            ),
            timers,
            settings.instance_id,
            due_batch=settings.due_batch,
            backfill_chunk=settings.backfill_chunk,
            backfill_rate=settings.backfill_rate,
            limits=settings.record_limits(),
            inline_definitions=settings.scheduler_inline_definitions,
        )
        self.trigger_lateness = TriggerLateness(self.logic.codec, settings.topics.runs)

    @property
    def name(self) -> str:
        return "scheduler"

    @property
    def input_topics(self) -> Sequence[str]:
        return (self.schedules_topic, self.commands_topic)

    @property
    def changelog_topic(self) -> str:
        return self.settings.topics.scheduler_state

    @property
    def owned_topics(self) -> Sequence[str]:
        return (self.settings.topics.runs, self.settings.topics.attempts,
                self.schedules_topic)  # fmt: skip

    def restore_record(self, store: StateStore, key: bytes, value: bytes | None) -> None:
        self.logic.jobs.restore_record(store, key, value)

    def process(self, ctx: TaskContext, message: Any) -> None:
        key: bytes | None = message.key()
        job_key = job_key_from_record_key(key)
        check_home_partition(job_key, ctx.partition, self.settings.partitions)
        out = ContextOutput(ctx)
        now = ctx.now_us()
        if message.topic() == self.schedules_topic:
            _, timestamp_ms = message.timestamp()
            stamp = timestamp_ms * 1000 if timestamp_ms > 0 else now
            self.logic.on_schedule(ctx.store, out, ctx.partition, key, message.value(), stamp, now)
        else:
            self.logic.on_command(ctx.store, out, ctx.partition, key, message.value(), now)

    def punctuate(self, ctx: TaskContext, now_us: int) -> None:
        out = ContextOutput(ctx)
        backfilled = self.logic.counters.by_trigger.get("backfill", 0)
        deadline = time.monotonic() + PUNCTUATE_BUDGET_S
        while self.logic.on_tick(ctx.store, out, ctx.partition, now_us):
            if time.monotonic() > deadline:
                break
        backfills = self.logic.counters.by_trigger.get("backfill", 0) != backfilled
        self.trigger_lateness.observe(ctx.outputs, now_us, backfills)  # metrics

    def on_running(self, ctx: TaskContext) -> None:
        """The store was (re)built: the timer scan starts again from the first due key."""
        self.logic.jobs.forget_due_floor(ctx.store)
        self.logic.backfills.budget.forget(ctx.partition)
