"""A full outage of every scheduler, longer than the misfire grace, then catch-up under each
misfire policy.

The only scheduler is killed (-9), stays away for longer than ``misfire_grace`` (quick: a
5 s grace and a 20 s outage; slow: the default 60 s grace and a 3 min outage), and restarts
(same identity, warm). Its first tick finds every instant of the outage due: those more than
the grace late are *late*, the rest are emitted as usual. Per job (1 s schedules):

- ``skip``: no late instant runs; all of them are one ``missed`` event with their count;
- ``fire_once``: only the latest late instant runs (trigger ``catch_up``), the others are
  one ``missed`` event with their count;
- ``catch_up``: every late instant runs, in order (trigger ``catch_up``), nothing missed;
- ``catch_up`` with a ``catch_up_window`` shorter than the outage: the late instants inside
  the window run, the older ones are one ``missed`` event ("older than catch_up_window").

Checked on the committed runs and attempt events: the exact instants, one run id each, the
missed counts equal to the instants not run, nothing else missing.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

import pytest

from schedulerstream.publish import Publisher
from schedulerstream.settings import Settings
from tests.faults.conftest import SpawnFault
from tests.faults.helpers import (
    SECOND,
    attempt_events,
    every_second_jobs,
    next_second_us,
    now_us,
    report,
    wait_until,
)
from tests.support.runs import gaps, read_runs

pytestmark = [pytest.mark.kafka, pytest.mark.faults]


def outage(topo: Settings, procs: SpawnFault, grace_s: int, away_s: float) -> dict[str, Any]:
    window_s = grace_s + 3 if grace_s < 30 else grace_s + 30
    jobs = [
        *every_second_jobs(1, tenant="skip", misfire_policy="skip"),
        *every_second_jobs(1, tenant="once", misfire_policy="fire_once"),
        *every_second_jobs(1, tenant="all", misfire_policy="catch_up"),
        *every_second_jobs(1, tenant="window", misfire_policy="catch_up", catch_up_window=window_s),
    ]
    # runs emitted ahead are not late: a 1 s lookahead keeps the late block as computed below
    grace = {"misfire_grace_ms": grace_s * 1000, "lookahead_ms": 1000}
    sched = procs("scheduler", "a", **grace)
    sched.wait_running(topo.partitions)
    Publisher(topo).put_jobs(jobs)
    since = next_second_us(2)
    wait_until(lambda: now_us() > since + 3 * SECOND, 30, "runs before the outage")
    sched.kill()
    down_at = now_us()
    time.sleep(away_s)
    spawned_at = now_us()  # the instants due before this (less the grace) ran late or never
    sched = procs("scheduler", "a", **grace)
    sched.wait_running(topo.partitions)
    back_at = now_us()
    wait_until(lambda: now_us() > back_at + 4 * SECOND, 30, "runs after the outage")
    until = next_second_us(-2)
    assert sched.stop() == 0
    seen = read_runs(topo)
    ids = [r["run_id"] for r in seen.triggered]
    assert len(ids) == len(set(ids)), "a run committed twice"
    runs: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for r in seen.triggered:
        if since <= r["scheduled_at_us"] <= until:
            runs[r["tenant"]][r["scheduled_at_us"]] = r
    missed: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in attempt_events(topo):
        if event["kind"] == "missed":
            missed[event["tenant"]].append(event)
    every = list(range(since, until + 1, SECOND))
    outage_s = (back_at - down_at) / 1e6
    figures: dict[str, Any] = {"grace_s": grace_s, "outage_s": round(outage_s, 1)}
    for tenant in ("skip", "once", "all", "window"):
        ran = runs[tenant]
        not_run = [t for t in every if t not in ran]
        caught = sorted(t for t, r in ran.items() if r["trigger"] == "catch_up")
        count = sum(e["count"] for e in missed[tenant])
        late = [r["emitted_at_us"] - r["not_before_us"] for t, r in ran.items() if t not in caught]
        figures[tenant] = {
            "not_run": len(not_run),
            "caught_up": len(caught),
            "missed_count": count,
            "missed_events": len(missed[tenant]),
            "max_lateness_ms": round(max(late) / 1000, 1),
        }
        assert gaps(not_run, SECOND) == [], f"{tenant}: instants not run are not one block"
        assert gaps(caught, SECOND) == [], f"{tenant}: catch-up runs are not one block"
        # every-second jobs are plain intervals: counted exactly at any length (timers.span)
        said = f"{tenant}: {count} missed counted, {len(not_run)} not run"
        assert count == len(not_run), said
        assert not any(e["reason"].startswith("at least ") for e in missed[tenant]), said
        if not_run:
            [event] = missed[tenant]
            assert event["scheduled_at_us"] == not_run[-1], (tenant, event)
        # the late block is at least the outage minus the grace (and its edges); the outage
        # counted to the spawn, as the restart's own time may go either way
        expected_late = (spawned_at - down_at) / 1e6 - grace_s - 2
        if tenant == "skip":
            assert caught == [] and len(not_run) >= expected_late, figures[tenant]
        elif tenant == "once":
            assert len(caught) == 1 and len(not_run) >= expected_late - 1, figures[tenant]
            assert caught[0] == not_run[-1] + SECOND, "fire_once ran another than the latest"
        elif tenant == "all":
            assert not_run == [] and missed[tenant] == [], figures[tenant]
            assert len(caught) >= expected_late, figures[tenant]
        else:
            assert not_run and caught, figures[tenant]
            assert caught[0] == not_run[-1] + SECOND, "window: not the newest late instants"
            assert abs(len(caught) - (window_s - grace_s)) <= 2, figures[tenant]
            assert "older than catch_up_window" in missed[tenant][0]["reason"]
    return figures


# slow: tests/scheduler/test_scheduler_kafka.py::test_misfire_policies_after_a_full_outage
# covers the same in CI
@pytest.mark.slow
def test_full_outage_past_a_short_grace_then_each_misfire_policy(
    topo: Settings, procs: SpawnFault
) -> None:
    """CI: a 5 s grace, a 20 s outage."""
    report("full outage 20 s, grace 5 s", **outage(topo, procs, grace_s=5, away_s=20.0))


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_full_outage_of_three_minutes_then_each_misfire_policy(
    topo: Settings, procs: SpawnFault
) -> None:
    """The default 60 s grace, a 3 minute outage."""
    report("full outage 3 min, grace 60 s", **outage(topo, procs, grace_s=60, away_s=180.0))
