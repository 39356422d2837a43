"""A circuit breaker for one target host: open after N consecutive failures, probe after a
cool-down (half-open: one attempt at a time), close on the first success."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from schedulerstream.clock import Clock, SystemClock

BreakerState = Literal["closed", "open", "half_open"]


@dataclass(frozen=True, slots=True)
class Permit:
    """Leave to make one attempt; ``probe`` when it is the half-open trial."""

    probe: bool


class CircuitBreaker:
    """Counts consecutive failures; ``admit()`` says whether an attempt may be made now.

    Every permit must end in ``record_success``, ``record_failure`` or ``release`` (no verdict,
    e.g. cancelled), so that the half-open probe slot is never lost.
    """

    def __init__(
        self, failure_threshold: int = 5, cool_down: float = 30.0, clock: Clock | None = None
    ) -> None:
        if failure_threshold < 1:
            raise ValueError("failure_threshold must be at least 1")
        if cool_down < 0:
            raise ValueError("cool_down must not be negative")
        self.failure_threshold = failure_threshold
        self.cool_down = cool_down
        self._clock: Clock = clock or SystemClock()
        self._failures = 0
        self._opened_at: float | None = None
        self._probing = False

    @property
    def state(self) -> BreakerState:
        if self._opened_at is None:
            return "closed"
        if self._probing or self._clock.monotonic() - self._opened_at >= self.cool_down:
            return "half_open"
        return "open"

    @property
    def consecutive_failures(self) -> int:
        return self._failures

    def admit(self) -> Permit | None:
        """A permit if an attempt may start now (the one probe slot when half-open)."""
        state = self.state
        if state == "closed":
            return Permit(probe=False)
        if state == "half_open" and not self._probing:
            self._probing = True
            return Permit(probe=True)
        return None

    def retry_after(self) -> float:
        """Seconds until ``admit()`` may grant a permit (a probe in flight: one cool-down)."""
        if self._opened_at is None:
            return 0.0
        if self._probing:
            return self.cool_down
        return max(0.0, self._opened_at + self.cool_down - self._clock.monotonic())

    def record_success(self, permit: Permit) -> None:
        """The host answered: close."""
        self._failures = 0
        self._opened_at = None
        self._probing = False

    def record_failure(self, permit: Permit) -> None:
        """The host failed: open at the threshold, or again when the probe failed."""
        self._failures += 1
        if permit.probe:
            self._probing = False
            self._opened_at = self._clock.monotonic()
        elif self._opened_at is None and self._failures >= self.failure_threshold:
            self._opened_at = self._clock.monotonic()

    def release(self, permit: Permit) -> None:
        """The attempt ended without a verdict: free the probe slot, change nothing else."""
        if permit.probe:
            self._probing = False
