"""The broker stopped and restarted under load: a clean stop (SIGTERM: controlled shutdown)
and a kill -9, on the fault matrix's own broker (tests/faults/broker.py), never the session one.

A scheduler emits 1 s runs of 100 jobs throughout. While the broker is away nothing can be
committed; once it is back the scheduler emits the instants it could not, late. After a
restart librdkafka's ``send_offsets_to_transaction`` may block far past its timeout (librdkafka
issues #5456, #5511: seen in 4 runs of 4 here, minutes, SIGTERM ignored); the runtime's
watchdog (schedulerstream/runtime/watchdog.py) then ends the process with exit 75 and a clear
message, and this case restarts it as a supervisor would. librdkafka 2.16 may also abort the
process on an assertion of its own after a long outage (``rd_kafka_enq_once_del_source_return:
Assertion `eonce->refcnt > 0'``, seen once in this case): a crash like a kill -9, restarted
the same way. Any other exit fails the case.
The misfire grace is raised to 5 min so that the instants of the outage and of a watchdog
restart are emitted late, not *missed*. Checked on the committed runs: every instant once, one
run id each; per outage: the watchdog restarts, when runs resumed, and the lateness of the
instants that fell due from the stop until runs resumed (emitted_at - not_before).
"""

from __future__ import annotations

import re
import signal
import time
from typing import Any

import pytest

from schedulerstream.publish import Publisher
from schedulerstream.runtime.watchdog import EXIT_HUNG
from schedulerstream.settings import Settings
from tests.faults.broker import ProxiedBroker
from tests.faults.conftest import SpawnFault
from tests.faults.helpers import (
    SECOND,
    FaultProcess,
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
GRACE = {"misfire_grace_ms": 300_000}  # a watchdog restart takes ~2 min: late, not missed
RESUME_S = 240  # the watchdog's limit (2 x 30 s + 30 s) + a restart + a restore, with margin
LIBRDKAFKA_ABORT = re.compile(r"rdkafka\w*\.[ch]:\d+: \w+: Assertion .* failed")


def outages(
    topo: Settings, broker: ProxiedBroker, procs: SpawnFault, plan: list[tuple[str, float]]
) -> dict[str, Any]:
    sched = procs("scheduler", "a", settings=topo, **GRACE)
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
        mark = len(sched.log())  # one instance keeps one log file across restarts
        restarts = 0
        deadline = time.monotonic() + RESUME_S
        while latest_instant(topo) <= back_at + 3 * SECOND:
            assert time.monotonic() < deadline, (
                f"no run committed {RESUME_S} s after the {how}:\n{sched.log()[-3000:]}"
            )
            if not sched.alive():
                sched = restart_after_watchdog(sched, topo, procs)
                restarts += 1
            time.sleep(1.0)
        resumed_at = now_us()
        wait_until(lambda r=resumed_at: now_us() > r + 6 * SECOND, 30, "6 s of runs again")
        windows.append((down_at, resumed_at))
        figures.append(
            {
                "how": how,
                "stop_s": round(stop_s, 1),
                "away_s": away_s,
                "restart_s": round(up_s, 1),
                "resumed_after_s": round((resumed_at - back_at) / 1e6, 1),
                "watchdog_restarts": restarts,
                "scheduler_log": _signs(sched.log()[mark:]),
            }
        )
    until = next_second_us(-2)
    assert sched.alive(), sched.this_log()[-3000:]
    assert sched.stop() == 0
    seen = read_runs(topo)
    checked = check_every_instant_once(topo, JOBS, since, until, seen=seen)
    for (down_at, resumed_at), entry in zip(windows, figures, strict=True):
        late = Lateness()
        for r in seen.triggered:
            if down_at <= r["not_before_us"] <= resumed_at:
                late.add(r["emitted_at_us"] - r["not_before_us"])
        entry["outage_lateness"] = late.summary()
    return {"outages": figures, **checked}


def restart_after_watchdog(sched: FaultProcess, topo: Settings, procs: SpawnFault) -> FaultProcess:
    """The scheduler ended: only the watchdog's exit (75, its message, no traceback) or
    librdkafka's own abort (an assertion of rdkafka, SIGABRT) is accepted; then it is restarted
    with the same identity and data dir, as a supervisor would."""
    code = sched.wait_exit(5)
    log = sched.this_log()
    if code == -signal.SIGABRT and LIBRDKAFKA_ABORT.search(log[-3000:]):
        pass  # librdkafka's bug: a crash, which loses nothing (the kill -9 cases)
    else:
        assert code == EXIT_HUNG, f"the scheduler exited {code}:\n{log[-3000:]}"
        assert "a supervisor restarts this process" in log, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    restarted = procs("scheduler", "a", settings=topo, **GRACE)
    restarted.wait_running(1, timeout=120)
    return restarted


def latest_instant(topo: Settings) -> int:
    """The latest scheduled instant among the committed runs (0 when none)."""
    return max((r["scheduled_at_us"] for r in read_runs(topo, 1.0).triggered), default=0)


def _signs(log: str) -> dict[str, int]:
    """How the outage showed in the scheduler's log."""
    return {
        sign: log.count(sign)
        for sign in (
            "transaction failed",
            " lost ",
            " revoked ",
            "running: restored",
            "client is stuck",
        )
    }


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_broker_clean_stop_and_kill_9_under_load(
    own_topo: Settings, own_broker: ProxiedBroker, procs: SpawnFault
) -> None:
    """A clean stop, then a kill -9, each 5 s away."""
    figures = outages(own_topo, own_broker, procs, [("clean stop", 5.0), ("kill -9", 5.0)])
    report("broker stop/restart under load", **figures)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_broker_stopped_and_killed_for_longer_in_turn(
    own_topo: Settings, own_broker: ProxiedBroker, procs: SpawnFault
) -> None:
    """Four outages of 20-30 s, clean and kill -9 in turn."""
    plan = [("kill -9", 20.0), ("clean stop", 25.0), ("kill -9", 30.0), ("clean stop", 20.0)]
    figures = outages(own_topo, own_broker, procs, plan)
    report("broker stop/restart x4, 20-30 s", **figures)
