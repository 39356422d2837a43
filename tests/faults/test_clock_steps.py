"""Wall-clock steps (NTP corrections, a VM resumed) on the scheduler logic, with the hand-moved
clock of tests/scheduler/harness.py (no broker). A forward step past the grace is a downtime:
tests/scheduler/test_logic.py::test_misfire_policies_after_downtime covers the policies; these
cases add the step back, a step forward inside the grace, and mutations after a step back.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.scheduler.harness import Harness, definition, us

pytestmark = pytest.mark.faults


def minute_ids(h: Harness) -> list[str]:
    return [r["run_id"].split("@")[1] for r in h.out.runs()]


def at(text: str) -> int:
    return us(f"2025-01-06T{text}Z")


def test_a_step_back_never_refires_an_emitted_instant() -> None:
    h = Harness()
    h.now = at("10:00:30")
    h.put(definition(1))
    h.tick_until(at("10:05:30"), step_s=0.5)
    assert minute_ids(h) == [f"20250106T10{m:02d}00Z" for m in range(1, 6)]
    h.now = at("10:01:30")  # the clock steps back four minutes
    h.tick_until(at("10:06:30"), step_s=0.5)
    ids = minute_ids(h)
    assert Counter(ids).most_common(1)[0][1] == 1, ids
    assert ids == [f"20250106T10{m:02d}00Z" for m in range(1, 7)]
    assert h.out.attempts("missed") == []


def test_an_update_after_a_step_back_does_not_re_emit_instants_already_due() -> None:
    """Runs emitted before the step look "ahead of time" again after it; an update must not
    revoke and re-emit them (they were due, and dispatched, before the step)."""
    h = Harness()
    h.now = at("10:00:30")
    h.put(definition(1))
    h.tick_until(at("10:03:30"), step_s=0.5)
    h.now = at("10:00:40")  # step back by almost three minutes
    h.put(definition(2, payload={"v": 2}))
    h.tick_until(at("10:04:30"), step_s=0.5)
    ids = minute_ids(h)
    assert Counter(ids).most_common(1)[0][1] == 1, f"an instant emitted twice: {ids}"
    assert ids == [f"20250106T10{m:02d}00Z" for m in range(1, 5)]


def test_a_step_forward_inside_the_grace_runs_every_instant_late_not_missed() -> None:
    h = Harness(grace_s=30)
    h.now = at("10:00:00.5")
    h.put(definition(1, schedule={"every": 1}))
    h.tick_until(at("10:00:05"))
    h.now = at("10:00:25")  # 20 s forward, inside the 30 s grace
    h.tick_until(at("10:00:27"))
    instants = [r["scheduled_at_us"] for r in h.out.runs()]
    assert instants == list(range(at("10:00:01"), at("10:00:28") + 1, 1_000_000))
    assert h.out.attempts("missed") == []
    runs = h.out.runs()
    late = [r["scheduled_at_us"] for r in runs if r["emitted_at_us"] - r["not_before_us"] > 10**6]
    # the first tick after the step is at 10:00:25.05: 10:00:07 .. 10:00:24 are over 1 s late
    assert late == list(range(at("10:00:07"), at("10:00:24") + 1, 1_000_000))


@pytest.mark.parametrize("policy", ["skip", "fire_once", "catch_up"])
def test_a_step_forward_past_the_grace_applies_the_misfire_policy_to_the_exact_instants(
    policy: str,
) -> None:
    h = Harness(grace_s=2)
    h.now = at("10:00:00.5")
    h.put(definition(1, schedule={"every": 1}, misfire_policy=policy))
    h.tick_until(at("10:00:05"))  # emitted through 10:00:06 (1 s lookahead)
    h.now = at("10:00:25")  # 20 s forward; first tick at 10:00:25.05, late cut 10:00:23.05
    h.tick_until(at("10:00:27"))
    late = list(range(at("10:00:07"), at("10:00:23") + 1, 1_000_000))
    runs = h.out.runs()
    assert max(Counter(r["scheduled_at_us"] for r in runs).values()) == 1
    caught_up = [r["scheduled_at_us"] for r in runs if r["trigger"] == "catch_up"]
    missed = h.out.attempts("missed")
    expected_runs = {"skip": [], "fire_once": late[-1:], "catch_up": late}[policy]
    expected_missed = {"skip": late, "fire_once": late[:-1], "catch_up": []}[policy]
    assert caught_up == expected_runs
    assert sum(e["count"] for e in missed) == len(expected_missed)
    if expected_missed:
        [event] = missed
        assert event["scheduled_at_us"] == expected_missed[-1]
        last = f"10:00:{len(expected_missed) + 6:02d}"
        assert "10:00:07" in event["reason"] and last in event["reason"], event["reason"]
    on_time = [r["scheduled_at_us"] for r in runs if r["scheduled_at_us"] > at("10:00:23")]
    assert on_time == list(range(at("10:00:24"), at("10:00:28") + 1, 1_000_000))
