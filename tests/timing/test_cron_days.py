"""Nth and last weekdays (``D#n``, ``DL``) and nearest weekdays (``nW``, ``LW``): worked examples,
then properties against a day-by-day reference written from the definitions with ``calendar``.

The reference knows nothing of the engine: for each calendar day it asks "is this the n-th
Tuesday of its month?", "is there no later Friday in this month?", "is this the weekday of the
month closest to the 15th?", "is this the month's last Monday-to-Friday day?".
"""

from __future__ import annotations

import calendar
import functools
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from schedulerstream.timing import parse_cron, preview

DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
MICROS = 1_000_000


def z(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()) * MICROS


def days(expression: str, after: str, count: int, zone: str = "UTC") -> list[str]:
    found = parse_cron(expression, zone).next_n(z(after), count)
    return [datetime.fromtimestamp(t / 1e6, ZoneInfo(zone)).strftime("%Y-%m-%d") for t in found]


# --- worked examples ------------------------------------------------------------------------


def test_patch_tuesday() -> None:
    assert days("0 18 * * TUE#2", "2026-01-01T00:00:00Z", 4) == [
        "2026-01-13",
        "2026-02-10",
        "2026-03-10",
        "2026-04-14",
    ]
    assert parse_cron("0 18 * * 2#2") == parse_cron("0 18 ? * TUE#2")


def test_fifth_weekday_skips_months_without_one() -> None:
    # Mondays of 2026: five in March, June, August, November only.
    assert days("0 9 * * MON#5", "2026-01-01T00:00:00Z", 4) == [
        "2026-03-30",
        "2026-06-29",
        "2026-08-31",
        "2026-11-30",
    ]


def test_fifth_friday_of_february_only_in_leap_years_starting_on_friday() -> None:
    assert days("0 9 * FEB FRI#5", "2000-01-01T00:00:00Z", 3) == [
        "2008-02-29",
        "2036-02-29",
        "2064-02-29",
    ]


def test_last_weekday_of_month() -> None:
    assert days("0 17 * * FRIL", "2026-01-01T00:00:00Z", 3) == [
        "2026-01-30",
        "2026-02-27",
        "2026-03-27",
    ]
    assert days("0 17 * * 7L", "2026-01-01T00:00:00Z", 2) == ["2026-01-25", "2026-02-22"]


def test_nearest_weekday() -> None:
    # 2025-11-01 is a Saturday: not Friday the 31st of October, but Monday the 3rd.
    assert days("0 9 1W * *", "2025-10-15T00:00:00Z", 2) == ["2025-11-03", "2025-12-01"]
    # 2026-02-01 is a Sunday: Monday the 2nd.
    assert days("0 9 1W * *", "2026-01-15T00:00:00Z", 1) == ["2026-02-02"]
    # 2026-02-15 is a Sunday: Monday the 16th; 2026-08-15 a Saturday: Friday the 14th.
    assert days("0 9 15W 2,8 *", "2026-01-01T00:00:00Z", 2) == ["2026-02-16", "2026-08-14"]
    # 2026-05-31 is a Sunday and the last day: Friday the 29th, not Monday June 1st.
    assert days("0 9 31W * *", "2026-05-01T00:00:00Z", 2) == ["2026-05-29", "2026-07-31"]
    # A month without a 31st has no 31W (as it has no 31).
    assert "2026-06-30" not in days("0 9 31W * *", "2026-05-01T00:00:00Z", 3)


def test_last_weekday_in_february() -> None:
    assert days("0 9 LW 2 *", "2024-01-01T00:00:00Z", 4) == [
        "2024-02-29",  # a Thursday in a leap year
        "2025-02-28",  # a Friday
        "2026-02-27",  # the 28th is a Saturday
        "2027-02-26",  # the 28th is a Sunday
    ]


def test_both_day_fields_restricted_match_either() -> None:
    # Vixie rule, unchanged: the 15th's nearest weekday or the last Friday.
    assert days("0 9 15W * FRIL", "2026-01-01T00:00:00Z", 4) == [
        "2026-01-15",
        "2026-01-30",
        "2026-02-16",
        "2026-02-27",
    ]


def test_lists_are_unions() -> None:
    assert days("0 9 ? * MON#1,FRIL", "2026-01-01T00:00:00Z", 4) == [
        "2026-01-05",
        "2026-01-30",
        "2026-02-02",
        "2026-02-27",
    ]
    assert days("0 9 1W,LW * ?", "2026-01-01T00:00:00Z", 4) == [
        "2026-01-01",
        "2026-01-30",
        "2026-02-02",
        "2026-02-27",
    ]


@pytest.mark.parametrize("expression", ["0 0 30W 2 *", "0 0 31W 4,6,9,11 *", "0 0 30W 2 ?"])
def test_never(expression: str) -> None:
    schedule = parse_cron(expression)
    assert schedule.matcher.never
    assert schedule.next_after(0) is None


def test_dst_rules_unchanged_on_the_second_sunday_of_march() -> None:
    # 2026-03-08 02:30 does not exist in New York: a fixed-time schedule fires at 03:00 EDT.
    schedule = parse_cron("30 2 * * SUN#2", "America/New_York")
    assert schedule.next_n(z("2026-03-01T00:00:00Z"), 2) == [
        z("2026-03-08T07:00:00Z"),
        z("2026-04-12T06:30:00Z"),
    ]
    entry = preview(
        "30 2 * * SUN#2",
        "America/New_York",
        datetime(2026, 3, 1, tzinfo=UTC),
        count=1,
    )[0]
    assert entry.local.isoformat() == "2026-03-08T03:00:00-04:00"
    assert "does not exist" in entry.note


def test_dst_repeat_on_the_last_sunday_of_october() -> None:
    # 2026-10-25 01:30 occurs twice in London; a fixed time fires at the first.
    assert parse_cron("30 1 * * SUNL", "Europe/London").next_n(z("2026-10-20T00:00:00Z"), 2) == [
        z("2026-10-25T00:30:00Z"),
        z("2026-11-29T01:30:00Z"),
    ]


# --- the day-by-day reference ---------------------------------------------------------------


@dataclass(frozen=True)
class DayFields:
    dom_text: str
    dow_text: str
    month_text: str
    plain_dom: frozenset[int] = frozenset()
    last: bool = False
    last_weekday: bool = False
    nearest: frozenset[int] = frozenset()
    plain_dow: frozenset[int] = frozenset()
    nth: frozenset[tuple[int, int]] = frozenset()
    last_of: frozenset[int] = frozenset()
    months: frozenset[int] = frozenset(range(1, 13))

    def matches(self, day: date) -> bool:
        """The definitions, one calendar day at a time."""
        if day.month not in self.months:
            return False
        length = calendar.monthrange(day.year, day.month)[1]
        month_days = [day.replace(day=d) for d in range(1, length + 1)]
        weekdays = [d for d in month_days if d.weekday() < 5]
        dom = (
            day.day in self.plain_dom
            or (self.last and day.day == length)
            or (self.last_weekday and day == weekdays[-1])
            or any(
                n <= length and day == min(weekdays, key=lambda w: abs(w.day - n))
                for n in self.nearest
            )
        )
        cron_weekday = day.isoweekday() % 7
        same_before = sum(1 for d in month_days if d < day and d.weekday() == day.weekday())
        later = day + timedelta(days=7)
        dow = (
            cron_weekday in self.plain_dow
            or (cron_weekday, same_before + 1) in self.nth
            or (cron_weekday in self.last_of and later.month != day.month)
        )
        dom_restricted = not self.dom_text.startswith(("*", "?"))
        dow_restricted = not self.dow_text.startswith(("*", "?"))
        if dom_restricted and dow_restricted:
            return dom or dow
        return (dom or not dom_restricted) and (dow or not dow_restricted)


def _weekday_text(value: int, draw: st.DrawFn) -> str:
    if draw(st.booleans()):
        name = DAYS[value % 7]
        return draw(st.sampled_from([name, name.lower(), name.title()]))
    return str(7 if value == 0 and draw(st.booleans()) else value)


@st.composite
def day_fields(draw: st.DrawFn, hint: date | None = None) -> DayFields:
    """Day fields mixing plain values with L, LW, nW, D#n and DL, often about ``hint``."""
    near_days = [1, 2, 3, 28, 29, 30, 31]
    weekday_hint = [] if hint is None else [hint.isoweekday() % 7]
    nth_hint = [] if hint is None else [(hint.day + 6) // 7]
    if hint is not None:
        near_days += [hint.day - 1, hint.day, hint.day + 1]
    day = st.one_of(st.sampled_from([d for d in near_days if 1 <= d <= 31]), st.integers(1, 31))
    weekday = st.one_of(st.sampled_from(weekday_hint or [0]), st.integers(0, 6))

    dom_texts: list[str] = []
    plain_dom: set[int] = set()
    last = last_weekday = False
    nearest: set[int] = set()
    if draw(st.integers(0, 3)) == 0:
        dom_texts.append(draw(st.sampled_from(["*", "?"])))
    else:
        for kind in draw(
            st.lists(st.sampled_from(["plain", "L", "LW", "W"]), min_size=1, max_size=3)
        ):
            if kind == "plain":
                value = draw(day)
                dom_texts.append(str(value))
                plain_dom.add(value)
            elif kind == "L":
                last = True
                dom_texts.append(draw(st.sampled_from(["L", "l"])))
            elif kind == "LW":
                last_weekday = True
                dom_texts.append(draw(st.sampled_from(["LW", "lw", "Lw"])))
            else:
                value = draw(day)
                nearest.add(value)
                dom_texts.append(f"{value}{draw(st.sampled_from(['W', 'w']))}")

    dow_texts: list[str] = []
    plain_dow: set[int] = set()
    nth: set[tuple[int, int]] = set()
    last_of: set[int] = set()
    if draw(st.integers(0, 3)) == 0:
        dow_texts.append(draw(st.sampled_from(["*", "?"])))
    else:
        for kind in draw(st.lists(st.sampled_from(["plain", "#", "L"]), min_size=1, max_size=3)):
            value = draw(weekday)
            text = _weekday_text(value, draw)
            if kind == "plain":
                plain_dow.add(value)
                dow_texts.append(text)
            elif kind == "#":
                n = draw(st.one_of(st.sampled_from(nth_hint or [5]), st.integers(1, 5)))
                nth.add((value, n))
                dow_texts.append(f"{text}#{n}")
            else:
                last_of.add(value)
                dow_texts.append(f"{text}{draw(st.sampled_from(['L', 'l']))}")

    month_hint = [2] if hint is None else [hint.month]
    if draw(st.booleans()):
        month_text, months = "*", set(range(1, 13))
    else:
        months = set(
            draw(st.lists(st.sampled_from([*month_hint, *range(1, 13)]), min_size=1, max_size=3))
        )
        month_text = ",".join(str(m) for m in sorted(months))
    return DayFields(
        dom_text=",".join(dom_texts),
        dow_text=",".join(dow_texts),
        month_text=month_text,
        plain_dom=frozenset(plain_dom),
        last=last,
        last_weekday=last_weekday,
        nearest=frozenset(nearest),
        plain_dow=frozenset(plain_dow),
        nth=frozenset(nth),
        last_of=frozenset(last_of),
        months=frozenset(months),
    )


def reference_utc(
    fields: DayFields, hour: int, minute: int, after: datetime, count: int, horizon: date
) -> list[datetime]:
    found = []
    day = after.date()
    while day < horizon and len(found) < count:
        if fields.matches(day):
            instant = datetime(day.year, day.month, day.day, hour, minute, tzinfo=UTC)
            if instant > after:
                found.append(instant)
        day += timedelta(days=1)
    return found


@settings(max_examples=300, deadline=None)
@given(
    fields=day_fields(),
    hour=st.integers(0, 23),
    minute=st.integers(0, 59),
    after=st.datetimes(datetime(1890, 1, 1), datetime(2410, 1, 1)).map(
        lambda d: d.replace(tzinfo=UTC)
    ),
)
def test_utc_matches_day_by_day_reference(
    fields: DayFields, hour: int, minute: int, after: datetime
) -> None:
    """Leap years (1900, 2000, 2100, 2400 included in range), months without a 5th weekday,
    1W on a Saturday the 1st, LW in February: whatever the draws land on, day by day."""
    text = f"{minute} {hour} {fields.dom_text} {fields.month_text} {fields.dow_text}"
    horizon = after.date() + timedelta(days=4 * 366)
    expected = reference_utc(fields, hour, minute, after, 6, horizon)
    after_us = int(after.timestamp()) * MICROS + after.microsecond
    horizon_us = (
        int(datetime(horizon.year, horizon.month, horizon.day, tzinfo=UTC).timestamp()) * MICROS
    )
    found = [t for t in parse_cron(text).next_n(after_us, 6) if t < horizon_us]
    assert found == [int(e.timestamp()) * MICROS for e in expected], text
    event("fires" if expected else "no fire within 4 years")


# --- DST days --------------------------------------------------------------------------------

ZONES = [
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",
    "America/Santiago",
    "America/Havana",
]


@functools.cache
def transition_days(zone_name: str) -> list[tuple[date, int]]:
    """(local date, UTC second) of each offset change 2024–2030."""
    zone = ZoneInfo(zone_name)
    start = int(datetime(2024, 1, 1, tzinfo=UTC).timestamp())
    end = int(datetime(2031, 1, 1, tzinfo=UTC).timestamp())
    found = []
    previous = datetime.fromtimestamp(start, zone).utcoffset()
    for second in range(start + 1800, end, 1800):
        offset = datetime.fromtimestamp(second, zone).utcoffset()
        if offset != previous:
            found.append((datetime.fromtimestamp(second, zone).date(), second))
        previous = offset
    return found


def reference_zone(
    fields: DayFields, times: list[tuple[int, int]], zone: ZoneInfo, first: date, last: date
) -> set[int]:
    """Fixed-time fires (UTC seconds) of the local days ``first..last`` (DESIGN.md §4 auto rules:
    a repeated wall time fires at its first occurrence; a skipped one at the jump)."""
    fires = set()
    day = first
    while day <= last:
        if fields.matches(day):
            for hour, minute in times:
                wall = datetime(day.year, day.month, day.day, hour, minute)
                earlier = int(wall.replace(tzinfo=zone, fold=0).timestamp())
                back = datetime.fromtimestamp(earlier, zone).replace(tzinfo=None)
                if back == wall:
                    fires.add(min(earlier, int(wall.replace(tzinfo=zone, fold=1).timestamp())))
                    continue
                # Skipped: the first minute whose wall clock is past it is the jump itself.
                second = int(wall.replace(tzinfo=zone, fold=1).timestamp())
                second -= second % 60
                while datetime.fromtimestamp(second, zone).replace(tzinfo=None) <= wall:
                    second += 60
                event("fired after a DST gap")
                fires.add(second)
        day += timedelta(days=1)
    return fires


@settings(max_examples=500, deadline=None)
@given(data=st.data())
def test_dst_days_match_reference(data: st.DataObject) -> None:
    zone_name = data.draw(st.sampled_from(ZONES))
    zone = ZoneInfo(zone_name)
    local_day, transition = data.draw(st.sampled_from(transition_days(zone_name)))
    fields = data.draw(day_fields(hint=local_day))
    at = datetime.fromtimestamp(transition, zone)
    near_hours = sorted({at.hour, (at.hour - 1) % 24, (at.hour + 1) % 24, 0, 23})
    hours = sorted(set(data.draw(st.lists(st.sampled_from(near_hours), min_size=1, max_size=2))))
    minutes = sorted(
        set(data.draw(st.lists(st.sampled_from([0, 15, 30, 59]), min_size=1, max_size=2)))
    )
    text = (
        f"{','.join(map(str, minutes))} {','.join(map(str, hours))} "
        f"{fields.dom_text} {fields.month_text} {fields.dow_text}"
    )
    start = transition - 3 * 86_400
    end = transition + 3 * 86_400
    times = [(h, m) for h in hours for m in minutes]
    expected = sorted(
        s
        for s in reference_zone(
            fields, times, zone, local_day - timedelta(days=4), local_day + timedelta(days=4)
        )
        if start < s <= end
    )
    schedule = parse_cron(text, zone_name)
    found = []
    instant = schedule.next_after(start * MICROS)
    while instant is not None and instant <= end * MICROS:
        found.append(instant // MICROS)
        instant = schedule.next_after(instant)
    assert found == expected, text
