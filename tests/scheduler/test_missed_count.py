"""Missed counts are exact for schedules that count by arithmetic (intervals, one-shots, either
bounded by start/end): an every-second job three minutes behind reports its 120 late instants,
not "at least 100". Crons and schedules with excluded dates walk: past MISFIRE_SCAN, a lower
bound."""

from __future__ import annotations

import random
from datetime import date
from typing import Any

import pytest

from schedulerstream.scheduler.timers import MISFIRE_SCAN, Span, next_instant, span
from schedulerstream.timing import EverySchedule, Schedule, parse_cron
from schedulerstream.timing.combine import ExcludedSchedule
from schedulerstream.timing.spec import BoundedSchedule

from .harness import Harness, definition, us

WRITTEN = "2025-01-06T11:57:00Z"  # the job's last instant before three minutes away
NOW = "2025-01-06T12:00:00.2Z"  # the default 60 s grace: late up to 11:59:00


class Walked:
    """A schedule that hides its arithmetic: ``span`` walks it one instant at a time."""

    def __init__(self, inner: Schedule) -> None:
        self.inner = inner

    def __hash__(self) -> int:
        return hash((Walked, self.inner))

    def next_after(self, after_us: int) -> int | None:
        return self.inner.next_after(after_us)

    def next_n(self, after_us: int, n: int) -> list[int]:
        return self.inner.next_n(after_us, n)


def _instants(schedule: Schedule, first: int, limit: int) -> list[int]:
    found = [first]
    while (following := schedule.next_after(found[-1])) is not None and following < limit:
        found.append(following)
    return found


def _behind(policy: str, schedule: dict[str, Any], **extra: Any) -> Harness:
    h = Harness()
    h.now = us(NOW)
    job = definition(1, schedule=schedule, misfire_policy=policy, **extra)
    h.put(job, ts=us(WRITTEN))
    h.tick_until(us(NOW) + 1_000_000)
    return h


def _said(missed: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return [(m["count"], m["reason"]) for m in missed]


def test_an_every_second_job_three_minutes_behind_skips_an_exact_count() -> None:
    h = _behind("skip", {"every": 1})
    assert _said(h.out.attempts("missed")) == [
        (120, "120 instant(s) from 2025-01-06T11:57:01Z to 2025-01-06T11:59:00Z not run: "
              "misfire skip"),
    ]  # fmt: skip
    runs = h.out.runs()
    assert [r["trigger"] for r in runs] == ["scheduled"] * len(runs)
    assert runs[0]["run_id"] == "acme/j1@20250106T115901Z"


def test_fire_once_fires_the_latest_and_counts_the_others_exactly() -> None:
    h = _behind("fire_once", {"every": 1})
    missed = h.out.attempts("missed")
    assert _said(missed) == [
        (119, "119 instant(s) from 2025-01-06T11:57:01Z to 2025-01-06T11:58:59Z not run: "
              "misfire fire_once"),
    ]  # fmt: skip
    assert missed[0]["scheduled_at_us"] == us("2025-01-06T11:58:59Z")
    caught = [r["run_id"] for r in h.out.runs() if r["trigger"] == "catch_up"]
    assert caught == ["acme/j1@20250106T115900Z"]


@pytest.mark.parametrize("policy", ["skip", "catch_up"])
def test_instants_older_than_the_catch_up_window_are_counted_exactly(policy: str) -> None:
    h = _behind(policy, {"every": 1}, catch_up_window=70)  # from 11:58:50.2
    missed = _said(h.out.attempts("missed"))
    assert missed[0] == (
        110, "110 instant(s) from 2025-01-06T11:57:01Z to 2025-01-06T11:58:50Z not run: "
             "older than catch_up_window",
    )  # fmt: skip
    caught = [r["scheduled_at_us"] for r in h.out.runs() if r["trigger"] == "catch_up"]
    if policy == "skip":
        assert missed[1:] == [
            (10, "10 instant(s) from 2025-01-06T11:58:51Z to 2025-01-06T11:59:00Z not run: "
                 "misfire skip"),
        ]  # fmt: skip
        assert caught == []
    else:
        assert missed[1:] == []
        assert caught == list(range(us("2025-01-06T11:58:51Z"), us("2025-01-06T11:59:01Z"), 10**6))


def test_a_bounded_interval_job_counts_exactly_from_its_start() -> None:
    h = _behind("skip", {"every": 1, "start_at": "2025-01-06T11:57:15Z"})
    assert _said(h.out.attempts("missed")) == [
        (106, "106 instant(s) from 2025-01-06T11:57:15Z to 2025-01-06T11:59:00Z not run: "
              "misfire skip"),
    ]  # fmt: skip


def test_an_interval_and_a_phase_of_fractions_of_seconds_count_exactly() -> None:
    """Every 7.3 s from 2.9 s past the epoch: the first late instant is 11:57:03.9 and the
    last 11:58:53.4 (the next, 11:59:00.7, is within the grace: late from 11:59:00.2)."""
    h = _behind("fire_once", {"every": 7.3, "phase": 2.9})
    every = EverySchedule(7.3, 2.9)
    late = _instants(every, every.next_after(us(WRITTEN)), us(NOW) - 60_000_000)
    assert len(late) == 16 and late[0] == us("2025-01-06T11:57:03.9Z")
    missed = h.out.attempts("missed")
    assert [(m["count"], m["scheduled_at_us"]) for m in missed] == [(15, late[-2])]
    assert missed[0]["reason"] == (
        "15 instant(s) from 2025-01-06T11:57:03Z to 2025-01-06T11:58:46Z not run: misfire fire_once"
    )
    caught = [r["scheduled_at_us"] for r in h.out.runs() if r["trigger"] == "catch_up"]
    assert caught == [late[-1]] == [us("2025-01-06T11:58:53.4Z")]


def test_a_span_of_non_round_numbers_is_counted_not_walked() -> None:
    every = EverySchedule.from_us(1_234_567, phase_us=890_123)
    first = every.next_after(10**12)
    limit = first + 987_654_321  # 800 intervals and a fraction
    instants = _instants(every, first, limit)
    found = span(next_instant, every, first, limit)
    assert found == Span(len(instants), instants[-1], instants[-2], False, 3)
    assert found.count == 801 > MISFIRE_SCAN


def test_counted_spans_match_one_by_one_counts_for_random_intervals() -> None:
    rng = random.Random(20251208)
    for case in range(400):
        interval = rng.choice([1, 7, 1_000_000, 60_000_000, rng.randrange(1, 10**8)])
        every = EverySchedule.from_us(interval, rng.randrange(-(10**12), 10**12))
        first = every.next_after(rng.randrange(-(10**15), 10**15))
        length = rng.choice([1, interval, interval + 1, rng.randrange(1, 400 * interval + 2)])
        limit = first + length
        instants = _instants(every, first, limit)
        found = span(next_instant, every, first, limit)
        expected = (len(instants), instants[-1], instants[-2] if len(instants) > 1 else None)
        said = (case, interval, every.phase_us, first, limit)
        assert (found.count, found.last, found.before_last) == expected, said
        assert not found.capped and found.examined <= 3, said
        if len(instants) <= MISFIRE_SCAN:  # the walk's answer, every field but the work
            walked = span(next_instant, Walked(every), first, limit)
            assert (walked.count, walked.last, walked.before_last, walked.capped) == (
                found.count, found.last, found.before_last, found.capped,
            ), said  # fmt: skip


THREE_HOURS = (us("2025-01-06T09:00:00Z"), us("2025-01-06T12:00:00Z"))


@pytest.mark.parametrize(
    "schedule",
    [
        parse_cron("* * * * *"),
        ExcludedSchedule(EverySchedule(60), [date(2025, 12, 25)], "UTC"),  # not even in the span
        BoundedSchedule(ExcludedSchedule(EverySchedule(60), [date(2025, 12, 25)], "UTC"), 0, None),
        Walked(EverySchedule(60)),
    ],
    ids=["cron", "excluded", "bounded-excluded", "opaque"],
)
def test_schedules_that_cannot_count_report_a_lower_bound_past_the_scan(
    schedule: Schedule,
) -> None:
    first, limit = THREE_HOURS[0] + 60_000_000, THREE_HOURS[1]
    instants = _instants(schedule, first, limit)
    found = span(next_instant, schedule, first, limit)
    assert len(instants) == 179 > MISFIRE_SCAN
    assert (found.count, found.capped) == (MISFIRE_SCAN, True)
    assert (found.last, found.before_last) == (instants[-1], instants[-2])


@pytest.mark.parametrize(
    "schedule",
    [{"cron": "* * * * * *"}, {"every": 1, "exclude": ["2025-12-25"]}],
    ids=["cron", "excluded"],
)
def test_a_job_that_cannot_count_still_says_at_least(schedule: dict[str, Any]) -> None:
    h = _behind("skip", schedule)
    assert _said(h.out.attempts("missed")) == [
        (100, "at least 100 instant(s) from 2025-01-06T11:57:01Z to 2025-01-06T11:59:00Z not "
              "run: misfire skip"),
    ]  # fmt: skip
