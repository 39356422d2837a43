"""The DST-aware next-instant engine for cron schedules.

A zone's UTC timeline is a sequence of segments of constant offset. Inside a segment local time
is a bijection of UTC, so the first fire in it is the first matching local time of the segment's
local range. At segment boundaries (transitions) the DST policy decides:

- forward jump, ``dst_gap=fire_after``: if any local time in the skipped range matches, fire once
  at the transition instant (a real match at the same instant is the same fire);
- backward jump, ``dst_repeat=first``: local times already shown before the jump do not fire
  again, so the search in the segment starts after the repeated range.
"""

from __future__ import annotations

import functools

from schedulerstream.contracts.policies import DstGap, DstRepeat
from schedulerstream.timing.civil import MAX_SECOND, MIN_SECOND, SECONDS_PER_DAY
from schedulerstream.timing.cron_match import FieldMatcher
from schedulerstream.timing.cron_parse import CronFields, parse_fields
from schedulerstream.timing.policy import (
    ResolvedGap,
    ResolvedRepeat,
    resolve_gap,
    resolve_repeat,
)
from schedulerstream.timing.schedule import MICROS
from schedulerstream.timing.zones import DEFAULT_ZONE, Timeline, get_zone, timeline_for


@functools.lru_cache(maxsize=4096)
def _matcher(fields: CronFields) -> FieldMatcher:
    return FieldMatcher(fields)


# The Gregorian calendar repeats every 400 years, weekdays included (146,097 days), and so do
# zone rules past their last listed change: a cron that matches nothing in 401 years never
# will. Walking on to year 9999 cost ~8 s (and ~6 MB of zone segments) the first time in a
# zone, then ~50 ms every time its job was planned.
NEVER_AFTER_S = 146_097 * SECONDS_PER_DAY + 366 * SECONDS_PER_DAY


class CronSchedule:
    """A cron expression in an IANA zone with a resolved DST policy; immutable, thread-safe."""

    __slots__ = (
        "_fire_after",
        "_first_only",
        "_key",
        "_memo",
        "dst_gap",
        "dst_repeat",
        "expression",
        "fields",
        "matcher",
        "timeline",
        "timezone",
    )

    def __init__(
        self,
        expression: str,
        timezone: str = DEFAULT_ZONE,
        dst_gap: DstGap = "auto",
        dst_repeat: DstRepeat = "auto",
    ) -> None:
        fields = parse_fields(expression)
        get_zone(timezone)
        self.expression = fields.text
        self.timezone = timezone
        self.fields = fields
        self.dst_gap: ResolvedGap = resolve_gap(dst_gap, fields.is_fixed_time)
        self.dst_repeat: ResolvedRepeat = resolve_repeat(dst_repeat, fields.is_fixed_time)
        self.matcher = _matcher(fields)
        self.timeline: Timeline = timeline_for(timezone)
        self._fire_after = self.dst_gap == "fire_after"
        self._first_only = self.dst_repeat == "first"
        self._key = (fields, timezone, self.dst_gap, self.dst_repeat)
        self._memo: tuple[int, int | None] | None = None

    @property
    def is_fixed_time(self) -> bool:
        """Minute and hour (and second) fields do not start with ``*`` (DESIGN.md §4)."""
        return self.fields.is_fixed_time

    def next_after(self, after_us: int) -> int | None:
        """The first fire instant strictly after ``after_us`` (UTC epoch µs), or None if never."""
        memo = self._memo
        if memo is not None and memo[0] == after_us:
            return memo[1]
        second = self.next_second_from(after_us // MICROS + 1)
        result = None if second is None else second * MICROS
        self._memo = (after_us, result)
        return result

    def next_n(self, after_us: int, n: int) -> list[int]:
        found: list[int] = []
        current = after_us
        while len(found) < n:
            instant = self.next_after(current)
            if instant is None:
                break
            found.append(instant)
            current = instant
        return found

    def next_second_from(self, second: int) -> int | None:
        """The first fire instant at or after ``second`` (UTC epoch seconds), or None."""
        matcher = self.matcher
        if matcher.never:
            return None
        first_match = matcher.first_match
        segment_at = self.timeline.segment
        second = max(second, MIN_SECOND)
        last = min(MAX_SECOND, second + NEVER_AFTER_S)
        while second <= last:
            start, end, offset, prev_offset = segment_at(second)
            if (
                second == start
                and offset > prev_offset
                and self._fire_after
                and first_match(start + prev_offset, start + offset) is not None
            ):
                return start
            low = second + offset
            if offset < prev_offset and self._first_only:
                low = max(low, start + prev_offset)
            local = first_match(low, end + offset)
            if local is not None:
                return local - offset
            second = end
        return None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CronSchedule) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return (
            f"CronSchedule({self.expression!r}, {self.timezone!r}, "
            f"dst_gap={self.dst_gap!r}, dst_repeat={self.dst_repeat!r})"
        )


_shared_schedule = functools.lru_cache(maxsize=65_536)(CronSchedule)


def parse_cron(
    expression: str,
    timezone: str = DEFAULT_ZONE,
    dst_gap: DstGap = "auto",
    dst_repeat: DstRepeat = "auto",
) -> CronSchedule:
    """The shared CronSchedule of these settings; raises CronSyntaxError/UnknownTimeZoneError."""
    return _shared_schedule(expression, timezone, dst_gap, dst_repeat)
