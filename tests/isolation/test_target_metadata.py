"""A tenant whose jobs write to hundreds of missing Kafka topics beside a healthy Kafka-target
tenant on one scheduler and one dispatcher (real processes, real broker).

Before a record joins the transaction the dispatcher asks the cluster whether its topic
exists; a missing topic is asked again a second later. Asked on the dispatcher's loop, the
bad tenant's lookups (about a millisecond each, hundreds a second) held back every other
tenant's runs. They are asked on a thread of their own now: the healthy tenant's records
stay on time and the bad runs fail alone, naming their topic.
"""

from __future__ import annotations

from typing import Any

import pytest

from schedulerstream.model import JobDefinition
from schedulerstream.publish import Publisher
from schedulerstream.settings import Settings
from tests.faults.conftest import SpawnFault
from tests.faults.helpers import next_second_us, now_us, report
from tests.isolation.helpers import (
    SECOND,
    attempt_events,
    create_topic,
    every_second_run_ids,
    kafka_lateness,
    p99,
)
from tests.support.waits import wait_until

pytestmark = [pytest.mark.kafka]
MISSING_TOPICS = 400
HEALTHY_JOBS = 4
WINDOW_S = 8


def job(tenant: str, job_id: str, topic: str) -> JobDefinition:
    return JobDefinition.model_validate(
        {"tenant": tenant, "job_id": job_id, "schedule": {"every": 1},
         "target": {"type": "kafka", "topic": topic}, "retry": {"max_attempts": 1}}
    )  # fmt: skip


def test_hundreds_of_missing_target_topics_hold_back_no_other_tenants_records(
    topo: Settings, procs: SpawnFault
) -> None:
    out = topo.topic("stream-out")
    create_topic(topo, out)
    disp = procs("dispatcher", "d")
    sched = procs("scheduler", "s")
    disp.wait_running(topo.partitions)
    sched.wait_running(topo.partitions)

    healthy = [job("stream", f"feed-{i}", out) for i in range(HEALTHY_JOBS)]
    bad = [job("bad", f"gone-{i}", topo.topic(f"gone-{i}")) for i in range(MISSING_TOPICS)]
    Publisher(topo).put_jobs(healthy + bad)
    since = next_second_us(3)
    until = since + WINDOW_S * SECOND
    wait_until(lambda: now_us() > until + 2 * SECOND, 40, "the window to pass")
    assert sched.stop() == 0

    expected = every_second_run_ids(healthy, since, until)
    arrivals, lateness_ms = kafka_lateness(topo, out, expected, since, until)
    events = attempt_events(topo)
    failed = [
        e
        for j in bad[:20]
        for e in events[f"bad/{j.job_id}"]
        if e["kind"] == "failed" and since <= e["scheduled_at_us"] <= until
    ]
    figures: dict[str, Any] = {
        "healthy_runs": len(arrivals),
        "healthy_duplicates": sum(len(a) - 1 for a in arrivals.values()),
        "healthy_lateness_p99_ms": round(p99(lateness_ms), 1),
        "healthy_lateness_max_ms": round(max(lateness_ms), 1),
        "bad_failed_of_first_20_jobs": len(failed),
        "dispatcher_aborts": disp.log().count("transaction failed"),
    }
    report("isolation_target_metadata", **figures)
    assert set(arrivals) == expected, figures
    assert figures["healthy_duplicates"] == 0, figures
    # quiet 2-core machine: 80-107 ms; with the lookups on the dispatcher's loop 312-404 ms
    assert p99(lateness_ms) <= 250, figures
    assert len(failed) >= 20 * WINDOW_S // 2, figures
    assert all("no such topic" in (e["reason"] or "") for e in failed), failed[:3]
    assert figures["dispatcher_aborts"] == 0, disp.log()[-3000:]
