"""A job's schedule in words, its status, and its next instants with the DST notes of
``cron next``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from schedulerstream.api.ui.models import Instant, JobStatus
from schedulerstream.model import JobDefinition
from schedulerstream.timing import get_zone
from schedulerstream.timing.preview import describe
from schedulerstream.timing.spec import cron_schedules, exclusions_of, schedule_of

_MACROS = {
    "@yearly": "yearly", "@annually": "yearly", "@monthly": "monthly", "@weekly": "weekly",
    "@daily": "daily at midnight", "@midnight": "daily at midnight", "@hourly": "hourly",
}  # fmt: skip
_DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")


def _seconds(value: float) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if value >= size and value % size == 0:
            n = int(value // size)
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return f"{value:g} seconds" if value != 1 else "1 second"


def _cron_words(expr: str) -> str:
    text = expr.strip()
    if text.lower() in _MACROS:
        return _MACROS[text.lower()]
    fields = text.split()
    if len(fields) != 5:
        return "cron"
    minute, hour, dom, month, dow = fields
    if (dom, month) != ("*", "*"):
        return "cron"
    if [minute, hour, dow] == ["*", "*", "*"]:
        return "every minute"
    if minute.startswith("*/") and minute[2:].isdigit() and (hour, dow) == ("*", "*"):
        return f"every {minute[2:]} minutes"
    if minute.isdigit() and hour == "*" and dow == "*":
        return f"hourly at :{int(minute):02d}"
    if minute.isdigit() and hour.isdigit():
        at = f"{int(hour):02d}:{int(minute):02d}"
        if dow == "*":
            return f"daily at {at}"
        if dow == "1-5":
            return f"weekdays at {at}"
        if dow.isdigit() and int(dow) <= 7:
            return f"{_DAYS[int(dow) % 7]}s at {at}"
    return "cron"


def in_words(schedule: dict[str, Any]) -> tuple[str, str]:
    """(the schedule in words, its expression) of a definition's ``schedule`` JSON."""
    cron = schedule.get("cron")
    if isinstance(cron, list) and cron:
        words = " or ".join(_cron_words(str(c)) for c in cron)
        return words, " | ".join(str(c) for c in cron)
    if cron:
        return _cron_words(str(cron)), str(cron)
    if schedule.get("every") is not None:
        words = f"every {_seconds(float(schedule['every']))}"
        return words, f"every {float(schedule['every']):g}s"
    return "once", f"at {schedule.get('at')}"


def status_of(paused: bool, next_fires: list[int] | list[str]) -> JobStatus:
    if paused:
        return "paused"
    return "active" if next_fires else "ended"


def upcoming(job: JobDefinition, after_us: int, count: int) -> list[Instant]:
    """The job's next ``count`` instants after ``after_us`` (start/end bounds applied)."""
    spec = job.with_version(job.version or 1).to_avro()["schedule"]
    zone = get_zone(spec["timezone"])
    crons = cron_schedules(spec) if spec["cron"] is not None else ()
    schedule = schedule_of(spec)
    exclusions = exclusions_of(schedule)
    result, previous = [], after_us
    for instant in schedule.next_n(after_us, count):
        moment = datetime.fromtimestamp(instant / 1_000_000, tz=UTC)
        firing = [c for c in crons if c.next_n(instant - 1, 1) == [instant]]
        notes = [n for n in (describe(c, previous, instant, exclusions) for c in firing) if n]
        result.append(
            Instant(
                utc=moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
                local=moment.astimezone(zone).isoformat(timespec="seconds"),
                note="; ".join(dict.fromkeys(notes)),
            )
        )
        previous = instant
    return result
