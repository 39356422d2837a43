"""Bulk load: ``schedules put``'s path against a raw confluent-kafka producer writing the same
records.

One job file of N varied jobs (cron and interval schedules, HTTP and Kafka targets, payloads) is
written three times, each to a fresh topic set, timed once the broker has finished creating
it (``fresh`` waits: a load of 20,000 jobs lasts about as long as that work):

- raw: the records ``put`` produces for it (``Publisher.encode_jobs``: same keys and values, no
  headers), precomputed, through a plain producer (``producer_config``'s defaults); timed from
  the producer's creation to the end of its flush;
- put: ``put_text`` of schedulerstream/cli/schedules_cmd.py in this process, the function the CLI
  runs (parse, validate, encode, check the limits, produce, wait for every acknowledgement);
  timed from the Publisher's creation (the CLI's first step) to its return. A file this long is
  checked in pieces, one a usable core (this process and forked workers,
  ``schedulerstream/bulkload.py``), as the CLI does by default; put_one_process is the same in
  one process;
- cli: ``schedulerstream schedules put FILE`` as a subprocess: wall time with interpreter start
  and imports.

``put_vs_raw_producer`` is put_jobs_per_s / raw_producer_per_s. CPU seconds are this process's
(librdkafka's threads included) for raw, with its forked workers' for put, the child's for cli.

    SCHEDULERSTREAM_BOOTSTRAP_SERVERS=127.0.0.1:39292 .venv/bin/python bench/bench_put.py
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.common import drop_topics, fresh, progress
from harness.procs import settings_env
from schedulerstream.cli.schedules_cmd import put_text
from schedulerstream.jobfile import parse_job_file
from schedulerstream.kafka import clients
from schedulerstream.publish import Publisher
from schedulerstream.settings import Settings, load_settings


def job_file(jobs: int) -> str:
    """JSON lines of ``jobs`` jobs over 50 tenants, a third each cron (two zones), interval and
    a list of cron expressions; half HTTP, half Kafka targets; a small payload each."""
    schedules: list[dict[str, Any]] = [
        {"cron": "*/5 * * * *", "timezone": "Europe/Paris"},
        {"every": 60},
        {"cron": ["0 9 * * MON-FRI", "30 12 * * SAT"], "timezone": "America/New_York"},
    ]
    lines = []
    for n in range(jobs):
        target: dict[str, Any] = (
            {"type": "http", "url": f"https://hooks.example.com/t/{n}", "headers": {"x-n": str(n)}}
            if n % 2
            else {"type": "kafka", "topic": "jobs-out", "key": f"k{n}"}
        )
        job = {
            "tenant": f"tenant-{n % 50}",
            "job_id": f"job-{n}",
            "schedule": schedules[n % 3],
            "target": target,
            "payload": {"n": n, "report": "daily", "tags": ["bench", "bulk"]},
        }
        lines.append(json.dumps(job))
    return "\n".join(lines) + "\n"


def _cpu() -> float:
    return time.process_time()


def measure_raw(settings: Settings, records: list[tuple[bytes, bytes | None]]) -> dict[str, Any]:
    """The records through a plain producer: creation to flushed."""
    topic = settings.topics.schedules
    cpu, started = _cpu(), time.monotonic()
    producer = Producer(clients.producer_config(settings))
    for key, value in records:
        while True:
            try:
                producer.produce(topic, key=key, value=value)
                break
            except BufferError:
                producer.poll(0.05)
    left = producer.flush(120)
    elapsed, used = time.monotonic() - started, _cpu() - cpu
    if left:
        raise RuntimeError(f"raw producer: {left} records not acknowledged")
    return {"raw_producer_per_s": round(len(records) / elapsed),
            "raw_producer_s": round(elapsed, 3), "raw_producer_cpu_s": round(used, 3)}  # fmt: skip


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure_put(
    settings: Settings, text: str, jobs: int, processes: int | None = None, name: str = "put"
) -> dict[str, Any]:
    """``put_text`` in this process, as the CLI calls it (the Publisher made unconnected, so
    a long file is checked in up to ``processes`` processes, default one a core): Publisher
    creation to every acknowledgement. CPU counts the forked workers'."""
    cpu, children, started = _cpu(), _children_cpu(), time.monotonic()
    written, errors = put_text(Publisher(settings, connect=False), text, processes=processes)
    elapsed = time.monotonic() - started
    used = _cpu() - cpu + _children_cpu() - children
    if errors or len(written) != jobs:
        raise RuntimeError(f"put: {len(written)} of {jobs} written; {errors[:3]}")
    return {f"{name}_jobs_per_s": round(jobs / elapsed),
            f"{name}_s": round(elapsed, 3), f"{name}_cpu_s": round(used, 3)}  # fmt: skip


def measure_cli(settings: Settings, path: Path, jobs: int) -> dict[str, Any]:
    """``schedulerstream schedules put FILE`` as a child process (interpreter start included)."""
    command = [sys.executable, "-m", "schedulerstream.cli", "schedules", "put", str(path)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run(
        command, env=settings_env(settings), capture_output=True, text=True, timeout=1800
    )
    elapsed = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    lines = done.stdout.count("\n")
    if done.returncode != 0 or lines != jobs:
        raise RuntimeError(f"cli: exit {done.returncode}, {lines} lines: {done.stderr[-500:]}")
    used = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return {"put_cli_jobs_per_s": round(jobs / elapsed),
            "put_cli_s": round(elapsed, 3), "put_cli_cpu_s": round(used, 3)}  # fmt: skip


def measure(base: Settings, jobs: int, cli: bool = True) -> dict[str, Any]:
    """raw, put and (``cli``) the CLI on fresh topic sets of ``base``'s broker; the figures."""
    text = job_file(jobs)
    progress(f"put: {jobs:,} jobs ({len(text) / 1e6:.1f} MB of JSON lines)")
    figures: dict[str, Any] = {"put_jobs": jobs}
    raw_settings = fresh(base)
    try:
        parsed, errors = parse_job_file(text)
        assert not errors, errors[:3]
        _, records = Publisher(raw_settings).encode_jobs(parsed)
        del parsed
        figures["put_record_bytes"] = round(sum(len(v or b"") for _, v in records) / jobs)
        progress("put: raw producer")
        figures.update(measure_raw(raw_settings, records))
        del records
    finally:
        drop_topics(raw_settings)
    for processes, name in ((None, "put"), (1, "put_one_process")):
        put_settings = fresh(base)
        try:
            progress(f"put: put_text in-process ({processes or 'one a core'} processes)")
            figures.update(measure_put(put_settings, text, jobs, processes, name))
        finally:
            gc.unfreeze()  # put_text froze what it built; let this process collect it again
            drop_topics(put_settings)
    if cli:
        cli_settings = fresh(base)
        path = cli_settings.data_dir / "jobs.jsonl"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            progress("put: schedulerstream schedules put FILE (subprocess)")
            figures.update(measure_cli(cli_settings, path, jobs))
        finally:
            drop_topics(cli_settings)
    figures["put_vs_raw_producer"] = round(
        figures["put_jobs_per_s"] / figures["raw_producer_per_s"], 3
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--no-cli", action="store_true", help="skip the subprocess run")
    args = parser.parse_args()
    print(json.dumps(measure(load_settings(), args.jobs, cli=not args.no_cli)))


if __name__ == "__main__":
    main()
