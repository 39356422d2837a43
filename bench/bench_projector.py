"""Projector throughput into the read model, each figure next to a same-run baseline.

Pre-produces ``--runs`` runs (RunTriggered, then started and succeeded AttemptEvents: three
events a run) over ``--jobs`` jobs, then drains them with the real projector (runtime,
state store, cron.run-state, read model) against the real broker, once into SQLite and once
into PostgreSQL. The baseline is raw ``executemany`` of the same number of row upserts into the
same kind of database, one transaction per 1,000 rows (best of three): what the database
takes at best.

    .venv/bin/python bench/bench_projector.py --bootstrap 127.0.0.1:39092 --runs 10000 --json

Without ``--bootstrap`` the bench broker (bench/common.py) is used, started if needed; without
``--database-url`` a throw-away PostgreSQL server is started (tests/projector/pg.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from confluent_kafka import Producer

from bench.common import bench_broker, drop_topics, fresh, progress
from schedulerstream.codec import default_codec
from schedulerstream.ids import scheduled_run_id
from schedulerstream.kafka import clients
from schedulerstream.model import JobDefinition
from schedulerstream.partitioner import partition_for_job_key
from schedulerstream.projector.topology import ProjectorTopology
from schedulerstream.readmodel import SqlReadModel, open_read_model
from schedulerstream.readmodel.sql import RUN_COLUMNS
from schedulerstream.runtime import Processor, TaskState
from schedulerstream.settings import Settings, load_settings

T0 = 1_767_225_600_000_000
MINUTE = 60_000_000
BASELINE_CHUNK = 1000


def produce_events(settings: Settings, jobs: int, runs: int) -> int:
    """Schedules of ``jobs`` jobs and ``runs`` runs (3 events each), placed by job key."""
    codec = default_codec()
    producer = Producer(clients.producer_config(settings, **{"linger.ms": 20}))
    sent = 0

    def send(logical: str, key: str, value: bytes, job_key: str) -> None:
        nonlocal sent
        partition = partition_for_job_key(job_key, settings.partitions)
        while True:
            try:
                producer.produce(settings.topic(logical), value, key.encode(), partition)
                break
            except BufferError:
                producer.poll(0.05)
        sent += 1

    definitions = {}
    for j in range(jobs):
        job = JobDefinition.model_validate(
            {"tenant": f"t{j % 10}", "job_id": f"job{j}", "version": 1,
             "schedule": {"cron": "* * * * *"}, "target": {"type": "kafka", "topic": "out"}}
        )  # fmt: skip
        definitions[job.key] = codec.encode("JobDefinition", job.to_avro())
    for job_key, raw in definitions.items():
        send("schedules", job_key, raw, job_key)
    for i in range(runs):
        job_key = f"t{i % jobs % 10}/job{i % jobs}"
        tenant, job_id = job_key.split("/")
        at = T0 + (i // jobs) * MINUTE
        rid = scheduled_run_id(job_key, at)
        who = {"run_id": rid, "tenant": tenant, "job_id": job_id}
        send("runs", rid, codec.encode("RunTriggered", {
            **who, "scheduled_at_us": at, "not_before_us": at, "emitted_at_us": at - 10**6,
            "trigger": "scheduled", "payload_json": None, "job_version": 1,
            "job_definition": definitions[job_key],
        }), job_key)  # fmt: skip
        for kind, offset in (("started", 5), ("succeeded", 9)):
            send("attempts", rid, codec.encode("AttemptEvent", {
                **who, "attempt": 1, "kind": kind, "at_us": at + offset, "scheduled_at_us": at,
                "reason": None, "status_code": None, "retry_at_us": None,
                "duration_us": None if kind == "started" else 4, "count": 1, "instance": "b",
            }), job_key)  # fmt: skip
    producer.flush(120)
    return sent - jobs  # run events (the schedules are few)


def drain_projector(settings: Settings, model: SqlReadModel, events: int) -> dict[str, Any]:
    """Run the projector until it processed every record; events/s from the moment every task
    runs (restore and group join excluded) to the last commit."""
    processor = Processor(settings, ProjectorTopology(settings, model))
    processor.start()
    started: float | None = None
    processed_at_start = 0.0
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline:
            processor.step()
            tasks = processor.tasks
            running = len(tasks) == settings.partitions and all(
                t.state is TaskState.RUNNING for t in tasks.values()
            )
            if started is None and running:
                started = time.monotonic()
                processed_at_start = processor.metrics["records_processed"]
            total = processor.metrics["records_processed"]
            if started is not None and total >= events:
                processor.commit()
                break
        else:
            raise RuntimeError(f"projector did not finish: {processor.metrics}")
        seconds = time.monotonic() - (started or time.monotonic())
    finally:
        processor.close()
    measured = processor.metrics["records_processed"] - processed_at_start
    return {
        "events": int(measured),
        "seconds": round(seconds, 3),
        "events_per_s": round(measured / seconds, 1) if seconds > 0 else None,
        "commits": int(processor.metrics["commits"]),
    }


def baseline(model: SqlReadModel, rows: int, rounds: int = 3) -> dict[str, Any]:
    """Raw executemany of ``rows`` run-row upserts, one transaction per BASELINE_CHUNK rows;
    the best of ``rounds`` (each inserts new rows)."""
    return min((_baseline_once(model, rows) for _ in range(rounds)), key=lambda r: r["seconds"])


def _baseline_once(model: SqlReadModel, rows: int) -> dict[str, Any]:
    columns = ", ".join(RUN_COLUMNS)
    marks = ", ".join("?" for _ in RUN_COLUMNS)
    sql = (
        f"INSERT INTO runs ({columns}) VALUES ({marks}) ON CONFLICT (run_id) DO UPDATE SET"
        " status = excluded.status, updated_at_us = excluded.updated_at_us"
    )
    tag = uuid.uuid4().hex[:6]
    params = [
        (f"base{tag}/j{i % 100}@{i}", "base", f"j{i % 100}", "scheduled", "succeeded",
         T0 + i, T0 + i, T0 + i, 1, None, T0 + i)
        for i in range(rows)
    ]  # fmt: skip
    began = time.perf_counter()
    for at in range(0, rows, BASELINE_CHUNK):
        model._execute([(sql, params[at : at + BASELINE_CHUNK])])
    seconds = time.perf_counter() - began
    return {"rows": rows, "seconds": round(seconds, 3), "rows_per_s": round(rows / seconds, 1)}


def measure(base: Settings, backend: str, url: str, jobs: int, runs: int) -> dict[str, Any]:
    settings = fresh(base, partitions=4, database_url=url)
    try:
        progress(f"{backend}: producing {runs} runs ({runs * 3} events)")
        events = produce_events(settings, jobs, runs) + jobs
        with open_read_model(settings) as model:
            progress(f"{backend}: projector draining {events} records")
            projected = drain_projector(settings, model, events)
            progress(f"{backend}: baseline executemany of {events} rows")
            raw = baseline(model, events)
    finally:
        drop_topics(settings)
    ratio = projected["events_per_s"] / raw["rows_per_s"]
    return {"backend": backend, "projector": projected, "baseline": raw,
            "projector_vs_baseline": round(ratio, 4)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="an existing broker (default: the bench broker)")
    parser.add_argument("--database-url", help="PostgreSQL admin URL (default: start one)")
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--only", choices=("sqlite", "postgres"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    base = load_settings(bootstrap_servers=args.bootstrap) if args.bootstrap else bench_broker()
    results = []
    if args.only in (None, "sqlite"):
        results.append(measure(base, "sqlite", "", args.jobs, args.runs))
    if args.only in (None, "postgres"):
        results.append(measure_postgres(base, args.database_url, args.jobs, args.runs))
    for r in results:
        progress(
            f"{r['backend']}: projector {r['projector']['events_per_s']} events/s, "
            f"baseline {r['baseline']['rows_per_s']} rows/s, ratio {r['projector_vs_baseline']}"
        )
    if args.json:
        print(json.dumps({"projector": results}))


def measure_postgres(base: Settings, admin_url: str | None, jobs: int, runs: int) -> Any:
    from harness.pg import PostgresServer, create_database, drop_database

    server = None if admin_url else PostgresServer().start()
    admin = admin_url or (server.url if server else "")
    url = create_database(admin)
    try:
        return measure(base, "postgres", url, jobs, runs)
    finally:
        drop_database(admin, url)
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
