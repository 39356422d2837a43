"""A Kafka target's record, produced inside the dispatcher's transaction (exactly once).

The attempt ends in the transaction that starts it: the record is delivered when the
transaction commits. A topic reserved for the deployment or Kafka (``reserved_topic``: its
changelogs, inputs, worker and Connect topics) is refused before anything is produced, whoever
wrote the job. What else can go wrong belongs to that one attempt: a topic known to be
missing or unwritable, a record the broker refused in the aborted transaction this one
replays, or a record larger than its topic takes (then later ones as large fail at once,
without another abort: ``TargetTopics.too_large``). A record refused in a batch too large
for its topic is produced again in a batch of its own, where the broker judges it alone.
"""

from __future__ import annotations

from collections.abc import Collection

from confluent_kafka.admin import AdminClient

from schedulerstream.clock import Clock
from schedulerstream.contracts.topic_names import reserved_topic
from schedulerstream.dispatch_spec import TargetConfig
from schedulerstream.dispatcher.actions import Start
from schedulerstream.kafka import clients
from schedulerstream.model import KafkaTarget
from schedulerstream.runtime.context import TaskContext
from schedulerstream.settings import Settings
from schedulerstream.targets.base import Outcome
from schedulerstream.targets.kafka import TargetTopics, admin_lookup, kafka_record


class KafkaRecords:
    """Produces Kafka targets' records into a task's transaction; knows their topics."""

    def __init__(self, settings: Settings, clock: Clock) -> None:
        self.settings = settings
        self.clock = clock
        self._admin: AdminClient | None = None
        self.topics = TargetTopics(self._lookup, clock)  # metadata, on a thread of its own

    def ready(self, target: TargetConfig) -> bool:
        """May a record for ``target`` be produced now: its topic's metadata is in (a
        reserved topic is refused at once: its metadata is not asked for)."""
        if not isinstance(target, KafkaTarget):
            return True
        return self.reserved(target.topic) is not None or self.topics.known(target.topic)

    def reserved(self, topic: str) -> str | None:
        """Why no job may produce to ``topic`` (cached per name)."""
        return reserved_topic(topic, self.settings.topic_prefix)

    def produce(self, ctx: TaskContext, start: Start, config: KafkaTarget) -> Outcome:
        """Join ``start``'s record to the open transaction; the attempt's outcome. It fails
        (retried with backoff like any failure) when its topic is known to be missing or the
        broker refused it in the aborted transaction this replays (but for its batch's
        size: then it goes again, alone), and fails for good ("refused") when its topic is
        reserved or the record alone is too large for the topic."""
        reserved = self.reserved(config.topic)
        if reserved is not None:
            return _refused(ctx, start, reserved)
        d = start.delivery
        origin = f"{d.run_id}#{d.attempt}"
        topic, key, value, headers = kafka_record(d, config, clock=self.clock)
        size = len(key) + len(value) + sum(len(n) + len(v) for n, v in headers)
        refused = ctx.failed(origin)
        if refused is not None and ctx.refused_for_size(origin):  # the topic is fine
            self.topics.refused_size(topic, size, refused)
            return _refused(ctx, start, refused)
        alone = refused is not None and ctx.refused_for_size(origin, alone=False)
        if refused is not None and not alone:
            self.topics.refused(config.topic, refused)
            return _failed(ctx, start, refused)
        problem = self.topics.problem(config.topic)
        if problem is not None:
            return _failed(ctx, start, problem)
        too_large = self.topics.too_large(topic, size)
        if too_large is None and size > ctx.max_record_bytes:
            too_large = (f"the record for Kafka target topic {topic!r} is {size:,} bytes, over "
                         f"the limit of {ctx.max_record_bytes:,}")  # fmt: skip
        if too_large is not None:
            return _refused(ctx, start, too_large)
        # refused in a batch too large, perhaps not for itself: it goes alone this time, and
        # is delivered, or refused for its own size and learned (one abort more at most)
        ctx.produce(topic, key, value, None, list(headers), origin=origin, alone=alone)
        ctx.request_commit()  # the record is delivered when this transaction commits
        return Outcome("succeeded", f"produced to {topic}", False, 0)

    def close(self) -> None:
        self.topics.close()

    def _lookup(self, topics: Collection[str]) -> dict[str, str | None]:
        """(the lookup thread of ``topics``)"""
        if self._admin is None:
            self._admin = AdminClient(clients.base_config(self.settings))
        return admin_lookup(self._admin)(topics)


def _failed(ctx: TaskContext, start: Start, reason: str) -> Outcome:
    d = start.delivery
    ctx.isolated("kafka_target", f"{d.run_id} attempt {d.attempt}: {reason}")
    return Outcome("failed", reason, True, 0)


def _refused(ctx: TaskContext, start: Start, reason: str) -> Outcome:
    """The topic is reserved or the record too large for it: the attempt fails for good,
    alone."""
    d = start.delivery
    ctx.isolated("kafka_target", f"{d.run_id} attempt {d.attempt}: {reason}")
    return Outcome("refused", reason, False, 0)
