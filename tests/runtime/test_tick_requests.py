"""The loop's cadence against the real broker: a punctuation that left due work behind gets the
next one at once, and the tick's cadence resumes once it asks no more."""

from __future__ import annotations

import itertools
import statistics
import time

import pytest

from schedulerstream.runtime import Processor, TaskContext
from schedulerstream.settings import Settings
from tests.runtime.rt_helpers import drive
from tests.runtime.runtime_counter_app import CounterTopology

pytestmark = pytest.mark.kafka


class Backlogged(CounterTopology):
    """Each round (partition 0's punctuation) asks for the next one while ``rounds_left``."""

    def __init__(self, settings: Settings, rounds: int) -> None:
        super().__init__(settings)
        self.rounds_left = rounds
        self.round_at: list[float] = []

    def punctuate(self, ctx: TaskContext, now_us: int) -> None:
        super().punctuate(ctx, now_us)
        if ctx.partition != 0:
            return
        self.round_at.append(time.monotonic())
        if self.rounds_left > 0:
            self.rounds_left -= 1
            ctx.request_tick()


def test_a_punctuation_that_asks_for_a_tick_gets_it_at_once_and_then_the_cadence_resumes(
    counter_settings: Settings,
) -> None:
    s = counter_settings.model_copy(update={"tick_ms": 100})
    topology = Backlogged(s, rounds=20)
    proc = Processor(s, topology)
    proc.start()
    try:
        drive([proc], lambda: len(topology.round_at) >= 23)
    finally:
        proc.close()
    gaps = [b - a for a, b in itertools.pairwise(topology.round_at)]
    asked = gaps[:20]  # the rounds that followed a request
    assert statistics.median(asked) < 0.05, asked  # not a tick (0.1 s) apart
    assert min(gaps[20:]) >= 0.09, gaps[20:]  # no more requests: one tick apart, no spinning
