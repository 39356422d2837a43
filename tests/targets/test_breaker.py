"""CircuitBreaker with a ManualClock: no sleeping."""

from __future__ import annotations

import pytest

from schedulerstream.clock import ManualClock
from schedulerstream.targets.breaker import CircuitBreaker, Permit


def tripped(threshold: int = 3, cool_down: float = 10.0) -> tuple[CircuitBreaker, ManualClock]:
    clock = ManualClock()
    breaker = CircuitBreaker(threshold, cool_down, clock)
    for _ in range(threshold):
        permit = breaker.admit()
        assert permit is not None
        breaker.record_failure(permit)
    return breaker, clock


def test_closed_admits_and_counts_consecutive_failures() -> None:
    breaker = CircuitBreaker(3, 10.0, ManualClock())
    for _ in range(2):
        permit = breaker.admit()
        assert permit == Permit(probe=False)
        breaker.record_failure(permit)
    assert breaker.state == "closed" and breaker.consecutive_failures == 2
    breaker.record_success(Permit(probe=False))
    assert breaker.consecutive_failures == 0
    breaker.record_failure(Permit(probe=False))
    breaker.record_failure(Permit(probe=False))
    assert breaker.state == "closed"


def test_opens_at_the_threshold_and_refuses_during_the_cool_down() -> None:
    breaker, clock = tripped()
    assert breaker.state == "open"
    assert breaker.admit() is None
    assert breaker.retry_after() == 10.0
    clock.advance(4.0)
    assert breaker.admit() is None
    assert breaker.retry_after() == pytest.approx(6.0)


def test_half_open_admits_exactly_one_probe() -> None:
    breaker, clock = tripped()
    clock.advance(10.0)
    assert breaker.state == "half_open" and breaker.retry_after() == 0.0
    probe = breaker.admit()
    assert probe == Permit(probe=True)
    assert breaker.admit() is None
    assert breaker.state == "half_open" and breaker.retry_after() == 10.0


def test_a_successful_probe_closes() -> None:
    breaker, clock = tripped()
    clock.advance(11.0)
    probe = breaker.admit()
    assert probe is not None
    breaker.record_success(probe)
    assert breaker.state == "closed" and breaker.consecutive_failures == 0
    assert breaker.admit() == Permit(probe=False)


def test_a_failed_probe_reopens_for_a_full_cool_down() -> None:
    breaker, clock = tripped()
    clock.advance(15.0)
    probe = breaker.admit()
    assert probe is not None
    breaker.record_failure(probe)
    assert breaker.state == "open" and breaker.retry_after() == 10.0
    clock.advance(9.9)
    assert breaker.admit() is None
    clock.advance(0.1)
    assert breaker.admit() == Permit(probe=True)


def test_releasing_a_probe_frees_the_slot() -> None:
    breaker, clock = tripped()
    clock.advance(10.0)
    probe = breaker.admit()
    assert probe is not None
    breaker.release(probe)
    assert breaker.admit() == Permit(probe=True)


def test_a_late_non_probe_result_does_not_free_the_probe_slot_or_extend_the_cool_down() -> None:
    breaker, clock = tripped()
    clock.advance(5.0)
    breaker.record_failure(Permit(probe=False))  # admitted before the breaker opened
    assert breaker.retry_after() == pytest.approx(5.0)
    clock.advance(5.0)
    probe = breaker.admit()
    assert probe is not None
    breaker.release(Permit(probe=False))
    assert breaker.admit() is None


def test_a_late_success_closes_even_while_open() -> None:
    breaker, _ = tripped()
    breaker.record_success(Permit(probe=False))
    assert breaker.state == "closed"


def test_threshold_one_and_zero_cool_down() -> None:
    breaker = CircuitBreaker(1, 0.0, ManualClock())
    breaker.record_failure(Permit(probe=False))
    assert breaker.state == "half_open"
    assert breaker.admit() == Permit(probe=True)


@pytest.mark.parametrize(("threshold", "cool_down"), [(0, 1.0), (1, -1.0)])
def test_bad_parameters(threshold: int, cool_down: float) -> None:
    with pytest.raises(ValueError):
        CircuitBreaker(threshold, cool_down)
