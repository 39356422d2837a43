"""One tenant's broken jobs and targets beside healthy tenants on one scheduler and one
dispatcher (real processes, real broker, a real receiver and a real SQS server).

Tenant ``bad`` has one job of each broken kind: a payload exactly at the limit (it works), one
byte over it (refused by the API's publisher and, written straight to cron.schedules, sent to
cron.rejected), a Kafka target topic that does not exist, one deleted while runs go to it,
an SQS queue that does not exist, and a host that does not resolve. Tenants ``web`` (signed
webhooks) and ``stream`` (Kafka target) must get every run, once, on time; each broken run
must show its failed attempts with a reason naming the cause.
"""

from __future__ import annotations

import base64
import os
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import Producer

from harness.procs import ReceiverProcess
from schedulerstream.errors import ValidationError
from schedulerstream.kafka.clients import producer_config
from schedulerstream.model import JobDefinition
from schedulerstream.publish import Publisher
from schedulerstream.settings import Settings
from tests.faults.conftest import SpawnFault
from tests.faults.helpers import log_time, next_second_us, now_us, report, wait_until
from tests.isolation.helpers import (
    CODEC,
    SECOND,
    attempt_events,
    create_topic,
    delete_topic,
    every_second_run_ids,
    instant_of,
    kafka_deliveries,
    kafka_lateness,
    p99,
    running_pair,
    set_max_message_bytes,
)
from tests.support.runs import read_events
from tests.targets.procs import ElasticMQ

pytestmark = [pytest.mark.kafka]
HEALTHY_JOBS = 4
WINDOW_S = 14
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
FAST_RETRY = {"max_attempts": 2, "initial_backoff": 1, "multiplier": 1, "max_backoff": 1}


def job(tenant: str, job_id: str, target: dict[str, Any], **extra: Any) -> JobDefinition:
    fields: dict[str, Any] = {"schedule": {"every": 1}, "retry": FAST_RETRY, "timeout": 5}
    fields.update(extra)
    return JobDefinition.model_validate(
        {"tenant": tenant, "job_id": job_id, "target": target, **fields}
    )


def test_a_tenants_broken_jobs_and_targets_stop_no_other_tenant(
    topo: Settings, procs: SpawnFault, aws_env: ElasticMQ
) -> None:
    limits = topo.record_limits()
    out, big, doomed = topo.topic("stream-out"), topo.topic("big-out"), topo.topic("doomed")
    missing = topo.topic("no-such-topic")
    for name in (out, big, doomed):
        create_topic(topo, name)
    receiver = ReceiverProcess().start()
    try:
        disp, sched = running_pair(topo, procs)

        at_limit = "x" * (limits.max_payload_bytes - 2)  # its JSON text: exactly the limit
        over = job("bad", "over-limit", {"type": "kafka", "topic": big}, payload=at_limit + "y")
        with pytest.raises(ValidationError) as refused:
            Publisher(topo).put_jobs([over])
        assert refused.value.field == "payload"
        assert f"{limits.max_payload_bytes:,}" in refused.value.message
        # the same definition written straight to cron.schedules by any Kafka producer
        raw = Producer(producer_config(topo))
        raw.produce(topo.topic("schedules"), over.model_dump_json().encode(), b"bad/over-limit")
        assert raw.flush(30) == 0

        healthy = [
            job("web", f"hook-{i}", {"type": "http", "url": receiver.url("/ok"), "secret": SECRET})
            for i in range(HEALTHY_JOBS)
        ] + [
            job("stream", f"feed-{i}", {"type": "kafka", "topic": out}) for i in range(HEALTHY_JOBS)
        ]
        queue = f"{aws_env.endpoint}/000000000000/no-such-queue"
        broken = [
            job("bad", "at-limit", {"type": "kafka", "topic": big}, payload=at_limit,
                schedule={"every": 2}),
            job("bad", "missing-topic", {"type": "kafka", "topic": missing}),
            job("bad", "deleted-topic", {"type": "kafka", "topic": doomed}),
            job("bad", "missing-queue", {"type": "sqs", "queue_url": queue,
                                         "region": "us-east-1"}),
            job("bad", "no-dns", {"type": "http", "url": "http://no-such-host.invalid/hook"}),
        ]  # fmt: skip
        Publisher(topo).put_jobs(healthy + broken)
        since = next_second_us(2)
        until = since + WINDOW_S * SECOND
        wait_until(lambda: now_us() > since + 5 * SECOND, 30, "the first runs")
        delete_topic(topo, doomed)
        deleted_us = now_us()
        wait_until(lambda: now_us() > until + 2 * SECOND, 40, "the window to pass")
        assert sched.stop() == 0

        def in_window(run_id: str) -> bool:
            return since <= instant_of(run_id) <= until

        expected = every_second_run_ids(healthy, since, until)

        def delivered() -> dict[str, list[float]] | None:
            arrivals: dict[str, list[float]] = {}
            for request in receiver.requests():
                run_id = request["headers"].get("webhook-id", "")
                if in_window(run_id):
                    arrivals.setdefault(run_id, []).append(request["received_at"] * SECOND)
            for envelope in kafka_deliveries(topo, out):
                if in_window(envelope["run_id"]):
                    arrivals.setdefault(envelope["run_id"], []).append(envelope["arrived_us"])
            return arrivals if expected <= set(arrivals) else None

        arrivals = wait_until(delivered, 60, "every healthy run delivered", every=1.0)
        assert set(arrivals) == expected
        duplicates = {r: len(a) for r, a in arrivals.items() if len(a) > 1}
        lateness_ms = [(min(a) - instant_of(r)) / 1000 for r, a in arrivals.items()]

        events = attempt_events(topo)

        def reasons(job_id: str, kind: str = "failed") -> list[str]:
            return [e["reason"] or "" for e in events[f"bad/{job_id}"] if e["kind"] == kind]

        figures: dict[str, Any] = {
            "healthy_runs": len(arrivals),
            "healthy_duplicates": sum(n - 1 for n in duplicates.values()),
            "healthy_lateness_p99_ms": round(p99(lateness_ms), 1),
            "healthy_lateness_max_ms": round(max(lateness_ms), 1),
            "dispatcher_aborts": disp.log().count("transaction failed"),
            "reasons": {
                j: (reasons(j) or ["-"])[-1][:160]
                for j in ("missing-topic", "deleted-topic", "missing-queue", "no-dns")
            },
        }
        report("isolation_tenants", **figures)
        assert duplicates == {}, figures
        assert p99(lateness_ms) <= 1000, figures

        # the broken runs failed alone, retried, and each says why
        assert any("no-such-topic" in r for r in reasons("missing-topic")), figures
        assert reasons("missing-topic", "dead_lettered"), figures
        after_delete = [
            e for e in events["bad/deleted-topic"] if e["at_us"] > deleted_us + 2 * SECOND
        ]
        assert any(e["kind"] == "succeeded" for e in events["bad/deleted-topic"]), figures
        assert any(
            e["kind"] == "failed" and "doomed" in (e["reason"] or "") for e in after_delete
        ), figures
        assert any("queue" in r.lower() for r in reasons("missing-queue")), figures
        assert any("no-such-host.invalid" in r for r in reasons("no-dns")), figures
        at_limit_runs = [e for e in kafka_deliveries(topo, big) if in_window(e["run_id"])]
        assert len(at_limit_runs) >= WINDOW_S // 2, "the job at the payload limit must run"
        assert Counter(e["run_id"] for e in at_limit_runs).most_common(1)[0][1] == 1

        rejected = [m for m in read_events(topo, "rejected", 1.0) if m.key() == b"bad/over-limit"]
        assert rejected, "the over-limit record written to cron.schedules must be rejected"
        headers = dict(rejected[0].headers())
        reason = headers["rejected.reason"].decode()
        assert "payload" in reason and f"{limits.max_payload_bytes:,}" in reason, reason
        assert disp.alive(), disp.log()[-3000:]
        assert "aborted two transactions in a row" not in disp.log()
    finally:
        receiver.stop()


def running_again_ms(log: str, partitions: int) -> float:
    """From the first failed transaction in ``log`` to every task running after the last."""
    lines = [line for line in log.splitlines() if line[:2] == "20"]
    failed = [log_time(line) for line in lines if "transaction failed (" in line]
    if not failed:
        return 0.0
    back: dict[str, float] = {}  # task → the first time it ran after the last failure
    for line in lines:
        task, running, _ = line.partition(" running: restored")
        if running and log_time(line) > failed[-1]:
            back.setdefault(task.rsplit(" ", 1)[-1], log_time(line))
    if len(back) < partitions:
        return float("inf")
    return round((max(back.values()) - failed[0]) * 1000)


def test_a_run_record_the_broker_refuses_quarantines_its_job_alone(
    topo: Settings, procs: SpawnFault
) -> None:
    """A scheduler configured for larger records than its runs topic takes (settings of
    2 MB, the topic's 500 kB): a job written straight to cron.schedules (1 MiB) passes the
    scheduler's own limits, but the broker refuses its run record (the payload, as in the
    job). The transaction aborts once; the replay records the run as missed with the
    broker's reason and pauses the job with it; every other job's runs are emitted and
    delivered on time, once."""
    out = topo.topic("stream-out")
    create_topic(topo, out)
    set_max_message_bytes(topo, topo.topic("runs"), 500_000)
    roomy = {"max_record_bytes": 2_000_000, "max_payload_bytes": 700_000}
    disp = procs("dispatcher", "d")
    sched = procs("scheduler", "s", **roomy)
    disp.wait_running(topo.partitions)
    sched.wait_running(topo.partitions)
    healthy = [
        job("stream", f"feed-{i}", {"type": "kafka", "topic": out}) for i in range(HEALTHY_JOBS)
    ]
    Publisher(topo).put_jobs(healthy)
    noise = base64.b64encode(os.urandom(450_000)).decode()  # 600,000 characters, incompressible
    big = job("bad", "huge", {"type": "kafka", "topic": out}, payload=noise)
    raw = Producer(producer_config(topo))
    raw.produce(topo.topic("schedules"), big.model_dump_json().encode(), b"bad/huge")
    assert raw.flush(30) == 0
    since = next_second_us(2)
    until = since + 10 * SECOND
    wait_until(lambda: now_us() > until + 2 * SECOND, 40, "the window to pass")
    assert sched.stop() == 0

    expected = every_second_run_ids(healthy, since, until)
    arrivals, lateness_ms = kafka_lateness(topo, out, expected, since, until)
    missed = [e for e in attempt_events(topo)["bad/huge"] if e["kind"] == "missed"]
    latest = None
    for message in read_events(topo, "schedules", 1.0):
        if message.key() == b"bad/huge" and message.value()[:2] == b"\xc3\x01":
            latest = CODEC.decode(message.value())[1]
    figures: dict[str, Any] = {
        "healthy_runs": len(arrivals),
        "healthy_duplicates": sum(len(a) - 1 for a in arrivals.values()),
        "healthy_lateness_p99_ms": round(p99(lateness_ms), 1),
        "scheduler_aborts": sched.log().count("transaction failed ("),
        "running_again_ms": running_again_ms(sched.log(), topo.partitions),
        "missed_reason": missed[0]["reason"][:200] if missed else None,
        "paused_reason": None if latest is None else latest["paused_reason"][:200],
    }
    report("isolation_refused_run_record", **figures)
    assert set(arrivals) >= expected, figures
    assert not any(r.startswith("bad/") for r in arrivals), figures
    assert figures["healthy_duplicates"] == 0, figures
    assert p99(lateness_ms) <= 1000, figures
    assert missed and "MSG_SIZE_TOO_LARGE" in missed[0]["reason"], figures
    assert latest is not None and latest["paused"], figures
    assert "quarantined" in latest["paused_reason"], figures
    assert figures["scheduler_aborts"] <= 2, figures
    # every task of the scheduler runs again soon after the abort (not after librdkafka's
    # message.timeout.ms: the healthy runs' lateness shows that only when they were in it)
    assert 0 < figures["running_again_ms"] <= 3000, figures
    assert "aborted two transactions in a row" not in sched.log()


def test_a_target_topic_too_small_for_a_jobs_records_fails_those_runs_alone(
    topo: Settings, procs: SpawnFault
) -> None:
    """A Kafka target topic whose max.message.bytes (2,000) is below one job's records: the
    broker refuses the first one, the dispatcher's transaction aborts (twice when the record
    was refused in one batch with the small job's: the replay sends it alone), and that
    attempt fails for good with the broker's reason; the job's later records are refused by
    the dispatcher itself, naming the size, without another abort. A job of the same tenant
    writing small records to the same topic partition, and a healthy tenant, lose nothing
    and come on time."""
    out, small = topo.topic("stream-out"), topo.topic("small-out")
    create_topic(topo, out)
    create_topic(topo, small, partitions=1, **{"max.message.bytes": "2000"})
    disp = procs("dispatcher", "d")
    sched = procs("scheduler", "s")
    disp.wait_running(topo.partitions)
    sched.wait_running(topo.partitions)
    healthy = [
        job("stream", f"feed-{i}", {"type": "kafka", "topic": out}) for i in range(HEALTHY_JOBS)
    ]
    fits = job("bad", "fits", {"type": "kafka", "topic": small})
    noise = base64.b64encode(os.urandom(3000)).decode()  # 4,000 characters, incompressible
    too_big = job("bad", "too-big", {"type": "kafka", "topic": small}, payload=noise)
    Publisher(topo).put_jobs([*healthy, fits, too_big])
    learned = "bytes was; this one has"  # the dispatcher refuses the job's records itself
    wait_until(lambda: learned in disp.log(), 30, "the first refusal learned", alive=disp)
    since = next_second_us(2)  # after the aborts it cost: from here on the steady state
    until = since + WINDOW_S * SECOND
    wait_until(lambda: now_us() > until + 2 * SECOND, 40, "the window to pass")
    assert sched.stop() == 0

    arrivals, lateness_ms = kafka_lateness(
        topo, out, every_second_run_ids(healthy, since, until), since, until
    )
    fit_arrivals, fit_lateness_ms = kafka_lateness(
        topo, small, every_second_run_ids([fits], since, until), since, until
    )
    events = attempt_events(topo)["bad/too-big"]
    in_window = [e for e in events if since <= instant_of(e["run_id"]) <= until]
    failed = [e for e in in_window if e["kind"] == "failed"]
    figures: dict[str, Any] = {
        "healthy_lateness_p99_ms": round(p99(lateness_ms), 1),
        "fits_lateness_p99_ms": round(p99(fit_lateness_ms), 1),
        "fits_duplicates": sum(len(a) - 1 for a in fit_arrivals.values()),
        "too_big_failed": len(failed),
        "too_big_attempts": max((e["attempt"] for e in in_window), default=0),
        "dispatcher_aborts": disp.log().count("transaction failed ("),
        "aborts_in_window": sum(
            1
            for line in disp.log().splitlines()
            if "transaction failed (" in line and log_time(line) * SECOND >= since
        ),
        "running_again_ms": running_again_ms(disp.log(), topo.partitions),
        "first_reason": failed[0]["reason"][:200] if failed else None,
        "last_reason": failed[-1]["reason"][:200] if failed else None,
    }
    report("isolation_target_too_small", **figures)
    assert sum(len(a) - 1 for a in arrivals.values()) == 0, figures
    assert p99(lateness_ms) <= 1000 and p99(fit_lateness_ms) <= 1000, figures
    assert figures["fits_duplicates"] == 0, figures
    assert not any(e["run_id"].startswith("bad/too-big") for e in kafka_deliveries(topo, small))
    assert figures["too_big_failed"] == WINDOW_S + 1, figures  # each run once, not retried
    assert figures["too_big_attempts"] == 1, figures
    first = next(e["reason"] or "" for e in events if e["kind"] == "failed")
    assert "MSG_SIZE_TOO_LARGE" in first and "(a record of" not in first, figures  # the broker's
    assert "bytes was; this one has" in (failed[-1]["reason"] or ""), figures  # then its own
    assert 1 <= figures["dispatcher_aborts"] <= 2, figures  # the first record's, alone
    assert figures["aborts_in_window"] == 0, figures
