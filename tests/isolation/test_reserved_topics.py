"""A job written straight to cron.schedules (the API and ``schedules put`` refuse it) whose
Kafka target is the dispatcher's own changelog, firing every second, beside a healthy webhook
tenant (real processes, real broker, a real receiver).

Before the fix the dispatcher produced the job's envelope into its changelog under the job's
key (``run/x``); the next restore of that partition could not decode it and the dispatcher
exited, and so did every member that took the partition over: every tenant's deliveries
stopped. Now its runs fail, refused, naming the topic; nothing of theirs reaches the
changelog; the healthy tenant gets every run; the dispatcher restarts and runs again.
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Producer

from harness.procs import ReceiverProcess
from schedulerstream.kafka.clients import producer_config
from schedulerstream.kafka.reader import read_topic
from schedulerstream.model import JobDefinition
from schedulerstream.publish import Publisher
from schedulerstream.settings import Settings
from tests.faults.conftest import SpawnFault
from tests.faults.helpers import next_second_us, now_us, wait_until
from tests.isolation.helpers import (
    SECOND,
    attempt_events,
    every_second_run_ids,
    instant_of,
    running_pair,
)

pytestmark = [pytest.mark.kafka]
HEALTHY_JOBS = 4
WINDOW_S = 8


def job(tenant: str, job_id: str, target: dict[str, Any]) -> JobDefinition:
    return JobDefinition.model_validate(
        {"tenant": tenant, "job_id": job_id, "schedule": {"every": 1}, "target": target,
         "retry": {"max_attempts": 1}, "timeout": 5}
    )  # fmt: skip


def test_a_raw_job_targeting_the_dispatchers_changelog_is_refused_beside_a_healthy_tenant(
    topo: Settings, procs: SpawnFault
) -> None:
    changelog = topo.topics.dispatcher_state
    receiver = ReceiverProcess().start()
    try:
        disp, sched = running_pair(topo, procs)

        evil = job("evil", "own-changelog", {"type": "kafka", "topic": changelog, "key": "run/x"})
        raw = Producer(producer_config(topo))  # as any Kafka producer may: no API, no CLI
        raw.produce(topo.topics.schedules, evil.model_dump_json().encode(), evil.key.encode())
        assert raw.flush(30) == 0
        healthy = [job("web", f"hook-{i}", {"type": "http", "url": receiver.url("/ok")})
                   for i in range(HEALTHY_JOBS)]  # fmt: skip
        Publisher(topo).put_jobs(healthy)
        since = next_second_us(2)
        until = since + WINDOW_S * SECOND
        wait_until(lambda: now_us() > until + 2 * SECOND, 40, "the window to pass")
        assert sched.stop() == 0

        expected = every_second_run_ids(healthy, since, until)

        def delivered() -> set[str] | None:
            arrived = {r["headers"].get("webhook-id", "") for r in receiver.requests()}
            got = {r for r in arrived if "@" in r and since <= instant_of(r) <= until}
            return got if expected <= got else None

        assert wait_until(delivered, 60, "every healthy run delivered", every=1.0) == expected

        events = attempt_events(topo)["evil/own-changelog"]
        failed = [e for e in events if e["kind"] == "failed"]
        assert failed, events
        assert all(f"topic {changelog!r} is reserved" in (e["reason"] or "") for e in failed)
        assert not [e for e in events if e["kind"] == "succeeded"], events

        keys = {m.key() for m in read_topic(topo, changelog, True, 1.5)}
        assert b"run/x" not in keys  # nothing of the job's own reached the changelog
        assert disp.alive(), disp.log()[-3000:]

        assert disp.stop() == 0  # its restore reads the changelog back whole
        disp.start()
        disp.wait_running(topo.partitions)
        assert disp.alive(), disp.this_log()[-3000:]
    finally:
        receiver.stop()
