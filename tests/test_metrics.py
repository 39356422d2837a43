"""The processors' /metrics endpoint: a real scheduler process, scraped over HTTP after it
emitted runs, exports the runtime's and the scheduler's series with sane values."""

from __future__ import annotations

import math
import socket
import time
from collections import defaultdict
from pathlib import Path

import httpx
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from harness.procs import ProcessorProcess
from schedulerstream.kafka import clients, topics
from schedulerstream.model import JobDefinition
from schedulerstream.publish import Publisher
from schedulerstream.settings import Settings

pytestmark = pytest.mark.kafka
Samples = dict[str, list[tuple[dict[str, str], float]]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape(port: int) -> Samples:
    response = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
    response.raise_for_status()
    samples: Samples = defaultdict(list)
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[sample.name].append((sample.labels, sample.value))
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    found = [v for lab, v in samples.get(name, []) if labels.items() <= lab.items()]
    assert len(found) == 1, (name, labels, samples.get(name))
    return found[0]


def test_a_scheduler_process_exports_its_metrics(kafka_settings: Settings, tmp_path: Path) -> None:
    settings = kafka_settings
    topics.apply(settings)
    port = free_port()
    proc = ProcessorProcess(
        settings, "scheduler", "m1", tmp_path, metrics_port=port, metrics_host="127.0.0.1"
    ).start()
    try:
        proc.wait_for_log(" running: restored", timeout=90, count=settings.partitions)
        target = {"type": "kafka", "topic": "out"}
        jobs = [
            JobDefinition.model_validate(
                {"tenant": "acme", "job_id": f"job-{i}", "schedule": {"every": 1}, "target": target}
            )
            for i in range(4)
        ]
        Publisher(settings).put_jobs(jobs)
        deadline = time.monotonic() + 60
        while True:
            samples = scrape(port)
            emitted = samples.get("schedulerstream_runs_emitted_total", [])
            lags = samples.get("schedulerstream_consumer_lag", [])
            if sum(v for _, v in emitted) >= 12 and len(lags) == 2 * settings.partitions:
                break
            assert time.monotonic() < deadline, (emitted, lags, proc.log()[-2000:])
            assert proc.alive(), proc.log()[-3000:]
            time.sleep(0.5)
    finally:
        assert proc.stop() == 0, proc.log()[-3000:]
    scheduler = {"processor": "scheduler"}
    assert value(samples, "schedulerstream_runs_emitted_total", trigger="scheduled") >= 12
    assert value(samples, "schedulerstream_records_processed_total", **scheduler) >= 4
    assert value(samples, "schedulerstream_commits_total", **scheduler) >= 1
    assert value(samples, "schedulerstream_transaction_aborts_total", **scheduler) == 0
    assert value(samples, "schedulerstream_instants_missed_total", **scheduler) == 0
    assert value(samples, "schedulerstream_runs_revoked_total", **scheduler) == 0
    commits = value(samples, "schedulerstream_commit_duration_seconds_count", **scheduler)
    assert commits >= 1
    assert 0 < value(samples, "schedulerstream_commit_duration_seconds_sum") < commits * 5
    # emitted ahead of the instant (the lookahead), not seconds late. A histogram with negative
    # buckets has no _sum/_count (OpenMetrics): the +Inf bucket is the count.
    lateness = "schedulerstream_trigger_lateness_seconds_bucket"
    count = value(samples, lateness, le="+Inf")
    assert count >= 12
    assert value(samples, lateness, le="5.0") == count
    assert value(samples, lateness, le="0.0") >= 1
    assert value(samples, lateness, le="-5.0") == 0  # not before the lookahead
    inputs = {settings.topic("schedules"), settings.topic("commands")}
    lags = samples["schedulerstream_consumer_lag"]
    assert {(lab["topic"], lab["partition"]) for lab, _ in lags} == {
        (t, str(p)) for t in inputs for p in range(settings.partitions)
    }
    assert all(0 <= v < 10 for _, v in lags)
    assert value(samples, "schedulerstream_tasks", state="running") == settings.partitions


def test_dispatcher_and_projector_processes_export_theirs(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    settings = kafka_settings
    topics.apply(settings)
    out = settings.topic("out")
    admin = AdminClient(clients.base_config(settings))
    admin.create_topics([NewTopic(out, settings.partitions, 1)])[out].result(30)
    ports = {name: free_port() for name in ("scheduler", "dispatcher", "projector")}
    procs = {
        name: ProcessorProcess(
            settings, name, "m1", tmp_path, metrics_port=port, metrics_host="127.0.0.1"
        ).start()
        for name, port in ports.items()
    }
    try:
        for proc in procs.values():
            proc.wait_for_log(" running: restored", timeout=120, count=settings.partitions)
        target = {"type": "kafka", "topic": out}
        jobs = [
            JobDefinition.model_validate(
                {"tenant": "acme", "job_id": f"job-{i}", "schedule": {"every": 1}, "target": target}
            )
            for i in range(4)
        ]
        Publisher(settings).put_jobs(jobs)
        deadline = time.monotonic() + 90
        while True:
            dispatcher, projector = scrape(ports["dispatcher"]), scrape(ports["projector"])
            finished = dispatcher.get("schedulerstream_runs_finished_total", [])
            rows = projector.get("schedulerstream_readmodel_rows_written_total", [])
            # runs wait in their tenant queue until due (emitted a lookahead early)
            queued = dispatcher.get("schedulerstream_queue_depth", [])
            if sum(v for _, v in finished) >= 8 and rows and rows[0][1] >= 8 and queued:
                break
            assert time.monotonic() < deadline, (finished, rows, queued)
            assert all(p.alive() for p in procs.values()), [p.log()[-2000:] for p in procs.values()]
            time.sleep(0.5)
    finally:
        for proc in procs.values():
            assert proc.stop() == 0, proc.log()[-3000:]
    assert value(dispatcher, "schedulerstream_runs_finished_total", outcome="succeeded") >= 8
    assert value(dispatcher, "schedulerstream_runs_skipped_total") == 0
    assert value(dispatcher, "schedulerstream_attempts_started_total") >= 8
    assert value(dispatcher, "schedulerstream_runs_accepted_total") >= 8
    lateness = "schedulerstream_dispatch_lateness_seconds_bucket"
    count = value(dispatcher, lateness, le="+Inf")
    assert count >= 8
    assert value(dispatcher, lateness, le="5.0") == count  # started on time, not seconds late
    assert value(dispatcher, lateness, le="-1.0") == 0  # never before the scheduled instant
    assert value(dispatcher, "schedulerstream_commits_total", processor="dispatcher") >= 1
    waiting_at_most = 4 * math.ceil(settings.lookahead_ms / 1000)  # 4 jobs' instants ahead
    assert 1 <= value(dispatcher, "schedulerstream_queue_depth", tenant="acme") <= waiting_at_most
    writes = value(projector, "schedulerstream_readmodel_write_seconds_count")
    assert writes >= 1
    assert value(projector, "schedulerstream_readmodel_refused_records_total") == 0
    assert value(projector, "schedulerstream_records_processed_total", processor="projector") >= 8
