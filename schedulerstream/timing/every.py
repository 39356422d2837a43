"""Fixed-interval schedules counted in real time from the Unix epoch."""

from __future__ import annotations

import math

from schedulerstream.errors import ValidationError
from schedulerstream.timing.schedule import MICROS


class EverySchedule:
    """Instants ``phase + k * interval`` (any integer k), so every instance agrees on them."""

    __slots__ = ("interval_us", "phase_us")

    def __init__(self, interval_s: float, phase_s: float = 0.0) -> None:
        if not math.isfinite(interval_s) or interval_s <= 0:
            raise ValidationError(
                "interval", f"{interval_s!r} must be a positive number of seconds"
            )
        if not math.isfinite(phase_s):
            raise ValidationError("phase", f"{phase_s!r} must be a finite number of seconds")
        interval_us = round(interval_s * MICROS)
        if interval_us < 1:
            raise ValidationError("interval", f"{interval_s!r} is shorter than one microsecond")
        self.interval_us = interval_us
        self.phase_us = round(phase_s * MICROS) % interval_us

    @classmethod
    def from_us(cls, interval_us: int, phase_us: int = 0) -> EverySchedule:
        """The same schedule given exactly, in integer microseconds."""
        if interval_us < 1:
            raise ValidationError("interval", f"{interval_us!r} µs is shorter than one microsecond")
        schedule = cls.__new__(cls)
        schedule.interval_us = interval_us
        schedule.phase_us = phase_us % interval_us
        return schedule

    def next_after(self, after_us: int) -> int:
        steps = (after_us - self.phase_us) // self.interval_us + 1
        return self.phase_us + steps * self.interval_us

    def next_n(self, after_us: int, n: int) -> list[int]:
        first = self.next_after(after_us)
        return [first + i * self.interval_us for i in range(max(n, 0))]

    def count_between(self, first_us: int, limit_us: int) -> int:
        # -((phase - x) // interval): the index k of the first instant at or after x
        start = -((self.phase_us - first_us) // self.interval_us)
        stop = -((self.phase_us - limit_us) // self.interval_us)
        return max(stop - start, 0)

    def last_before(self, limit_us: int) -> int:
        return self.next_after(limit_us - 1) - self.interval_us

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, EverySchedule)
            and self.interval_us == other.interval_us
            and self.phase_us == other.phase_us
        )

    def __hash__(self) -> int:
        return hash((EverySchedule, self.interval_us, self.phase_us))

    def __repr__(self) -> str:
        return f"EverySchedule.from_us({self.interval_us}, {self.phase_us})"
