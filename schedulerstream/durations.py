"""Durations as users write them: seconds (a number) or ISO 8601 (``PT30S``, ``P1DT2H``)."""

from __future__ import annotations

import re

_ISO = re.compile(
    r"^P(?:(?P<weeks>\d+(?:\.\d+)?)W)?(?:(?P<days>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<hours>\d+(?:\.\d+)?)H)?(?:(?P<minutes>\d+(?:\.\d+)?)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$"
)
_INFINITY = float("inf")
_UNIT_SECONDS = {"weeks": 604800, "days": 86400, "hours": 3600, "minutes": 60, "seconds": 1}


def parse_duration(value: object) -> float:
    """Seconds in ``value``; raise ValueError naming what is wrong."""
    if type(value) is float and 0 <= value < _INFINITY:  # the common case, first (not NaN)
        return value
    if isinstance(value, bool):
        raise ValueError("a duration is a number of seconds or an ISO 8601 string, not a boolean")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            match = _ISO.match(text.upper())
            if not match or text.upper() in ("P", "PT") or text.upper().endswith("T"):
                raise ValueError(
                    f"{value!r} is not a duration (seconds, or ISO 8601 like 'PT30S')"
                ) from None
            seconds = sum(
                float(amount) * _UNIT_SECONDS[unit]
                for unit, amount in match.groupdict().items()
                if amount is not None
            )
    else:
        raise ValueError(f"{value!r} is not a duration (seconds, or ISO 8601 like 'PT30S')")
    if seconds < 0 or seconds != seconds or seconds == float("inf"):
        raise ValueError(f"{value!r} must be a finite, non-negative duration")
    return seconds


def to_us(seconds: float) -> int:
    return round(seconds * 1_000_000)
