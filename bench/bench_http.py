"""HttpSender deliveries per second against a raw aiohttp client loop, in the same run.

Both drive the same receiver process (``tests/targets/receiver.py --no-record``, /ok) with 50
concurrent workers on one event loop:

- ``raw_http_per_s``: ``session.post(url, data=body, headers=...)`` with a prepared body and
  static headers, the response body read;
- ``target_http_per_s``: ``HttpSender.deliver`` (envelope serialized per attempt, Standard
  Webhooks headers and HMAC signature, Retry-After/breaker/outcome bookkeeping). The receiver is
  on loopback, so the target runs with ``allow_private=True``; the SSRF guard only acts when a
  connection is opened, which a keep-alive pool does 50 times in all.

The phases alternate (raw, target, three times each) to even out drift; the rates are their
means. ``*_cpu_us_*`` is this process's CPU time per call, which other load on the machine
disturbs less than the rates; ``http_others_cores`` is the CPU other processes took meanwhile
(above 0.2 cores, a warning on stderr and in ``http_warning``). The last stdout line is JSON;
``--quick`` runs a short measurement.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.common import CpuMeter
from harness.procs import ReceiverProcess
from schedulerstream.model import HttpTarget as HttpTargetConfig
from schedulerstream.targets import Delivery, HttpSender
from schedulerstream.targets.envelope import envelope_bytes

CONCURRENCY = 50
ROUNDS = 3
SECRET = "whsec_" + base64.b64encode(b"bench-secret-0123456789abcdef").decode()


def _delivery(worker: int, attempt: int) -> Delivery:
    return Delivery(
        run_id=f"bench/job-{worker}@20250101T000000Z",
        tenant="bench",
        job_id=f"job-{worker}",
        scheduled_at_us=1_735_689_600_000_000,
        attempt=attempt,
        trigger="scheduled",
        payload_json='{"report":"daily","rows":42}',
        deadline=10.0,
    )


async def _rate(one: Callable[[int, int], Awaitable[bool]], seconds: float) -> tuple[float, float]:
    """(calls per second, client CPU µs per call) of ``one(worker, n)`` by CONCURRENCY workers."""
    done = 0
    stop_at = time.perf_counter() + seconds

    async def worker(index: int) -> None:
        nonlocal done
        n = 1
        while time.perf_counter() < stop_at:
            if not await one(index, n):
                raise RuntimeError("a bench request failed")
            done += 1
            n += 1

    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker(i) for i in range(CONCURRENCY)))
    return done / (time.perf_counter() - started), (time.process_time() - cpu) / done * 1e6


async def _measure(url: str, seconds: float) -> dict[str, float]:
    config = HttpTargetConfig(url=url, secret=SECRET)
    target = HttpSender(allow_private=True, limit=CONCURRENCY * 2)
    raw = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CONCURRENCY * 2))
    body = envelope_bytes(_delivery(0, 1))
    headers = {"content-type": "application/json", "webhook-id": "bench", "webhook-timestamp": "0"}

    async def ours(worker: int, n: int) -> bool:
        return (await target.deliver(_delivery(worker, n), config)).succeeded

    async def theirs(worker: int, n: int) -> bool:
        async with raw.post(url, data=body, headers=headers, allow_redirects=False) as response:
            await response.read()
            return response.status == 200

    try:
        await _rate(theirs, min(1.0, seconds / 8))
        await _rate(ours, min(1.0, seconds / 8))
        share = seconds / (2 * ROUNDS)
        raw_runs, target_runs = [], []
        for _ in range(ROUNDS):
            raw_runs.append(await _rate(theirs, share))
            target_runs.append(await _rate(ours, share))
    finally:
        await target.close()
        await raw.close()
    raw_rate = sum(r for r, _ in raw_runs) / ROUNDS
    target_rate = sum(r for r, _ in target_runs) / ROUNDS
    return {
        "target_http_per_s": round(target_rate),
        "raw_http_per_s": round(raw_rate),
        "target_vs_raw_http": round(target_rate / raw_rate, 3),
        "target_cpu_us_per_delivery": round(sum(c for _, c in target_runs) / ROUNDS, 1),
        "raw_cpu_us_per_request": round(sum(c for _, c in raw_runs) / ROUNDS, 1),
    }


def measure(seconds: float) -> dict[str, Any]:
    """Measure both rates for about ``seconds`` in total (plus a short warm-up); with the CPU
    the rest of the machine took meanwhile (``http_others_cores``, and ``http_warning`` when
    above NOISE_CORES)."""
    receiver = ReceiverProcess(record=False).start()
    assert receiver.process is not None
    meter = CpuMeter({"bench": os.getpid(), "receiver": receiver.process.pid}, "http").start()
    try:
        found: dict[str, Any] = dict(asyncio.run(_measure(receiver.url("/ok"), seconds)))
    finally:
        used = meter.stop()
        receiver.stop()
    found["http_others_cores"] = used["others_cores"]
    if meter.warning is not None:
        found["http_warning"] = meter.warning
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short run (about 2 s)")
    parser.add_argument("--seconds", type=float, default=12.0, help="total measuring time")
    args = parser.parse_args()
    print(json.dumps(measure(2.0 if args.quick else args.seconds)))


if __name__ == "__main__":
    main()
