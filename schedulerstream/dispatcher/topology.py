"""The dispatcher as a topology on the processor runtime.

Inputs: cron.runs, cron.commands (CancelRun) and the retry delay topics; changelog
cron.dispatcher-state. HTTP and SQS attempts run on the ``Executor``'s loop and come back
through ``punctuate``; a Kafka target is produced inside the transaction (exactly once).

Delay topics: a retry record is held (its partition paused, ``TaskContext.hold``) until its
record timestamp plus the tier's delay, so no sleeping and no scan; then the run waits in its
tenant queue for the rest of the wait (a tier's records carry waits from its delay up to the
next tier's), due at ``retry_at``.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from schedulerstream.codec import Codec, default_codec
from schedulerstream.dispatcher.executor import Completion, Executor
from schedulerstream.dispatcher.limits import Limits
from schedulerstream.dispatcher.logic import Action, Cancel, DispatchLogic, Start, Topics
from schedulerstream.ingest import RejectedRecord, job_key_from_record_key
from schedulerstream.kafka.topics import retry_tiers
from schedulerstream.model import HttpTarget as HttpConfig
from schedulerstream.model import KafkaTarget as KafkaConfig
from schedulerstream.model import SqsTarget as SqsConfig
from schedulerstream.partitioner import partition_for_job_key
from schedulerstream.runtime.context import TaskContext
from schedulerstream.runtime.topology import Topology
from schedulerstream.settings import Settings
from schedulerstream.targets.base import Outcome, Target
from schedulerstream.targets.http import HttpTarget
from schedulerstream.targets.kafka import kafka_record

log = logging.getLogger(__name__)


class ContextOutput:
    """The logic's Output on a task context."""

    def __init__(self, ctx: TaskContext) -> None:
        self.ctx = ctx

    def produce(self, topic: str, key: bytes, value: bytes | None, partition: int) -> None:
        self.ctx.produce(topic, key, value, partition)


class DispatcherTopology(Topology):
    """Runs → per-tenant queues → fair dispatch → attempts; see the module docstring."""

    def __init__(
        self, settings: Settings, codec: Codec | None = None, executor: Executor | None = None
    ) -> None:
        self.settings = settings
        self.runs_topic = settings.topic("runs")
        self.commands_topic = settings.topic("commands")
        tiers = tuple((t.name, (t.delay_ms or 0) * 1000) for t in retry_tiers(settings))
        self.tier_delay_us = dict(tiers)
        self.limits = Limits(
            settings.dispatch_concurrency,
            settings.tenant_concurrency,
            settings.tenant_rate_per_s,
            settings.host_concurrency,
        )
        self.logic = DispatchLogic(
            codec or default_codec(),
            Topics(settings.topic("attempts"), tiers, commands=settings.topic("commands")),
            self.limits,
            settings.instance_id,
        )
        self.executor = executor or Executor()
        self.http = HttpTarget.from_settings(settings)
        self._sqs: Target[Any] | None = None
        self._completed: dict[int, list[Completion]] = defaultdict(list)

    @property
    def name(self) -> str:
        return "dispatcher"

    @property
    def input_topics(self) -> Sequence[str]:
        return (self.runs_topic, self.commands_topic, *self.tier_delay_us)

    @property
    def changelog_topic(self) -> str:
        return self.settings.topic("dispatcher-state")

    def process(self, ctx: TaskContext, message: Any) -> None:
        key: bytes | None = message.key()
        topic = message.topic()
        now = ctx.now_us()
        out = ContextOutput(ctx)
        if topic == self.commands_topic:
            self._check_partition(ctx, job_key_from_record_key(key))
            self._apply(ctx, self.logic.on_command(ctx.store, out, ctx.partition, key,
                                                   message.value(), now))  # fmt: skip
            return
        run_id = (key or b"").decode("utf-8", "replace")
        self._check_partition(ctx, run_id.partition("@")[0])
        if topic == self.runs_topic:
            self.logic.on_run(ctx.store, out, ctx.partition, message.value(), now)
            return
        _, produced_ms = message.timestamp()
        release_us = produced_ms * 1000 + self.tier_delay_us[topic]
        if release_us > now:
            ctx.hold(release_us)
        else:
            self.logic.on_retry(ctx.store, ctx.partition, message.value())

    def punctuate(self, ctx: TaskContext, now_us: int) -> None:
        for completion in self.executor.drain():
            self.limits.release(completion.tenant, completion.host)
            if completion.outcome is not None:
                self._completed[completion.partition].append(completion)
        out = ContextOutput(ctx)
        for done in self._completed.pop(ctx.partition, []):
            assert done.outcome is not None
            self.logic.on_outcome(ctx.store, out, ctx.partition, done.run_id, done.attempt,
                                  done.outcome, now_us)  # fmt: skip
        self._apply(ctx, self.logic.on_tick(ctx.store, out, ctx.partition, now_us))

    def on_running(self, ctx: TaskContext) -> None:
        """Attempts still running for this partition belong to state that was dropped."""
        self.executor.cancel_partition(ctx.partition)
        self._completed.pop(ctx.partition, None)
        self.logic.on_running(ctx.store, ContextOutput(ctx), ctx.partition, ctx.now_us())

    def on_stopped(self, partition: int) -> None:
        """The partition moved away or is being rebuilt: its attempts must not go on here (the
        next owner re-dispatches them), so a zombie sends nothing after it lost the task."""
        cancelled = self.executor.cancel_partition(partition)
        self._completed.pop(partition, None)
        if cancelled:
            log.info("partition %d stopped: aborted %d attempts in flight", partition, cancelled)

    def close(self) -> None:
        """Close the targets and stop the delivery loop."""
        self.executor.call(self.http.close)
        if self._sqs is not None:
            self.executor.call(self._sqs.close)
        self.executor.close()

    # -- actions ------------------------------------------------------------------------
    def _apply(self, ctx: TaskContext, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Cancel):
                self.executor.cancel(action.partition, action.run_id, action.attempt)
            else:
                self._start(ctx, action)

    def _start(self, ctx: TaskContext, start: Start) -> None:
        config = start.target
        if isinstance(config, HttpConfig):
            self.executor.submit(start.partition, start.tenant, start.delivery, self.http, config,
                                 start.host)  # fmt: skip
        elif isinstance(config, SqsConfig):
            self.executor.submit(start.partition, start.tenant, start.delivery, self._sqs_target(),
                                 config, start.host)  # fmt: skip
        elif isinstance(config, KafkaConfig):
            topic, key, value, headers = kafka_record(start.delivery, config)
            ctx.produce(topic, key, value, None, list(headers))
            self._settle(ctx, start, Outcome("succeeded", f"produced to {topic}", False, 0))
        else:
            reason = f"worker pool {config.pool!r}: this dispatcher does not offer worker runs"
            self._settle(ctx, start, Outcome("refused", reason, False, 0))

    def _settle(self, ctx: TaskContext, start: Start, outcome: Outcome) -> None:
        """An attempt that ended as it started (Kafka, refused)."""
        self.limits.release(start.tenant, start.host)
        d = start.delivery
        self.logic.on_outcome(ctx.store, ContextOutput(ctx), ctx.partition, d.run_id, d.attempt,
                              outcome, ctx.now_us())  # fmt: skip

    def _sqs_target(self) -> Target[Any]:
        if self._sqs is None:
            from schedulerstream.targets.sqs import SqsTarget  # aiobotocore only where used

            self._sqs = SqsTarget()
        return self._sqs

    def _check_partition(self, ctx: TaskContext, job_key: str) -> None:
        expected = partition_for_job_key(job_key, self.settings.partitions)
        if expected != ctx.partition:
            raise RejectedRecord(
                f"{job_key!r} belongs on partition {expected} (murmur2 of the job key), not "
                f"{ctx.partition}"
            )
