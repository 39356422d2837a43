"""Next-instant engine in UTC: field skipping, L, the day-of-month/day-of-week rule, never."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from schedulerstream.errors import UnknownTimeZoneError, ValidationError
from schedulerstream.timing import CronSchedule, parse_cron


def z(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()) * 1_000_000


def days(expression: str, after: str, count: int) -> list[str]:
    found = parse_cron(expression).next_n(z(after), count)
    return [datetime.fromtimestamp(t / 1e6, UTC).strftime("%Y-%m-%d") for t in found]


def test_every_five_minutes() -> None:
    schedule = parse_cron("*/5 * * * *")
    assert schedule.next_n(z("2024-01-01T00:02:00Z"), 3) == [
        z("2024-01-01T00:05:00Z"),
        z("2024-01-01T00:10:00Z"),
        z("2024-01-01T00:15:00Z"),
    ]


def test_strictly_after_with_microseconds() -> None:
    schedule = parse_cron("*/5 * * * *")
    assert schedule.next_after(z("2024-01-01T00:05:00Z")) == z("2024-01-01T00:10:00Z")
    assert schedule.next_after(z("2024-01-01T00:05:00Z") - 1) == z("2024-01-01T00:05:00Z")
    assert schedule.next_after(z("2024-01-01T00:05:00Z") + 1) == z("2024-01-01T00:10:00Z")


def test_carry_across_year() -> None:
    schedule = parse_cron("59 23 31 12 *")
    assert schedule.next_after(z("2024-12-31T23:59:00Z")) == z("2025-12-31T23:59:00Z")
    assert parse_cron("@yearly").next_after(z("2024-06-01T00:00:00Z")) == z("2025-01-01T00:00:00Z")


def test_weekdays_business_hours() -> None:
    schedule = parse_cron("*/30 9-10 * * MON-FRI")
    # 2024-01-05 is a Friday.
    assert schedule.next_n(z("2024-01-05T10:15:00Z"), 3) == [
        z("2024-01-05T10:30:00Z"),
        z("2024-01-08T09:00:00Z"),
        z("2024-01-08T09:30:00Z"),
    ]


def test_six_field_seconds() -> None:
    schedule = parse_cron("*/20 * * * * *")
    assert schedule.next_n(z("2024-01-01T00:00:50Z"), 3) == [
        z("2024-01-01T00:01:00Z"),
        z("2024-01-01T00:01:20Z"),
        z("2024-01-01T00:01:40Z"),
    ]
    assert parse_cron("5/15 0 12 * * *").next_n(z("2024-01-01T00:00:00Z"), 5) == [
        z("2024-01-01T12:00:05Z"),
        z("2024-01-01T12:00:20Z"),
        z("2024-01-01T12:00:35Z"),
        z("2024-01-01T12:00:50Z"),
        z("2024-01-02T12:00:05Z"),
    ]


def test_last_day_of_month() -> None:
    assert days("0 12 L * *", "2024-01-15T00:00:00Z", 5) == [
        "2024-01-31",
        "2024-02-29",
        "2024-03-31",
        "2024-04-30",
        "2024-05-31",
    ]
    assert days("0 0 L 2 *", "2023-01-01T00:00:00Z", 3) == [
        "2023-02-28",
        "2024-02-29",
        "2025-02-28",
    ]
    assert days("0 0 15,L * *", "2023-02-01T00:00:00Z", 3) == [
        "2023-02-15",
        "2023-02-28",
        "2023-03-15",
    ]


def test_dom_and_dow_both_restricted_match_either() -> None:
    # September 2024: Sunday the 1st; Fridays 6, 13, 20, 27; October: Fridays 4, 11, 18, 25.
    assert days("0 0 13 * FRI", "2024-09-01T00:00:00Z", 8) == [
        "2024-09-06",
        "2024-09-13",
        "2024-09-20",
        "2024-09-27",
        "2024-10-04",
        "2024-10-11",
        "2024-10-13",
        "2024-10-18",
    ]


def test_unrestricted_day_field_is_ignored() -> None:
    assert days("0 0 * * FRI", "2024-09-01T00:00:00Z", 2) == ["2024-09-06", "2024-09-13"]
    assert days("0 0 13 * *", "2024-09-01T00:00:00Z", 2) == ["2024-09-13", "2024-10-13"]
    assert days("0 0 13 * ?", "2024-09-01T00:00:00Z", 1) == ["2024-09-13"]


def test_star_with_step_counts_as_unrestricted_so_both_must_match() -> None:
    # Days 1, 11, 21, 31 that are also Fridays.
    assert days("0 0 */10 * FRI", "2024-09-01T00:00:00Z", 3) == [
        "2024-10-11",
        "2024-11-01",
        "2025-01-31",
    ]


def test_last_day_or_weekday() -> None:
    # 2024-02: Mondays 5, 12, 19, 26; last day 29 (Thursday).
    assert days("0 0 L * MON", "2024-02-20T00:00:00Z", 3) == [
        "2024-02-26",
        "2024-02-29",
        "2024-03-04",
    ]


def test_sunday_as_seven() -> None:
    assert parse_cron("0 0 * * 7").next_n(0, 3) == parse_cron("0 0 * * SUN").next_n(0, 3)


@pytest.mark.parametrize("expression", ["0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 30,31 FEB *"])
def test_never(expression: str) -> None:
    assert parse_cron(expression).next_after(0) is None
    assert parse_cron(expression, "America/New_York").next_n(0, 3) == []


def test_rare_but_possible() -> None:
    assert days("0 0 29 2 *", "2024-03-01T00:00:00Z", 2) == ["2028-02-29", "2032-02-29"]
    # dow */7 is {0, 7} = Sunday and starts with '*', so both must match: Feb 29 on a Sunday.
    assert days("0 0 29 2 */7", "2016-03-01T00:00:00Z", 1) == ["2032-02-29"]
    assert parse_cron("0 0 31 2 MON").next_after(z("2024-02-01T00:00:00Z")) == z(
        "2024-02-05T00:00:00Z"
    )


def test_far_future_ends() -> None:
    schedule = parse_cron("0 0 1 1 *")
    assert schedule.next_after(z("9998-06-01T00:00:00Z")) == z("9999-01-01T00:00:00Z")
    assert schedule.next_after(z("9999-01-01T00:00:00Z")) is None
    assert parse_cron("0 0 1 1 *", "America/New_York").next_after(z("9999-06-01T00:00:00Z")) is None


def test_before_the_epoch() -> None:
    schedule = parse_cron("0 0 1 1 *", "Europe/London")
    assert schedule.next_after(z("1965-06-01T00:00:00Z")) == z("1966-01-01T00:00:00Z")


def test_parse_cron_is_cached_and_schedules_compare_by_definition() -> None:
    assert parse_cron("0 * * * *", "UTC") is parse_cron("0 * * * *", "UTC")
    assert CronSchedule("0 0 * * MON") == CronSchedule("0 0 * * 1")
    assert hash(CronSchedule("0 0 * * MON")) == hash(CronSchedule("0 0 * * 1"))
    assert CronSchedule("30 2 * * *", "UTC", "auto") == CronSchedule(
        "30 2 * * *", "UTC", "fire_after"
    )
    assert CronSchedule("30 2 * * *", "UTC", "auto") != CronSchedule("30 2 * * *", "UTC", "skip")
    assert CronSchedule("0 * * * *") != CronSchedule("0 * * * *", "Europe/London")


def test_policy_resolution() -> None:
    fixed = parse_cron("30 2 * * *")
    assert (fixed.dst_gap, fixed.dst_repeat) == ("fire_after", "first")
    wildcard = parse_cron("0 * * * *")
    assert (wildcard.dst_gap, wildcard.dst_repeat) == ("skip", "both")
    explicit = parse_cron("0 * * * *", "UTC", "fire_after", "first")
    assert (explicit.dst_gap, explicit.dst_repeat) == ("fire_after", "first")


def test_bad_policy_and_zone() -> None:
    with pytest.raises(ValidationError) as caught:
        parse_cron("0 * * * *", "UTC", "later")  # type: ignore[arg-type]
    assert caught.value.field == "dst_gap"
    with pytest.raises(ValidationError) as caught:
        parse_cron("0 * * * *", "UTC", "auto", "twice")  # type: ignore[arg-type]
    assert caught.value.field == "dst_repeat"
    with pytest.raises(UnknownTimeZoneError) as zone_error:
        parse_cron("0 * * * *", "Mars/Olympus")
    assert (zone_error.value.field, zone_error.value.message) == (
        "timezone",
        "unknown IANA time zone 'Mars/Olympus'",
    )


def test_memo_returns_same_answer() -> None:
    schedule = parse_cron("0 * * * *", "America/New_York")
    after = z("2024-03-10T06:30:00Z")
    assert schedule.next_after(after) == schedule.next_after(after) == z("2024-03-10T07:00:00Z")


def test_a_cron_that_only_names_a_dst_gap_it_skips_never_fires_and_says_so_quickly() -> None:
    """02:30 on the second Sunday of March is always in New York's spring gap: with
    dst_gap=skip it never fires. The search stops after one 400-year calendar cycle (it walked
    to year 9999: ~8 s the first time in a zone, ~50 ms each time after)."""
    schedule = parse_cron("30 2 ? 3 SUN#2", "America/New_York", dst_gap="skip")
    started = time.perf_counter()
    assert schedule.next_after(1_765_000_000_000_000) is None
    assert time.perf_counter() - started < 5.0
    leap_day = parse_cron("0 0 29 2 *", "UTC")  # a date of every fourth year is still found
    assert leap_day.next_after(1_765_000_000_000_000) == 1_835_395_200_000_000  # 2028-02-29
