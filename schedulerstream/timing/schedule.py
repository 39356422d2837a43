"""The one interface every kind of schedule offers to the scheduler, and an optional one for
those that count their instants by arithmetic."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

MICROS = 1_000_000


@runtime_checkable
class Schedule(Protocol):
    """Fire instants as UTC epoch microseconds, strictly increasing. Equal and hashing alike
    when defined alike: jobs that share a schedule share its memoized answers."""

    def __hash__(self) -> int: ...

    def next_after(self, after_us: int) -> int | None:
        """The first instant strictly after ``after_us``, or None if there is none."""
        ...

    def next_n(self, after_us: int, n: int) -> list[int]:
        """Up to ``n`` instants strictly after ``after_us``, in order."""
        ...


@runtime_checkable
class CountableSchedule(Schedule, Protocol):
    """A schedule that counts its instants in a span by arithmetic, not one ``next_after`` an
    instant (the scheduler's missed counts are exact then). Optional: wrappers that cannot
    count exactly answer None, and the scheduler walks."""

    def count_between(self, first_us: int, limit_us: int) -> int | None:
        """How many instants lie in ``[first_us, limit_us)``, or None if not known exactly."""
        ...

    def last_before(self, limit_us: int) -> int | None:
        """The latest instant strictly before ``limit_us``, or None if there is none or it is
        not known at once."""
        ...


def next_instants(
    schedule: Schedule, after_us: int, count: int, until_us: int | None = None
) -> list[int]:
    """Up to ``count`` instants after ``after_us`` and, if ``until_us`` is given, not after it."""
    found: list[int] = []
    current = after_us
    while len(found) < count:
        instant = schedule.next_after(current)
        if instant is None or (until_us is not None and instant > until_us):
            break
        found.append(instant)
        current = instant
    return found
