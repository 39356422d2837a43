"""Schedules made of others: the union of several, and one without excluded local dates."""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from datetime import date

from schedulerstream.errors import ValidationError
from schedulerstream.timing.civil import SECONDS_PER_DAY, days_from_civil
from schedulerstream.timing.schedule import MICROS, Schedule
from schedulerstream.timing.zones import timeline_for

# A UTC offset is under a day either way (datetime's rule): a backward transition takes local
# time back less than two days.
_DROP_S = 2 * SECONDS_PER_DAY
# A range through the calendar's last date excludes every instant after its start: none after
# it could be named (a run id's instant ends with 9999-12-31 UTC).
_LAST_DAY = days_from_civil(9999, 12, 31)


def _next_n(schedule: Schedule, after_us: int, n: int) -> list[int]:
    found: list[int] = []
    while len(found) < n:
        instant = schedule.next_after(after_us)
        if instant is None:
            break
        found.append(instant)
        after_us = instant
    return found


class UnionSchedule:
    """Every instant of any part, each once (parts firing together make one instant)."""

    __slots__ = ("parts",)

    def __init__(self, parts: Iterable[Schedule]) -> None:
        self.parts = tuple(dict.fromkeys(parts))
        if not self.parts:
            raise ValidationError("cron", "a union needs at least one schedule")

    def next_after(self, after_us: int) -> int | None:
        found = None
        for part in self.parts:
            instant = part.next_after(after_us)
            if instant is not None and (found is None or instant < found):
                found = instant
        return found

    def next_n(self, after_us: int, n: int) -> list[int]:
        return _next_n(self, after_us, n)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnionSchedule) and self.parts == other.parts

    def __hash__(self) -> int:
        return hash((UnionSchedule, self.parts))

    def __repr__(self) -> str:
        return f"UnionSchedule({list(self.parts)!r})"


DayRange = tuple[date, date]


def parse_excluded(text: str) -> date | DayRange:
    """``YYYY-MM-DD`` or ``YYYY-MM-DD..YYYY-MM-DD`` (inclusive), as the CLI and the API take it."""
    first_text, dots, last_text = text.strip().partition("..")
    try:
        first = date.fromisoformat(first_text)
        last = date.fromisoformat(last_text) if dots else first
    except ValueError:
        raise ValidationError(
            "exclude", f"{text!r} is not a date (YYYY-MM-DD) or a range (YYYY-MM-DD..YYYY-MM-DD)"
        ) from None
    if last < first:
        raise ValidationError("exclude", f"range {text!r} ends before it starts")
    return (first, last) if dots else first


def day_ranges(excluded: Iterable[date | DayRange]) -> tuple[tuple[int, int], ...]:
    """Inclusive local dates or ranges → sorted, merged (first day, last day) numbers."""
    spans = []
    for item in excluded:
        first, last = item if isinstance(item, tuple) else (item, item)
        if last < first:
            raise ValidationError("exclude", f"range {first} to {last} ends before it starts")
        spans.append(
            (
                days_from_civil(first.year, first.month, first.day),
                days_from_civil(last.year, last.month, last.day),
            )
        )
    merged: list[tuple[int, int]] = []
    for first_day, last_day in sorted(spans):
        if merged and first_day <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last_day))
        else:
            merged.append((first_day, last_day))
    return tuple(merged)


def _resume(second: int, end: int, offset: int, midnight: int) -> int:
    """Where to search on from after an excluded instant at ``second``, whose ``offset`` holds
    until ``end`` and whose range ends at local ``midnight``: every instant before is excluded.

    Past ``end`` the offset is unknown, but local time stays under ``midnight`` before
    ``midnight - 1 day``, and it cannot fall back before the range unless a transition comes
    within two days: so a range reaching years ahead costs a few steps, not one per segment.
    """
    if midnight - offset <= end or end <= second:  # (a fixed offset's segment ends in 9999)
        return midnight - offset
    if end - second <= _DROP_S:
        return end
    return max(end, midnight - SECONDS_PER_DAY)


class ExcludedSchedule:
    """The instants of ``inner`` whose local date in ``timezone`` is not excluded."""

    __slots__ = ("_firsts", "inner", "ranges", "timeline", "timezone")

    def __init__(self, inner: Schedule, excluded: Iterable[date | DayRange], timezone: str) -> None:
        self.inner = inner
        self.ranges = day_ranges(excluded)
        self.timezone = timezone
        self.timeline = timeline_for(timezone)
        self._firsts = tuple(first for first, _ in self.ranges)

    def next_after(self, after_us: int) -> int | None:
        """A few steps for each excluded range passed (the inner schedule bounds its own
        search: a cron's is 401 years)."""
        ranges, firsts, segment_at = self.ranges, self._firsts, self.timeline.segment
        while True:
            instant = self.inner.next_after(after_us)
            if instant is None:
                return None
            second = instant // MICROS
            _, end, offset, _ = segment_at(second)
            day = (second + offset) // SECONDS_PER_DAY
            index = bisect.bisect_right(firsts, day) - 1
            if index < 0 or day > ranges[index][1]:
                return instant
            if ranges[index][1] >= _LAST_DAY:
                return None
            midnight = (ranges[index][1] + 1) * SECONDS_PER_DAY
            after_us = max(instant, _resume(second, end, offset, midnight) * MICROS - 1)

    def next_n(self, after_us: int, n: int) -> list[int]:
        return _next_n(self, after_us, n)

    def excludes(self, day: int) -> bool:
        """Whether the local date ``day`` (days since 1970-01-01) is excluded."""
        index = bisect.bisect_right(self._firsts, day) - 1
        return index >= 0 and day <= self.ranges[index][1]

    def outside(self, start: int, end: int) -> list[tuple[int, int]]:
        """The spans of UTC seconds ``[start, end)`` that may hold a kept local date: all but
        the insides of ranges, more than a day (the largest offset) from their ends."""
        found: list[tuple[int, int]] = []
        index = max(bisect.bisect_right(self._firsts, start // SECONDS_PER_DAY) - 1, 0)
        for first, last in self.ranges[index:]:
            inside_start, inside_end = (first + 1) * SECONDS_PER_DAY, last * SECONDS_PER_DAY
            if inside_start >= end:
                break
            if inside_start < inside_end and start < inside_end:
                if start < inside_start:
                    found.append((start, inside_start))
                start = inside_end
        if start < end:
            found.append((start, end))
        return found

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ExcludedSchedule)
            and self.inner == other.inner
            and self.ranges == other.ranges
            and self.timezone == other.timezone
        )

    def __hash__(self) -> int:
        return hash((ExcludedSchedule, self.inner, self.ranges, self.timezone))

    def __repr__(self) -> str:
        return f"ExcludedSchedule({self.inner!r}, {self.ranges!r}, {self.timezone!r})"
