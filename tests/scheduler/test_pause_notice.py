"""The "paused" notification (issue #16): a PauseJob that takes effect emits one notification
run beside the paused version; an ignored pause, a job without ``notify: paused`` and a replay
emit none; a refused notice is a ``missed`` event of its own."""

from __future__ import annotations

import json
from typing import Any

from schedulerstream.ingest import pause_job_command
from schedulerstream.model import JobDefinition

from .harness import CODEC, Harness, definition, us

T0 = us("2025-01-06T10:00:30Z")
HOOK = {"type": "http", "url": "https://alerts.example.com/hook", "secret": None}
LAST = {"attempt": 1, "outcome": "failed", "status_code": 500, "error": "HTTP 500",
        "at": "2025-01-06T10:00:30Z"}  # fmt: skip
REASON = "paused after 3 consecutive failed runs (last: acme/j1@20250106T100000Z: ...)"


def started(**job: Any) -> Harness:
    h = Harness()
    h.now = T0
    h.put(definition(7, **job))
    h.out.clear()
    return h


def pause(version: int = 7) -> bytes:
    return pause_job_command(CODEC, "acme/j1", version, REASON, T0, "acme/j1@20250106T100000Z",
                             json.dumps(LAST))  # fmt: skip


def notices(h: Harness) -> list[dict[str, Any]]:
    return [r for r in h.out.runs() if r["trigger"] == "notification"]


def test_a_pause_that_takes_effect_emits_one_notification_run() -> None:
    h = started(notify={"on": ["paused"], "target": HOOK}, payload={"big": "x" * 1000})
    h.command(pause())
    [notice] = notices(h)
    assert notice["run_id"] == "acme/j1@v8!paused"
    assert (notice["job_version"], notice["scheduled_at_us"]) == (8, T0)
    assert json.loads(notice["payload_json"]) == {
        "type": "schedulerstream.notification", "event": "paused", "tenant": "acme",
        "job_id": "j1", "job_version": 8, "run_id": "acme/j1@20250106T100000Z",
        "reason": REASON, "last_attempt": LAST,
    }  # fmt: skip
    snapshot = JobDefinition.from_avro(CODEC.decode_as("JobDefinition", notice["job_definition"]))
    assert (snapshot.version, snapshot.paused, snapshot.payload) == (8, True, None)
    assert (
        snapshot.notify is not None and snapshot.notify.target.model_dump().items() >= HOOK.items()
    )
    [(topic, key, _, _, partition)] = [r for r in h.out.records if r[3] == "RunTriggered"]
    assert (topic, key, partition) == ("runs", b"acme/j1@v8!paused", 0)
    h.out.clear()
    h.command(pause())  # a replay or a second ask: the job is paused already
    assert notices(h) == []


def test_no_notice_without_notify_paused_or_when_the_pause_is_ignored() -> None:
    h = started(notify={"on": ["dead_lettered"], "target": HOOK})
    h.command(pause())
    assert h.logic.counters.paused_by_command == 1 and notices(h) == []
    h = started(notify={"on": ["paused"], "target": HOOK})
    h.command(pause(6))  # the user changed the job since: no pause, no notice
    assert h.logic.counters.pauses_ignored == 1 and notices(h) == []


def test_a_refused_notice_is_a_missed_event_and_the_pause_still_applies() -> None:
    h = started(notify={"on": ["paused"], "target": HOOK})
    h.out.refused["acme/j1@v8!paused"] = "TOPIC_AUTHORIZATION_FAILED"
    h.command(pause())
    assert notices(h) == []
    [missed] = h.out.attempts("missed")
    assert (missed["run_id"], missed["reason"]) == (
        "acme/j1@v8!paused", "notification not emitted: TOPIC_AUTHORIZATION_FAILED",
    )  # fmt: skip
    state = h.logic.jobs.load(h.store, "acme/j1")
    assert state is not None and (state.version, state.paused) == (8, True)
