"""Scheduler figures: emit throughput vs a like-for-like passthrough, a top-of-the-hour
burst with a small tenant in the same instant, state size per job, restore and takeover.

``scheduler_runs_per_s`` is the throughput of one scheduler process: runs of the burst seen by
a read_committed consumer per second of their commit span. ``passthrough_per_s`` is the same
per-run work without the scheduler's logic (bench_passthrough: one consume, one state write
and its changelog record, one produce of a run record of the scheduler's size, same commit
interval), records per second of wall time of one process: the fastest of three passes.

    .venv/bin/python bench/bench_scheduler.py --jobs 100000 [--quick]

Progress goes to stderr; the last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import re
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from schedulerstream.codec import default_codec
from schedulerstream.kafka import clients
from schedulerstream.model import JobDefinition
from schedulerstream.publish import Publisher
from schedulerstream.settings import Settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.bench_passthrough import measure_best as passthrough_best
from bench.common import (
    bench_broker,
    cpu_seconds,
    dir_bytes,
    fresh,
    log_bytes,
    percentile,
    progress,
    start_profile,
    summarize_profile,
    wait_split,
)
from harness.procs import ProcessorProcess

SECOND = 1_000_000
RUNNING = re.compile(r"^(\S+ \S+) INFO .*task (\d+) running: restored (\d+) records \((\w+)\)")


def jobs_for(
    tenant: str, count: int, interval_s: int, phase_s: int, payload_bytes: int = 0
) -> list[JobDefinition]:
    """Kafka-target jobs; with ``payload_bytes``, each carries that much base64 text of its
    own random bytes (lz4 cannot shrink it much, as with real payloads)."""
    return [
        JobDefinition.model_validate(
            {"tenant": tenant, "job_id": f"j{i}",
             "schedule": {"every": interval_s, "phase": phase_s},
             "target": {"type": "kafka", "topic": "bench.out"},
             **({"payload": {"data": _noise(f"{tenant}{i}", payload_bytes)}}
                if payload_bytes else {})}
        )
        for i in range(count)
    ]  # fmt: skip


def _noise(seed: str, size: int) -> str:
    return base64.b64encode(random.Random(seed).randbytes(size * 3 // 4)).decode()


def publish(settings: Settings, jobs: list[JobDefinition], chunk: int = 20_000) -> None:
    publisher = Publisher(settings)
    for start in range(0, len(jobs), chunk):
        publisher.put_jobs(jobs[start : start + chunk], timeout=120)


def _hms(instant_us: int) -> str:
    return time.strftime("%H:%M:%SZ", time.gmtime(instant_us // SECOND))


def group_lag(settings: Settings, group: str, topic: str) -> int:
    consumer = Consumer(clients.consumer_config(settings, group))
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        parts = [TopicPartition(topic, p) for p in meta.partitions]
        committed = consumer.committed(parts, timeout=10)
        lag = 0
        for tp in committed:
            _, high = consumer.get_watermark_offsets(
                TopicPartition(topic, tp.partition), timeout=10
            )
            lag += high - max(tp.offset, 0)
        return lag
    finally:
        consumer.close()


def wait_ingested(settings: Settings, timeout: float) -> float:
    started = time.monotonic()
    group = f"{settings.topic_prefix}scheduler"
    while time.monotonic() - started < timeout:
        if group_lag(settings, group, settings.topic("schedules")) == 0:
            return time.monotonic() - started
        time.sleep(1)
    raise RuntimeError("the scheduler did not ingest the jobs in time")


def log_times(proc: ProcessorProcess) -> list[tuple[float, int, int, str]]:
    """(unix time, partition, records, warm|cold) for each task that reached RUNNING."""
    found = []
    for line in proc.log().splitlines():
        match = RUNNING.match(line)
        if match:
            stamp = datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            found.append((stamp, int(match[2]), int(match[3]), match[4]))
    return found


def watch_burst(
    settings: Settings, instant_us: int, expected: int, timeout: float,
    ready: Callable[[], object] = lambda: None,
) -> list[tuple[str, int, int]]:  # fmt: skip
    """(tenant, emitted_at_us, arrival_us) of the runs of ``instant_us``, read_committed, from
    the ends of ``runs`` as they are when it is called (``ready`` runs once they are fixed)."""
    consumer = Consumer(clients.consumer_config(settings, f"{settings.topic_prefix}bench-watch"))
    topic = settings.topic("runs")
    meta = consumer.list_topics(topic, timeout=10).topics[topic]
    ends = [(p, consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1])
            for p in meta.partitions]  # fmt: skip
    consumer.assign([TopicPartition(topic, p, end) for p, end in ends])
    ready()
    codec = default_codec()
    seen: list[tuple[str, int, int]] = []
    deadline = time.monotonic() + timeout
    while len(seen) < expected and time.monotonic() < deadline:
        for msg in consumer.consume(2000, 0.1):
            if msg.error():
                continue
            arrival = time.time_ns() // 1000
            name, record = codec.decode(msg.value())
            if name == "RunTriggered" and record["scheduled_at_us"] == instant_us:
                seen.append((record["tenant"], record["emitted_at_us"], arrival))
    consumer.close()
    return seen


def burst(
    base: Settings, big: int, small: int, log_dir: Path, burst_lead_ms: int,
    profile_s: float = 0.0, processes: int = 1, payload_bytes: int = 0,
) -> tuple[dict[str, Any], Settings, ProcessorProcess]:  # fmt: skip
    """One tenant's ``big`` jobs and another's ``small`` due at one instant, emitted by
    ``processes`` members of the group (1 or 2; the first is returned running, the second is
    stopped); with ``profile_s``, a py-spy profile of the first from now to ``profile_s``
    after it (``profile``: its summary; idle samples are not counted)."""
    interval = 3600  # hourly jobs: exactly one instant falls inside the run
    settings = fresh(base, burst_lead_ms=burst_lead_ms)
    members = []
    for i in range(processes):
        name = f"burst-{burst_lead_ms}-{processes}x{i}"
        data_dir = settings.data_dir / ("a" if i == 0 else f"member{i}")
        members.append(ProcessorProcess(settings, "scheduler", name, log_dir, data_dir=data_dir))
    proc = members[0]
    for member in members:
        member.start()
    if processes == 1:
        proc.wait_for_log(" running: restored", timeout=120, count=settings.partitions)
    else:
        wait_split(members, settings.partitions, timeout=300)
    # publish + ingest first: 1M jobs took 117-119 s at 002e737 on a quiet machine (8.4k
    # jobs/s); the margin allows under 3k/s (a busy machine) before the burst is refused
    margin_s = max(60, (big + small) // 3000 + 60)
    instant = (time.time_ns() // 1000 // SECOND + margin_s) * SECOND
    phase = instant // SECOND % interval
    progress(f"publishing {big} + {small} jobs due at {_hms(instant)}")
    t0 = time.monotonic()
    jobs = jobs_for("big", big, interval, phase, payload_bytes) + jobs_for(
        "small", small, interval, phase, payload_bytes
    )
    publish(settings, jobs)
    produce_s = time.monotonic() - t0
    ingest_s = wait_ingested(settings, timeout=margin_s)
    progress(f"published in {produce_s:.1f}s, ingested {ingest_s:.1f}s after")
    now = time.time_ns() // 1000
    # the CPU window opens 1 s before the runs' emission does (lead + lookahead ahead)
    opens_s = (instant - (burst_lead_ms + settings.lookahead_ms + 1000) * 1000) / 1e6
    if opens_s - 1 < now / 1e6:
        raise RuntimeError("ingest took too long: the burst began before all jobs were loaded")
    progress(f"waiting for the burst at {_hms(instant)}")
    spy, profile_path = None, log_dir / f"scheduler-burst-{burst_lead_ms}.profile"
    if profile_s and proc.process is not None:
        spy = start_profile(proc.process.pid, (instant - now) / 1e6 + profile_s, profile_path)
    cpu: list[float] = []  # the first member's, from ``opens_s`` to the last run read
    seen = watch_burst(settings, instant, big + small, timeout=(instant - now) / 1e6 + 600,
                       ready=lambda: cpu.append(_cpu_at(proc, opens_s)))  # fmt: skip
    cpu.append(_cpu_at(proc, 0.0))
    for member in members[1:]:
        member.stop()
    profile = None
    if spy is not None:
        spy.wait(timeout=(instant - now) / 1e6 + profile_s + 60)
        profile = summarize_profile(profile_path)
    arrivals = [a for _, _, a in seen]
    late_ms = [(a - instant) / 1000 for _, _, a in seen]
    small_ms = [(a - instant) / 1000 for t, _, a in seen if t == "small"]
    span_s = (max(arrivals) - min(arrivals)) / 1e6 if arrivals else float("nan")
    return (
        {
            "burst_jobs": big + small,
            "burst_seen": len(seen),
            "burst_drain_s": round(max(late_ms) / 1000, 3) if late_ms else None,
            "burst_commit_span_s": round(span_s, 3),
            "scheduler_runs_per_s": round(len(seen) / span_s) if span_s > 0 else None,
            "emit_lateness_p50_ms": round(percentile(late_ms, 50), 1),
            "emit_lateness_p99_ms": round(percentile(late_ms, 99), 1),
            "burst_small_tenant_p99_ms": round(percentile(small_ms, 99), 1),
            "cpu_us_per_run": _per_run_us(cpu, len(seen)) if processes == 1 else None,
            "publish_jobs_per_s": round((big + small) / produce_s),
            "ingest_jobs_per_s": round((big + small) / (produce_s + ingest_s)),
            **({"profile": profile} if profile is not None else {}),
        },
        settings,
        proc,
    )


def state_and_restore(
    settings: Settings, proc: ProcessorProcess, jobs: int, log_dir: Path, broker_dir: Path
) -> dict[str, Any]:
    rocks = dir_bytes(settings.data_dir / "a")
    changelog = sum(
        log_bytes(p)
        for p in (broker_dir / "kafka" / "data").glob(f"{settings.topic('scheduler-state')}-*")
    )
    result: dict[str, Any] = {
        "state_rocksdb_bytes": rocks,
        "state_changelog_bytes": changelog,
        "state_bytes_per_job": round((rocks + changelog) / jobs, 1),
    }
    proc.stop()
    warm = ProcessorProcess(
        settings, "scheduler", "warm-a", log_dir, data_dir=settings.data_dir / "a"
    )
    started = time.time()
    warm.start()
    warm.wait_for_log(" running: restored", timeout=600, count=settings.partitions)
    times = log_times(warm)
    result["warm_restart_s"] = round(max(t for t, *_ in times) - started, 2)
    warm.stop()
    cold = ProcessorProcess(
        settings, "scheduler", "cold-b", log_dir, data_dir=settings.data_dir / "b"
    )
    started = time.time()
    cold.start()
    cold.wait_for_log(" running: restored", timeout=1200, count=settings.partitions)
    times = log_times(cold)
    records = sum(r for _, _, r, _ in times)
    elapsed = max(t for t, *_ in times) - started
    result["cold_restore_records"] = records
    result["cold_restore_s"] = round(elapsed, 2)
    # the changelog holds more records than jobs until it is compacted (a fired job's update)
    result["restore_records_per_s"] = round(records / elapsed)
    result["restore_jobs_per_s"] = round(jobs / elapsed)
    # takeover: a second instance joins and keeps a warm standby copy of the partitions the
    # first runs (num_standby_replicas 1); once those copies caught up the first is killed
    other = ProcessorProcess(
        settings, "scheduler", "cold-c", log_dir, data_dir=settings.data_dir / "c"
    )
    other.start()
    wait_split([cold, other], settings.partitions, timeout=1800)
    before = len(log_times(other))
    killed_at = time.time()
    cold.kill()
    other.wait_for_log(" running: restored", timeout=300, count=before + 1)
    deadline = time.monotonic() + 120
    while (
        time.monotonic() < deadline
        and len({p for _, p, _, _ in log_times(other)}) < settings.partitions
    ):
        time.sleep(0.5)
    taken = log_times(other)[before:]
    after = [t for t, *_ in taken]
    result["takeover_s"] = round(max(after) - killed_at, 2) if after else None
    result["takeover_restored_records"] = sum(r for _, _, r, _ in taken)
    result["takeover_restore"] = sorted({kind for *_, kind in taken})
    result["takeover_session_timeout_ms"] = settings.session_timeout_ms
    other.stop()
    return result


def _per_run_us(cpu: list[float], runs: int) -> float | None:
    """CPU µs a run between two readings; None when none ran or the process was gone."""
    used = cpu[1] - cpu[0]
    return round(used / runs * 1e6, 1) if runs and min(cpu) > 0 and used > 0 else None


def _cpu_at(proc: ProcessorProcess, unix_s: float) -> float:
    """``proc``'s CPU seconds once the wall clock reaches ``unix_s`` (0: now)."""
    time.sleep(max(0.0, unix_s - time.time()))  # a point in time, not a wait for a condition
    return cpu_seconds(proc.process.pid) if proc.process is not None else 0.0


def payload_bursts(
    base: Settings, big: int, small: int, log_dir: Path, payload_bytes: int
) -> dict[str, Any]:
    """The burst without its lead (the raw emission rate) of jobs carrying ``payload_bytes``.
    The passthrough carries no payload, so no ratio."""
    progress(f"burst of jobs with {payload_bytes}-byte payloads, without the burst lead")
    result, _, proc = burst(base, big, small, log_dir, burst_lead_ms=0,
                            payload_bytes=payload_bytes)  # fmt: skip
    proc.stop()
    return {"payload_bytes": payload_bytes, **result}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--passthrough-records", type=int, default=0, help="default: --jobs")
    parser.add_argument(
        "--skip-nolead", action="store_true", help="only the default (burst lead) burst run"
    )
    parser.add_argument(
        "--payload-bytes", type=int, default=0, help="each job's payload; then only its burst"
    )
    args = parser.parse_args()
    base = bench_broker()
    log_dir = Path(base.data_dir).parent / "logs" / time.strftime("%Y%m%dT%H%M%S")
    log_dir.mkdir(parents=True, exist_ok=True)
    if args.payload_bytes:
        print(json.dumps(payload_bursts(base, args.jobs, args.small, log_dir, args.payload_bytes)))
        return
    records = args.passthrough_records or args.jobs
    progress(f"passthrough baseline: {records} records")
    raw = passthrough_best(lambda: fresh(base, apply=False), records)
    figures: dict[str, Any] = {
        "passthrough_per_s": raw["records_per_s"],
        "passthrough_passes_per_s": raw["passes_per_s"],
        "passthrough_baseline": raw["baseline"],
    }
    if not args.skip_nolead:
        progress("burst without the burst lead (raw emission rate and lateness)")
        raw_burst, settings, proc = burst(base, args.jobs, args.small, log_dir, burst_lead_ms=0)
        proc.stop()
        figures.update({f"nolead_{k}": v for k, v in raw_burst.items()})
    progress("burst with the default burst lead")
    result, settings, proc = burst(base, args.jobs, args.small, log_dir, burst_lead_ms=10_000)
    figures["scheduler_runs_per_s"] = figures.get("nolead_scheduler_runs_per_s") or result.pop(
        "scheduler_runs_per_s"
    )
    result.pop("scheduler_runs_per_s", None)
    figures.update(result)
    if figures.get("scheduler_runs_per_s"):
        figures["scheduler_vs_passthrough"] = round(
            figures["scheduler_runs_per_s"] / figures["passthrough_per_s"], 3
        )
    progress("state size, restore, takeover")
    figures.update(
        state_and_restore(settings, proc, args.jobs + args.small, log_dir, Path(base.data_dir))
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
