"""The Kafka target: a record for the dispatcher to produce inside its own transaction.

Producing to the job's topic in the transaction that records the attempt makes the delivery
exactly-once, so this module builds the record and sends nothing. ``TargetTopics`` says
before producing whether a target topic exists, so that a missing one fails that attempt
and not the transaction it would have joined (DESIGN.md §8).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

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


log = logging.getLogger(__name__)
Lookup = Callable[[str], str | None]  # topic → why it cannot be written (None: it can)


class TargetTopics:
    """Which target topics exist, from the cluster's metadata, cached: a topic seen is
    trusted for ``known_s``, a missing one is asked again after ``missing_s``. A record the
    broker refuses anyway (the topic deleted since) ``forget``s the topic."""

    def __init__(
        self, lookup: Lookup, clock: Clock, known_s: float = 60.0, missing_s: float = 1.0
    ) -> None:
        self._lookup = lookup
        self._clock = clock
        self._known_us = round(known_s * 1e6)
        self._missing_us = round(missing_s * 1e6)
        self._seen: dict[str, tuple[int, str | None]] = {}  # topic → (until µs, reason)

    def problem(self, topic: str) -> str | None:
        """Why ``topic`` cannot take a record now (None: it can, as far as is known)."""
        now = self._clock.now_us()
        cached = self._seen.get(topic)
        if cached is not None and cached[0] > now:
            return cached[1]
        reason = self._lookup(topic)
        ttl = self._known_us if reason is None else self._missing_us
        self._seen[topic] = (now + ttl, reason)
        return reason

    def forget(self, topic: str) -> None:
        self._seen.pop(topic, None)


def admin_lookup(admin: Any, timeout_s: float = 2.0) -> Lookup:
    """A lookup asking the cluster (an AdminClient) for one topic's metadata."""

    def lookup(topic: str) -> str | None:
        try:
            metadata = admin.list_topics(topic=topic, timeout=timeout_s)
        except Exception as exc:  # the cluster did not answer: let the produce decide
            log.warning("metadata of target topic %r unavailable: %s", topic, exc)
            return None
        found = metadata.topics.get(topic)
        if found is None or (found.error is not None and found.error.code() != 0):
            what = "no such topic" if found is None else found.error.str()
            return f"Kafka target topic {topic!r} cannot be written: {what}"
        if not found.partitions:
            return f"Kafka target topic {topic!r} has no partitions"
        return None

    return lookup
