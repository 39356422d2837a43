"""pause_after_failures and notify in the dispatcher logic, by hand (issue #16): N consecutive
failed runs ask for one PauseJob; a success or a new version starts the count again; a dead
letter queues one notification run to the notify target, which never blocks, counts or
notifies itself."""

from __future__ import annotations

import json
from typing import Any

from schedulerstream.model import HttpTarget, KafkaTarget
from schedulerstream.targets.base import Outcome

from .harness import (
    CODEC,
    FAIL,
    OK,
    SECOND,
    T0,
    Harness,
    cancel,
    definition,
    run_id,
    run_triggered,
)

HOOK = {"type": "http", "url": "https://alerts.example.com/hook"}
NOTIFY = {"on": ["dead_lettered", "paused"], "target": HOOK}
ONCE = {"max_attempts": 1}
GONE = Outcome("gone", "HTTP 410: removed", False, 10, 410)
TIMED_OUT = Outcome("timed_out", "no answer in 30 s", True, 10)
NOTICE = "acme/j1@{}!dead_lettered"


def fragile(n: int, version: int = 1, **extra: Any) -> bytes:
    return run_triggered(n, version=version, pause_after_failures=3, retry=ONCE, **extra)


def pauses(h: Harness) -> list[dict[str, Any]]:
    return [r["command"][1] for r in h.on_topic("commands")]


def fail_runs(h: Harness, ns: range, outcome: Outcome = FAIL, version: int = 1) -> None:
    for n in ns:
        h.run(fragile(n, version))
        [start] = h.tick()
        h.finish(start.delivery.run_id, outcome)


def test_three_failed_runs_in_a_row_ask_for_one_pause_with_the_reason() -> None:
    h = Harness()
    fail_runs(h, range(2))
    assert pauses(h) == []
    fail_runs(h, range(2, 3))
    [pause] = pauses(h)
    last = json.loads(pause.pop("last_attempt_json"))
    assert pause == {
        "job_version": 1,
        "run_id": run_id(2),
        "reason": f"paused after 3 consecutive failed runs (last: {run_id(2)}: dead_lettered: "
        "1 attempts; last error: HTTP 503: try again)",
    }
    assert last == {"attempt": 1, "outcome": "failed", "status_code": 503,
                    "error": "HTTP 503: try again", "at": "2026-01-01T00:00:00Z"}  # fmt: skip
    [(_topic, key, _, partition)] = [r for r in h.records if r[0] == "commands"]
    assert (key, partition) == (b"acme/j1", 0)
    fail_runs(h, range(3, 5))  # the count started again: two more are not three
    assert len(pauses(h)) == 1


def test_a_success_resets_the_count_and_skipped_or_cancelled_runs_change_nothing() -> None:
    h = Harness()
    fail_runs(h, range(2))
    h.run(fragile(2))
    [start] = h.tick()
    h.finish(start.delivery.run_id, OK)
    fail_runs(h, range(3, 5))
    assert pauses(h) == []
    h.run(fragile(5))
    h.tick()
    h.command(cancel(run_id(5)))  # cancelled: neither a failure nor a success
    fail_runs(h, range(6, 7))
    assert [p["run_id"] for p in pauses(h)] == [run_id(6)]


def test_timeouts_and_terminal_failures_count_a_410_does_not() -> None:
    h = Harness()
    fail_runs(h, range(1), TIMED_OUT)
    fail_runs(h, range(1, 2), Outcome("refused", "blocked address", False, 0))
    fail_runs(h, range(2, 3), GONE)  # pauses by itself, with its own reason: not a third
    assert [p["reason"].split(":")[0] for p in pauses(h)] == ["target gone"]
    assert json.loads(h.store.get(b"fails/acme/j1") or b"{}") == {"version": 1, "count": 2}


def test_a_new_version_starts_again_and_a_late_run_of_an_old_version_is_ignored() -> None:
    h = Harness()
    h.run(fragile(0, version=1))
    [old] = h.tick()
    fail_runs(h, range(1, 3), version=1)
    fail_runs(h, range(3, 5), version=2)  # a fix: 2 failures of version 2, not 4
    h.finish(old.delivery.run_id, FAIL)  # version 1 ends late: neither counts nor resets
    assert pauses(h) == []
    fail_runs(h, range(5, 6), version=2)
    assert [(p["job_version"], p["run_id"]) for p in pauses(h)] == [(2, run_id(5))]


def test_the_count_survives_a_restart_from_the_committed_store() -> None:
    h = Harness()
    fail_runs(h, range(2))
    h.restart()
    fail_runs(h, range(2, 3))
    assert [p["run_id"] for p in pauses(h)] == [run_id(2)]


def test_without_pause_after_failures_nothing_is_counted() -> None:
    h = Harness()
    for n in range(5):
        h.run(run_triggered(n, retry=ONCE))
        [start] = h.tick()
        h.finish(start.delivery.run_id, FAIL)
    assert pauses(h) == []
    assert [k for k, _ in h.store.range(b"fails/", b"fails0")] == []


def test_a_dead_letter_queues_one_notification_to_the_notify_target() -> None:
    h = Harness()
    h.run(run_triggered(0, retry={"max_attempts": 2, "initial_backoff": 0.001}, notify=NOTIFY))
    [_start] = h.tick()
    h.finish(run_id(0), FAIL)
    [retry] = h.advance(1)
    assert retry.delivery.run_id == run_id(0)
    h.finish(run_id(0), Outcome("failed", "HTTP 500: boom", True, 10, 500))
    notice_id = NOTICE.format(T0)
    assert h.events(notice_id) == [("accepted", 0)]
    [notice] = h.tick()
    assert notice.delivery.run_id == notice_id
    assert notice.target == HttpTarget.model_validate(HOOK)
    assert (notice.delivery.trigger, notice.delivery.attempt) == ("notification", 1)
    assert notice.delivery.payload == {
        "type": "schedulerstream.notification", "event": "dead_lettered", "tenant": "acme",
        "job_id": "j1", "job_version": 1, "run_id": run_id(0),
        "reason": "2 attempts; last error: HTTP 500: boom",
        "last_attempt": {"attempt": 2, "outcome": "failed", "status_code": 500,
                         "error": "HTTP 500: boom", "at": "2026-01-01T00:00:01Z"},
    }  # fmt: skip
    h.finish(notice_id, OK)
    assert h.events(notice_id)[-1] == ("succeeded", 1)


def test_a_notification_that_fails_for_good_neither_notifies_nor_counts() -> None:
    h = Harness()
    h.run(fragile(0, notify=NOTIFY))
    h.tick()
    h.finish(run_id(0), FAIL)
    notice_id = NOTICE.format(T0)
    [_notice] = h.tick()
    h.finish(notice_id, FAIL)  # the notification's own retry policy: one attempt
    assert h.events(notice_id)[-1] == ("dead_lettered", 1)
    assert h.tick() == []  # no notification of the notification
    assert [r for r in h.kinds("accepted") if "!" in r["run_id"]] == [
        r for r in h.kinds("accepted") if r["run_id"] == notice_id
    ]
    assert json.loads(h.store.get(b"fails/acme/j1") or b"{}")["count"] == 1
    fail_runs(h, range(1, 3))
    assert [p["run_id"] for p in pauses(h)] == [run_id(2)]  # the job's own 3 failures


def test_a_notification_neither_waits_for_nor_blocks_the_jobs_runs() -> None:
    h = Harness()
    h.run(run_triggered(0, overlap_policy="forbid", retry=ONCE, notify=NOTIFY))
    h.tick()
    h.finish(run_id(0), FAIL)
    [notice] = h.tick()  # in flight to the notify target
    h.run(run_triggered(1, overlap_policy="replace", retry=ONCE, notify=NOTIFY))
    [run] = h.tick()
    assert run.delivery.run_id == run_id(1) and h.cancelled == []
    assert notice.delivery.run_id in h.in_flight


def test_a_paused_notice_from_the_scheduler_goes_to_the_notify_target_once() -> None:
    h = Harness()
    target = {"type": "kafka", "topic": "alerts"}
    paused = CODEC.encode(
        "RunTriggered",
        {
            "run_id": "acme/j1@v2!paused", "tenant": "acme", "job_id": "j1",
            "scheduled_at_us": T0, "not_before_us": T0, "emitted_at_us": T0,
            "trigger": "notification", "payload_json": json.dumps({"event": "paused"}),
            "job_version": 2,
            "job_definition": definition(version=2, paused=True, paused_reason="target gone",
                                         notify={"on": ["paused"], "target": target}),
        },
    )  # fmt: skip
    h.store.put(b"gone/acme/j1", json.dumps({"version": 2, "reason": "removed"}).encode())
    h.run(paused)
    h.run(paused)  # a duplicate (a replay)
    [start] = h.tick()  # not skipped as "target gone": it goes elsewhere
    assert start.target == KafkaTarget(topic="alerts")
    assert start.delivery.payload == {"event": "paused"}
    assert h.logic.counters.duplicates == 1
    h.clock.advance(SECOND)
    assert h.tick() == []
