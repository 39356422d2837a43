"""Holds: input partitions paused at a record until a time (``TaskContext.hold``).

A delay topic's record that is not due yet is left unprocessed: its partition is paused and
rewound to it, and resumed once the clock reaches the record's time. No sleeping in the
loop and no scan: the broker keeps the record, the consumer keeps the position.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from schedulerstream.clock import Clock


class Holds:
    """Held input partitions of one consumer: ``(topic, partition)`` → monotonic resume time."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._until: dict[tuple[str, int], float] = {}

    def __contains__(self, where: tuple[str, int]) -> bool:
        return where in self._until

    def hold(self, consumer: Consumer, msg: Any, until_us: int) -> None:
        """Pause the record's partition and rewind to it until ``until_us`` (wall clock)."""
        tp = TopicPartition(msg.topic(), msg.partition(), msg.offset())
        consumer.pause([tp])
        consumer.seek(tp)
        delay_s = max(0.0, (until_us - self._clock.now_us()) / 1e6)
        self._until[(msg.topic(), msg.partition())] = self._clock.monotonic() + delay_s

    def resume_due(self, consumer: Consumer, running: Callable[[int], bool]) -> None:
        """Resume the held partitions whose time came (those of a running task)."""
        now = self._clock.monotonic()
        for topic, partition in [w for w, at in self._until.items() if at <= now]:
            del self._until[(topic, partition)]
            if running(partition):
                consumer.resume([TopicPartition(topic, partition)])

    def forget(self, partition: int) -> None:
        """The task of ``partition`` restores (which seeks and resumes every input) or left."""
        for where in [w for w in self._until if w[1] == partition]:
            del self._until[where]
