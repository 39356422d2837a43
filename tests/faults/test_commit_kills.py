"""kill -9 of a scheduler at each step of the commit protocol, repeated.

The tests' process hook (``tests/faults/hooks/sitecustomize.py``, ``SS_FAULT_KILL_AT``)
SIGKILLs the process the n-th time a commit reaches a step: before ``commit_transaction``
(an open transaction holding runs, changelog and offsets), during it (a timer fires while
EndTxn is in flight), after it but before the local RocksDB write (the store is behind the
changelog), and after the local write. Each restart keeps the instance id (init_transactions
fences the dead epoch) and the data dir (warm restore). Afterwards every 1 s instant of every
job is committed exactly once, under one run id.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Any

import pytest

from schedulerstream.publish import Publisher
from schedulerstream.settings import Settings
from tests.faults.conftest import SpawnFault
from tests.faults.helpers import (
    check_every_instant_once,
    every_second_jobs,
    next_second_us,
    report,
)
from tests.support.runs import RunsFollower, emitted_through

pytestmark = [pytest.mark.kafka, pytest.mark.faults]
JOBS = 200
ENV = "SS_FAULT_KILL_AT"
POINTS = ("before-commit", "during-commit", "before-local", "after-local")
HOOKS = Path(__file__).resolve().parent / "hooks"  # sitecustomize: SIGKILL at a commit step


def killing_env(plan: str) -> dict[str, str]:
    """The environment that makes a processor kill itself as ``plan`` says."""
    path = os.pathsep.join([str(HOOKS), os.environ.get("PYTHONPATH", "")])
    return {ENV: plan, "PYTHONPATH": path}


def kill_cycles(
    topo: Settings, procs: SpawnFault, phases: list[str], reps: int, seed: int
) -> dict[str, Any]:
    rng = random.Random(seed)
    first = procs("scheduler", "a")
    first.wait_running(topo.partitions)
    Publisher(topo).put_jobs(every_second_jobs(JOBS))
    with RunsFollower(topo) as runs:
        runs.wait_until(lambda seen: emitted_through(seen, JOBS, 0), 60, "every job emitting")
    since = next_second_us(1)
    assert first.stop() == 0
    kills: list[str] = []
    started = time.monotonic()
    for rep in range(reps):
        for phase in phases:
            n = rng.randint(2, 12)
            proc = procs("scheduler", "a", env=killing_env(f"{phase}:{n}"))
            code = proc.wait_exit(180)
            log = proc.this_log()
            assert code == -9, f"rep {rep} {phase}:{n}: exit {code}, not SIGKILL:\n{log[-2000:]}"
            assert f"fault injection: SIGKILL at {phase} #{n}" in log
            kills.append(f"{phase}:{n}")
    cycle_s = (time.monotonic() - started) / max(1, len(kills))
    last = procs("scheduler", "a")
    last.wait_running(topo.partitions)
    until = next_second_us(2)  # a few instants of steady running after the last kill
    with RunsFollower(topo) as runs:
        runs.wait_until(lambda seen: emitted_through(seen, JOBS, until), 60, "caught up")
    assert last.stop() == 0
    figures = check_every_instant_once(topo, JOBS, since, until)
    return {"kills": len(kills), "seconds_per_kill": round(cycle_s, 1), **figures}


def test_kill_9_at_each_commit_step_once(topo: Settings, procs: SpawnFault) -> None:
    """CI: one kill at each of the four steps, in a row."""
    figures = kill_cycles(topo, procs, list(POINTS), reps=1, seed=6)
    report("commit kill -9, each step once", **figures)


@pytest.mark.slow
@pytest.mark.parametrize("phase", POINTS)
def test_kill_9_at_one_commit_step_20_times_in_a_row(
    topo: Settings, procs: SpawnFault, phase: str
) -> None:
    figures = kill_cycles(topo, procs, [phase], reps=20, seed=POINTS.index(phase))
    report(f"commit kill -9 x20 at {phase}", **figures)
