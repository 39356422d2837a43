"""A tenant's huge backfill beside healthy tenants: the healthy runs' lateness, by backfill rate.

Each case runs on a fresh stack (scheduler, dispatcher, receiver; the dispatcher's per-tenant
rate at its default, 1,000 runs/s, as in production). Healthy tenants' jobs fire ``--healthy``
runs a second (6-field cron, as ``bench_e2e``'s rate steps); once they run on time, a "flood"
tenant's ``--flood-jobs`` every-second jobs each ask for a ``rerun`` backfill of the past day
(86,400 runs each). For ``--window-s`` from then on: the healthy tenants' runs' lateness
percentiles (a run that never arrived counts as infinitely late) and their worst by scheduled
second, the backfill runs that reached the receiver, the flood tenant's own scheduled runs'
p99 (they share its rate with its backfill), and the CPU of each process.
``SCHEDULERSTREAM_BACKFILL_RATE`` is set per case (``--rates``: 1000000 is the old, unbounded
behaviour: each job's 1,000-run chunk every tick).

    .venv/bin/python bench/bench_backfill.py [--rates 1000000,50] [--healthy 500]

Progress goes to stderr; the last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.bench_e2e import SETTLE_S, PeriodicLoad, _pcts, _start_second
from bench.bench_scheduler import publish
from bench.common import RESULTS, CpuMeter, bench_broker, fresh, progress
from bench.stack import Stack, http_job
from schedulerstream.publish import Publisher
from schedulerstream.settings import Settings

DAY_US = 86_400_000_000


def _flood(settings: Settings, url: str, jobs: int) -> None:
    """``jobs`` every-second jobs of tenant "flood", each backfilling the past day (rerun)."""
    publish(settings, [http_job("flood", f"f{n}", url, {"every": 1}) for n in range(jobs)])
    publisher = Publisher(settings)
    now_us = time.time_ns() // 1000
    for n in range(jobs):
        fields = {"request_id": f"flood-{n}", "start_us": now_us - DAY_US, "end_us": now_us,
                  "rerun": True}  # fmt: skip
        publisher.command(f"flood/f{n}", "Backfill", fields)


def case(base: Settings, log_dir: Path, rate: float, healthy: float, flood_jobs: int,
         window_s: int) -> dict[str, Any]:  # fmt: skip
    settings = fresh(base)
    stack = Stack(settings, log_dir, overrides={"backfill_rate": rate,
                                                "tenant_rate_per_s": 1000.0})  # fmt: skip
    receiver = stack.start_receiver()
    try:
        stack.start()
        load = PeriodicLoad(settings, receiver, period=10, tenants=8)
        load.set_rate(healthy)
        settled, settle_s = load.settle(SETTLE_S)
        begin = _start_second(1)
        while time.time() < begin:
            time.sleep(0.01)
        meter = CpuMeter(stack.pids(), f"backfill rate {rate:g}").start()
        _flood(settings, receiver.url(), flood_jobs)
        progress(
            f"rate {rate:g}: backfills of {flood_jobs} jobs sent at {time.time() - begin:.1f} s"
        )
        while time.time() < begin + window_s + 3:
            time.sleep(0.5)
            receiver.poll()
            stack.check_alive()
        cores = meter.stop()
        if meter.warning:
            progress(meter.warning)
        receiver.poll()
        arrived, expected = load.window(begin, begin + window_s)
        found = [a for a in arrived if a.tenant != "flood"]  # the healthy tenants' runs
        own = [a for a in arrived if a.tenant == "flood" and "~" not in a.run_id]
        missing = max(0, expected - len(found))
        late = [(a.arrival_us - a.scheduled_us) / 1e3 for a in found] + [math.inf] * missing
        own_late = [(a.arrival_us - a.scheduled_us) / 1e3 for a in own]
        worst: dict[int, float] = {}  # scheduled second → its latest arrival, ms
        for a in found:
            second = a.scheduled_us // 1_000_000 - begin
            worst[second] = max(worst.get(second, 0.0), (a.arrival_us - a.scheduled_us) / 1e3)
        backfilled = sum(
            1 for a in receiver.first.values() if a.tenant == "flood" and "~" in a.run_id
        )
        return {
            "backfill_rate": rate, "healthy_per_s": load.rate, "window_s": window_s,
            "settled": settled, "settle_s": settle_s, "healthy_runs": expected,
            "healthy_missing": missing, **_pcts(late), "backfill_runs_delivered": backfilled,
            "cores": cores,
            "worst_ms_by_second": [round(worst.get(k, -1)) for k in range(window_s)],
            "flood_own_runs": len(own), "flood_own_p99_ms": _pcts(own_late)["p99_ms"],
        }  # fmt: skip
    finally:
        stack.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="1000000,50")
    parser.add_argument("--healthy", type=float, default=500.0, help="healthy runs a second")
    parser.add_argument("--flood-jobs", type=int, default=10, help="0: the healthy load alone")
    parser.add_argument("--window-s", type=int, default=60)
    args = parser.parse_args()
    base = bench_broker()
    log_dir = RESULTS / "logs" / f"backfill-{time.strftime('%Y%m%dT%H%M%S')}"
    log_dir.mkdir(parents=True, exist_ok=True)
    results = []
    for rate in (float(r) for r in args.rates.split(",")):
        result = case(base, log_dir, rate, args.healthy, args.flood_jobs, args.window_s)
        progress(f"rate {rate:g}: healthy p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms, "
                 f"missing {result['healthy_missing']}/{result['healthy_runs']}, backfill runs "
                 f"delivered {result['backfill_runs_delivered']}")  # fmt: skip
        results.append(result)
    print(json.dumps({"cases": results}))


if __name__ == "__main__":
    main()
