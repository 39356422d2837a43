"""The Kafka target: a record for the dispatcher to produce inside its own transaction.

Producing to the job's topic in the transaction that records the attempt makes the delivery
exactly-once, so this module builds the record and sends nothing.
"""

from __future__ import annotations

from schedulerstream.clock import Clock, SystemClock
from schedulerstream.model import KafkaTarget as KafkaTargetConfig
from schedulerstream.targets.base import Delivery
from schedulerstream.targets.envelope import envelope_bytes

KafkaHeaders = list[tuple[str, bytes]]


def kafka_record(
    delivery: Delivery, target: KafkaTargetConfig, *, clock: Clock | None = None
) -> tuple[str, bytes, bytes, KafkaHeaders]:
    """``(topic, key, value, headers)``: key = the target's ``key``, else the run id."""
    timestamp = (clock or SystemClock()).now_us() // 1_000_000
    key = target.key if target.key is not None else delivery.run_id
    headers: KafkaHeaders = [
        ("webhook-id", delivery.run_id.encode()),
        ("webhook-timestamp", str(timestamp).encode()),
        ("content-type", b"application/json"),
    ]
    return target.topic, key.encode(), envelope_bytes(delivery), headers
