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
    """The parsed form of a cron expression; days of week are 0-6 with 0 = Sunday."""

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


def _field(name: str, text: str) -> tuple[frozenset[int], bool]:
    """The allowed values of one field and whether it contains ``L``."""
    if name in (DAY_OF_MONTH, DAY_OF_WEEK) and text == "?":
        text = "*"
    values: set[int] = set()
    last = False
    for element in text.split(","):
        if not element:
            raise CronSyntaxError(name, f"empty list element in {text!r}")
        if element.upper() == "L":
            if name != DAY_OF_MONTH:
                raise CronSyntaxError(name, f"'L' is only allowed in {DAY_OF_MONTH}")
            last = True
            continue
        values.update(_element(name, element))
    if name == DAY_OF_WEEK and 7 in values:
        values.discard(7)
        values.add(0)
    return frozenset(values), last


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
    parsed = {name: _field(name, token) for name, token in by_name.items()}
    timed = [by_name[MINUTE], by_name[HOUR]] + ([by_name[SECOND]] if has_seconds else [])
    return CronFields(
        seconds=parsed[SECOND][0] if has_seconds else frozenset({0}),
        minutes=parsed[MINUTE][0],
        hours=parsed[HOUR][0],
        days_of_month=parsed[DAY_OF_MONTH][0],
        last_day_of_month=parsed[DAY_OF_MONTH][1],
        months=parsed[MONTH][0],
        days_of_week=parsed[DAY_OF_WEEK][0],
        dom_restricted=not _unrestricted(by_name[DAY_OF_MONTH]),
        dow_restricted=not _unrestricted(by_name[DAY_OF_WEEK]),
        is_fixed_time=not any(token.startswith("*") for token in timed),
        has_seconds=has_seconds,
        text=text,
    )
