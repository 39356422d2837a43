"""Inputs that used to fail a whole tick of their partition, beside a healthy tenant (real
scheduler and dispatcher processes, real broker): commands written straight to
cron.commands that no run id can hold (rejected on arrival, naming why), and a target whose
redirect names a Location that is not UTF-8 (its runs fail, alone, with a readable reason).
"""

from __future__ import annotations

import socketserver
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from schedulerstream.kafka.clients import producer_config
from schedulerstream.model import JobDefinition
from schedulerstream.publish import Publisher
from schedulerstream.settings import Settings
from tests.faults.conftest import SpawnFault
from tests.faults.helpers import next_second_us, now_us, report, wait_until
from tests.isolation.helpers import (
    CODEC,
    SECOND,
    attempt_events,
    create_topic,
    every_second_run_ids,
    kafka_lateness,
    p99,
)
from tests.support.runs import read_events

pytestmark = [pytest.mark.kafka]
HEALTHY_JOBS = 4
FAST_RETRY = {"max_attempts": 2, "initial_backoff": 1, "multiplier": 1, "max_backoff": 1}


class _Redirect(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = self.request.recv(65536)
            if not chunk:
                return
            data += chunk
        self.request.sendall(
            b"HTTP/1.1 302 Found\r\nLocation: /caf\xe9\xff\r\nContent-Length: 0\r\n"
            b"Connection: close\r\n\r\n"
        )


@pytest.fixture
def bad_redirect() -> Iterator[str]:
    """A target answering every request with a redirect whose Location is not UTF-8."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Redirect)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()
    server.server_close()


def job(tenant: str, job_id: str, target: dict[str, Any], **extra: Any) -> JobDefinition:
    fields: dict[str, Any] = {"schedule": {"every": 1}, "retry": FAST_RETRY, "timeout": 5}
    fields.update(extra)
    return JobDefinition.model_validate(
        {"tenant": tenant, "job_id": job_id, "target": target, **fields}
    )


def command(job_id: str, kind: str, fields: dict[str, Any]) -> bytes:
    return CODEC.encode("Command", {
        "tenant": "bad", "job_id": job_id, "issued_at_us": now_us(),
        "command": (f"io.schedulerstream.{kind}", fields),
    })  # fmt: skip


def test_poison_commands_and_an_unreadable_redirect_stop_no_other_tenant(
    topo: Settings, procs: SpawnFault, bad_redirect: str
) -> None:
    out = topo.topic("stream-out")
    create_topic(topo, out)
    disp = procs("dispatcher", "d")
    sched = procs("scheduler", "s")
    disp.wait_running(topo.partitions)
    sched.wait_running(topo.partitions)
    healthy = [
        job("stream", f"feed-{i}", {"type": "kafka", "topic": out}) for i in range(HEALTHY_JOBS)
    ]
    redirect = job("bad", "redirect", {"type": "http", "url": bad_redirect})
    Publisher(topo).put_jobs([*healthy, redirect])
    since = next_second_us(2)
    until = since + 10 * SECOND
    wait_until(lambda: now_us() > since, 30, "the window to open")
    raw = Producer(producer_config(topo))
    hour_ago = now_us() - 3600 * SECOND
    poison = {
        "trigger-not-json": command("redirect", "TriggerNow",
                                    {"request_id": "t1", "payload_json": "{oops"}),
        "backfill-bad-id": command("redirect", "Backfill",
                                   {"request_id": "bad id", "start_us": hour_ago,
                                    "end_us": now_us(), "rerun": True}),
        "backfill-before-1970": command("redirect", "Backfill",
                                        {"request_id": "b2", "start_us": -(2**62),
                                         "end_us": now_us(), "rerun": True}),
    }  # fmt: skip
    for value in poison.values():
        raw.produce(topo.topic("commands"), value, b"bad/redirect")
    assert raw.flush(30) == 0
    wait_until(lambda: now_us() > until + 2 * SECOND, 40, "the window to pass")
    assert sched.stop() == 0

    expected = every_second_run_ids(healthy, since, until)
    arrivals, lateness_ms = kafka_lateness(topo, out, expected, since, until)
    rejected = [
        dict(m.headers())["rejected.reason"].decode()
        for m in read_events(topo, "rejected", 1.0)
        if m.key() == b"bad/redirect"
    ]

    def redirect_failures() -> list[str] | None:
        events = attempt_events(topo).get("bad/redirect", [])
        found = [e["reason"] or "" for e in events if e["kind"] == "failed"]
        return found or None

    reasons = wait_until(redirect_failures, 30, "the redirect's failed attempts")
    figures: dict[str, Any] = {
        "healthy_runs": len(arrivals),
        "healthy_duplicates": sum(len(a) - 1 for a in arrivals.values()),
        "healthy_lateness_p99_ms": round(p99(lateness_ms), 1),
        "rejected": rejected,
        "redirect_reason": reasons[0][:160],
        "dispatcher_callback_failures": disp.log().count("callback failed"),
        "scheduler_callback_failures": sched.log().count("callback failed"),
    }
    report("isolation_poison_inputs", **figures)
    assert set(arrivals) >= expected, figures
    assert figures["healthy_duplicates"] == 0, figures
    assert p99(lateness_ms) <= 1000, figures
    assert len(set(rejected)) == len(poison), figures  # each by the scheduler and the dispatcher
    assert any("TriggerNow: payload_json is not JSON" in r for r in rejected), figures
    assert any("Backfill: request_id" in r for r in rejected), figures
    assert any("Backfill: the window" in r for r in rejected), figures
    assert "redirect to /caf\ufffd\ufffd not followed" in reasons[0], figures
    assert figures["dispatcher_callback_failures"] == 0, figures
    assert figures["scheduler_callback_failures"] == 0, figures
    assert disp.alive(), disp.log()[-3000:]
