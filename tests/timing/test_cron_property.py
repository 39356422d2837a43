"""Property tests: the engine against brute-force references written from the rules' definitions.

Near DST transitions, the reference walks UTC instants one by one (minutes for 5-field
expressions, seconds in short windows for 6-field ones), converts each to local time with
zoneinfo and applies DESIGN.md §4 directly:
- a matching local time that exists once fires; one that occurs twice fires at its first
  occurrence, and at its second only when dst_repeat resolves to "both";
- where the local clock jumps forward, the instant after the jump fires if dst_gap resolves to
  "fire_after" and any skipped local time matches.
Far from transitions, a UTC reference walks calendar days and checks every matching time.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import event, given, settings
from hypothesis import strategies as st

from schedulerstream.timing import parse_cron

ZONES = [
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",
    "America/Santiago",
    "America/Havana",
    "Asia/Beirut",
]
MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]


@functools.cache
def transitions(zone_name: str) -> list[int]:
    """UTC seconds (to the hour after) where the zone's offset changes, 2020–2030."""
    zone = ZoneInfo(zone_name)
    start = int(datetime(2020, 1, 1, tzinfo=UTC).timestamp())
    end = int(datetime(2031, 1, 1, tzinfo=UTC).timestamp())
    found = []
    previous = datetime.fromtimestamp(start, zone).utcoffset()
    for second in range(start + 3600, end, 3600):
        offset = datetime.fromtimestamp(second, zone).utcoffset()
        if offset != previous:
            found.append(second)
        previous = offset
    return found


@dataclass(frozen=True)
class Field:
    text: str
    values: frozenset[int]
    last: bool = False


@dataclass(frozen=True)
class Expression:
    second: Field | None
    minute: Field
    hour: Field
    dom: Field
    month: Field
    dow: Field

    @property
    def text(self) -> str:
        fields = [self.minute, self.hour, self.dom, self.month, self.dow]
        return " ".join(f.text for f in ([self.second] if self.second else []) + fields)

    @property
    def fixed(self) -> bool:
        timed = [self.minute, self.hour] + ([self.second] if self.second else [])
        return not any(f.text.startswith("*") for f in timed)

    def day_matches(self, day: date) -> bool:
        if day.month not in self.month.values:
            return False
        last_day = (
            (day.replace(day=28) + timedelta(days=4)).replace(day=1) - timedelta(days=1)
        ).day
        dom = day.day in self.dom.values or (self.dom.last and day.day == last_day)
        dow = day.isoweekday() % 7 in self.dow.values
        restricted = not self.dom.text.startswith("*") and not self.dow.text.startswith("*")
        return (dom or dow) if restricted else (dom and dow)

    def matches(self, wall: datetime) -> bool:
        second_ok = wall.second in self.second.values if self.second else wall.second == 0
        return (
            second_ok
            and wall.minute in self.minute.values
            and wall.hour in self.hour.values
            and self.day_matches(wall.date())
        )


def _render(value: int, names: list[str] | None, offset: int, draw: st.DrawFn) -> str:
    if names is not None and value - offset < len(names) and draw(st.booleans()):
        name = names[value - offset]
        return draw(st.sampled_from([name, name.lower(), name.title()]))
    return str(value)


@st.composite
def element(
    draw: st.DrawFn, low: int, high: int, near: list[int], names: list[str] | None
) -> tuple[str, set[int]]:
    value = st.integers(0, 3).flatmap(
        lambda k: st.sampled_from(near) if k else st.integers(low, high)
    )
    kind = draw(st.sampled_from(["value", "range", "range_step", "from_step"]))
    first = draw(value)

    def text(v: int) -> str:
        return _render(v, names, low if names is not None else 0, draw)

    if kind == "value":
        return text(first), {first}
    step = draw(st.integers(1, max(1, (high - low) // 2)))
    if kind == "from_step":
        return f"{text(first)}/{step}", set(range(first, high + 1, step))
    second = draw(st.integers(first, high))
    if kind == "range":
        return f"{text(first)}-{text(second)}", set(range(first, second + 1))
    return f"{text(first)}-{text(second)}/{step}", set(range(first, second + 1, step))


@st.composite
def field(
    draw: st.DrawFn,
    low: int,
    high: int,
    near: list[int],
    star_weight: int,
    names: list[str] | None = None,
    allow_last: bool = False,
) -> Field:
    choice = draw(st.integers(0, 9))
    if choice < star_weight:
        if draw(st.booleans()):
            return Field("*", frozenset(range(low, high + 1)))
        step = draw(st.integers(1, high - low + 1))
        return Field(f"*/{step}", frozenset(range(low, high + 1, step)))
    parts = draw(st.lists(element(low, high, near, names), min_size=1, max_size=3))
    texts = [text for text, _ in parts]
    values: set[int] = set().union(*(v for _, v in parts))
    last = allow_last and draw(st.integers(0, 4)) == 0
    if last:
        texts.insert(draw(st.integers(0, len(texts))), draw(st.sampled_from(["L", "l"])))
    return Field(",".join(texts), frozenset(values), last)


def normalize_dow(f: Field) -> Field:
    return Field(f.text, frozenset(0 if v == 7 else v for v in f.values), f.last)


@st.composite
def expression(draw: st.DrawFn, hints: list[datetime], with_seconds: bool) -> Expression:
    """A valid expression whose values are often those of the local times in ``hints``."""
    near_hours = sorted(
        {h.hour for h in hints} | {(hints[0].hour + 1) % 24, (hints[-1].hour - 1) % 24}
    )
    near_days = sorted({(h + timedelta(days=d)).day for h in hints for d in (-1, 0, 1)})
    near_months = sorted({h.month for h in hints})
    near_dows = sorted({(h + timedelta(days=d)).isoweekday() % 7 for h in hints for d in (-1, 0)})
    day_star = 8 if len(hints) > 1 else 4
    return Expression(
        second=draw(field(0, 59, [0, 1, 30, 59], 4)) if with_seconds else None,
        minute=draw(field(0, 59, [0, 15, 29, 30, 45, 59], 4)),
        hour=draw(field(0, 23, near_hours, 2)),
        dom=draw(field(1, 31, near_days, day_star, allow_last=True)),
        month=draw(field(1, 12, near_months, day_star, MONTHS)),
        dow=normalize_dow(draw(field(0, 7, [*near_dows, 7], day_star, DAYS))),
    )


def walls(zone: ZoneInfo, transition: int) -> list[datetime]:
    """Local wall times just before and at a transition."""
    return [
        datetime.fromtimestamp(t, zone).replace(tzinfo=None) for t in (transition - 1, transition)
    ]


def reference_near(
    expr: Expression, zone: ZoneInfo, gap: str, repeat: str, start: int, end: int, step: int
) -> list[int]:
    """Fires in ``(start, end]`` (UTC seconds), walking UTC in ``step`` seconds."""
    fire_after = gap == "fire_after" or (gap == "auto" and expr.fixed)
    both = repeat == "both" or (repeat == "auto" and not expr.fixed)
    fires = []
    previous_wall = datetime.fromtimestamp(start, zone).replace(tzinfo=None)
    for second in range(start + step, end + 1, step):
        local = datetime.fromtimestamp(second, zone)
        wall = local.replace(tzinfo=None)
        fired = False
        if wall - previous_wall > timedelta(seconds=step) and fire_after:
            skipped = previous_wall + timedelta(seconds=step)
            while skipped < wall and not fired:
                fired = expr.matches(skipped)
                skipped += timedelta(seconds=step)
        if fired:
            event("fired after a DST gap")
        if not fired and expr.matches(wall):
            twice = local.replace(fold=1 - local.fold).utcoffset() != local.utcoffset()
            fired = not twice or local.fold == 0 or both
            if twice and local.fold == 1:
                event("second occurrence fired" if fired else "second occurrence not fired")
        if fired:
            fires.append(second)
        previous_wall = wall
    return fires


def engine(
    expr: Expression, zone: str, gap: str, repeat: str, after_us: int, end: int
) -> list[int]:
    schedule = parse_cron(expr.text, zone, gap, repeat)  # type: ignore[arg-type]
    found = []
    instant = schedule.next_after(after_us)
    while instant is not None and instant <= end * 1_000_000:
        assert instant % 1_000_000 == 0
        found.append(instant // 1_000_000)
        instant = schedule.next_after(instant)
    return found


policies = st.tuples(
    st.sampled_from(["auto", "fire_after", "skip"]), st.sampled_from(["auto", "first", "both"])
)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_five_fields_near_transitions(data: st.DataObject) -> None:
    zone_name = data.draw(st.sampled_from(ZONES))
    zone = ZoneInfo(zone_name)
    transition = data.draw(st.sampled_from(transitions(zone_name)))
    center = transition + data.draw(st.integers(-6, 6)) * 1800
    expr = data.draw(expression(walls(zone, transition), with_seconds=False))
    gap, repeat = data.draw(policies)
    start = center - center % 60 - 30 * 3600
    end = start + 60 * 3600
    after_us = start * 1_000_000 + data.draw(st.integers(0, 59_999_999))
    expected = reference_near(expr, zone, gap, repeat, start, end, 60)
    expected = [s for s in expected if s * 1_000_000 > after_us]
    assert engine(expr, zone_name, gap, repeat, after_us, end) == expected, expr.text


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_six_fields_near_transitions(data: st.DataObject) -> None:
    zone_name = data.draw(st.sampled_from(ZONES))
    zone = ZoneInfo(zone_name)
    transition = data.draw(st.sampled_from(transitions(zone_name)))
    center = transition + data.draw(st.integers(-4, 4)) * 900
    expr = data.draw(expression(walls(zone, transition), with_seconds=True))
    gap, repeat = data.draw(policies)
    start = center - 75 * 60
    end = center + 75 * 60
    expected = reference_near(expr, zone, gap, repeat, start, end, 1)
    assert engine(expr, zone_name, gap, repeat, start * 1_000_000, end) == expected, expr.text


def reference_utc(expr: Expression, after: int, count: int, horizon: date) -> list[int]:
    """Up to ``count`` UTC fires after ``after`` (seconds) and before ``horizon``, day by day."""
    seconds = sorted(expr.second.values) if expr.second else [0]
    times = [
        (h, m, s)
        for h in sorted(expr.hour.values)
        for m in sorted(expr.minute.values)
        for s in seconds
    ]
    fires: list[int] = []
    day = datetime.fromtimestamp(after, UTC).date()
    while day < horizon and len(fires) < count:
        if expr.day_matches(day):
            for h, m, s in times:
                instant = datetime(day.year, day.month, day.day, h, m, s, tzinfo=UTC)
                if instant.timestamp() > after and len(fires) < count:
                    fires.append(int(instant.timestamp()))
        day += timedelta(days=1)
    return fires


@settings(max_examples=200, deadline=None)
@given(
    expr=st.booleans().flatmap(lambda s: expression([datetime(2024, 1, 1)], with_seconds=s)),
    after=st.integers(
        int(datetime(1971, 1, 1, tzinfo=UTC).timestamp()),
        int(datetime(2199, 1, 1, tzinfo=UTC).timestamp()),
    ),
)
def test_utc_anywhere_matches_day_walk(expr: Expression, after: int) -> None:
    horizon = datetime.fromtimestamp(after, UTC).date() + timedelta(days=9 * 366)
    horizon_second = int(datetime(horizon.year, horizon.month, horizon.day, tzinfo=UTC).timestamp())
    expected = reference_utc(expr, after, 5, horizon)
    found = parse_cron(expr.text).next_n(after * 1_000_000 + 999_999, 5)
    assert [t // 1_000_000 for t in found if t < horizon_second * 1_000_000] == expected, expr.text
