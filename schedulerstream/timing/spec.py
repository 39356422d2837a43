"""The Schedule of a job's Avro ScheduleSpec record: cron (one expression or several), every or
at, without excluded local dates, bounded by start/end."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from schedulerstream.timing.at import AtSchedule
from schedulerstream.timing.combine import DayRange, ExcludedSchedule, UnionSchedule
from schedulerstream.timing.cron_next import CronSchedule, parse_cron
from schedulerstream.timing.every import EverySchedule
from schedulerstream.timing.schedule import CountableSchedule, Schedule


@dataclass(frozen=True, slots=True)
class BoundedSchedule:
    """A schedule limited to instants in ``[start_us, end_us)``."""

    inner: Schedule
    start_us: int | None
    end_us: int | None

    def next_after(self, after_us: int) -> int | None:
        if self.start_us is not None and after_us < self.start_us:
            after_us = self.start_us - 1
        instant = self.inner.next_after(after_us)
        if instant is None or (self.end_us is not None and instant >= self.end_us):
            return None
        return instant

    def next_n(self, after_us: int, n: int) -> list[int]:
        found: list[int] = []
        while len(found) < n:
            instant = self.next_after(after_us)
            if instant is None:
                break
            found.append(instant)
            after_us = instant
        return found

    def count_between(self, first_us: int, limit_us: int) -> int | None:
        """Exact when the inner schedule counts exactly (not one with excluded dates)."""
        if not isinstance(self.inner, CountableSchedule):
            return None
        if self.start_us is not None:
            first_us = max(first_us, self.start_us)
        if self.end_us is not None:
            limit_us = min(limit_us, self.end_us)
        return self.inner.count_between(first_us, limit_us) if first_us < limit_us else 0

    def last_before(self, limit_us: int) -> int | None:
        if not isinstance(self.inner, CountableSchedule):
            return None
        if self.end_us is not None:
            limit_us = min(limit_us, self.end_us)
        instant = self.inner.last_before(limit_us)
        if instant is None or (self.start_us is not None and instant < self.start_us):
            return None
        return instant


def cron_schedules(spec: dict[str, Any]) -> tuple[CronSchedule, ...]:
    """The CronSchedule of each expression of a record's ``cron`` (a string or a list)."""
    cron = spec["cron"]
    expressions: Sequence[str] = [cron] if isinstance(cron, str) else cron
    return tuple(
        parse_cron(text, spec["timezone"], spec["dst_gap"], spec["dst_repeat"])
        for text in expressions
    )


def excluded_days(spec: dict[str, Any]) -> list[date | DayRange]:
    """The ``exclude`` of a record (``from_date``/``to_date`` ISO dates) as dates and ranges."""
    found: list[date | DayRange] = []
    for item in spec.get("exclude") or ():
        found.append((date.fromisoformat(item["from_date"]), date.fromisoformat(item["to_date"])))
    return found


def exclusions_of(schedule: Schedule) -> ExcludedSchedule | None:
    """The ExcludedSchedule of a ``schedule_of`` answer (None: no excluded dates)."""
    if isinstance(schedule, BoundedSchedule):
        schedule = schedule.inner
    return schedule if isinstance(schedule, ExcludedSchedule) else None


def schedule_of(spec: dict[str, Any]) -> Schedule:
    """The Schedule of an Avro ScheduleSpec record (already validated at ingest)."""
    inner: Schedule
    if spec["cron"] is not None:
        parts = cron_schedules(spec)
        inner = parts[0] if len(parts) == 1 else UnionSchedule(parts)
    elif spec["every_us"] is not None:
        inner = EverySchedule.from_us(spec["every_us"], spec["phase_us"])
    else:
        inner = AtSchedule(spec["at_us"])
    excluded = excluded_days(spec)
    if excluded:
        inner = ExcludedSchedule(inner, excluded, spec["timezone"])
    if spec["start_at_us"] is None and spec["end_at_us"] is None:
        return inner
    return BoundedSchedule(inner, spec["start_at_us"], spec["end_at_us"])
