"""SIGSTOP past the session timeout: a zombie scheduler.

Two scheduler instances share the partitions; one is SIGSTOPped (mid-loop, usually with a
transaction open) for longer than the group session timeout, so the other takes its partitions
over (after the stopped one's open transaction times out, it restores them from the changelog).
Then SIGCONT: the zombie still believes it owns its partitions, ticks, emits runs and tries to
commit. It must be fenced (its offsets carry a stale member epoch; its open transaction was
aborted by the broker), so nothing it produced after losing the partitions is committed; it
then rejoins the group (or exits cleanly). Checked on the committed runs (read_committed):
every 1 s instant of every job once, one run id per instant; the zombie's aborted records are
counted on a read_uncommitted read.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
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
HOOKS = Path(__file__).resolve().parent / "hooks"  # sitecustomize: SIGSTOP at a point


def stopped(proc: FaultProcess) -> bool:
    """The process is in the stopped state (T) of /proc."""
    assert proc.process is not None
    stat = Path(f"/proc/{proc.process.pid}/stat").read_text()
    return stat.rpartition(")")[2].split()[0] == "T"


def zombie_rounds(
    topo: Settings, procs: SpawnFault, rounds: int, point: str | None = None
) -> dict[str, Any]:
    """``point``: the first zombie stops itself there (tests/faults/hooks), else SIGSTOP."""
    trigger = Path(str(topo.data_dir)).with_name("stop-a")
    hook = {
        "PYTHONPATH": os.pathsep.join([str(HOOKS), os.environ.get("PYTHONPATH", "")]),
        "SS_TEST_STOP_AT": point or "",
        "SS_TEST_STOP_FILE": str(trigger),
    }
    a = procs("scheduler", "a", env=hook if point else None)
    a.wait_running(topo.partitions)
    Publisher(topo).put_jobs(every_second_jobs(JOBS))
    b = procs("scheduler", "b")

    def split() -> bool:
        return (
            bool(owned_partitions(b.log(), "schedules"))
            and len(owned_partitions(a.log(), "schedules") | owned_partitions(b.log(), "schedules"))
            == topo.partitions
        )

    wait_until(split, 60, "a and b share the partitions", alive=b)
    since = next_second_us(1)
    time.sleep(3)  # both emitting (pacing, not an assertion)
    figures: list[dict[str, Any]] = []
    zombie, other = a, b
    for _ in range(rounds):
        theirs = owned_partitions(zombie.log(), "schedules")
        assert theirs, f"{zombie.instance} owns nothing before the stop"
        if point and zombie is a:
            trigger.touch()
            wait_until(lambda z=zombie: stopped(z), 30, f"a stopped at {point}", alive=zombie)
        else:
            zombie.signal(signal.SIGSTOP)
        stopped_at = time.monotonic()
        wait_until(
            lambda o=other: len(owned_partitions(o.log(), "schedules")) == topo.partitions,
            90,
            f"{other.instance} takes over {sorted(theirs)}",
            alive=other,
        )
        takeover_s = time.monotonic() - stopped_at
        time.sleep(2)  # the survivor runs everything for a while
        stopped_s = time.monotonic() - stopped_at
        mark = len(zombie.log())
        resumed_wall = time.time()
        zombie.signal(signal.SIGCONT)

        def fenced(z: FaultProcess = zombie, m: int = mark) -> str | None:
            after = z.log()[m:]
            for sign in (" lost ", "transaction failed"):
                if sign in after:
                    return sign.strip()
            return "exited" if not z.alive() else None

        how = wait_until(fenced, 60, f"{zombie.instance} notices it was fenced")
        code = None if zombie.alive() else zombie.wait_exit(1)
        if code is None:  # it rejoins as a new member and runs partitions again
            wait_until(
                lambda z=zombie, m=mark: bool(owned_partitions(z.log()[m:], "schedules")),
                90,
                f"{zombie.instance} rejoins and runs partitions again",
                alive=zombie,
            )
        else:
            assert code == 0, f"the zombie exited with {code}:\n{zombie.log()[-3000:]}"
        rejoined_s = time.time() - resumed_wall
        figures.append(
            {
                "stopped_s": round(stopped_s, 1),
                "takeover_s": round(takeover_s, 1),
                "rejoined_s": round(rejoined_s, 1),
                "exit": code,
                "fenced_by": how,
            }
        )
        time.sleep(3)
        zombie, other = other, zombie
    resumed = now_us()
    wait_until(lambda: now_us() > resumed + 3_000_000, 10, "3 s of steady running")
    until = next_second_us(-2)
    assert a.stop() == 0
    assert b.stop() == 0
    checked = check_every_instant_once(topo, JOBS, since, until)
    produced = uncommitted_run_ids(topo)
    aborted = sum(n - 1 for n in produced.values() if n > 1)
    return {"rounds": figures, "aborted_duplicates": aborted, **checked}


def test_a_sigstopped_scheduler_is_fenced_and_rejoins(topo: Settings, procs: SpawnFault) -> None:
    """CI: one zombie round."""
    figures = zombie_rounds(topo, procs, rounds=1)
    report("scheduler SIGSTOP zombie", **figures)


@pytest.mark.slow
def test_sigstopped_schedulers_in_turn_are_fenced_and_rejoin(
    topo: Settings, procs: SpawnFault
) -> None:
    """Four rounds, the two instances taking turns at being the zombie."""
    figures = zombie_rounds(topo, procs, rounds=4)
    report("scheduler SIGSTOP zombie x4", **figures)


@pytest.mark.slow
def test_a_scheduler_stopped_mid_commit_is_fenced_and_rejoins(
    topo: Settings, procs: SpawnFault
) -> None:
    figures = zombie_rounds(topo, procs, rounds=1, point="commit")
    report("scheduler SIGSTOP zombie mid-commit", **figures)
