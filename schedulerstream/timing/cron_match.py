"""Find matching local wall-clock times of parsed cron fields, skipping field by field.

Local wall-clock times are integers: seconds since 1970-01-01T00:00 of the naive local time, as
if it were UTC. Nothing here knows about time zones.
"""

from __future__ import annotations

from collections.abc import Iterable

from schedulerstream.timing.civil import (
    MAX_YEAR,
    SECONDS_PER_DAY,
    civil_from_days,
    days_from_civil,
    days_in_month,
    weekday,
)
from schedulerstream.timing.cron_parse import CronFields

_DAY_TABLE_LIMIT = 4096


def _next_table(allowed: Iterable[int], size: int) -> tuple[int, ...]:
    """``table[v]`` = the smallest allowed value >= v, or -1; ``table[size] == -1``."""
    allowed_set = set(allowed)
    table = [-1] * (size + 1)
    following = -1
    for value in range(size - 1, -1, -1):
        if value in allowed_set:
            following = value
        table[value] = following
    return tuple(table)


def nearest_weekday(day: int, length: int, first_weekday: int) -> int:
    """The weekday (Mon-Fri) nearest the ``day``-th of a month, never leaving the month."""
    day_of_week = (first_weekday + day - 1) % 7
    if day_of_week == 6:  # Saturday: the Friday before, or Monday the 3rd if it is the 1st
        return day - 1 if day > 1 else day + 2
    if day_of_week == 0:  # Sunday: the Monday after, or the Friday before if it is the last
        return day + 1 if day < length else day - 2
    return day


def last_weekday(length: int, first_weekday: int) -> int:
    """The last weekday (Mon-Fri) of a month."""
    day_of_week = (first_weekday + length - 1) % 7
    return length - 1 if day_of_week == 6 else length - 2 if day_of_week == 0 else length


def matching_days(fields: CronFields, length: int, first_weekday: int) -> list[int]:
    """The days of a month of ``length`` days starting on ``first_weekday`` (0 = Sunday) that
    match both day fields (either one when both are restricted: Vixie cron's rule)."""
    by_month_day = {day for day in fields.days_of_month if day <= length}
    if fields.last_day_of_month:
        by_month_day.add(length)
    if fields.last_weekday_of_month:
        by_month_day.add(last_weekday(length, first_weekday))
    by_month_day.update(
        nearest_weekday(day, length, first_weekday)
        for day in fields.nearest_weekdays
        if day <= length
    )
    either = fields.day_rule_is_or
    days_of_week, nth, last_of = fields.days_of_week, fields.nth_weekdays, fields.last_weekdays
    matching = []
    for day in range(1, length + 1):
        day_of_week = (first_weekday + day - 1) % 7
        by_week_day = (
            day_of_week in days_of_week
            or (bool(nth) and (day_of_week, (day + 6) // 7) in nth)
            or (day + 7 > length and day_of_week in last_of)
        )
        by_day = day in by_month_day
        if (by_day or by_week_day) if either else (by_day and by_week_day):
            matching.append(day)
    return matching


class FieldMatcher:
    """The matching local times of one cron expression (shared by every zone using it)."""

    __slots__ = (
        "_day_tables",
        "_fields",
        "_first_month",
        "_hours",
        "_minutes",
        "_months",
        "_seconds",
        "_shape_tables",
        "never",
    )

    def __init__(self, fields: CronFields) -> None:
        self._fields = fields
        self._seconds = _next_table(fields.seconds, 60)
        self._minutes = _next_table(fields.minutes, 60)
        self._hours = _next_table(fields.hours, 24)
        self._months = _next_table(fields.months, 13)
        self._first_month = min(fields.months)
        self._day_tables: dict[int, tuple[int, ...]] = {}
        self._shape_tables: dict[int, tuple[int, ...]] = {}
        self.never = not self._satisfiable()

    def _satisfiable(self) -> bool:
        """Whether any month allowed fires: each length occurs with every first weekday."""
        fields = self._fields
        lengths = {days_in_month(year, month) for month in fields.months for year in (2000, 2001)}
        return any(matching_days(fields, length, first) for length in lengths for first in range(7))

    def _day_table(self, year: int, month: int) -> tuple[int, ...]:
        """``table[d]`` = the first matching day >= d of the month, or -1 (indices 0..32)."""
        key = year * 16 + month
        table = self._day_tables.get(key)
        if table is not None:
            return table
        # A month's matching days depend only on its length and first weekday (28 shapes).
        length = days_in_month(year, month)
        first_weekday = weekday(days_from_civil(year, month, 1))
        shape = length * 8 + first_weekday
        table = self._shape_tables.get(shape)
        if table is None:
            table = _next_table(matching_days(self._fields, length, first_weekday), 33)
            self._shape_tables[shape] = table
        if len(self._day_tables) >= _DAY_TABLE_LIMIT:
            self._day_tables.clear()
        self._day_tables[key] = table
        return table

    def first_match(self, low: int, high: int) -> int | None:
        """The first matching local time ``t`` with ``low <= t < high``, or None."""
        if self.never or low >= high:
            return None
        days, second_of_day = divmod(low, SECONDS_PER_DAY)
        year, month, day = civil_from_days(days)
        hour, rest = divmod(second_of_day, 3600)
        minute, second = divmod(rest, 60)
        months, hours, minutes, seconds = self._months, self._hours, self._minutes, self._seconds
        new_month = False
        while True:
            allowed_month = months[month]
            if allowed_month != month:
                if allowed_month < 0:
                    year += 1
                    month = self._first_month
                else:
                    month = allowed_month
                day, hour, minute, second = 1, 0, 0, 0
                new_month = True
            if new_month:
                if year > MAX_YEAR or days_from_civil(year, month, 1) * SECONDS_PER_DAY >= high:
                    return None
                new_month = False
            allowed_day = self._day_table(year, month)[day]
            if allowed_day != day:
                if allowed_day < 0:
                    month += 1
                    day, hour, minute, second = 1, 0, 0, 0
                    new_month = True
                    continue
                day, hour, minute, second = allowed_day, 0, 0, 0
            allowed_hour = hours[hour]
            if allowed_hour != hour:
                if allowed_hour < 0:
                    day += 1
                    hour, minute, second = 0, 0, 0
                    continue
                hour, minute, second = allowed_hour, 0, 0
            allowed_minute = minutes[minute]
            if allowed_minute != minute:
                if allowed_minute < 0:
                    hour += 1
                    minute, second = 0, 0
                    continue
                minute, second = allowed_minute, 0
            allowed_second = seconds[second]
            if allowed_second < 0:
                minute += 1
                second = 0
                continue
            found = (
                days_from_civil(year, month, day) * SECONDS_PER_DAY
                + hour * 3600
                + minute * 60
                + allowed_second
            )
            return found if found < high else None

    def matches_between(self, low: int, high: int, limit: int) -> list[int]:
        """Up to ``limit`` matching local times in ``[low, high)``, in order."""
        found: list[int] = []
        while len(found) < limit:
            match = self.first_match(low, high)
            if match is None:
                break
            found.append(match)
            low = match + 1
        return found
