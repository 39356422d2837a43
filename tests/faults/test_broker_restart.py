"""The broker stopped and restarted under load: a clean stop (SIGTERM: controlled shutdown)
and a kill -9, on the fault matrix's own broker (tests/faults/broker.py), never the session one.

A scheduler emits 1 s runs of 100 jobs throughout. While the broker is away nothing can be
committed; once it is back the scheduler (same process: it must survive the outage) emits the
instants it could not, late (the outage is shorter than the misfire grace, so nothing is
*missed*). Checked on the committed runs: every instant once, one run id each; the lateness of
the outage is measured (emitted_at - not_before of the instants that fell due during it).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from schedulerstream.publish import Publisher
from schedulerstream.settings import Settings
from tests.faults.broker import ProxiedBroker
from tests.faults.conftest import SpawnFault
from tests.faults.helpers import (
    SECOND,
    Lateness,
    check_every_instant_once,
    every_second_jobs,
    next_second_us,
    now_us,
    report,
    wait_until,
)
from tests.support.runs import read_runs

pytestmark = [pytest.mark.kafka, pytest.mark.faults]
JOBS = 100


def outages(
    topo: Settings, broker: ProxiedBroker, procs: SpawnFault, plan: list[tuple[str, float]]
) -> dict[str, Any]:
    sched = procs("scheduler", "a", settings=topo)
    sched.wait_running(topo.partitions)
    Publisher(topo).put_jobs(every_second_jobs(JOBS))
    since = next_second_us(2)
    wait_until(lambda: now_us() > since + 3 * SECOND, 30, "runs before the first outage")
    windows: list[tuple[int, int]] = []
    figures: list[dict[str, Any]] = []
    for how, away_s in plan:
        down_at = now_us()
        started = time.monotonic()
        broker.down(timeout=60, kill=how == "kill -9")
        stop_s = time.monotonic() - started
        time.sleep(away_s)
        started = time.monotonic()
        broker.up(timeout=180)
        up_s = time.monotonic() - started
        back_at = now_us()
        assert sched.alive(), f"the scheduler died with the broker:\n{sched.this_log()[-3000:]}"
        mark = len(sched.this_log())
        wait_until(
            lambda b=back_at: latest_instant(topo) > b + 3 * SECOND,
            60,
            f"runs committed again after the {how}",
            every=1.0,
            alive=sched,
        )
        wait_until(lambda b=back_at: now_us() > b + 8 * SECOND, 30, "8 s after the restart")
        windows.append((down_at, back_at))
        figures.append(
            {
                "how": how,
                "stop_s": round(stop_s, 1),
                "away_s": away_s,
                "restart_s": round(up_s, 1),
                "scheduler_log": _signs(sched.this_log()[mark:]),
            }
        )
    until = next_second_us(-2)
    assert sched.alive(), sched.this_log()[-3000:]
    assert sched.stop() == 0
    seen = read_runs(topo)
    checked = check_every_instant_once(topo, JOBS, since, until, seen=seen)
    for (down_at, back_at), entry in zip(windows, figures, strict=True):
        late = Lateness()
        for r in seen.triggered:
            if down_at <= r["not_before_us"] <= back_at:
                late.add(r["emitted_at_us"] - r["not_before_us"])
        entry["outage_lateness"] = late.summary()
        entry["caught_up_after_s"] = round(
            max((r["emitted_at_us"] for r in seen.triggered if r["not_before_us"] <= back_at),
                default=back_at) / 1e6 - back_at / 1e6, 1,
        )  # fmt: skip
    return {"outages": figures, **checked}


def latest_instant(topo: Settings) -> int:
    """The latest scheduled instant among the committed runs (0 when none)."""
    return max((r["scheduled_at_us"] for r in read_runs(topo, 1.0).triggered), default=0)


def _signs(log: str) -> dict[str, int]:
    """How the outage showed in the scheduler's log."""
    return {
        sign: log.count(sign)
        for sign in ("transaction failed", " lost ", " revoked ", "running: restored")
    }


HANG = pytest.mark.xfail(
    strict=True,
    reason="runtime/librdkafka bug: after the broker restarts, the scheduler recovers its "
    "tasks, begins a transaction, and its main thread then blocks in Processor.commit step (2), "
    "TransactionalProducer.send_offsets -> Producer.send_offsets_to_transaction(offsets, "
    "metadata, 30): py-spy shows it there for minutes, past its 30 s timeout; the broker aborts "
    "the open transaction by timeout, no run is committed again and SIGTERM is not honoured "
    "(the loop never returns). Matches librdkafka issues #5456 (the coordinator request "
    "timeout of send_offsets_to_transaction is never checked) and #5511 (hang while the cached "
    "group coordinator is down). Mitigated, not fixed: runtime/watchdog.py now ends a process "
    "whose transactional call overruns its timeout (exit 75, a clear message) so a supervisor "
    "restarts it from the changelog; this case runs the processes without a supervisor, so "
    "the runs still stop here",
)


@pytest.mark.slow
@HANG
def test_broker_clean_stop_and_kill_9_under_load(
    own_topo: Settings, own_broker: ProxiedBroker, procs: SpawnFault
) -> None:
    """CI: a clean stop, then a kill -9, each 5 s away."""
    figures = outages(own_topo, own_broker, procs, [("clean stop", 5.0), ("kill -9", 5.0)])
    report("broker stop/restart under load", **figures)


@pytest.mark.slow
@HANG
def test_broker_stopped_and_killed_for_longer_in_turn(
    own_topo: Settings, own_broker: ProxiedBroker, procs: SpawnFault
) -> None:
    """Four outages of 20-30 s, clean and kill -9 in turn (inside the 60 s misfire grace)."""
    plan = [("kill -9", 20.0), ("clean stop", 25.0), ("kill -9", 30.0), ("clean stop", 20.0)]
    figures = outages(own_topo, own_broker, procs, plan)
    report("broker stop/restart x4, 20-30 s", **figures)
