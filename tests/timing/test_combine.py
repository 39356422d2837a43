"""Several cron expressions (the union, each instant once) and excluded local dates."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedulerstream.errors import ValidationError
from schedulerstream.timing import EverySchedule, parse_cron, preview
from schedulerstream.timing.combine import ExcludedSchedule, UnionSchedule, day_ranges
from schedulerstream.timing.spec import schedule_of

MICROS = 1_000_000
PARIS = "Europe/Paris"


def z(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()) * MICROS


def local(instants: list[int], zone: str) -> list[str]:
    return [
        datetime.fromtimestamp(t / MICROS, ZoneInfo(zone)).strftime("%a %Y-%m-%d %H:%M")
        for t in instants
    ]


def spec(**fields: object) -> dict[str, object]:
    base: dict[str, object] = {
        "cron": None,
        "every_us": None,
        "phase_us": 0,
        "at_us": None,
        "timezone": "UTC",
        "start_at_us": None,
        "end_at_us": None,
        "jitter_us": 0,
        "dst_gap": "auto",
        "dst_repeat": "auto",
        "exclude": [],
    }
    return {**base, **fields}


def test_weekdays_at_nine_and_saturdays_at_noon() -> None:
    schedule = UnionSchedule(
        [parse_cron("0 9 * * MON-FRI", PARIS), parse_cron("0 12 * * SAT", PARIS)]
    )
    assert local(schedule.next_n(z("2026-03-05T12:00:00Z"), 4), PARIS) == [
        "Fri 2026-03-06 09:00",
        "Sat 2026-03-07 12:00",
        "Mon 2026-03-09 09:00",
        "Tue 2026-03-10 09:00",
    ]


def test_shared_instants_fire_once() -> None:
    schedule = UnionSchedule([parse_cron("0 * * * *"), parse_cron("*/30 * * * *")])
    assert schedule.next_n(z("2026-01-01T00:00:00Z"), 3) == [
        z("2026-01-01T00:30:00Z"),
        z("2026-01-01T01:00:00Z"),
        z("2026-01-01T01:30:00Z"),
    ]


def test_union_of_never_is_never_and_equality_by_parts() -> None:
    assert UnionSchedule([parse_cron("0 0 30 2 *")]).next_after(0) is None
    one = UnionSchedule([parse_cron("0 9 * * *"), parse_cron("0 12 * * 6")])
    two = UnionSchedule([parse_cron("0 9 * * *"), parse_cron("0 12 * * 6")])
    assert one == two and hash(one) == hash(two)
    with pytest.raises(ValidationError):
        UnionSchedule([])


def test_excluded_dates_and_ranges_are_local_dates() -> None:
    # Local dates: 00:30 on Christmas Day in Paris (2026-12-24 23:30 UTC) does not fire.
    inner = parse_cron("30 0,23 * * *", PARIS)
    schedule = ExcludedSchedule(
        inner, [date(2026, 12, 25), (date(2026, 12, 31), date(2027, 1, 1))], PARIS
    )
    assert local(schedule.next_n(z("2026-12-23T12:00:00Z"), 5), PARIS) == [
        "Wed 2026-12-23 23:30",
        "Thu 2026-12-24 00:30",
        "Thu 2026-12-24 23:30",
        "Sat 2026-12-26 00:30",
        "Sat 2026-12-26 23:30",
    ]
    after_new_year = schedule.next_n(z("2026-12-30T12:00:00Z"), 2)
    assert local(after_new_year, PARIS) == ["Wed 2026-12-30 23:30", "Sat 2027-01-02 00:30"]


def test_every_schedule_skips_a_long_excluded_range_quickly() -> None:
    every = EverySchedule(1.0)
    schedule = ExcludedSchedule(every, [(date(2026, 1, 1), date(2026, 12, 31))], "Asia/Tokyo")
    first = schedule.next_after(z("2025-12-31T14:59:58Z"))
    assert first == z("2025-12-31T14:59:59Z")
    assert schedule.next_after(first) == z("2026-12-31T15:00:00Z")  # Tokyo midnight


def test_ranges_merge_and_reject_backwards() -> None:
    assert day_ranges(
        [date(1970, 1, 3), (date(1970, 1, 1), date(1970, 1, 2)), date(1970, 1, 10)]
    ) == (
        (0, 2),
        (9, 9),
    )
    with pytest.raises(ValidationError, match="ends before it starts"):
        day_ranges([(date(2026, 1, 2), date(2026, 1, 1))])


def test_excluded_on_a_dst_day_with_a_midnight_transition() -> None:
    # Santiago: 2026-09-06 00:00 does not exist (clocks go from 23:59:59 to 01:00).
    zone = "America/Santiago"
    inner = parse_cron("0 0,12 * * *", zone)
    schedule = ExcludedSchedule(inner, [date(2026, 9, 6)], zone)
    assert local(schedule.next_n(z("2026-09-05T12:00:00Z"), 2), zone) == [
        "Sat 2026-09-05 12:00",
        "Mon 2026-09-07 00:00",
    ]
    assert local(inner.next_n(z("2026-09-05T17:00:00Z"), 2), zone) == [
        "Sun 2026-09-06 01:00",
        "Sun 2026-09-06 12:00",
    ]


def test_schedule_of_a_record_with_a_list_and_exclusions() -> None:
    record = spec(
        cron=["0 9 * * MON-FRI", "0 12 * * SAT"],
        timezone=PARIS,
        exclude=[
            {"from_date": "2026-03-09", "to_date": "2026-03-09"},
            {"from_date": "2026-03-11", "to_date": "2026-03-12"},
        ],
    )
    schedule = schedule_of(record)
    assert local(schedule.next_n(z("2026-03-05T12:00:00Z"), 4), PARIS) == [
        "Fri 2026-03-06 09:00",
        "Sat 2026-03-07 12:00",
        "Tue 2026-03-10 09:00",
        "Fri 2026-03-13 09:00",
    ]
    assert schedule == schedule_of(record)
    assert schedule_of(spec(cron="0 9 * * *")) == parse_cron("0 9 * * *")
    assert schedule_of(spec(cron=["0 9 * * *"])) == parse_cron("0 9 * * *")
    older = spec(cron="0 9 * * *")
    del older["exclude"]  # a record built before the field existed
    assert schedule_of(older) == parse_cron("0 9 * * *")


def test_preview_of_a_union_names_its_sources_and_keeps_dst_notes() -> None:
    entries = preview(
        ["30 2 * * SUN#2", "0 3 * * *"],
        "America/New_York",
        datetime(2026, 3, 7, 12, tzinfo=UTC),
        count=3,
        exclude=[date(2026, 3, 9)],
    )
    assert [(e.local.isoformat(), e.sources, e.note) for e in entries] == [
        ("2026-03-08T03:00:00-04:00", (0, 1), "02:30 does not exist (DST gap); fired at 03:00"),
        ("2026-03-10T03:00:00-04:00", (1,), ""),
        ("2026-03-11T03:00:00-04:00", (1,), ""),
    ]


def reference(expressions: list[str], excluded: set[date], after: datetime, days: int) -> list[int]:
    """Each expression's own instants over ``days`` days, merged and filtered by local date."""
    instants: set[int] = set()
    end = after + timedelta(days=days)
    for text in expressions:
        schedule = parse_cron(text)
        current = int(after.timestamp()) * MICROS
        while (current := schedule.next_after(current) or 0) and current < end.timestamp() * MICROS:
            instants.add(current)
    return sorted(
        t for t in instants if datetime.fromtimestamp(t / MICROS, UTC).date() not in excluded
    )


@settings(max_examples=100, deadline=None)
@given(
    expressions=st.lists(
        st.sampled_from(
            [
                "0 9 * * MON-FRI",
                "0 12 * * SAT",
                "0 */6 * * *",
                "30 9 15W * *",
                "0 9 * * FRIL",
                "0 0 1 * *",
            ]
        ),
        min_size=1,
        max_size=3,
    ),
    excluded=st.sets(st.dates(date(2026, 1, 1), date(2026, 3, 1)), max_size=20),
    start=st.dates(date(2026, 1, 1), date(2026, 2, 1)),
)
def test_union_minus_excluded_matches_reference(
    expressions: list[str], excluded: set[date], start: date
) -> None:
    after = datetime(start.year, start.month, start.day, tzinfo=UTC)
    schedule = ExcludedSchedule(UnionSchedule(parse_cron(e) for e in expressions), excluded, "UTC")
    expected = reference(expressions, excluded, after, 28)
    end = (after + timedelta(days=28)).timestamp() * MICROS
    found = [
        t for t in schedule.next_n(int(after.timestamp()) * MICROS, len(expected) + 1) if t < end
    ]
    assert found == expected
