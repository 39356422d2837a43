"""TaskContext.hold: a record not yet due pauses its partition until its time (delay topics)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pytest
from confluent_kafka import Producer

from schedulerstream.kafka import clients
from schedulerstream.runtime import Processor
from schedulerstream.runtime.context import TaskContext
from schedulerstream.runtime.topology import Topology
from schedulerstream.settings import Settings
from tests.runtime.rt_helpers import drive, read_all

pytestmark = pytest.mark.kafka


class DelayTopology(Topology):
    """Input ``in``: value = due time (µs); a record is held until due, then copied to ``out``."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.seen: list[tuple[int, float]] = []  # (offset, wall time processed)
        self.holds = 0

    @property
    def name(self) -> str:
        return "delay"

    @property
    def input_topics(self) -> Sequence[str]:
        return (self.settings.topic("in"),)

    @property
    def changelog_topic(self) -> str:
        return self.settings.topic("counter-changelog")

    def process(self, ctx: TaskContext, message: Any) -> None:
        due = int(message.value())
        ctx.store.put(b"k", b"v")  # dropped when held
        if due > ctx.now_us():
            self.holds += 1
            ctx.hold(due)
            return
        self.seen.append((message.offset(), time.time()))
        ctx.produce(self.settings.topic("out"), message.key(), message.value(), ctx.partition)


def test_a_held_record_and_those_behind_it_wait_without_blocking_the_loop(
    counter_settings: Settings,
) -> None:
    settings = counter_settings
    topology = DelayTopology(settings)
    processor = Processor(settings, topology)
    processor.start()
    try:
        drive([processor], lambda: len(processor.running_partitions()) == settings.partitions)
        now = time.time_ns() // 1000
        due = now + 3_000_000
        producer = Producer(clients.producer_config(settings))
        for partition, value in ((0, due), (0, now), (1, now)):
            producer.produce(settings.topic("in"), value=str(value).encode(), partition=partition)
        assert producer.flush(30) == 0
        drive([processor], lambda: len(topology.seen) == 3, timeout=20)
        other, first, second = topology.seen
        assert other[1] < due / 1e6 - 1.0  # another partition is not held
        assert (first[0], second[0]) == (0, 1)  # the due-now record waited behind the head
        assert first[1] >= due / 1e6
        assert topology.holds >= 1
    finally:
        processor.close()
    out = read_all(settings, "out")
    assert sorted(int(m.value()) for m in out) == sorted([due, now, now])
    assert processor.metrics["records_rejected"] == 0
