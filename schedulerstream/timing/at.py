"""One-shot schedules: a single instant."""

from __future__ import annotations


class AtSchedule:
    """Fires once, at ``instant_us`` (UTC epoch microseconds)."""

    __slots__ = ("instant_us",)

    def __init__(self, instant_us: int) -> None:
        self.instant_us = instant_us

    def next_after(self, after_us: int) -> int | None:
        return self.instant_us if self.instant_us > after_us else None

    def next_n(self, after_us: int, n: int) -> list[int]:
        return [self.instant_us] if n > 0 and self.instant_us > after_us else []

    def count_between(self, first_us: int, limit_us: int) -> int:
        return 1 if first_us <= self.instant_us < limit_us else 0

    def last_before(self, limit_us: int) -> int | None:
        return self.instant_us if self.instant_us < limit_us else None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AtSchedule) and self.instant_us == other.instant_us

    def __hash__(self) -> int:
        return hash((AtSchedule, self.instant_us))

    def __repr__(self) -> str:
        return f"AtSchedule({self.instant_us})"
