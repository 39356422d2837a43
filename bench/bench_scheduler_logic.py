"""The scheduler's own logic per run, without Kafka, against the store work it needs.

``SchedulerLogic`` over a real RocksStore (a temporary directory): ``jobs`` hourly jobs of two
tenants are ingested (a WriteBatch every 500 records, as commits do), then one tick after
another emits the instant they all share (``DUE_BATCH`` jobs a tick, a WriteBatch after each,
as the processor commits after a punctuation).

- ``logic_us_per_run``: the ticks per run emitted (read the job, advance it, write its run
  record and its new state, move its timer key);
- ``store_us_per_run``: the baseline, in the same run: the store work an emission needs at
  the least (one range scan of the timer index, a get and a put of job-record-sized values,
  a delete and a put of a timer key, one WriteBatch per tick);
- ``logic_vs_store``: how many times the bare store work the logic costs;
- ``ingest_us_per_job``: ``on_schedule`` per new job of ``jobs`` cron jobs on
  ``CRON_EXPRESSIONS`` (jobs share expressions, as they do), in a store of their own:
  decode, validate, plan, first instants, state and timer writes.

    .venv/bin/python bench/bench_scheduler_logic.py [--jobs 50000] [--target kafka|http]

The last stdout line is JSON.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from schedulerstream.codec import default_codec
from schedulerstream.limits import RecordLimits
from schedulerstream.model import JobDefinition
from schedulerstream.publish import JobEncoder
from schedulerstream.runtime.store import RocksStore
from schedulerstream.scheduler.logic import SchedulerLogic
from schedulerstream.scheduler.timers import TimerSettings
from schedulerstream.scheduler.writer import Topics

HOUR_US = 3_600_000_000
T0 = 1_700_000_000_000_000 // HOUR_US * HOUR_US  # a whole hour: every job is due at T0 + 1 h
DUE_BATCH = 5000
CRON_EXPRESSIONS = (
    "0 * * * *", "*/5 * * * *", "0 9 * * 1-5", "30 2 * * *", "0 0 1 * *",
    "15 * * * *", "0 */6 * * *", "45 23 * * *", "0 12 * * 0", "*/15 * * * *",
)  # fmt: skip


class Discard:
    """An Output that counts records."""

    def __init__(self) -> None:
        self.records = 0
        self.bytes = 0

    def produce(
        self, topic: str, key: bytes, value: bytes | None, partition: int,
        origin: str | None = None,
    ) -> None:  # fmt: skip
        self.records += 1
        self.bytes += len(value or b"")

    def failed(self, origin: str) -> str | None:
        return None


def schedule_records(jobs: int, target: str, cron: bool = False) -> list[tuple[bytes, bytes]]:
    """(key, value) of ``jobs`` cron.schedules records, as ``schedules put`` writes them:
    hourly interval jobs, or (``cron``) jobs on ``CRON_EXPRESSIONS`` in turn."""
    encoder = JobEncoder(default_codec(), RecordLimits(), 1)
    records = []
    for i in range(jobs):
        to = ({"type": "kafka", "topic": "bench.out"} if target == "kafka"
              else {"type": "http", "url": f"https://hooks.test/{i}"})  # fmt: skip
        tenant = "big" if i % 100 else "small"
        when = {"cron": CRON_EXPRESSIONS[i % len(CRON_EXPRESSIONS)]} if cron else {"every": 3600}
        job = JobDefinition.model_validate(
            {"tenant": tenant, "job_id": f"j{i}", "version": 1, "schedule": when, "target": to}
        )
        records.append(encoder.encode(job)[1])
    return records  # type: ignore[return-value]


def ingested(
    records: list[tuple[bytes, bytes]], store: RocksStore
) -> tuple[SchedulerLogic, Discard]:
    """A SchedulerLogic that ingested ``records`` into ``store`` as new jobs (a WriteBatch
    every 500, as commits do), and its output."""
    timers = TimerSettings(lookahead_us=3_000_000, grace_us=60_000_000, count_cap=10_000,
                           burst_lead_us=10_000_000)  # fmt: skip
    logic = SchedulerLogic(default_codec(), Topics("runs", "attempts", "rejected", "schedules"),
                           timers, "bench", due_batch=DUE_BATCH)  # fmt: skip
    out = Discard()
    for i, (key, value) in enumerate(records, 1):
        logic.on_schedule(store, out, 0, key, value, T0, T0)
        if i % 500 == 0:
            store.flush(i)
    store.flush(0)
    return logic, out


def logic_seconds(
    records: list[tuple[bytes, bytes]], workdir: Path, profile: bool = False
) -> tuple[float, int]:
    store = RocksStore.open(workdir / "logic")
    logic, out = ingested(records, store)
    now = T0 + HOUR_US
    profiler = cProfile.Profile() if profile else None
    started = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    while logic.on_tick(store, out, 0, now):
        store.flush(0)
    store.flush(0)
    elapsed = time.perf_counter() - started
    if profiler is not None:
        profiler.disable()
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(30)
    store.close()
    if out.records != len(records):
        raise SystemExit(f"emitted {out.records} runs of {len(records)} jobs")
    return elapsed, out.records


def ingest_seconds(records: list[tuple[bytes, bytes]], workdir: Path) -> float:
    """Seconds to ingest ``records`` as new jobs."""
    store = RocksStore.open(workdir / "ingest")
    started = time.perf_counter()
    ingested(records, store)
    elapsed = time.perf_counter() - started
    store.close()
    return elapsed


def store_seconds(jobs: int, workdir: Path) -> float:
    store = RocksStore.open(workdir / "store")
    value = b"x" * 60  # about a job record (its definition is under def/, not rewritten)
    for i in range(jobs):
        store.put(b"job/%d" % i, value)
        store.put(b"due/%016x/%d" % (0, i), b"", logged=False)
    store.flush(0)
    started = time.perf_counter()
    done, floor, upper = 0, b"due/", b"due/%016x/" % 1
    while done < jobs:
        scan = zip(store.range(floor, upper), range(DUE_BATCH), strict=False)
        keys = [key for (key, _), _ in scan]
        floor = keys[-1]
        for due in keys:
            job = due.rsplit(b"/", 1)[1]
            store.get(b"job/" + job)
            store.put(b"job/" + job, value)
            store.delete(due, logged=False)
            store.put(b"due/%016x/" % 1 + job, b"", logged=False)
        done += len(keys)
        store.flush(0)
    elapsed = time.perf_counter() - started
    store.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--target", choices=("kafka", "http"), default="kafka",
                        help="a Kafka topic for all jobs, or a webhook URL per job")  # fmt: skip
    parser.add_argument("--profile", action="store_true", help="cProfile the ticks (stderr)")
    args = parser.parse_args()
    records = schedule_records(args.jobs, args.target)
    with tempfile.TemporaryDirectory() as tmp:
        logic_s, runs = logic_seconds(records, Path(tmp), args.profile)
        store_s = store_seconds(args.jobs, Path(tmp))
        ingest_s = ingest_seconds(schedule_records(args.jobs, args.target, cron=True), Path(tmp))
    logic_us, store_us = logic_s / runs * 1e6, store_s / args.jobs * 1e6
    print(json.dumps({"logic_us_per_run": round(logic_us, 1),
                      "store_us_per_run": round(store_us, 1),
                      "logic_vs_store": round(logic_us / store_us, 2), "runs": runs,
                      "ingest_us_per_job": round(ingest_s / args.jobs * 1e6, 1)}))  # fmt: skip


if __name__ == "__main__":
    main()
