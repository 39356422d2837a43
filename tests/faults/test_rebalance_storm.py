"""A rebalance storm: scheduler instances joining and leaving every few seconds.

Four instance identities (each keeps its data dir across restarts); every 2-4 s one of them
joins, or one leaves (SIGTERM: a clean leave, or kill -9 one time in three), at least one
always running. Every join and leave moves partitions (revoke, restore, run). Checked on the
committed runs: every 1 s instant of every job once, one run id each; aborted duplicates
(read_uncommitted) and rebalances counted, lateness measured.
"""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

from schedulerstream.publish import Publisher
from schedulerstream.settings import Settings
from tests.faults.conftest import SpawnFault
from tests.faults.helpers import (
    FaultProcess,
    check_every_instant_once,
    every_second_jobs,
    next_second_us,
    now_us,
    owned_partitions,
    report,
    uncommitted_run_ids,
    wait_until,
)

pytestmark = [pytest.mark.kafka, pytest.mark.faults]
JOBS = 100
NAMES = ("s0", "s1", "s2", "s3")


def storm(topo: Settings, procs: SpawnFault, seconds: float, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    running: dict[str, FaultProcess] = {"s0": procs("scheduler", "s0")}
    running["s0"].wait_running(topo.partitions)
    Publisher(topo).put_jobs(every_second_jobs(JOBS))
    since = next_second_us(2)
    wait_until(lambda: now_us() > since + 2_000_000, 10, "runs before the storm")
    events: list[str] = []
    all_procs: list[FaultProcess] = []
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        idle = [n for n in NAMES if n not in running]
        join = bool(idle) and (len(running) == 1 or rng.random() < 0.5)
        if join:
            name = rng.choice(idle)
            running[name] = procs("scheduler", name)
            all_procs.append(running[name])
            events.append(f"+{name}")
        else:
            name = rng.choice(sorted(running))
            proc = running.pop(name)
            if rng.random() < 1 / 3:
                proc.kill()
                events.append(f"-9 {name}")
            else:
                code = proc.stop()
                assert code == 0, f"{name} exited {code} on SIGTERM:\n{proc.log()[-3000:]}"
                events.append(f"-{name}")
        time.sleep(rng.uniform(2.0, 4.0))
    last = next(iter(running.values()))
    for name, proc in list(running.items())[1:]:
        assert proc.stop() == 0, f"{name}:\n{proc.log()[-3000:]}"
    wait_until(
        lambda: len(owned_partitions(last.this_log(), "schedules")) == topo.partitions,
        120,
        f"{last.instance} runs every partition",
        alive=last,
    )
    settled = now_us()
    wait_until(lambda: now_us() > settled + 4_000_000, 10, "4 s after the storm")
    until = next_second_us(-2)
    assert last.stop() == 0
    logs = "".join(p.log() for p in {id(p): p for p in [*all_procs, last]}.values())
    checked = check_every_instant_once(topo, JOBS, since, until)
    aborted = sum(n - 1 for n in uncommitted_run_ids(topo).values() if n > 1)
    return {
        "seconds": seconds,
        "membership_changes": len(events),
        "events": " ".join(events),
        "revocations": logs.count(" revoked "),
        "losses": logs.count(" lost "),
        "task_starts": logs.count(" running: restored"),
        "aborted_duplicates": aborted,
        **checked,
    }


def test_rebalance_storm_20s(topo: Settings, procs: SpawnFault) -> None:
    report("rebalance storm 20 s", **storm(topo, procs, 20.0, seed=6))


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_rebalance_storm_a_minute(topo: Settings, procs: SpawnFault, seed: int) -> None:
    report(f"rebalance storm 60 s (seed {seed})", **storm(topo, procs, 60.0, seed=seed))
