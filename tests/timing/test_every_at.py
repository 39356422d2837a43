"""Fixed-interval and one-shot schedules and their counts, next_instants and the shared
next-instant cache."""

from __future__ import annotations

from datetime import date

import pytest

from schedulerstream.errors import ValidationError
from schedulerstream.timing import (
    AtSchedule,
    CountableSchedule,
    CronSchedule,
    EverySchedule,
    NextInstantCache,
    Schedule,
    next_instants,
    parse_cron,
)
from schedulerstream.timing.combine import ExcludedSchedule, UnionSchedule
from schedulerstream.timing.spec import BoundedSchedule


def test_every_counts_from_the_epoch() -> None:
    every = EverySchedule(90)
    assert every.next_after(0) == 90_000_000
    assert every.next_after(89_999_999) == 90_000_000
    assert every.next_after(90_000_000) == 180_000_000
    assert every.next_n(1_000_000_000, 3) == [1_080_000_000, 1_170_000_000, 1_260_000_000]


def test_every_with_phase_and_fraction() -> None:
    every = EverySchedule(0.25, phase_s=0.1)
    assert every.next_n(0, 3) == [100_000, 350_000, 600_000]
    assert EverySchedule(60, phase_s=90).phase_us == 30_000_000
    assert EverySchedule(60, phase_s=-15).next_after(0) == 45_000_000


def test_every_before_the_epoch() -> None:
    assert EverySchedule(60).next_after(-90_000_000) == -60_000_000
    assert EverySchedule(60).next_after(-60_000_000) == 0


def test_every_from_us_and_equality() -> None:
    assert EverySchedule.from_us(1) == EverySchedule(0.000001)
    assert EverySchedule(60) == EverySchedule.from_us(60_000_000)
    assert EverySchedule(60) != EverySchedule(60, 1)
    assert len({EverySchedule(60), EverySchedule.from_us(60_000_000)}) == 1


@pytest.mark.parametrize("interval", [0, -1, float("nan"), float("inf"), 1e-9])
def test_every_rejects_bad_intervals(interval: float) -> None:
    with pytest.raises(ValidationError) as caught:
        EverySchedule(interval)
    assert caught.value.field == "interval"


def test_every_rejects_bad_phase_and_exact_interval() -> None:
    with pytest.raises(ValidationError) as caught:
        EverySchedule(1, float("nan"))
    assert caught.value.field == "phase"
    with pytest.raises(ValidationError) as exact:
        EverySchedule.from_us(0)
    assert exact.value.field == "interval"


def test_at() -> None:
    at = AtSchedule(5_000_000)
    assert at.next_after(0) == 5_000_000
    assert at.next_after(5_000_000) is None
    assert at.next_n(0, 3) == [5_000_000]
    assert at.next_n(0, 0) == []
    assert at == AtSchedule(5_000_000)


def test_all_kinds_are_schedules() -> None:
    for schedule in (parse_cron("* * * * *"), EverySchedule(1), AtSchedule(0)):
        assert isinstance(schedule, Schedule)


def _walked(schedule: Schedule, first_us: int, limit_us: int) -> list[int]:
    return next_instants(schedule, first_us - 1, 10_000, until_us=limit_us - 1)


def test_every_counts_a_span_and_finds_its_latest_by_arithmetic() -> None:
    every = EverySchedule.from_us(7_000_003, phase_us=1_234_567)
    for first, limit in [(0, 100_000_000), (1_234_567, 8_234_570), (-50_000_000, 3), (5, 5)]:
        walked = _walked(every, first, limit)
        assert every.count_between(first, limit) == len(walked), (first, limit)
        assert every.last_before(limit) == every.next_after(limit - 1) - 7_000_003
        if walked:
            assert every.last_before(limit) == walked[-1]
    assert every.count_between(100, 0) == 0  # an empty span, not a negative count


def test_at_counts_its_one_instant() -> None:
    at = AtSchedule(5_000_000)
    assert [at.count_between(0, 5_000_000), at.count_between(5_000_000, 5_000_001)] == [0, 1]
    assert (at.last_before(5_000_000), at.last_before(5_000_001)) == (None, 5_000_000)


def test_a_bounded_schedule_counts_when_its_inner_one_does() -> None:
    bounded = BoundedSchedule(EverySchedule(10), start_us=25_000_000, end_us=65_000_000)
    assert bounded.count_between(0, 100_000_000) == 4  # 30, 40, 50, 60
    assert bounded.count_between(45_000_000, 55_000_000) == 1
    assert bounded.count_between(61_000_000, 100_000_000) == 0
    assert bounded.last_before(100_000_000) == 60_000_000
    assert bounded.last_before(30_000_000) is None  # 20 is before the start
    excluded = ExcludedSchedule(EverySchedule(10), [date(1970, 1, 2)], "UTC")
    assert BoundedSchedule(excluded, None, 65_000_000).count_between(0, 100_000_000) is None
    assert BoundedSchedule(excluded, None, None).last_before(100_000_000) is None


def test_only_schedules_that_count_exactly_are_countable() -> None:
    countable = [EverySchedule(1), AtSchedule(0), BoundedSchedule(EverySchedule(1), 0, None)]
    assert all(isinstance(s, CountableSchedule) for s in countable)
    cron = parse_cron("* * * * *")
    others = [cron, UnionSchedule([cron]), ExcludedSchedule(EverySchedule(1), [], "UTC")]
    assert not any(isinstance(s, CountableSchedule) for s in others)


def test_next_instants_bounds() -> None:
    every = EverySchedule(10)
    assert next_instants(every, 0, 3) == [10_000_000, 20_000_000, 30_000_000]
    assert next_instants(every, 0, 100, until_us=25_000_000) == [10_000_000, 20_000_000]
    assert next_instants(AtSchedule(1), 0, 5) == [1]
    assert next_instants(parse_cron("0 0 30 2 *"), 0, 5) == []


def test_cache_computes_once_per_schedule_and_instant() -> None:
    calls = 0

    class Counting(EverySchedule):
        def next_after(self, after_us: int) -> int:
            nonlocal calls
            calls += 1
            return super().next_after(after_us)

    cache = NextInstantCache(maxsize=2)
    counting = Counting(60)
    for _ in range(1000):
        assert cache.next_after(counting, 0) == 60_000_000
    assert calls == 1
    assert (cache.hits, cache.misses) == (999, 1)
    cache.next_after(counting, 1)
    cache.next_after(counting, 2)
    assert len(cache) == 2
    cache.next_after(counting, 0)
    assert calls == 4
    cache.clear()
    assert len(cache) == 0 and cache.hits == 0


def test_cache_shares_between_equal_cron_schedules() -> None:
    cache = NextInstantCache()
    first = CronSchedule("0 * * * *", "America/New_York")
    second = CronSchedule("0 * * * *", "America/New_York")
    assert cache.next_after(first, 0) == cache.next_after(second, 0)
    assert (cache.hits, cache.misses) == (1, 1)
    assert cache.next_after(first, 0) is not None
    with pytest.raises(ValueError):
        NextInstantCache(0)
