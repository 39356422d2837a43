"""What the isolation cases read back: deliveries per run, attempt events, lateness."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from schedulerstream.codec import default_codec
from schedulerstream.kafka.clients import base_config
from schedulerstream.kafka.reader import read_topic
from schedulerstream.settings import Settings

CODEC = default_codec()
SECOND = 1_000_000


def create_topic(settings: Settings, name: str, **config: str) -> None:
    admin = AdminClient(base_config(settings))
    topic = NewTopic(name, num_partitions=2, replication_factor=1, config=config)
    admin.create_topics([topic], operation_timeout=30)[name].result(30)


def delete_topic(settings: Settings, name: str) -> None:
    admin = AdminClient(base_config(settings))
    admin.delete_topics([name], operation_timeout=30)[name].result(30)


def set_topic_config(settings: Settings, name: str, **config: str) -> None:
    admin = AdminClient(base_config(settings))
    resource = ConfigResource(ConfigResource.Type.TOPIC, name, set_config=config)
    for future in admin.alter_configs([resource]).values():
        future.result(30)


def attempt_events(settings: Settings) -> dict[str, list[dict[str, Any]]]:
    """AttemptEvents by job key, in topic order."""
    by_job: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for message in read_topic(settings, settings.topic("attempts"), True, 1.5):
        _, event = CODEC.decode(message.value())
        by_job[f"{event['tenant']}/{event['job_id']}"].append(event)
    return by_job


def kafka_deliveries(settings: Settings, topic: str) -> list[dict[str, Any]]:
    """Envelopes on a Kafka target topic, each with ``arrived_us`` (the record timestamp)."""
    found = []
    for message in read_topic(settings, topic, True, 1.5):
        envelope = json.loads(message.value())
        envelope["arrived_us"] = message.timestamp()[1] * 1000
        found.append(envelope)
    return found


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else 0.0
