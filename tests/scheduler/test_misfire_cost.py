"""A job far behind costs a bounded number of instants, whatever its downtime: an interval
job's dropped instants are counted by arithmetic, another's up to MISFIRE_SCAN and the latest
found by bisection, and a tick stops at TICK_INSTANTS, so one tenant's resumed jobs do not
hold the others' tick."""

from __future__ import annotations

from typing import Any

import pytest

import schedulerstream.scheduler.logic as logic_module
from schedulerstream.scheduler.timers import MISFIRE_SCAN, next_instant, span
from schedulerstream.timing import Schedule
from schedulerstream.timing.cron_next import parse_cron

from .harness import Harness, definition, us

NOW = "2025-01-06T12:00:00.2Z"
EVERY_SECOND: dict[str, Any] = {"every": 1}
CRON_EVERY_SECOND: dict[str, Any] = {"cron": "* * * * * *"}  # walked: a cron cannot count


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the scheduler's ``next_instant`` calls (one slot: the total)."""
    calls = [0]

    def counted(schedule: Schedule, after_us: int) -> int | None:
        calls[0] += 1
        return next_instant(schedule, after_us)

    monkeypatch.setattr("schedulerstream.scheduler.logic.next_instant", counted)
    return calls


def _behind(
    h: Harness, tenant: str, job_id: str, policy: str, written: str, window: int,
    schedule: dict[str, Any] = EVERY_SECOND,
) -> None:  # fmt: skip
    job = definition(1, tenant=tenant, job_id=job_id, schedule=schedule,
                     misfire_policy=policy, catch_up_window=window)  # fmt: skip
    h.put(job, key=f"{tenant}/{job_id}".encode(), ts=us(written))


@pytest.mark.parametrize("policy", ["fire_once", "skip"])
@pytest.mark.parametrize("kind", ["every", "cron"])
def test_a_job_a_day_behind_costs_a_few_hundred_instants_and_fires_once(
    policy: str, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An interval job's counts are exact (``every 1``); a cron's past MISFIRE_SCAN are a lower
    bound (``* * * * * *``, the same instants)."""
    calls = _counting(monkeypatch)
    h = Harness(grace_s=30)
    h.now = us(NOW)
    schedule = EVERY_SECOND if kind == "every" else CRON_EVERY_SECOND
    _behind(h, "acme", "j1", policy, "2025-01-05T09:00:00Z", window=86_400, schedule=schedule)
    h.tick_until(us(NOW) + 1_000_000)

    # one a second would be ~97,000 (10,000 a tick before); counted, a few dozen
    assert calls[0] < (100 if kind == "every" else 1_000)
    catch_up = [r for r in h.out.runs() if r["trigger"] == "catch_up"]
    missed = h.out.attempts("missed")
    if kind == "every":
        old, skip, once = "10800", "86370", "86369"
    else:
        old, skip, once = "at least 100", "at least 100", "at least 99"
    assert len(missed) == 2 and missed[0]["reason"].startswith(f"{old} instant(s)")
    assert "older than catch_up_window" in missed[0]["reason"]  # 09:00:01 .. 12:00:00 a day ago
    assert "to 2025-01-05T12:00:00Z" in missed[0]["reason"]
    if policy == "fire_once":  # once for the whole span: before, once a 10,000 instants
        assert [r["run_id"] for r in catch_up] == ["acme/j1@20250106T115930Z"]  # now - grace
        assert missed[1]["reason"].startswith(f"{once} instant(s) from 2025-01-05T12:00:01Z")
        assert "to 2025-01-06T11:59:29Z not run: misfire fire_once" in missed[1]["reason"]
    else:
        assert catch_up == []
        assert missed[1]["reason"].startswith(f"{skip} instant(s) from 2025-01-05T12:00:01Z")
        assert "to 2025-01-06T11:59:30Z not run: misfire skip" in missed[1]["reason"]
    if kind == "every":  # 09:00:01 .. 11:59:30 the next day: each instant run or counted
        assert sum(m["count"] for m in missed) + len(catch_up) == 3 * 3_600 + 86_400 - 30
    scheduled = [r["run_id"] for r in h.out.runs() if r["trigger"] == "scheduled"]
    assert scheduled[0] == "acme/j1@20250106T115931Z"  # within the grace: on time


def test_the_latest_instants_of_a_span_are_found_exactly() -> None:
    weekdays = parse_cron("0 9 * * MON-FRI", "Europe/Paris")
    first = us("2025-01-06T08:00:00Z")  # Monday 09:00 in Paris
    limit = us("2025-06-02T07:00:00Z")  # Monday 09:00 CEST
    found = span(lambda s, after: s.next_after(after), weekdays, first, limit)
    instants = [first]
    while (following := weekdays.next_after(instants[-1])) is not None and following < limit:
        instants.append(following)
    assert len(instants) > MISFIRE_SCAN
    assert (found.count, found.capped) == (MISFIRE_SCAN, True)
    assert (found.last, found.before_last) == (instants[-1], instants[-2])  # Fri, Thu
    assert found.examined < MISFIRE_SCAN + 100


def test_one_tenants_resumed_jobs_leave_each_tick_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logic_module, "TICK_INSTANTS", 2_000)
    h = Harness(grace_s=30, lookahead_s=3)
    h.now = us(NOW)
    _behind(h, "good", "g", "fire_once", "2025-01-06T11:59:59Z", window=3_600)  # on time
    for n in range(60):  # paused three hours, resumed: every one of them is behind (crons:
        # an interval job's dropped instants are counted at once, a cron's walked and bisected)
        _behind(h, "bad", f"j{n:02d}", "fire_once", "2025-01-06T09:00:00Z", window=3_600,
                schedule=CRON_EVERY_SECOND)  # fmt: skip

    per_tick: list[int] = []
    for _ in range(100):  # live ticks, 50 ms apart
        before = h.logic.examined
        h.logic.on_tick(h.store, h.out, 0, h.now)
        per_tick.append(h.logic.examined - before)
        h.now += 50_000

    runs: list[dict[str, Any]] = h.out.runs()
    fired = [r["run_id"] for r in runs if r["trigger"] == "catch_up"]
    assert len(fired) == len(set(fired)) == 60  # each resumed job fired once
    assert sum(n >= 2_000 for n in per_tick) >= 3  # the budget cut their ticks
    assert max(per_tick) < 2_000 + 600  # the budget, and one job's share past it
    good = [r["scheduled_at_us"] for r in runs if r["run_id"].startswith("good/")]
    assert good == sorted(set(good)) and good[-1] >= h.now + 2_000_000  # kept ahead


def test_jobs_due_now_go_before_a_tenants_resumed_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The resumed jobs' due keys are hours old and sort first: before, a tick spent its
    whole budget on them and the jobs due now waited until every one was handled (thousands
    of them: seconds, past the lookahead)."""
    monkeypatch.setattr(logic_module, "TICK_INSTANTS", 2_000)
    h = Harness(grace_s=30, lookahead_s=3)
    h.now = us(NOW)
    for n in range(60):  # ~170 instants each: five ticks' budgets
        _behind(h, "bad", f"j{n:02d}", "fire_once", "2025-01-06T09:00:00Z", window=3_600,
                schedule=CRON_EVERY_SECOND)  # fmt: skip
    _behind(h, "good", "g", "fire_once", "2025-01-06T11:59:59Z", window=3_600)

    h.logic.on_tick(h.store, h.out, 0, h.now)  # one tick, cut by the budget

    runs = h.out.runs()
    good = [r["scheduled_at_us"] for r in runs if r["tenant"] == "good"]
    assert good == [us("2025-01-06T12:00:00Z") + k * 1_000_000 for k in range(4)]
    resumed = {r["job_id"] for r in runs if r["tenant"] == "bad"}
    assert 0 < len(resumed) < 60  # the budget cut the resumed jobs' share, not the others'
    while h.logic.on_tick(h.store, h.out, 0, h.now):  # the rest follow in the next ticks
        pass
    fired = [r["job_id"] for r in h.out.runs() if r["trigger"] == "catch_up"]
    assert sorted(fired) == [f"j{n:02d}" for n in range(60)]  # each fired once
