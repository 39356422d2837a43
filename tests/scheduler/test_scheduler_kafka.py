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
from schedulerstream.scheduler.keys import job_store_key
from schedulerstream.settings import Settings
from tests.support.fixtures import Spawn
from tests.support.runs import RunsFollower, RunsSeen, emitted_through, gaps, read_events, read_runs
from tests.support.waits import wait_until

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


def now_us() -> int:
    return time.time_ns() // 1000


def next_second_us(offset_s: int = 1) -> int:
    return (now_us() // SECOND + offset_s) * SECOND


def ingested(settings: Settings, job_key: str) -> bool:
    """Whether the scheduler's committed state (its changelog) holds ``job_key`` now."""
    latest: dict[bytes, bytes | None] = {}
    for message in read_events(settings, "scheduler-state", 1.0):
        latest[message.key()] = message.value()
    return latest.get(job_store_key(job_key)) is not None


def backfilled(seen: RunsSeen) -> list[dict[str, Any]]:
    return [r for r in seen.triggered if r["trigger"] == "backfill"]


def rejections(settings: Settings) -> list[bytes]:
    return [dict(m.headers())["rejected.reason"] for m in read_events(settings, "rejected", 1.0)]


def wait_emitted(runs: RunsFollower, jobs: int, until_us: int, timeout: float = 60) -> None:
    """Wait until each of ``jobs`` jobs has a committed run at ``until_us`` or later."""
    runs.wait_until(
        lambda seen: emitted_through(seen, jobs, until_us), timeout, f"{jobs} jobs' runs"
    )


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
    wait_until(
        lambda: (
            len(read_events(topo, "rejected", 1.0)) >= len(poison)
            and len(read_runs(topo, 1.0).triggered) >= 4
        ),
        60,
        "the poison rejected and the job's four runs",
    )
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
    with RunsFollower(topo) as runs:
        wait_emitted(runs, jobs, 0)  # every job ingested and emitting
        since = next_second_us()
        for round_ in range(3):
            time.sleep(2.5 + round_ * 0.3)  # the scenario: run under load, kill at a new moment
            first.kill()
            time.sleep(1.5)  # the scenario: instants fall due while nobody runs
            first = spawn(f"a{round_}")
            wait_all_running(first, topo.partitions)
        until = next_second_us()
        wait_emitted(runs, jobs, until)
    first.stop()
    assert_contiguous(topo, jobs, since, until)


def test_zombie_after_sigstop_commits_nothing(topo: Settings, spawn: Spawn) -> None:
    jobs = 100
    a = spawn("a")
    wait_all_running(a, topo.partitions)
    b = spawn("b")
    Publisher(topo).put_jobs(every_second_jobs(jobs))
    with RunsFollower(topo) as runs:
        b.wait_for_log(" running: restored")  # b has joined and runs its share
        wait_emitted(runs, jobs, next_second_us())
        since = next_second_us()
        a.signal(signal.SIGSTOP)  # past the session timeout: b takes a's partitions
        stopped_at = now_us()
        # a's jobs run on only once b has taken them over
        wait_emitted(runs, jobs, stopped_at + topo.session_timeout_ms * 1000 + SECOND)
        a.signal(signal.SIGCONT)  # the zombie wakes up with stale state and a stale epoch
        until = next_second_us(3)  # runs go on past the zombie's first commits
        wait_emitted(runs, jobs, until)
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
    with RunsFollower(topo) as runs:
        wait_emitted(runs, jobs, 0)
        since = next_second_us()
        b = spawn("b")
        b.wait_for_log(" running: restored")  # b has taken partitions from a
        c = spawn("c")
        c.wait_for_log(" running: restored")
        b.stop()
        wait_emitted(runs, jobs, next_second_us(2))  # b's partitions run on elsewhere
        a.stop()
        until = next_second_us(2)
        wait_emitted(runs, jobs, until)  # c alone runs everything
    c.stop()
    assert_contiguous(topo, jobs, since, until)


def test_misfire_policies_after_a_full_outage(topo: Settings, spawn: Spawn) -> None:
    # runs emitted ahead are not missed: a 1 s lookahead keeps the outage's missed span ~7 s
    grace = {"misfire_grace_ms": 2000, "lookahead_ms": 1000}
    a = spawn("a", **grace)
    wait_all_running(a, topo.partitions)
    jobs = [
        *every_second_jobs(1, tenant="skip", misfire_policy="skip"),
        *every_second_jobs(1, tenant="once", misfire_policy="fire_once"),
        *every_second_jobs(1, tenant="all", misfire_policy="catch_up"),
    ]
    Publisher(topo).put_jobs(jobs)
    with RunsFollower(topo) as runs:
        wait_emitted(runs, len(jobs), 0)
        a.kill()
        down_from = time.time_ns() // 1000
        time.sleep(8)  # the scenario: an outage several times the misfire grace
        b = spawn("b", **grace)
        wait_all_running(b, topo.partitions)
        wait_emitted(runs, len(jobs), next_second_us())  # caught up, running on time again
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
    wait_until(lambda: ingested(topo, "ops/report"), 30, "ops/report in the scheduler's state")
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
    wait_until(lambda: ingested(topo, "ops/hourly"), 30, "ops/hourly in the scheduler's state")
    now = time.time_ns() // 1000
    day = 24 * 3600 * SECOND
    publisher.command(
        "ops/hourly",
        "Backfill",
        {"request_id": "b1", "start_us": now - day, "end_us": now, "rerun": True},
    )
    wait_until(lambda: len(backfilled(read_runs(topo, 1.0))) >= 24, 60, "the backfill's 24 runs")
    publisher.delete_job("ops/hourly")
    wait_until(
        lambda: any(b"unknown job" in reason for reason in rejections(topo)),
        30,
        "the TriggerNow of an unknown job rejected",
    )
    wait_until(lambda: not ingested(topo, "ops/hourly"), 30, "ops/hourly deleted from the state")
    a.stop()
    seen = read_runs(topo)
    manual = [r for r in seen.triggered if r["trigger"] == "manual"]
    assert [r["run_id"] for r in manual] == ["ops/report@manual-r1"]
    assert json.loads(manual[0]["payload_json"]) == {"p": 1}
    backfill = backfilled(seen)
    assert len(backfill) == 24 and all(r["run_id"].endswith("~b1") for r in backfill)
    assert created.version is not None
