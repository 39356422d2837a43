"""The loop's cadence against the real broker: a punctuation that left due work behind gets the
next one at once, and a commit a punctuation asked for does not wait for the whole round."""

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

PARTITIONS = 4


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


class SlowRound(CounterTopology):
    """Every punctuation takes 60 ms (more than half a tick). Once every partition runs, the
    first punctuation of a round asks for a commit. Records where in the sequence of
    punctuations each commit fell."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.commits_at: list[int] = []
        self.asked_at: int | None = None
        self.round_now_us = 0  # a round's punctuations share one now_us

    def punctuate(self, ctx: TaskContext, now_us: int) -> None:
        super().punctuate(ctx, now_us)
        time.sleep(0.06)  # the punctuation's own work, not a wait for anything
        first, self.round_now_us = now_us != self.round_now_us, now_us
        if first and self.asked_at is None and len(set(self.running)) == PARTITIONS:
            self.asked_at = len(self.punctuated)
            ctx.produce(self.out, b"asked", b"1", ctx.partition)  # work for the commit
            ctx.request_commit()

    def after_commit(self) -> None:
        self.commits_at.append(len(self.punctuated))


def test_a_requested_commit_is_made_within_half_a_tick_not_after_the_whole_round(
    counter_settings: Settings,
) -> None:
    s = counter_settings.model_copy(update={"tick_ms": 100, "commit_interval_ms": 60_000})
    topology = SlowRound(s)
    proc = Processor(s, topology)
    proc.start()
    try:
        drive([proc], lambda: topology.asked_at is not None
              and len(topology.punctuated) >= topology.asked_at + PARTITIONS)  # fmt: skip
    finally:
        proc.close()
    assert topology.asked_at is not None
    # committed right after the asking punctuation (it took more than half a tick), not after
    # the round's other three
    assert topology.asked_at in topology.commits_at, (topology.asked_at, topology.commits_at)
