"""A lost or corrupted RocksDB state directory between runs of a scheduler: rebuilt from the
changelog (cold restore), nothing lost, nothing emitted twice.

One scheduler instance is stopped and restarted several times under load; between runs its
per-partition store directories are damaged in a different way each time: deleted, every
file overwritten with random bytes, two partitions' directories swapped (each store then
belongs to another changelog partition), every file truncated to zero, and (after a kill -9)
the table and log files' middles scribbled over.
"""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from schedulerstream.publish import Publisher
from schedulerstream.settings import Settings
from tests.faults.conftest import SpawnFault
from tests.faults.helpers import (
    SECOND,
    check_every_instant_once,
    every_second_jobs,
    next_second_us,
    now_us,
    report,
    wait_until,
)

pytestmark = [pytest.mark.kafka, pytest.mark.faults]
JOBS = 100


def files(store: Path) -> list[Path]:
    return sorted(p for p in store.rglob("*") if p.is_file())


def delete(stores: Path, rng: random.Random) -> list[int]:
    shutil.rmtree(stores / "0")
    return [0]


def overwrite_with_random(stores: Path, rng: random.Random) -> list[int]:
    for path in files(stores / "1"):
        size = max(path.stat().st_size, 64)
        path.write_bytes(rng.randbytes(size))
    return [1]


def swap(stores: Path, rng: random.Random) -> list[int]:
    (stores / "2").rename(stores / "tmp")
    (stores / "3").rename(stores / "2")
    (stores / "tmp").rename(stores / "3")
    return [2, 3]


def truncate(stores: Path, rng: random.Random) -> list[int]:
    for path in files(stores / "0") + files(stores / "1"):
        path.write_bytes(b"")
    return [0, 1]


def scribble(stores: Path, rng: random.Random) -> list[int]:
    """Random bytes over the middle of every table and write-ahead-log file (not the names)."""
    for store in sorted(stores.iterdir()):
        for path in files(store):
            if path.suffix not in (".sst", ".log") or path.stat().st_size < 64:
                continue
            size = path.stat().st_size
            with path.open("r+b") as out:
                out.seek(size // 3)
                out.write(rng.randbytes(max(16, size // 3)))
    return list(range(4))


# (name, damage, the touched stores must restore cold: a scribbled write-ahead log may be
# recovered to an older consistent point by RocksDB itself, then the restore is warm from there)
DAMAGES: list[tuple[str, Callable[[Path, random.Random], list[int]], bool]] = [
    ("deleted", delete, True),
    ("overwritten with random bytes", overwrite_with_random, True),
    ("swapped with another partition", swap, True),
    ("truncated to zero", truncate, True),
    ("table and log files scribbled over (after kill -9)", scribble, False),
]


def test_damaged_state_dirs_are_rebuilt_from_the_changelog(
    topo: Settings, procs: SpawnFault
) -> None:
    rng = random.Random(6)
    sched = procs("scheduler", "a")
    sched.wait_running(topo.partitions)
    stores = Path(str(sched.overrides["data_dir"])) / "scheduler"
    Publisher(topo).put_jobs(every_second_jobs(JOBS))
    since = next_second_us(2)
    observed: dict[str, object] = {}
    wait_until(lambda: now_us() > since + 3 * SECOND, 30, "runs before the first damage")
    for name, damage, must_be_cold in DAMAGES:
        if "kill" in name:
            sched.kill()
        else:
            assert sched.stop() == 0
        touched = damage(stores, rng)
        sched = procs("scheduler", "a")
        sched.wait_running(topo.partitions)
        log = sched.this_log()
        lines = [line for line in log.splitlines() if " running: restored" in line]
        cold = sum(1 for line in lines if "(cold)" in line)
        if must_be_cold:
            assert cold >= len(touched), f"{name}: {cold} cold restores:\n{log[-3000:]}"
        observed[name] = {"stores": touched, "cold_restores": cold}
        resumed = now_us()
        wait_until(lambda r=resumed: now_us() > r + 3 * SECOND, 30, "runs after the restart")
    until = next_second_us(-2)
    assert sched.stop() == 0
    assert os.path.isdir(stores / "0")
    figures = check_every_instant_once(topo, JOBS, since, until)
    report("state dir lost/corrupted", damages=observed, **figures)
