"""The loop's cadence against the real broker: a punctuation that left due work behind gets the
next one at once, and the tick's cadence resumes once it asks no more, on a grid of the wall
clock (work due on a whole second finds a tick at its due time); one that asks for a tick at
a due time between two points of the grid gets it then, at least half a tick after itself."""

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


class Waking(CounterTopology):
    """Partition 0's punctuations on the grid ask for a tick ``ahead_us`` later."""

    def __init__(self, settings: Settings, ahead_us: int) -> None:
        super().__init__(settings)
        self.ahead_us = ahead_us
        self.woken: list[tuple[int, int]] = []  # (asked for, came) wall µs
        self._asked: int | None = None

    def punctuate(self, ctx: TaskContext, now_us: int) -> None:
        super().punctuate(ctx, now_us)
        if ctx.partition != 0:
            return
        if self._asked is not None:
            self.woken.append((self._asked, now_us))
            self._asked = None
        elif now_us % 100_000 < 20_000:  # a round on the grid
            self._asked = now_us + self.ahead_us
            ctx.request_tick(self._asked)


def woken_after(settings: Settings, ahead_us: int) -> list[tuple[int, int]]:
    """(asked for, came) of 10 ticks asked for ``ahead_us`` after a tick of a 100-ms grid."""
    s = settings.model_copy(update={"tick_ms": 100})
    topology = Waking(s, ahead_us)
    proc = Processor(s, topology)
    proc.start()
    try:
        drive([proc], lambda: len(topology.woken) >= 11)
    finally:
        proc.close()
    return topology.woken[1:]  # the first may follow a round made late by the start


def test_a_tick_asked_for_at_a_due_time_comes_then_not_at_the_next_point_of_the_grid(
    counter_settings: Settings,
) -> None:
    woken = woken_after(counter_settings, 60_000)
    late_ms = [(came - asked) / 1000 for asked, came in woken]
    assert min(late_ms) >= 0, late_ms  # never before the time asked for
    assert statistics.median(late_ms) <= 10, late_ms  # not at the grid point 40 ms later
    assert sum(late <= 25 for late in late_ms) >= len(late_ms) - 2, late_ms


def test_a_tick_asked_for_sooner_than_half_a_tick_waits_for_half_a_tick(
    counter_settings: Settings,
) -> None:
    woken = woken_after(counter_settings, 10_000)
    gaps_ms = [(came - (asked - 10_000)) / 1000 for asked, came in woken]  # after the asker
    assert min(gaps_ms) >= 49, gaps_ms
    assert statistics.median(gaps_ms) <= 65, gaps_ms
