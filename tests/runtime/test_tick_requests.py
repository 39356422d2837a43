"""The loop's cadence against the real broker: a punctuation that left due work behind gets the
next one at once, and the tick's cadence resumes once it asks no more, on a grid of the wall
clock (work due on a whole second finds a tick at its due time)."""

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
        self.wall_at: list[int] = []  # the punctuation's now_us

    def punctuate(self, ctx: TaskContext, now_us: int) -> None:
        super().punctuate(ctx, now_us)
        if ctx.partition != 0:
            return
        self.round_at.append(time.monotonic())
        self.wall_at.append(now_us)
        if self.rounds_left > 0:
            self.rounds_left -= 1
            ctx.request_tick()


def rounds_of(settings: Settings, requests: int, rounds: int) -> Backlogged:
    """A processor ticking every 100 ms whose partition 0 asks ``requests`` times for the
    next tick at once, run for ``rounds`` of partition 0."""
    s = settings.model_copy(update={"tick_ms": 100})
    topology = Backlogged(s, rounds=requests)
    proc = Processor(s, topology)
    proc.start()
    try:
        drive([proc], lambda: len(topology.round_at) >= rounds)
    finally:
        proc.close()
    return topology


def test_a_punctuation_that_asks_for_a_tick_gets_it_at_once_and_then_the_cadence_resumes(
    counter_settings: Settings,
) -> None:
    topology = rounds_of(counter_settings, 20, 26)
    gaps = [b - a for a, b in itertools.pairwise(topology.round_at)]
    asked = gaps[:20]  # the rounds that followed a request
    assert statistics.median(asked) < 0.05, asked  # not a tick (0.1 s) apart
    assert gaps[20] <= 0.15, gaps[20]  # the next point of the grid
    later = gaps[21:]  # no more requests: one tick apart, no spinning
    assert min(later) >= 0.05 and 0.09 <= statistics.median(later) <= 0.11, later


def test_ticks_fall_just_after_whole_multiples_of_the_tick_on_the_wall_clock(
    counter_settings: Settings,
) -> None:
    topology = rounds_of(counter_settings, 0, 12)
    # a tick's now_us is 1 ms past a multiple of 100 ms, give or take the poll's wake-up
    phases_ms = sorted((at % 100_000) / 1000 for at in topology.wall_at[1:])
    assert statistics.median(phases_ms) <= 10, phases_ms
    assert sum(p <= 20 for p in phases_ms) >= 9, phases_ms
