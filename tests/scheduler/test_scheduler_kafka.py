"""The scheduler as real processes against the real broker: crashes, zombies, rebalances."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from typing import Any

import pytest
from confluent_kafka import Producer

from harness.procs import ProcessorProcess, settings_env
from schedulerstream.codec import default_codec
from schedulerstream.kafka.clients import producer_config
from schedulerstream.model import JobDefinition
from schedulerstream.publish import Publisher
from schedulerstream.settings import Settings
from tests.support.fixtures import Spawn
from tests.support.runs import gaps, read_events, read_runs

pytestmark = pytest.mark.kafka
SECOND = 1_000_000


def every_second_jobs(count: int, tenant: str = "load", **extra: Any) -> list[JobDefinition]:
    return [
        JobDefinition.model_validate(
            {
                "tenant": tenant,
                "job_id": f"job-{i}",
                "schedule": {"every": 1},
                "target": {"type": "kafka", "topic": "out"},
                **extra,
            }
        )
        for i in range(count)
    ]


def wait_all_running(proc: ProcessorProcess, partitions: int, timeout: float = 90) -> None:
    proc.wait_for_log(" running: restored", timeout=timeout, count=partitions)


def assert_contiguous(
    settings: Settings, jobs: int, since_us: int, until_us: int
) -> dict[str, Any]:
    """Every job has every 1 s instant in [since, until] exactly once."""
    seen = read_runs(settings)
    assert seen.duplicates() == {}, f"duplicate committed runs: {list(seen.duplicates())[:5]}"
    by_job = seen.instants_by_job()
    assert len(by_job) == jobs
    for key, instants in by_job.items():
        window = [t for t in instants if since_us <= t <= until_us]
        expected = (until_us - since_us) // SECOND + 1
        assert gaps(window, SECOND) == [], f"{key} has gaps"
        assert len(window) == expected, f"{key}: {len(window)} instants, expected {expected}"
    return {"runs": len(seen.triggered)}


def test_cli_put_and_tail_and_poison_records_are_rejected(topo: Settings, spawn: Spawn) -> None:
    sched = spawn("a")
    wait_all_running(sched, topo.partitions)
    env = settings_env(topo)
    job = {
        "tenant": "acme",
        "job_id": "hello",
        "schedule": {"cron": "* * * * * *"},
        "target": {"type": "kafka", "topic": "x"},
        "max_runs": 4,
    }
    bad = {
        "tenant": "acme",
        "job_id": "bad",
        "schedule": {"cron": "* 61 * * *"},
        "target": {"type": "kafka", "topic": "x"},
    }
    cli = [sys.executable, "-m", "schedulerstream.cli"]
    refused = subprocess.run(
        [*cli, "schedules", "put", "-"],
        input=json.dumps(job) + "\n" + json.dumps(bad),
        env=env,
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2
    assert "line 2: schedule.cron: hour: '61' is out of range" in refused.stderr
    put = subprocess.run(
        [*cli, "schedules", "put", "-"],
        input=json.dumps(job),
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert put.stdout.startswith("acme/hello version ")

    # Poison records straight on the topics: the processor rejects them and keeps going.
    producer = Producer(producer_config(topo))
    poison = [
        (topo.topic("schedules"), b"acme/p1", b"\x00garbage"),
        (topo.topic("schedules"), b"acme/p2", b"\xc3\x01" + b"\x01" * 12),
        (
            topo.topic("schedules"),
            b"acme/p3",
            json.dumps(
                {**job, "job_id": "p3", "schedule": {"cron": "* * * * *", "timezone": "Mars/Base"}}
            ).encode(),
        ),
        (topo.topic("schedules"), b"NOT A KEY", b"{}"),
        (topo.topic("commands"), b"acme/hello", b"not a command"),
    ]
    for topic, key, value in poison:
        producer.produce(topic, key=key, value=value)
    producer.flush(10)
    time.sleep(4)
    tail = subprocess.run(
        [*cli, "runs", "tail", "--from-beginning", "--json", "--idle-timeout", "2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = [json.loads(line) for line in tail.stdout.splitlines()]
    assert len(lines) == 4
    first = lines[0]
    assert first["run_id"].startswith("acme/hello@") and first["trigger"] == "scheduled"
    assert {"tenant", "job_id", "scheduled_at", "emitted_at"} <= set(first)
    assert sched.alive()
    rejected = read_events(topo, "rejected")
    reasons = [dict(m.headers() or [])["rejected.reason"].decode() for m in rejected]
    assert len(rejected) == len(poison)
    for needle in (
        "neither Avro",
        "unknown schema",
        "Mars/Base",
        "bad key",
        "not Avro single-object",
    ):
        assert any(needle in r for r in reasons), (needle, reasons)


def test_kill_9_under_load_then_restart_every_instant_exactly_once(
    topo: Settings, spawn: Spawn
) -> None:
    jobs = 300
    first = spawn("a")
    wait_all_running(first, topo.partitions)
    Publisher(topo).put_jobs(every_second_jobs(jobs))
    time.sleep(3)
    since = (time.time_ns() // 1000 // SECOND + 1) * SECOND
    for round_ in range(3):
        time.sleep(2.5 + round_ * 0.3)
        first.kill()
        time.sleep(1.5)
        first = spawn(f"a{round_}")
        wait_all_running(first, topo.partitions)
    time.sleep(3)
    until = (time.time_ns() // 1000 // SECOND - 2) * SECOND
    first.stop()
    assert_contiguous(topo, jobs, since, until)


def test_zombie_after_sigstop_commits_nothing(topo: Settings, spawn: Spawn) -> None:
    jobs = 100
    a = spawn("a")
    wait_all_running(a, topo.partitions)
    b = spawn("b")
    Publisher(topo).put_jobs(every_second_jobs(jobs))
    time.sleep(4)
    since = (time.time_ns() // 1000 // SECOND + 1) * SECOND
    a.signal(signal.SIGSTOP)  # past the session timeout: b takes a's partitions
    time.sleep(topo.session_timeout_ms / 1000 + 6)
    a.signal(signal.SIGCONT)  # the zombie wakes up with stale state and a stale epoch
    time.sleep(5)
    until = (time.time_ns() // 1000 // SECOND - 2) * SECOND
    a.stop()
    b.stop()
    assert_contiguous(topo, jobs, since, until)


def test_instances_joining_and_leaving_leave_no_gap_and_no_duplicate(
    topo: Settings, spawn: Spawn
) -> None:
    jobs = 120
    a = spawn("a")
    wait_all_running(a, topo.partitions)
    Publisher(topo).put_jobs(every_second_jobs(jobs))
    time.sleep(2)
    since = (time.time_ns() // 1000 // SECOND + 1) * SECOND
    b = spawn("b")
    time.sleep(5)
    c = spawn("c")
    time.sleep(5)
    b.stop()
    time.sleep(4)
    a.stop()
    time.sleep(5)
    until = (time.time_ns() // 1000 // SECOND - 2) * SECOND
    c.stop()
    assert_contiguous(topo, jobs, since, until)


def test_misfire_policies_after_a_full_outage(topo: Settings, spawn: Spawn) -> None:
    grace = {"misfire_grace_ms": 2000}
    a = spawn("a", **grace)
    wait_all_running(a, topo.partitions)
    jobs = [
        *every_second_jobs(1, tenant="skip", misfire_policy="skip"),
        *every_second_jobs(1, tenant="once", misfire_policy="fire_once"),
        *every_second_jobs(1, tenant="all", misfire_policy="catch_up"),
    ]
    Publisher(topo).put_jobs(jobs)
    time.sleep(3)
    a.kill()
    down_from = time.time_ns() // 1000
    time.sleep(8)
    b = spawn("b", **grace)
    wait_all_running(b, topo.partitions)
    time.sleep(3)
    b.stop()
    seen = read_runs(topo)
    assert seen.duplicates() == {}
    by_trigger: dict[str, list[dict[str, Any]]] = {}
    for r in seen.triggered:
        by_trigger.setdefault(r["tenant"], []).append(r)
    catch = {t: [r for r in rs if r["trigger"] == "catch_up"] for t, rs in by_trigger.items()}
    assert catch.get("skip", []) == []
    assert len(catch["once"]) == 1
    assert len(catch["all"]) >= 5
    assert gaps(sorted(r["scheduled_at_us"] for r in by_trigger["all"]), SECOND) == []
    codec = default_codec()
    missed = [codec.decode(m.value())[1] for m in read_events(topo, "attempts")]
    missed_by = {}
    for event in missed:
        if event["kind"] == "missed":
            missed_by[event["tenant"]] = missed_by.get(event["tenant"], 0) + event["count"]
    assert missed_by.get("skip", 0) >= 5
    assert missed_by.get("once", 0) >= 4
    assert "all" not in missed_by
    assert all(
        e["scheduled_at_us"] >= down_from - 2 * SECOND for e in missed if e["kind"] == "missed"
    )


def test_commands_trigger_while_paused_backfill_and_delete(topo: Settings, spawn: Spawn) -> None:
    a = spawn("a")
    wait_all_running(a, topo.partitions)
    publisher = Publisher(topo)
    job = JobDefinition.model_validate(
        {
            "tenant": "ops",
            "job_id": "report",
            "schedule": {"cron": "0 0 1 1 *"},
            "paused": True,
            "target": {"type": "kafka", "topic": "out"},
            "payload": {"p": 1},
        }
    )
    publisher.put_jobs([job])
    time.sleep(1)
    publisher.command("ops/report", "TriggerNow", {"request_id": "r1", "payload_json": None})
    publisher.command("ops/report", "TriggerNow", {"request_id": "r1", "payload_json": None})
    publisher.command("ops/other", "TriggerNow", {"request_id": "r1", "payload_json": None})
    hourly = JobDefinition.model_validate(
        {
            "tenant": "ops",
            "job_id": "hourly",
            "schedule": {"cron": "0 * * * *"},
            "target": {"type": "kafka", "topic": "out"},
        }
    )
    [created] = publisher.put_jobs([hourly])
    time.sleep(2)
    now = time.time_ns() // 1000
    day = 24 * 3600 * SECOND
    publisher.command(
        "ops/hourly",
        "Backfill",
        {"request_id": "b1", "start_us": now - day, "end_us": now, "rerun": True},
    )
    time.sleep(4)
    publisher.delete_job("ops/hourly")
    time.sleep(2)
    a.stop()
    seen = read_runs(topo)
    manual = [r for r in seen.triggered if r["trigger"] == "manual"]
    assert [r["run_id"] for r in manual] == ["ops/report@manual-r1"]
    assert json.loads(manual[0]["payload_json"]) == {"p": 1}
    backfill = [r for r in seen.triggered if r["trigger"] == "backfill"]
    assert len(backfill) == 24 and all(r["run_id"].endswith("~b1") for r in backfill)
    rejected = read_events(topo, "rejected")
    assert any(b"unknown job" in dict(m.headers())["rejected.reason"] for m in rejected)
    assert created.version is not None
