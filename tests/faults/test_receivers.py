"""Misbehaving receivers, process level: a scheduler and a dispatcher process deliver webhooks
to a real receiver process (harness/webhook_receiver.py) and to a black hole in the test.

- ``hang``: the receiver reads the request and never answers (/hang);
- ``blackhole``: a TCP listener that accepts and never reads nor answers;
- ``flaky``: 503 twice, then 200 (/fail-then-ok/2);
- ``throttled``: 429 with ``Retry-After: 6`` every time: the wait goes through the 5 s delay
  topic (the retry record is on cron.retry.5s), the next attempt no earlier than 6 s;
- ``unavailable``: 503 with ``Retry-After: 3`` every time (a wait shorter than every delay
  topic: kept locally).

The dispatcher must enforce each job's 2 s timeout, retry as the policy and Retry-After say,
and end every run: ``succeeded`` (flaky, on attempt 3) or ``dead_lettered`` after
``max_attempts`` (the others), nothing lost, each run's attempts counted at the receiver.
Each behaviour has its own receiver process, since the dispatcher's circuit breaker is per
host: an attempt refused by an open breaker (after 5 consecutive failures of that host) makes
no request and is counted as such.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest

from harness.procs import ReceiverProcess
from schedulerstream.model import JobDefinition
from schedulerstream.publish import Publisher
from schedulerstream.settings import Settings
from tests.faults.conftest import SpawnFault
from tests.faults.helpers import (
    SECOND,
    attempt_events,
    next_second_us,
    now_us,
    report,
    wait_until,
)
from tests.support.runs import read_events, read_runs

pytestmark = [pytest.mark.kafka, pytest.mark.faults]
TIMEOUT_S = 2
FAST_RETRY = {"max_attempts": 3, "initial_backoff": 1, "multiplier": 1, "max_backoff": 1}
ONE_RETRY = {"max_attempts": 2, "initial_backoff": 1, "multiplier": 1, "max_backoff": 1}
BEHAVIOURS: dict[str, tuple[str, dict[str, Any]]] = {
    "hang": ("/hang", FAST_RETRY),
    "flaky": ("/fail-then-ok/2", FAST_RETRY),
    "throttled": ("/429?after=6", ONE_RETRY),
    "unavailable": ("/503?after=3", ONE_RETRY),
}


class BlackHole:
    """Accepts TCP connections on 127.0.0.1 and never reads or answers."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.port = self.server.getsockname()[1]
        self.accepted: list[tuple[float, socket.socket]] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = self.server.accept()
                self.accepted.append((time.time(), conn))

    def close(self) -> None:
        self.server.close()
        for _, conn in self.accepted:
            conn.close()


@pytest.fixture
def black_hole() -> Iterator[BlackHole]:
    hole = BlackHole()
    yield hole
    hole.close()


def webhook(job_id: str, url: str, retry: dict[str, Any]) -> JobDefinition:
    return JobDefinition.model_validate(
        {
            "tenant": "rx",
            "job_id": job_id,
            "schedule": {"every": 10},
            "target": {"type": "http", "url": url},
            "timeout": TIMEOUT_S,
            "retry": retry,
        }
    )


def test_hanging_failing_throttling_and_silent_receivers(
    topo: Settings, procs: SpawnFault, black_hole: BlackHole
) -> None:
    # one receiver process per behaviour: the dispatcher's circuit breaker is per host
    receivers = {name: ReceiverProcess().start() for name in BEHAVIOURS}
    try:
        disp = procs("dispatcher", "d")
        sched = procs("scheduler", "s")
        disp.wait_running(topo.partitions)
        sched.wait_running(topo.partitions)
        hole = f"http://127.0.0.1:{black_hole.port}/"
        jobs = {
            name: webhook(name, receivers[name].url(path), retry)
            for name, (path, retry) in BEHAVIOURS.items()
        }
        jobs["blackhole"] = webhook("blackhole", hole, FAST_RETRY)
        Publisher(topo).put_jobs(list(jobs.values()))
        since = next_second_us(1)
        wait_until(lambda: now_us() > since + 21 * SECOND, 40, "two or three runs of each job")
        until = now_us()
        assert sched.stop() == 0
        # every run the stopped scheduler emitted, also those due before `since` or emitted
        # ahead of their time past `until`: the black hole counts their connections too
        due = {r["run_id"]: r for r in read_runs(topo).triggered}
        in_window = {r["job_id"] for r in due.values() if since <= r["scheduled_at_us"] <= until}
        assert in_window == set(jobs), "a job has no run"

        def all_ended() -> dict[str, list[dict[str, Any]]] | None:
            events: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for event in attempt_events(topo, 1.0):
                events[event["run_id"]].append(event)
            ended = all(
                any(e["kind"] in ("succeeded", "dead_lettered") for e in events[rid]) for rid in due
            )
            return events if ended else None

        events = wait_until(all_ended, 90, "every run to end", every=2.0)
        assert disp.alive(), disp.log()[-3000:]
        requests = [r for rx in receivers.values() for r in rx.requests()]
        retry_5s = [m.key().decode() for m in read_events(topo, "retry.5s", 1.0)]
        outside = [r for r in due.values() if not since <= r["scheduled_at_us"] <= until]
        figures: dict[str, Any] = {"runs": len(due), "outside_window": len(outside)}
        by_job: dict[str, list[str]] = defaultdict(list)
        for rid, run in due.items():
            by_job[run["job_id"]].append(rid)
        for job_id, rids in sorted(by_job.items()):
            attempts, lengths_s, gaps_s, ends, refused = [], [], [], [], 0
            for rid in rids:
                mine = events[rid]
                terminal = [e for e in mine if e["kind"] in ("succeeded", "dead_lettered")]
                assert len(terminal) == 1, f"{rid}: {[e['kind'] for e in mine]}"
                ends.append(terminal[0]["kind"])
                started = {e["attempt"]: e["at_us"] for e in mine if e["kind"] == "started"}
                attempts.append(len(started))
                for e in mine:
                    if e["kind"] in ("timed_out", "failed") and e["attempt"] in started:
                        lengths_s.append((e["at_us"] - started[e["attempt"]]) / 1e6)
                starts = sorted(started.values())
                gaps_s += [(b - a) / 1e6 for a, b in itertools.pairwise(starts)]
                breaker = [
                    e
                    for e in mine
                    if e["kind"] == "failed"
                    and (e["reason"] or "").startswith("circuit breaker open")
                ]
                refused += len(breaker)
                if job_id == "blackhole":
                    continue
                arrived = [r for r in requests if r["headers"].get("webhook-id") == rid]
                assert len(arrived) + len(breaker) == len(started), (
                    f"{rid}: {len(started)} attempts, {len(arrived)} requests, "
                    f"{len(breaker)} refused by the open circuit breaker"
                )
            figures[job_id] = {
                "runs": len(rids),
                "ends": sorted(set(ends)),
                "attempts": sorted(set(attempts)),
                "max_attempt_s": round(max(lengths_s, default=0), 2),
                "min_retry_gap_s": round(min(gaps_s, default=0), 2),
                "breaker_refused": refused,
            }
        figures["blackhole_connections"] = len(black_hole.accepted)
        figures["retry_5s_records"] = len(retry_5s)
        report("misbehaving receivers", **figures)
        for job_id in ("hang", "blackhole"):
            f = figures[job_id]
            assert f["ends"] == ["dead_lettered"] and f["attempts"] == [3], (job_id, f)
            assert TIMEOUT_S - 0.1 <= f["max_attempt_s"] <= TIMEOUT_S + 1.5, (job_id, f)
        hole_attempts = 3 * figures["blackhole"]["runs"]
        refused = figures["blackhole"]["breaker_refused"]
        assert figures["blackhole_connections"] + refused == hole_attempts, figures["blackhole"]
        assert figures["flaky"]["ends"] == ["succeeded"] and figures["flaky"]["attempts"] == [3]
        for job_id, after_s in (("throttled", 6), ("unavailable", 3)):
            f = figures[job_id]
            assert f["ends"] == ["dead_lettered"] and f["attempts"] == [2], (job_id, f)
            assert f["min_retry_gap_s"] >= after_s - 0.05, f"{job_id}: Retry-After ignored {f}"
        throttled = set(by_job["throttled"])
        assert throttled <= set(retry_5s), "429 + Retry-After 6 s did not go through retry.5s"
        assert not set(by_job["unavailable"]) & set(retry_5s), "a 3 s wait went to retry.5s"
        assert disp.stop() == 0
    finally:
        for rx in receivers.values():
            rx.stop()
