"""Excluded ranges reaching far ahead: the right next instant (or None) in a few steps, however
many DST segments the range holds."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedulerstream.timing import EverySchedule, parse_cron, preview
from schedulerstream.timing.combine import DayRange, ExcludedSchedule
from schedulerstream.timing.schedule import Schedule, next_instants
from schedulerstream.timing.zones import ZoneTimeline, timeline_for

MICROS = 1_000_000
ZONES = [
    "America/New_York",
    "Europe/Paris",
    "Australia/Sydney",
    "America/Santiago",  # its transitions are at local midnight
    "Australia/Lord_Howe",  # a 30-minute DST
    "America/Havana",
    "Asia/Tokyo",  # no transitions since 1951: segments end at the timeline's chunks
]
FOREVER = (date(2026, 12, 1), date(9999, 12, 30))
AFTER = 1_796_601_600 * MICROS  # 2026-12-07T00:00:00Z


def z(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp()) * MICROS


class Counting:
    """A schedule that counts the instants asked of it."""

    def __init__(self, inner: Schedule) -> None:
        self.inner = inner
        self.asked = 0

    def next_after(self, after_us: int) -> int | None:
        self.asked += 1
        return self.inner.next_after(after_us)

    def next_n(self, after_us: int, n: int) -> list[int]:
        return next_instants(self, after_us, n)

    def __hash__(self) -> int:
        return hash(self.inner)


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts the zone timelines' segment lookups (a chunk visit: each segment or transition
    scan goes through one per chunk of ~388 days, built or kept)."""
    counter = [0]
    chunk = ZoneTimeline._chunk

    def counted(self: ZoneTimeline, index: int) -> object:
        counter[0] += 1
        return chunk(self, index)

    monkeypatch.setattr(ZoneTimeline, "_chunk", counted)
    yield counter


def local_date(instant_us: int, zone: str) -> date:
    return datetime.fromtimestamp(instant_us / MICROS, ZoneInfo(zone)).date()


def brute_force(
    inner: Schedule, ranges: list[DayRange], zone: str, after_us: int, count: int, until_us: int
) -> list[int]:
    """Every instant of ``inner`` in turn, kept unless zoneinfo puts it on an excluded date."""
    found: list[int] = []
    instant: int | None = after_us
    while len(found) < count:
        instant = inner.next_after(instant)
        if instant is None or instant > until_us:
            break
        day = local_date(instant, zone)
        if not any(first <= day <= last for first, last in ranges):
            found.append(instant)
    return found


@pytest.mark.parametrize("zone", ZONES)
def test_excluded_until_9999_never_fires_again_in_a_few_steps(
    zone: str, lookups: list[int]
) -> None:
    # The reviewer's job. Before: 23,446 instants asked and 46,890 lookups in New York (12 s).
    inner = Counting(parse_cron("0 * * * * *", zone))
    schedule = ExcludedSchedule(inner, [FOREVER], zone)
    assert schedule.next_after(AFTER) is None
    assert inner.asked <= 4
    assert lookups[0] <= 12


@pytest.mark.parametrize("zone", ZONES)
def test_the_steps_do_not_grow_with_the_segments_a_range_holds(
    zone: str, lookups: list[int]
) -> None:
    steps = {}
    for years in (1, 200, 7000):
        inner = Counting(parse_cron("*/30 * * * *", zone))
        last = date(2026 + years, 6, 30)
        schedule = ExcludedSchedule(inner, [(date(2026, 12, 1), last)], zone)
        lookups[0] = 0
        instant = schedule.next_after(AFTER)
        midnight = datetime(last.year, 7, 1, tzinfo=ZoneInfo(zone))
        assert instant == int(midnight.timestamp()) * MICROS
        steps[years] = (inner.asked, lookups[0])
    # Before: {1: (4, 8), 200: (589, 1178), 7000: (20584, 41168)} in New York.
    assert steps[1] == steps[200] == steps[7000], steps
    assert steps[1][0] <= 4 and steps[1][1] <= 12, steps


@pytest.mark.parametrize("zone", ZONES)
def test_the_first_instant_after_a_far_range_is_the_first_after_its_last_local_date(
    zone: str,
) -> None:
    # Brute force from two days before the range's end (every instant before is in it).
    ranges = [(date(2026, 12, 1), date(2400, 3, 31))]
    start = z("2400-03-30T00:00:00+00:00")
    for inner in (parse_cron("0 0 * * *", zone), parse_cron("30 2 * * *", zone)):
        expected = brute_force(inner, ranges, zone, start, 3, start + 40 * 86_400 * MICROS)
        assert ExcludedSchedule(inner, ranges, zone).next_n(AFTER, 3) == expected


def test_every_schedule_excluded_through_the_calendars_last_date_never_fires_again() -> None:
    # Its next instant would be in year 10000, which no run id can name.
    every = EverySchedule(1.0)
    for zone in ("UTC", "America/New_York"):
        through_31st = ExcludedSchedule(every, [(date(2026, 12, 1), date(9999, 12, 31))], zone)
        assert through_31st.next_after(AFTER) is None
    through_30th = ExcludedSchedule(every, [FOREVER], "America/New_York")
    assert through_30th.next_after(AFTER) == z("9999-12-31T00:00:00-05:00")
    in_utc = ExcludedSchedule(every, [FOREVER], "UTC")  # (its one segment ends in 9999)
    assert in_utc.next_after(AFTER) == z("9999-12-31T00:00:00+00:00")


def test_a_preview_past_a_far_range_looks_for_dst_gaps_only_near_kept_dates(
    lookups: list[int],
) -> None:
    # Before: the notes' scan for skipped DST gaps visited every chunk to the range's end
    # (~7,400 to 9998, 11.6 s) and named a gap of an excluded date.
    entries = preview(
        "*/5 * * * *",
        "America/New_York",
        datetime(2026, 12, 7, tzinfo=UTC),
        count=2,
        exclude=[(date(2026, 12, 1), date(9998, 12, 31))],
    )
    assert [(e.local.isoformat(), e.note) for e in entries] == [
        ("9999-01-01T00:00:00-05:00", ""),
        ("9999-01-01T00:05:00-05:00", ""),
    ]
    assert lookups[0] <= 20


def test_a_dst_gap_is_noted_on_kept_dates_only() -> None:
    def notes(*excluded: date | DayRange) -> list[tuple[str, str]]:
        entries = preview(
            "30 2 * * *",
            "America/New_York",
            datetime(2026, 3, 7, 12, tzinfo=UTC),
            count=1,
            dst_gap="skip",
            exclude=excluded,
        )
        return [(e.local.date().isoformat(), e.note) for e in entries]

    gap = "02:30 does not exist (DST gap); skipped"
    assert notes(date(2026, 3, 9)) == [("2026-03-10", gap)]  # 2026-03-08 is kept
    assert notes(date(2026, 3, 8)) == [("2026-03-09", "")]
    assert notes((date(2026, 3, 1), date(2026, 3, 20))) == [("2026-03-21", "")]


@pytest.mark.parametrize("zone", [zone for zone in ZONES if zone != "Asia/Tokyo"])
def test_a_range_from_just_before_a_transition_matches_a_brute_force_reference(
    zone: str,
) -> None:
    # The instant excluded first is less than two days before the transition: the search
    # steps to it (a transition may take local time back) before jumping to the range's end.
    year = z("2026-01-01T00:00:00+00:00") // MICROS, z("2027-01-01T00:00:00+00:00") // MICROS
    for transition in timeline_for(zone).transitions(*year):
        instant = transition.instant * MICROS
        first = local_date(instant, zone) - timedelta(days=1)
        ranges = [(first, first + timedelta(days=60))]
        until = instant + 70 * 86_400 * MICROS
        for inner in (parse_cron("0 * * * *", zone), parse_cron("0 0 * * *", zone)):
            after = instant - 36 * 3600 * MICROS
            expected = brute_force(inner, ranges, zone, after, 3, until)
            assert ExcludedSchedule(inner, ranges, zone).next_n(after, 3) == expected


@settings(max_examples=150, deadline=None)
@given(
    zone=st.sampled_from(ZONES),
    expression=st.sampled_from(["0 * * * *", "30 2 * * *", "0 0 * * *", "15 1 * * *", "every"]),
    start=st.dates(date(2026, 1, 1), date(2027, 12, 31)),
    lengths_and_gaps=st.lists(
        st.tuples(st.integers(0, 200), st.integers(-3, 30)), min_size=1, max_size=3
    ),
    lead_s=st.integers(-3 * 86_400, 200 * 86_400),
)
def test_exclusions_match_a_brute_force_reference(
    zone: str,
    expression: str,
    start: date,
    lengths_and_gaps: list[tuple[int, int]],
    lead_s: int,
) -> None:
    inner = EverySchedule(5400.0, 600.0) if expression == "every" else parse_cron(expression, zone)
    ranges: list[DayRange] = []
    first = start
    for length, gap in lengths_and_gaps:  # gaps under 2 days: ranges overlap or touch
        ranges.append((first, first + timedelta(days=length)))
        first += timedelta(days=length + gap)
    schedule = ExcludedSchedule(inner, ranges, zone)
    after = z(f"{start.isoformat()}T00:00:00+00:00") + lead_s * MICROS
    until = max(z(f"{max(last for _, last in ranges).isoformat()}T00:00:00+00:00"), after)
    expected = brute_force(inner, ranges, zone, after, 3, until + 10 * 86_400 * MICROS)
    assert len(expected) == 3
    assert schedule.next_n(after, 3) == expected
