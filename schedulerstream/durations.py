"""Durations as users write them: seconds (a number) or ISO 8601 (``PT30S``, ``P1DT2H``)."""

from __future__ import annotations

import re

_ISO = re.compile(
    r"^P(?:(?P<weeks>\d+(?:\.\d+)?)W)?(?:(?P<days>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<hours>\d+(?:\.\d+)?)H)?(?:(?P<minutes>\d+(?:\.\d+)?)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$"
)
_INFINITY = float("inf")
# the longest a record holds with room for an instant added (an Avro long of µs: ~292,000 years);
# stored definitions were always within it, so reading them never trips it
MAX_DURATION_S = 1e12  # ~31,700 years
_UNIT_SECONDS = {"weeks": 604800, "days": 86400, "hours": 3600, "minutes": 60, "seconds": 1}


def parse_duration(value: object) -> float:
    """Seconds in ``value``; raise ValueError naming what is wrong."""
    if type(value) is float and 0 <= value <= MAX_DURATION_S:  # the common case, first
        return value
    if isinstance(value, bool):
        raise ValueError("a duration is a number of seconds or an ISO 8601 string, not a boolean")
    if isinstance(value, int):
        seconds = float(max(-1, min(value, 2 * round(MAX_DURATION_S))))  # JSON ints: any size
    elif isinstance(value, float):
        seconds = value
    elif isinstance(value, str):
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            match = _ISO.match(text.upper())
            if not match or text.upper() in ("P", "PT") or text.upper().endswith("T"):
                raise ValueError(
                    f"{_shown(value)} is not a duration (seconds, or ISO 8601 like 'PT30S')"
                ) from None
            seconds = sum(
                float(amount) * _UNIT_SECONDS[unit]
                for unit, amount in match.groupdict().items()
                if amount is not None
            )
    else:
        raise ValueError(f"{_shown(value)} is not a duration (seconds, or ISO 8601 like 'PT30S')")
    if seconds < 0 or seconds != seconds or seconds == _INFINITY:
        raise ValueError(f"{_shown(value)} must be a finite, non-negative duration")
    if seconds > MAX_DURATION_S:
        raise ValueError(f"{_shown(value)} is longer than 1e12 s (~31,700 years), the longest")
    return seconds


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def to_us(seconds: float) -> int:
    return round(seconds * 1_000_000)
