"""The scheduler's state disk full: its data dir on a small tmpfs (mounted by the test, as
root), filled up by another file while the scheduler runs under load.

RocksDB writes then fail (ENOSPC). The processor must stop cleanly (no traceback, a message)
or keep going and recover; either way nothing committed may be lost or emitted twice once the
space returns (a stopped processor is restarted, as a supervisor would: it restores its
stores from the changelog). The committed runs are checked after the space is freed: every
1 s instant of every job once (the disk is full for less than the misfire grace, so late
instants are emitted late, not missed), lateness measured.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
SIZE_MB = 16
_TASK_LINE = re.compile(
    r"task (\d+)(: (?:local write failed|state store|closing its store|restore cannot start)"
    r"| running)"
)


def stalled_tasks(log: str, partitions: int) -> set[int]:
    """Partitions whose task is not running at the end of ``log``: its last line is a failed
    write or a closed store (it retries its restore later), or it never ran."""
    running: dict[int, bool] = {}
    for match in _TASK_LINE.finditer(log):
        running[int(match.group(1))] = match.group(2) == " running"
    return {p for p in range(partitions) if not running.get(p, False)}


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A ``SIZE_MB`` tmpfs mounted at ``tmp_path/small`` (unmounted afterwards)."""
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE_MB}m", "tmpfs", str(mount_point)],
        check=True,
        capture_output=True,
    )
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False, capture_output=True)


def fill(path: Path) -> int:
    """Write ``path`` until the filesystem is full; the bytes written."""
    written = 0
    chunk = b"\0" * 65536
    with path.open("wb", buffering=0) as out:
        while True:
            try:
                written += out.write(chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
    small = b"\0" * 512
    with contextlib.suppress(OSError), path.open("ab", buffering=0) as out:
        while True:
            written += out.write(small)
    return written


def disk_full(
    topo: Settings, procs: SpawnFault, small_fs: Path, full_s: float, case: str
) -> dict[str, Any]:
    sched = procs("scheduler", "a", data_dir=small_fs / "state")
    sched.wait_running(topo.partitions)
    Publisher(topo).put_jobs(every_second_jobs(JOBS))
    since = next_second_us(2)
    wait_until(lambda: now_us() > since + 3 * SECOND, 30, "runs before the disk fills")
    mark = len(sched.log())
    filler = small_fs / "filler"
    filled = fill(filler)
    full_at = time.monotonic()
    while time.monotonic() - full_at < full_s and sched.alive():
        time.sleep(0.2)
    stopped_by_itself = not sched.alive()
    time.sleep(max(0.0, full_s - (time.monotonic() - full_at)))
    during = sched.log()[mark:]
    filler.unlink()
    freed = now_us()
    code = None
    if not sched.alive():
        code = sched.wait_exit(1)
        sched = procs("scheduler", "a", data_dir=small_fs / "state")  # a supervisor restarts it
    sched.wait_running(1)
    # a write that failed just before the space returned retries its restore seconds later
    wait_until(
        lambda: not stalled_tasks(sched.log(), topo.partitions),
        60,
        "every task running again after the space returned",
        alive=sched,
    )
    back = now_us()
    wait_until(lambda: now_us() > max(freed, back) + 6 * SECOND, 30, "6 s of it running again")
    until = next_second_us(-2)
    assert sched.alive(), sched.log()[-3000:]
    assert sched.stop() == 0
    checked = check_every_instant_once(topo, JOBS, since, until)
    figures = {
        "fs_mb": SIZE_MB,
        "filler_mb": round(filled / 2**20, 1),
        "full_s": full_s,
        "stopped_by_itself": stopped_by_itself,
        "exit": code,
        "local_write_failures": during.count("local write failed"),
        "transaction_failures": during.count("transaction failed"),
        "no_space_lines": during.count("No space left"),
        "tracebacks": during.count("Traceback"),
        "running_again_s": round((back - freed) / 1e6, 1),
        **checked,
    }
    report(case, **figures)
    # nothing was lost (checked above); now how it behaved while the disk was full
    assert "Traceback" not in during, f"not a clean stop nor a recovery:\n{during[-3000:]}"
    return figures


@pytest.mark.slow
def test_state_disk_full_then_space_returns(
    topo: Settings, procs: SpawnFault, small_fs: Path
) -> None:
    disk_full(topo, procs, small_fs, 10.0, "state disk full 10 s")


@pytest.mark.slow
def test_state_disk_full_for_longer(topo: Settings, procs: SpawnFault, small_fs: Path) -> None:
    disk_full(topo, procs, small_fs, 40.0, "state disk full 40 s")


@pytest.mark.slow
def test_small_fs_is_really_small(small_fs: Path) -> None:
    """The fixture's premise: writes there fail with ENOSPC past ``SIZE_MB``."""
    written = fill(small_fs / "probe")
    assert SIZE_MB * 2**20 * 0.9 < written <= SIZE_MB * 2**20
    with pytest.raises(OSError) as failed:
        (small_fs / "more").write_bytes(b"x" * 4096)
    assert failed.value.errno == errno.ENOSPC
    os.unlink(small_fs / "probe")
