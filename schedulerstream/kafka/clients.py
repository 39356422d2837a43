"""Configuration for the one Kafka client (confluent-kafka / librdkafka) used everywhere.

Every client the project creates takes its config from here, so the user's client properties
(``settings.client_properties()``: SCHEDULERSTREAM_KAFKA_CONFIG_FILE and SCHEDULERSTREAM_KAFKA_*,
schedulerstream/client_properties.py) reach all of them. They win over the defaults set here;
the properties the runtime owns cannot be among them (refused when settings load).
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from schedulerstream.settings import Settings

# Java's default partitioner: murmur2 of the key, so Java producers and Connect agree with us.
PARTITIONER = "murmur2_random"


def base_config(settings: Settings) -> dict[str, Any]:
    """Address, identity and the user's properties: what an admin client or a plain consumer
    starts from."""
    config: dict[str, Any] = {
        "bootstrap.servers": settings.bootstrap_servers,
        "client.id": f"schedulerstream-{settings.instance_id}",
        "log_level": 3,
    }
    return _with_user_properties(config, settings)


def _with_user_properties(config: dict[str, Any], settings: Settings) -> dict[str, Any]:
    config.update(settings.client_properties())
    return config


def producer_config(settings: Settings, **extra: Any) -> dict[str, Any]:
    """An idempotent, acks=all producer placing keys like the Java client."""
    config = base_config(settings)
    config.update(
        {
            "enable.idempotence": True,
            "acks": "all",
            "partitioner": PARTITIONER,
            "linger.ms": 5,
            "compression.type": "lz4",
        }
    )
    config.update(extra)
    return _with_user_properties(config, settings)


def transactional_producer_config(
    settings: Settings, transactional_id: str, **extra: Any
) -> dict[str, Any]:
    return producer_config(
        settings,
        **{
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 60_000,
            "linger.ms": 2,
            **extra,
        },
    )


def consumer_config(
    settings: Settings, group_id: str, *, copartitioned: bool = False, **extra: Any
) -> dict[str, Any]:
    """A read_committed consumer with manual offset management.

    ``copartitioned``: the subscription has several topics whose partition i must go to the
    same member. Cooperative-sticky and KIP-848's default "uniform" assignor do not keep
    that; KIP-848's server-side "range" assignor does (and is sticky), classic needs the
    eager "range" assignor.
    """
    config = base_config(settings)
    config.update(
        {
            "group.id": group_id,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": False,
        }
    )
    if settings.group_protocol == "consumer":
        config["group.protocol"] = "consumer"
        if copartitioned:
            config["group.remote.assignor"] = "range"
    else:
        config.update(
            {
                "partition.assignment.strategy": "range" if copartitioned else "cooperative-sticky",
                "session.timeout.ms": settings.session_timeout_ms,
                "heartbeat.interval.ms": max(250, settings.session_timeout_ms // 4),
            }
        )
    config.update(extra)
    return _with_user_properties(config, settings)


def restore_consumer_config(
    settings: Settings, group_id: str, *, committed: bool = True, **extra: Any
) -> dict[str, Any]:
    """A group-less consumer (assign() only, never commits) for reading changelogs.

    ``group_id`` is required by the client but never joined. ``committed=False`` gives a
    read_uncommitted client, used only to see high watermarks (open transactions).
    """
    config = base_config(settings)
    config.update(
        {
            "group.id": group_id,
            "isolation.level": "read_committed" if committed else "read_uncommitted",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    config.update(extra)
    return _with_user_properties(config, settings)


# Right after a topic is created (or a leader moves) the broker may briefly answer these.
_TRANSIENT_OFFSET_ERRORS = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
    }
)


def watermarks(consumer: Consumer, tp: TopicPartition, timeout: float = 10.0) -> tuple[int, int]:
    """(log start, end) of ``tp`` from the leader, retrying transient leadership errors."""
    deadline = time.monotonic() + timeout
    while True:
        remaining = max(0.5, deadline - time.monotonic())
        try:
            low, high = consumer.get_watermark_offsets(tp, timeout=remaining, cached=False)
            return int(low), int(high)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            code = error.code() if isinstance(error, KafkaError) else None
            if code not in _TRANSIENT_OFFSET_ERRORS or time.monotonic() >= deadline:
                raise
            time.sleep(0.1)
