"""Timeliness through a failover: two schedulers and two dispatchers (standbys on) under a
steady load of per-second cron jobs to a real receiver; one scheduler is killed with
SIGKILL, later one dispatcher. For the runs due in the ``window_s`` after each kill: the
dispatch lateness (first arrival at the receiver minus the scheduled instant, p50/p99/max),
the instants that never arrived, and the takeover (kill until the survivor runs every
partition).

    .venv/bin/python bench/bench_failover.py --jobs 200 [--window 10]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.bench_scheduler import publish, wait_ingested
from bench.common import bench_broker, fresh, owned_partitions, percentile, progress, wait_split
from bench.stack import BENCH_TENANT_RATE, Receiver, http_job
from harness.procs import ProcessorProcess
from schedulerstream.settings import Settings

SECOND_US = 1_000_000
RUNNING = re.compile(r"task (\d+) running: restored (\d+) records \((\w+)\)")


def _running_since(proc: ProcessorProcess, mark: int) -> set[int]:
    """Partitions ``proc`` logged RUNNING for after byte ``mark`` of its log."""
    return {int(p) for p, _, _ in RUNNING.findall(proc.log()[mark:])}


def _pair(settings: Settings, component: str, log_dir: Path) -> list[ProcessorProcess]:
    procs = [
        ProcessorProcess(
            settings, component, f"{component}-{member}", log_dir,
            data_dir=settings.data_dir / f"{component}-{member}",
            allow_private_targets=True, tenant_rate_per_s=BENCH_TENANT_RATE,
        ).start()
        for member in ("a", "b")
    ]  # fmt: skip
    return procs


def _kill_and_measure(
    victim: ProcessorProcess, survivor: ProcessorProcess, receiver: Receiver,
    jobs: int, partitions: int, window_s: float,
) -> dict[str, Any]:  # fmt: skip
    owned = owned_partitions(victim)
    mark = len(survivor.log())
    killed_at = time.time()
    victim.kill()
    window = (int(killed_at) + 1) * SECOND_US, (int(killed_at + window_s) + 1) * SECOND_US
    deadline = time.monotonic() + window_s + 30
    takeover_s = None
    while time.monotonic() < deadline:
        if takeover_s is None and owned <= _running_since(survivor, mark):
            takeover_s = time.time() - killed_at
        receiver.poll()
        if time.time() * SECOND_US > window[1] + 5 * SECOND_US and takeover_s is not None:
            break
        time.sleep(0.2)
    receiver.poll()
    late = [
        (a.arrival_us - a.scheduled_us) / 1000
        for a in receiver.first.values()
        if window[0] <= a.scheduled_us < window[1]
    ]
    expected = jobs * (window[1] - window[0]) // SECOND_US
    return {
        "takeover_s": round(takeover_s, 2) if takeover_s is not None else None,
        "partitions_taken": len(owned),
        "runs_expected": expected,
        "runs_missing": expected - len(late),
        "lateness_p50_ms": round(percentile(late, 50), 1) if late else None,
        "lateness_p99_ms": round(percentile(late, 99), 1) if late else None,
        "lateness_max_ms": round(max(late), 1) if late else None,
    }


def measure(base: Settings, jobs: int = 200, window_s: float = 10.0) -> dict[str, Any]:
    settings = fresh(base, partitions=12)
    log_dir = Path(settings.data_dir) / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    receiver = Receiver(log_dir).start()
    procs: list[ProcessorProcess] = []
    result: dict[str, Any] = {"failover_jobs": jobs, "failover_window_s": window_s,
                              "failover_session_timeout_ms": settings.session_timeout_ms,
                              "failover_lookahead_ms": settings.lookahead_ms}  # fmt: skip
    try:
        url = receiver.url()
        every_second = {"cron": "* * * * * *"}
        publish(settings, [http_job("acme", f"f{i:05d}", url, every_second) for i in range(jobs)])
        schedulers = _pair(settings, "scheduler", log_dir)
        dispatchers = _pair(settings, "dispatcher", log_dir)
        procs = schedulers + dispatchers
        wait_ingested(settings, 120)
        wait_split(schedulers, settings.partitions, 120)
        wait_split(dispatchers, settings.partitions, 120)
        progress(f"failover: {jobs} jobs/s steady, two of each, standbys caught up")
        time.sleep(3)  # steady state before the kill (the load itself, not a sync)
        receiver.poll()
        receiver.clear()
        progress("failover: kill -9 of one scheduler")
        for key, value in _kill_and_measure(
            schedulers[0], schedulers[1], receiver, jobs, settings.partitions, window_s
        ).items():
            result[f"failover_scheduler_{key}"] = value
        receiver.clear()
        progress("failover: kill -9 of one dispatcher")
        for key, value in _kill_and_measure(
            dispatchers[0], dispatchers[1], receiver, jobs, settings.partitions, window_s
        ).items():
            result[f"failover_dispatcher_{key}"] = value
    finally:
        for proc in procs:
            if proc.alive():
                try:
                    proc.stop(30)
                except AssertionError as exc:
                    progress(str(exc).splitlines()[0])
        receiver.stop()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--window", type=float, default=10.0)
    args = parser.parse_args()
    print(json.dumps(measure(bench_broker(), args.jobs, args.window), indent=2))


if __name__ == "__main__":
    main()
