"""One scheduler partition as large as it is at 50M jobs (400,000 jobs: 50M / 128 partitions),
measured rather than extrapolated: state bytes per job, the timer scan's CPU per tick, warm
restart, cold restore, and the takeover by a member holding a standby after kill -9.

The jobs are hourly, spread over the hour (about 111 fall due each second), so the scan works
as in production: every tick finds the instants due and emits their runs.

    .venv/bin/python bench/bench_partition.py --jobs 400000
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.bench_scheduler import log_times, publish, wait_ingested
from bench.common import (
    RESULTS,
    bench_broker,
    cpu_seconds,
    dir_bytes,
    drop_topics,
    fresh,
    log_bytes,
    progress,
)
from harness.procs import ProcessorProcess
from schedulerstream.model import JobDefinition
from schedulerstream.settings import Settings

HOUR = 3600
SCAN_WINDOW_S = 20.0


def hourly_jobs(count: int) -> list[JobDefinition]:
    return [
        JobDefinition.model_validate(
            {"tenant": f"t{i % 50}", "job_id": f"j{i}",
             "schedule": {"every": HOUR, "phase": i % HOUR},
             "target": {"type": "kafka", "topic": "bench.out"}}
        )
        for i in range(count)
    ]  # fmt: skip


def _member(settings: Settings, name: str, log_dir: Path) -> ProcessorProcess:
    return ProcessorProcess(
        settings, "scheduler", name, log_dir, data_dir=settings.data_dir / name
    ).start()


def _running_after(proc: ProcessorProcess, count: int, timeout: float) -> tuple[float, int, str]:
    """Wait for the ``count``-th RUNNING line; (its unix time, records restored, warm|cold)."""
    proc.wait_for_log(" running: restored", timeout=timeout, count=count)
    at, _, records, kind = log_times(proc)[count - 1]
    return at, records, kind


def _caught_up(
    newcomer: ProcessorProcess, owner: ProcessorProcess, timeout: float
) -> tuple[ProcessorProcess, ProcessorProcess]:
    """(standby, owner) once a member's standby has caught up. The group may give the
    partition to the newcomer and make the old owner its standby."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for standby, active in ((newcomer, owner), (owner, newcomer)):
            if "standby 0 caught up" in standby.log():
                return standby, active
            if not standby.alive():
                raise AssertionError(f"{standby.log_path} exited early")
        time.sleep(0.2)
    raise AssertionError(f"no standby caught up within {timeout:g} s")


def measure(base: Settings, jobs: int = 400_000) -> dict[str, Any]:
    settings = fresh(base, partitions=1)
    log_dir = Path(settings.data_dir) / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"partition_jobs": jobs}
    procs: list[ProcessorProcess] = []
    try:
        a = _member(settings, "a", log_dir)
        procs.append(a)
        _running_after(a, 1, 120)
        progress(f"one partition: publishing {jobs} hourly jobs")
        started = time.monotonic()
        publish(settings, hourly_jobs(jobs))
        ingest_s = wait_ingested(settings, 1800)
        result["partition_load_s"] = round(time.monotonic() - started, 1)
        result["partition_ingest_after_publish_s"] = round(ingest_s, 1)
        assert a.process is not None
        before = cpu_seconds(a.process.pid)
        time.sleep(SCAN_WINDOW_S)  # the steady scan itself is what is measured
        cpu = cpu_seconds(a.process.pid) - before
        ticks = SCAN_WINDOW_S / (settings.tick_ms / 1000)
        result["partition_scan_cpu_per_tick_us"] = round(cpu / ticks * 1e6)
        result["partition_scan_cores"] = round(cpu / SCAN_WINDOW_S, 3)
        result["partition_due_per_s"] = round(jobs / HOUR, 1)
        a.stop()
        rocks = dir_bytes(settings.data_dir / "a")
        changelog_dir = RESULTS / "broker" / "kafka" / "data"
        changelog = sum(
            log_bytes(p) for p in changelog_dir.glob(f"{settings.topics.scheduler_state}-*")
        )
        result.update(
            partition_rocksdb_bytes=rocks,
            partition_changelog_bytes=changelog,
            partition_state_bytes_per_job=round((rocks + changelog) / jobs, 1),
        )
        progress("one partition: warm restart")
        warm = _member(settings, "a", log_dir)
        procs.append(warm)
        started_at = time.time()
        at, records, kind = _running_after(warm, 2, 600)
        result["partition_warm_restart_s"] = round(at - started_at, 2)
        warm.stop()
        progress("one partition: cold restore")
        cold = _member(settings, "cold", log_dir)
        procs.append(cold)
        started_at = time.time()
        at, records, kind = _running_after(cold, 1, 1800)
        result["partition_cold_restore_s"] = round(at - started_at, 2)
        result["partition_cold_restore_records"] = records
        result["partition_restore_jobs_per_s"] = round(jobs / max(at - started_at, 1e-3))
        progress("one partition: a standby catches up, then the owner is killed")
        newcomer = _member(settings, "standby", log_dir)
        procs.append(newcomer)
        standby, owner = _caught_up(newcomer, cold, 1800)
        result["partition_moved_to_newcomer"] = standby is cold
        running = standby.running_tasks()
        killed = time.time()
        owner.kill()
        at, records, kind = _running_after(standby, running + 1, 600)
        result["partition_takeover_s"] = round(at - killed, 2)
        result["partition_takeover_restored_records"] = records
        result["partition_takeover_restore"] = kind
    finally:
        for proc in procs:
            if proc.alive():
                proc.stop()
        drop_topics(settings)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=400_000)
    args = parser.parse_args()
    print(json.dumps(measure(bench_broker(), args.jobs), indent=2))


if __name__ == "__main__":
    main()
