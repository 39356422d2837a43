"""Cron expression text → the set of allowed values of each field (no zones, no instants)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from schedulerstream.errors import CronSyntaxError

SECOND = "second"
MINUTE = "minute"
HOUR = "hour"
DAY_OF_MONTH = "day_of_month"
MONTH = "month"
DAY_OF_WEEK = "day_of_week"

FIELDS_5 = (MINUTE, HOUR, DAY_OF_MONTH, MONTH, DAY_OF_WEEK)
FIELDS_6 = (SECOND, *FIELDS_5)

BOUNDS: dict[str, tuple[int, int]] = {
    SECOND: (0, 59),
    MINUTE: (0, 59),
    HOUR: (0, 23),
    DAY_OF_MONTH: (1, 31),
    MONTH: (1, 12),
    DAY_OF_WEEK: (0, 7),
}

MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_NAMES: dict[str, dict[str, int]] = {
    MONTH: {name: i + 1 for i, name in enumerate(MONTH_NAMES)},
    DAY_OF_WEEK: {name: i for i, name in enumerate(DAY_NAMES)},
}
_EXPECTED = {
    MONTH: "1-12 or JAN-DEC",
    DAY_OF_WEEK: "0-7 or SUN-SAT",
}

MACROS: dict[str, str] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


@dataclass(frozen=True, slots=True)
class CronFields:
    """The parsed form of a cron expression; days of week are 0-6 with 0 = Sunday.

    Besides plain values, day of month may hold ``L`` (the last day), ``LW`` (the last weekday)
    and ``nW`` (the weekday nearest the n-th, within the month); day of week may hold ``D#n``
    (the n-th such weekday of the month) and ``DL`` (the last such weekday of the month).
    """

    seconds: frozenset[int]
    minutes: frozenset[int]
    hours: frozenset[int]
    days_of_month: frozenset[int]
    last_day_of_month: bool
    months: frozenset[int]
    days_of_week: frozenset[int]
    dom_restricted: bool
    dow_restricted: bool
    is_fixed_time: bool
    has_seconds: bool = field(compare=False)
    text: str = field(compare=False)
    last_weekday_of_month: bool = False
    nearest_weekdays: frozenset[int] = frozenset()
    nth_weekdays: frozenset[tuple[int, int]] = frozenset()
    last_weekdays: frozenset[int] = frozenset()

    @property
    def day_rule_is_or(self) -> bool:
        """Vixie rule: when both day fields are restricted, a day matching either one matches."""
        return self.dom_restricted and self.dow_restricted


def _value(name: str, token: str) -> int:
    low, high = BOUNDS[name]
    if token.isdigit() and token.isascii():
        number = int(token)
        if not low <= number <= high:
            raise CronSyntaxError(name, f"{token!r} is out of range {low}-{high}")
        return number
    names = _NAMES.get(name)
    if names is not None and token.upper() in names:
        return names[token.upper()]
    expected = _EXPECTED.get(name, f"{low}-{high}")
    raise CronSyntaxError(name, f"{token!r} is not a valid value (expected {expected})")


def _step(name: str, token: str) -> int:
    if not (token.isdigit() and token.isascii()):
        raise CronSyntaxError(name, f"{token!r} is not a valid step")
    step = int(token)
    if step < 1:
        raise CronSyntaxError(name, f"step {token!r} must be at least 1")
    return step


def _element(name: str, element: str) -> range:
    low, high = BOUNDS[name]
    base, slash, step_token = element.partition("/")
    step = _step(name, step_token) if slash else 1
    if base == "*":
        return range(low, high + 1, step)
    if "-" in base:
        first_token, _, last_token = base.partition("-")
        first, last = _value(name, first_token), _value(name, last_token)
        if first > last:
            raise CronSyntaxError(name, f"range {element!r} starts after it ends")
        return range(first, last + 1, step)
    first = _value(name, base)
    return range(first, high + 1 if slash else first + 1, step)


@dataclass(slots=True)
class _DayRules:
    """The day-field elements that are not plain values (collected while parsing)."""

    last: bool = False
    last_weekday: bool = False
    nearest: set[int] = field(default_factory=set)
    nth: set[tuple[int, int]] = field(default_factory=set)
    last_of: set[int] = field(default_factory=set)


def _day_of_month_rule(element: str, rules: _DayRules) -> bool:
    """Record ``L``, ``LW`` or ``nW``; False if ``element`` is a plain one."""
    upper = element.upper()
    if upper == "L":
        rules.last = True
        return True
    if upper == "LW":
        rules.last_weekday = True
        return True
    if upper.startswith("L"):
        raise CronSyntaxError(
            DAY_OF_MONTH,
            f"{element!r} is not supported: 'L' stands alone (the last day) "
            "or as 'LW' (the last weekday)",
        )
    if not upper.endswith("W"):
        return False
    base = element[:-1]
    if not base:
        raise CronSyntaxError(
            DAY_OF_MONTH,
            "'W' needs a day before it: 15W is the weekday nearest the 15th, LW the last weekday",
        )
    if not (base.isdigit() and base.isascii()):
        raise CronSyntaxError(
            DAY_OF_MONTH,
            f"{element!r}: 'W' takes a single day of the month (e.g. 15W), not a range or step",
        )
    rules.nearest.add(_value(DAY_OF_MONTH, base))
    return True


def _single_weekday(element: str, base: str, example: str) -> int:
    if not base or any(mark in base for mark in "*?-/"):
        raise CronSyntaxError(
            DAY_OF_WEEK,
            f"{element!r}: {example} takes a single weekday, not a range, step or wildcard",
        )
    value = _value(DAY_OF_WEEK, base)
    return 0 if value == 7 else value


def _day_of_week_rule(element: str, rules: _DayRules) -> bool:
    """Record ``D#n`` or ``DL``; False if ``element`` is a plain one."""
    if "#" in element:
        base, _, occurrence = element.partition("#")
        weekday = _single_weekday(element, base, "'#' (e.g. TUE#2)")
        if not (occurrence.isdigit() and occurrence.isascii() and 1 <= int(occurrence) <= 5):
            raise CronSyntaxError(
                DAY_OF_WEEK,
                f"{element!r}: the occurrence after '#' must be 1-5 "
                "(a month has at most five of a weekday)",
            )
        rules.nth.add((weekday, int(occurrence)))
        return True
    upper = element.upper()
    if upper == "L":
        raise CronSyntaxError(
            DAY_OF_WEEK,
            "'L' alone is ambiguous in day_of_week: FRIL or 5L is the last Friday of the month; "
            "L in day_of_month is the last day",
        )
    if not upper.endswith("L"):
        return False
    rules.last_of.add(_single_weekday(element, element[:-1], "'L' (e.g. FRIL, 5L)"))
    return True


def _field(name: str, text: str, rules: _DayRules) -> frozenset[int]:
    """The allowed plain values of one field; day-field rules go into ``rules``."""
    if name in (DAY_OF_MONTH, DAY_OF_WEEK) and text == "?":
        text = "*"
    values: set[int] = set()
    for element in text.split(","):
        if not element:
            raise CronSyntaxError(name, f"empty list element in {text!r}")
        if name == DAY_OF_MONTH and _day_of_month_rule(element, rules):
            continue
        if name == DAY_OF_WEEK and _day_of_week_rule(element, rules):
            continue
        if element.upper() == "L":
            raise CronSyntaxError(name, f"'L' is only allowed in {DAY_OF_MONTH}")
        values.update(_element(name, element))
    if name == DAY_OF_WEEK and 7 in values:
        values.discard(7)
        values.add(0)
    return frozenset(values)


def _unrestricted(text: str) -> bool:
    return text.startswith(("*", "?"))


def parse_fields(expression: str) -> CronFields:
    """Parse a 5-field (m h dom mon dow) or 6-field (s m h dom mon dow) expression or a macro."""
    return _parse_cached(expression)


@functools.lru_cache(maxsize=4096)
def _parse_cached(expression: str) -> CronFields:
    if not isinstance(expression, str):
        raise CronSyntaxError("expression", f"{expression!r} is not a string")
    text = expression.strip()
    if not text:
        raise CronSyntaxError("expression", "the expression is empty")
    if text.startswith("@"):
        macro = MACROS.get(text.lower())
        if macro is None:
            known = ", ".join(MACROS)
            raise CronSyntaxError("expression", f"unknown macro {text!r} (known: {known})")
        tokens = macro.split()
    else:
        tokens = text.split()
    if len(tokens) not in (5, 6):
        raise CronSyntaxError(
            "expression", f"expected 5 or 6 fields, got {len(tokens)} in {text!r}"
        )
    has_seconds = len(tokens) == 6
    by_name = dict(zip(FIELDS_6 if has_seconds else FIELDS_5, tokens, strict=True))
    rules = _DayRules()
    parsed = {name: _field(name, token, rules) for name, token in by_name.items()}
    timed = [by_name[MINUTE], by_name[HOUR]] + ([by_name[SECOND]] if has_seconds else [])
    return CronFields(
        seconds=parsed[SECOND] if has_seconds else frozenset({0}),
        minutes=parsed[MINUTE],
        hours=parsed[HOUR],
        days_of_month=parsed[DAY_OF_MONTH],
        last_day_of_month=rules.last,
        months=parsed[MONTH],
        days_of_week=parsed[DAY_OF_WEEK],
        dom_restricted=not _unrestricted(by_name[DAY_OF_MONTH]),
        dow_restricted=not _unrestricted(by_name[DAY_OF_WEEK]),
        is_fixed_time=not any(token.startswith("*") for token in timed),
        has_seconds=has_seconds,
        text=text,
        last_weekday_of_month=rules.last_weekday,
        nearest_weekdays=frozenset(rules.nearest),
        nth_weekdays=frozenset(rules.nth),
        last_weekdays=frozenset(rules.last_of),
    )
