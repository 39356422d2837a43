"""One dispatcher process draining pre-produced runs to a real receiver, against a raw aiohttp
client driving the same receiver with the same concurrency, in the same run.

- ``dispatch_per_s``: ``runs`` RunTriggered records (the scheduler's encoding: distinct jobs of
  ``tenants`` tenants, HTTP targets at the receiver, all already due) are produced to cron.runs
  before ``schedulerstream dispatcher`` starts; the rate is counted at the receiver, from its
  first to its last arrival (ingest into the durable queues, fair selection, attempts events,
  the webhook, the outcome: the whole per-run path of the dispatcher, minus its start-up).
- ``raw_http_per_s``: the same number of POSTs of an envelope of the same size, by
  ``concurrency`` workers on one event loop in this process (``concurrency`` is what the
  dispatcher may have in flight: min(dispatch_concurrency, tenants × tenant_concurrency)).
  Measured before and after the dispatcher; the figure is the mean.

    .venv/bin/python bench/bench_dispatch.py [--runs 10000] [--tenants 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
from confluent_kafka import Producer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.common import (
    RESULTS,
    CpuMeter,
    bench_broker,
    fresh,
    progress,
    start_profile,
    summarize_profile,
)
from bench.stack import Receiver, Stack, http_job, wait_until
from schedulerstream.codec import default_codec
from schedulerstream.ids import scheduled_run_id
from schedulerstream.kafka.clients import producer_config
from schedulerstream.partitioner import partition_for_job_key
from schedulerstream.settings import Settings

SECOND = 1_000_000


def produce_runs(settings: Settings, url: str, runs: int, tenants: int) -> list[bytes]:
    """``runs`` due runs of distinct jobs to cron.runs; returns one envelope-sized body each."""
    codec = default_codec()
    producer = Producer(producer_config(settings, **{"linger.ms": 20}))
    instant = (time.time_ns() // 1000 // SECOND - 5) * SECOND
    bodies = []
    for i in range(runs):
        job = http_job(f"t{i % tenants}", f"d{i}", url, {"every": 3600}).with_version(1)
        run_id = scheduled_run_id(job.key, instant)
        value = codec.encode(
            "RunTriggered",
            {
                "run_id": run_id, "tenant": job.tenant, "job_id": job.job_id,
                "scheduled_at_us": instant, "not_before_us": instant, "emitted_at_us": instant,
                "trigger": "scheduled", "payload_json": json.dumps(job.payload),
                "job_version": 1, "job_definition": codec.encode("JobDefinition", job.to_avro()),
            },
        )  # fmt: skip
        partition = partition_for_job_key(job.key, settings.partitions)
        while True:
            try:
                producer.produce(
                    settings.topic("runs"), key=run_id.encode(), value=value, partition=partition
                )
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
        iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(instant // SECOND))
        bodies.append(
            json.dumps(
                {"run_id": run_id, "tenant": job.tenant, "job_id": job.job_id,
                 "scheduled_at": iso, "attempt": 1, "trigger": "scheduled",
                 "payload": job.payload},
                separators=(",", ":"),
            ).encode()
        )  # fmt: skip
    if producer.flush(120):
        raise RuntimeError("the runs were not all acknowledged")
    return bodies


async def _raw(url: str, bodies: list[bytes], concurrency: int) -> float:
    """POST every body with ``concurrency`` workers; requests per second."""
    connector = aiohttp.TCPConnector(limit=concurrency * 2)
    async with aiohttp.ClientSession(connector=connector) as session:
        queue = iter(range(len(bodies)))

        async def worker() -> None:
            for i in queue:
                headers = {"content-type": "application/json", "webhook-id": f"raw-{i}",
                           "webhook-timestamp": str(int(time.time()))}  # fmt: skip
                async with session.post(
                    url, data=bodies[i], headers=headers, allow_redirects=False
                ) as response:
                    await response.read()
                    if response.status != 200:
                        raise RuntimeError(f"raw request answered {response.status}")

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return len(bodies) / (time.perf_counter() - started)


def raw_http(receiver: Receiver, bodies: list[bytes], concurrency: int) -> tuple[float, float]:
    """(requests/s, client CPU µs per request) of the raw client."""
    cpu = time.process_time()
    try:
        rate = asyncio.run(_raw(receiver.url(), bodies, concurrency))
        return rate, (time.process_time() - cpu) / len(bodies) * 1e6
    finally:
        receiver.clear()


def measure(
    base: Settings, log_dir: Path, runs: int, tenants: int = 8, profile: float = 0.0
) -> dict[str, Any]:
    """The figures; with ``profile`` > 0, py-spy records the dispatcher for that many seconds
    from its start (bench/results/profiles/, summarized under ``dispatch_profile``)."""
    settings = fresh(base)
    stack = Stack(settings, log_dir, components=("dispatcher",))
    receiver = stack.start_receiver()
    concurrency = min(settings.dispatch_concurrency, tenants * settings.tenant_concurrency)
    try:
        progress(f"dispatch: producing {runs} due runs of {tenants} tenants")
        bodies = produce_runs(settings, receiver.url(), runs, tenants)
        progress(f"raw aiohttp client: {runs} POSTs, concurrency {concurrency}")
        before, raw_cpu_before = raw_http(receiver, bodies, concurrency)
        progress(f"  {before:.0f} requests/s; starting the dispatcher")
        started = time.monotonic()
        stack.start()
        startup = time.monotonic() - started
        assert stack.procs["dispatcher"].process is not None
        dispatcher_pid = stack.procs["dispatcher"].process.pid
        meter = CpuMeter({"dispatcher": dispatcher_pid}).start()
        spy = None
        if profile:
            spy_out = RESULTS / "profiles" / f"dispatcher-{time.strftime('%Y%m%dT%H%M%S')}.txt"
            spy = start_profile(dispatcher_pid, profile, spy_out)
        done = wait_until(lambda: receiver.count() >= runs, timeout=max(120, runs / 50), step=0.5)
        wall = time.monotonic() - started
        cpu = meter.stop()
        receiver.poll()
        stack.check_alive()
        arrivals = sorted(a.arrival_us for a in receiver.first.values())
        span_s = (arrivals[-1] - arrivals[0]) / 1e6 if len(arrivals) > 1 else float("nan")
        rate = (len(arrivals) - 1) / span_s if span_s > 0 else 0.0
        duplicates = receiver.requests - len(receiver.first)
        progress(f"  dispatcher: {len(arrivals)} runs at {rate:.0f}/s ({wall:.1f} s from start)")
        for proc in stack.procs.values():
            proc.stop(30)
        receiver.clear()
        after, raw_cpu_after = raw_http(receiver, bodies, concurrency)
        progress(f"raw again: {after:.0f} requests/s")
        raw = (before + after) / 2
        extra: dict[str, Any] = {}
        if spy is not None:
            spy.wait(60)
            extra["dispatch_profile"] = summarize_profile(spy_out)
            extra["dispatch_profile_file"] = str(spy_out)
        return {
            "dispatch_per_s": round(rate),
            "raw_http_per_s": round(raw),
            "dispatch_vs_raw_http": round(rate / raw, 3) if raw else None,
            "dispatch_runs": runs,
            "dispatch_delivered": len(arrivals),
            "dispatch_complete": done and len(arrivals) >= runs,
            "dispatch_duplicates": duplicates,
            "dispatch_wall_s": round(wall, 2),
            "dispatch_concurrency": concurrency,
            "raw_http_before_per_s": round(before),
            "raw_http_after_per_s": round(after),
            "dispatch_cpu_us_per_run": round(cpu["dispatcher"] * (wall - startup) / runs * 1e6),
            "raw_http_cpu_us_per_request": round((raw_cpu_before + raw_cpu_after) / 2),
            **extra,
        }
    finally:
        stack.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--tenants", type=int, default=8)
    parser.add_argument("--profile", type=float, default=0.0, help="py-spy seconds (0: none)")
    args = parser.parse_args()
    base = bench_broker()
    log_dir = RESULTS / "logs" / time.strftime("%Y%m%dT%H%M%S")
    log_dir.mkdir(parents=True, exist_ok=True)
    print(json.dumps(measure(base, log_dir, args.runs, args.tenants, args.profile)))


if __name__ == "__main__":
    main()
