"""Read a whole topic, outside any consumer group (for tails and tests)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    Message,
    TopicPartition,
)

from schedulerstream.errors import SchedulerStreamError
from schedulerstream.kafka.clients import base_config
from schedulerstream.settings import Settings


def read_topic(
    settings: Settings, topic: str, from_beginning: bool = True, idle_timeout: float = 5.0,
    max_seconds: float | None = None, catch_up_timeout: float = 30.0, committed: bool = True,
) -> Iterator[Message]:  # fmt: skip
    """Yield committed records of every partition: first up to each partition's end (its last
    stable offset when reached), then until none arrives for ``idle_timeout`` s. With
    ``committed=False``, records of open and aborted transactions too (read_uncommitted).

    The idle clock starts only once every partition reached its end, so a slow first fetch
    never ends the read early; before that, ``catch_up_timeout`` s without a record or a new
    end ends it (an unreachable broker). A partition reaching its end again (after a
    transaction marker no reader sees) is no news: a busy transactional writer does not keep
    the read going."""
    config = base_config(settings)
    config.update(
        {
            "group.id": f"schedulerstream-reader-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed" if committed else "read_uncommitted",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer = Consumer(config)
    try:
        metadata = consumer.list_topics(topic, timeout=10)
        info = metadata.topics.get(topic)
        if info is None or info.error is not None:
            raise SchedulerStreamError(
                f"topic {topic} does not exist (run `schedulerstream topics apply`)"
            )
        start = OFFSET_BEGINNING if from_beginning else OFFSET_END
        behind = set(info.partitions)
        consumer.assign([TopicPartition(topic, p, start) for p in sorted(behind)])
        deadline = None if max_seconds is None else time.monotonic() + max_seconds
        last = time.monotonic()
        catch_up = max(catch_up_timeout, idle_timeout)
        while time.monotonic() - last < (catch_up if behind else idle_timeout):
            if deadline is not None and time.monotonic() > deadline:
                return
            progressed = False
            for message in consumer.consume(500, timeout=0.2):
                error = message.error()
                if error is None:
                    progressed = True
                    yield message
                elif error.code() != KafkaError._PARTITION_EOF:
                    raise SchedulerStreamError(f"reading {topic}: {error}")
                elif message.partition() in behind:  # its first end; later ones (after a
                    behind.discard(message.partition())  # transaction marker) are no news
                    progressed = True
            if progressed:
                last = time.monotonic()
    finally:
        consumer.close()
