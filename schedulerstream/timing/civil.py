"""Proleptic Gregorian calendar arithmetic on integers (days and seconds since 1970-01-01)."""

from __future__ import annotations

SECONDS_PER_DAY = 86_400
MIN_YEAR = 1
MAX_YEAR = 9999


def is_leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def days_in_month(year: int, month: int) -> int:
    if month == 2:
        return 29 if is_leap(year) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a calendar date (H. Hinnant's algorithm)."""
    y = year - 1 if month <= 2 else year
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146_097 + doe - 719_468


def civil_from_days(days: int) -> tuple[int, int, int]:
    """The (year, month, day) of a day number since 1970-01-01."""
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (1 if month <= 2 else 0), month, day


def weekday(days: int) -> int:
    """Day of week of a day number, 0 = Sunday (1970-01-01 was a Thursday)."""
    return (days + 4) % 7


MIN_SECOND = days_from_civil(MIN_YEAR, 1, 2) * SECONDS_PER_DAY
MAX_SECOND = days_from_civil(MAX_YEAR, 12, 30) * SECONDS_PER_DAY
