"""Warm the bench broker's JVM before the timed phases.

A freshly started broker spends its first minutes compiling: after a start on the 2-core
machine, its JIT compiler threads had used 30 s of CPU when its request handlers had used
1.3 s each, and its CPU per drained run (bench_dispatch, 30,000 runs) fell 148 → 85 → 53 →
51 µs over four drains in a row. A broker in production has run for days. So before the
timed phases, rounds of a passthrough pass (bench_passthrough: produce, then transactional
consume → produce with a changelog write), a bulk load (bench_put without the CLI: a plain
producer) and a dispatcher drain (bench_dispatch.drain: the consumer group, the runs, events
and changelog topics) run until a round sees the JIT
threads take under ``WARM_JIT_CORES``, within a time budget. Passthrough passes alone left
the first drain after them at 112 µs of broker CPU per run (2.2 s of JIT). run.py reports
the JIT's cores during every phase beside this, so a phase that still compiled shows.

    .venv/bin/python bench/warm_broker.py [--budget 300] [--records 50000] [--runs 10000]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import bench_dispatch, bench_passthrough, bench_put
from bench.common import (
    RESULTS,
    bench_broker,
    broker_pid,
    drop_topics,
    fresh,
    jit_seconds,
    progress,
)
from bench.stack import Receiver
from schedulerstream.settings import Settings

WARM_JIT_CORES = 0.05  # a round whose JIT took less: the broker is warm
MIN_ROUNDS = 2
TENANTS = 8
PUT_JOBS = 20_000  # a plain producer's path (the put phase's)


def _round(
    base: Settings,
    log_dir: Path,
    receiver: Receiver,
    due: list[bench_dispatch.DueRun],
    records: int,
) -> None:
    settings = fresh(base, apply=False)
    try:
        bench_passthrough.measure(settings, records)
    finally:
        drop_topics(settings)
    bench_put.measure(base, PUT_JOBS, cli=False)
    bench_dispatch.drain(base, log_dir, receiver, due, 1)


def warm(base: Settings, log_dir: Path, budget_s: float, records: int, runs: int) -> dict[str, Any]:
    """Rounds (a passthrough pass of ``records``, a bulk load, a drain of ``runs``) until one
    sees the broker's JIT under WARM_JIT_CORES (at least MIN_ROUNDS, at most ``budget_s``):
    how long it took and the JIT's cores in each round."""
    pid = broker_pid()
    if pid is None:
        return {"broker_warm": False, "broker_warmup_note": "the broker's pid is not known"}
    started = time.monotonic()
    rounds: list[float] = []
    receiver = Receiver(log_dir).start()
    try:
        due = bench_dispatch.due_runs(receiver.url(), runs, TENANTS)
        while True:
            jit_at, at = jit_seconds(pid), time.monotonic()
            _round(base, log_dir, receiver, due, records)
            used = max(0.0, jit_seconds(pid) - jit_at)
            rounds.append(round(used / (time.monotonic() - at), 3))
            progress(f"warm-up round {len(rounds)}: the broker's JIT took {rounds[-1]:.3f} cores")
            warm = rounds[-1] < WARM_JIT_CORES
            if (warm and len(rounds) >= MIN_ROUNDS) or time.monotonic() - started > budget_s:
                break
    finally:
        receiver.stop()
    return {
        "broker_warm": warm,
        "broker_warmup_s": round(time.monotonic() - started, 1),
        "broker_warmup_jit_cores": rounds,
        "broker_jit_s_total": round(jit_seconds(pid), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--budget", type=float, default=300.0, help="seconds at most")
    parser.add_argument("--records", type=int, default=50_000, help="per passthrough pass")
    parser.add_argument("--runs", type=int, default=10_000, help="per drain")
    args = parser.parse_args()
    log_dir = RESULTS / "logs" / time.strftime("%Y%m%dT%H%M%S")
    log_dir.mkdir(parents=True, exist_ok=True)
    print(json.dumps(warm(bench_broker(), log_dir, args.budget, args.records, args.runs)))


if __name__ == "__main__":
    main()
