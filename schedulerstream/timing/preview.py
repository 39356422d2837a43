"""The next instants of a cron schedule with their local time and a note on each DST adjustment."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from schedulerstream.errors import ValidationError
from schedulerstream.timing.civil import SECONDS_PER_DAY
from schedulerstream.timing.cron_next import CronSchedule, parse_cron
from schedulerstream.timing.policy import DstGap, DstRepeat
from schedulerstream.timing.schedule import MICROS
from schedulerstream.timing.zones import get_zone

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_LISTED = 4


@dataclass(frozen=True, slots=True)
class PreviewEntry:
    """One fire: its UTC instant, its local time in the schedule's zone, and its DST note."""

    utc: datetime
    local: datetime
    note: str


def _clock(local_second: int, with_seconds: bool) -> str:
    second_of_day = local_second % SECONDS_PER_DAY
    hour, rest = divmod(second_of_day, 3600)
    minute, second = divmod(rest, 60)
    return f"{hour:02d}:{minute:02d}:{second:02d}" if with_seconds else f"{hour:02d}:{minute:02d}"


def _gap_matches(schedule: CronSchedule, start: int, before: int, after: int) -> tuple[str, str]:
    """The matching local times skipped by a forward jump at ``start`` and their verb."""
    low, high = start + before, start + after
    matches = schedule.matcher.matches_between(low, high, high - low)
    if not matches:
        return "", ""
    with_seconds = any(t % 60 for t in matches)
    clocks = [_clock(t, with_seconds) for t in matches]
    if len(clocks) == 1:
        return clocks[0], "does"
    if len(clocks) <= _LISTED:
        return ", ".join(clocks), "do"
    return f"{clocks[0]}–{clocks[-1]} ({len(clocks)} times)", "do"


def describe(schedule: CronSchedule, previous_us: int, instant_us: int) -> str:
    """The DST note of the fire at ``instant_us`` that follows ``previous_us`` ("" if none)."""
    notes: list[str] = []
    instant = instant_us // MICROS
    timeline = schedule.timeline
    if schedule.dst_gap == "skip":
        for start, before, after in timeline.transitions(previous_us // MICROS + 1, instant + 1):
            if after > before:
                times, verb = _gap_matches(schedule, start, before, after)
                if times:
                    notes.append(f"{times} {verb} not exist (DST gap); skipped")
    start, _, offset, prev_offset = timeline.segment(instant)
    local = instant + offset
    with_seconds = schedule.fields.has_seconds and local % 60 != 0
    if instant == start and offset > prev_offset and schedule.dst_gap == "fire_after":
        times, verb = _gap_matches(schedule, start, prev_offset, offset)
        if times:
            notes.append(
                f"{times} {verb} not exist (DST gap); fired at {_clock(local, with_seconds)}"
            )
            return "; ".join(notes)
    aware = (_EPOCH + timedelta(seconds=instant)).astimezone(get_zone(schedule.timezone))
    other = aware.replace(fold=1 - aware.fold)
    if other.utcoffset() != aware.utcoffset():
        clock = _clock(local, with_seconds)
        if aware.fold == 1:
            notes.append(f"second occurrence of {clock} (DST fall-back)")
        elif schedule.dst_repeat == "first":
            notes.append(f"{clock} occurs twice (DST fall-back); fired at the first occurrence")
        else:
            notes.append(f"{clock} occurs twice (DST fall-back); first occurrence")
    return "; ".join(notes)


def preview(
    expression: str,
    timezone: str,
    after: datetime,
    count: int = 5,
    dst_gap: DstGap = "auto",
    dst_repeat: DstRepeat = "auto",
) -> list[PreviewEntry]:
    """The next ``count`` fires strictly after the aware datetime ``after``, with DST notes."""
    if after.tzinfo is None or after.utcoffset() is None:
        raise ValidationError("after", f"{after.isoformat()!r} has no UTC offset")
    schedule = parse_cron(expression, timezone, dst_gap, dst_repeat)
    zone = get_zone(timezone)
    delta = after - _EPOCH
    previous = (delta.days * SECONDS_PER_DAY + delta.seconds) * MICROS + delta.microseconds
    entries: list[PreviewEntry] = []
    for instant in schedule.next_n(previous, count):
        utc = _EPOCH + timedelta(microseconds=instant)
        entries.append(
            PreviewEntry(utc, utc.astimezone(zone), describe(schedule, previous, instant))
        )
        previous = instant
    return entries
