"""Clocks: the one source of "now", injectable so time rules are tested without sleeping."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Wall-clock time in microseconds since the Unix epoch (UTC) and a monotonic reading."""

    def now_us(self) -> int: ...

    def monotonic(self) -> float: ...


class SystemClock:
    """The real clock."""

    def now_us(self) -> int:
        return time.time_ns() // 1000

    def monotonic(self) -> float:
        return time.monotonic()


class ManualClock:
    """A clock that moves only when told to; for tests."""

    def __init__(self, start_us: int = 0) -> None:
        self._now_us = start_us
        self._mono = 0.0

    def now_us(self) -> int:
        return self._now_us

    def monotonic(self) -> float:
        return self._mono

    def set_us(self, now_us: int) -> None:
        """Set the wall clock; the monotonic reading moves by a forward step only (a wall clock
        set back leaves it where it is, as a real monotonic clock would)."""
        self._mono += max(0, now_us - self._now_us) / 1e6
        self._now_us = now_us

    def advance(self, seconds: float) -> None:
        self._now_us += int(seconds * 1_000_000)
        self._mono += seconds
