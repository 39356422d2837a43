"""The next instants of a cron schedule (one expression or several, without excluded dates) with
their local time and a note on each DST adjustment."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from schedulerstream.contracts.policies import DstGap, DstRepeat
from schedulerstream.errors import ValidationError
from schedulerstream.timing.civil import SECONDS_PER_DAY
from schedulerstream.timing.combine import DayRange, ExcludedSchedule, UnionSchedule
from schedulerstream.timing.cron_next import CronSchedule, parse_cron
from schedulerstream.timing.schedule import MICROS, Schedule
from schedulerstream.timing.zones import get_zone

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_LISTED = 4


@dataclass(frozen=True, slots=True)
class PreviewEntry:
    """One fire: its UTC instant, its local time in the schedule's zone, its DST note, and the
    expressions (by position) that fire at it."""

    utc: datetime
    local: datetime
    note: str
    sources: tuple[int, ...] = (0,)


def _clock(local_second: int, with_seconds: bool) -> str:
    second_of_day = local_second % SECONDS_PER_DAY
    hour, rest = divmod(second_of_day, 3600)
    minute, second = divmod(rest, 60)
    return f"{hour:02d}:{minute:02d}:{second:02d}" if with_seconds else f"{hour:02d}:{minute:02d}"


def _gap_matches(
    schedule: CronSchedule,
    start: int,
    before: int,
    after: int,
    excluded: ExcludedSchedule | None = None,
) -> tuple[str, str]:
    """The matching local times skipped by a forward jump at ``start`` (but on excluded local
    dates: nothing fires there anyway) and their verb."""
    low, high = start + before, start + after
    matches = schedule.matcher.matches_between(low, high, high - low)
    if excluded is not None:
        matches = [t for t in matches if not excluded.excludes(t // SECONDS_PER_DAY)]
    if not matches:
        return "", ""
    with_seconds = any(t % 60 for t in matches)
    clocks = [_clock(t, with_seconds) for t in matches]
    if len(clocks) == 1:
        return clocks[0], "does"
    if len(clocks) <= _LISTED:
        return ", ".join(clocks), "do"
    return f"{clocks[0]}–{clocks[-1]} ({len(clocks)} times)", "do"


def describe(
    schedule: CronSchedule,
    previous_us: int,
    instant_us: int,
    excluded: ExcludedSchedule | None = None,
) -> str:
    """The DST note of the fire at ``instant_us`` that follows ``previous_us`` ("" if none),
    for a schedule without the local dates ``excluded`` excludes."""
    notes = _skipped(schedule, previous_us, instant_us, excluded) + _at(schedule, instant_us)
    return "; ".join(notes)


def _skipped(
    schedule: CronSchedule,
    previous_us: int,
    instant_us: int,
    excluded: ExcludedSchedule | None = None,
) -> list[str]:
    """Notes on matches skipped by forward jumps after ``previous_us`` up to ``instant_us``
    (not looked for inside excluded ranges, however long)."""
    notes: list[str] = []
    if schedule.dst_gap != "skip":
        return notes
    start, end = previous_us // MICROS + 1, instant_us // MICROS + 1
    spans = [(start, end)] if excluded is None else excluded.outside(start, end)
    for low, high in spans:
        for at, before, after in schedule.timeline.transitions(low, high):
            if after > before:
                times, verb = _gap_matches(schedule, at, before, after, excluded)
                if times:
                    notes.append(f"{times} {verb} not exist (DST gap); skipped")
    return notes


def _at(schedule: CronSchedule, instant_us: int) -> list[str]:
    """Notes on a fire of ``schedule`` at ``instant_us`` moved by or repeated around a jump."""
    notes: list[str] = []
    instant = instant_us // MICROS
    timeline = schedule.timeline
    start, _, offset, prev_offset = timeline.segment(instant)
    local = instant + offset
    with_seconds = schedule.fields.has_seconds and local % 60 != 0
    if instant == start and offset > prev_offset and schedule.dst_gap == "fire_after":
        times, verb = _gap_matches(schedule, start, prev_offset, offset)
        if times:
            notes.append(
                f"{times} {verb} not exist (DST gap); fired at {_clock(local, with_seconds)}"
            )
            return notes
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
    return notes


def preview(
    expression: str | Sequence[str],
    timezone: str,
    after: datetime,
    count: int = 5,
    dst_gap: DstGap = "auto",
    dst_repeat: DstRepeat = "auto",
    exclude: Iterable[date | DayRange] = (),
) -> list[PreviewEntry]:
    """The next ``count`` fires strictly after the aware datetime ``after``, with DST notes.

    Several expressions fire at the union of their instants (each once); no instant fires on an
    excluded local date (a date or an inclusive ``(first, last)`` range).
    """
    if after.tzinfo is None or after.utcoffset() is None:
        raise ValidationError("after", f"{after.isoformat()!r} has no UTC offset")
    texts = [expression] if isinstance(expression, str) else list(expression)
    parts = [parse_cron(text, timezone, dst_gap, dst_repeat) for text in texts]
    if not parts:
        raise ValidationError("expression", "give at least one cron expression")
    schedule: Schedule = parts[0] if len(parts) == 1 else UnionSchedule(parts)
    excluded = list(exclude)
    exclusions = ExcludedSchedule(schedule, excluded, timezone) if excluded else None
    schedule = exclusions or schedule
    zone = get_zone(timezone)
    delta = after - _EPOCH
    previous = (delta.days * SECONDS_PER_DAY + delta.seconds) * MICROS + delta.microseconds
    entries: list[PreviewEntry] = []
    for instant in schedule.next_n(previous, count):
        utc = _EPOCH + timedelta(microseconds=instant)
        sources = tuple(
            i for i, part in enumerate(parts) if part.next_after(instant - 1) == instant
        )
        notes: list[str] = []
        for i, part in enumerate(parts):
            found = _skipped(part, previous, instant, exclusions)
            found += _at(part, instant) if i in sources else []
            notes.extend(note for note in found if note not in notes)
        entries.append(PreviewEntry(utc, utc.astimezone(zone), "; ".join(notes), sources))
        previous = instant
    return entries
