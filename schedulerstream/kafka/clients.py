"""Configuration for the one Kafka client (confluent-kafka / librdkafka) used everywhere."""

from __future__ import annotations

from typing import Any

from schedulerstream.settings import Settings

# Java's default partitioner: murmur2 of the key, so Java producers and Connect agree with us.
PARTITIONER = "murmur2_random"


def base_config(settings: Settings) -> dict[str, Any]:
    return {
        "bootstrap.servers": settings.bootstrap_servers,
        "client.id": f"schedulerstream-{settings.instance_id}",
        "log_level": 3,
    }


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
    return config


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


def consumer_config(settings: Settings, group_id: str, **extra: Any) -> dict[str, Any]:
    """A read_committed consumer with manual offset management."""
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
    else:
        config.update(
            {
                "partition.assignment.strategy": "cooperative-sticky",
                "session.timeout.ms": settings.session_timeout_ms,
                "heartbeat.interval.ms": max(250, settings.session_timeout_ms // 4),
            }
        )
    config.update(extra)
    return config
