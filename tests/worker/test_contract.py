"""The offer/event records, handler lookup and ``--app`` loading (no broker)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from schedulerstream.cli import main
from schedulerstream.cli.worker_cmd import load_app
from schedulerstream.contracts.worker import (
    WorkCancel,
    WorkerEvent,
    WorkOffer,
    cancel_value,
    decode_work,
    decode_worker_event,
    offer_value,
)
from schedulerstream.errors import ConfigError
from schedulerstream.ingest import RejectedRecord
from schedulerstream.targets.base import Delivery
from schedulerstream.targets.envelope import envelope_text
from schedulerstream.worker import Job, WorkerApp

SECOND = 1_000_000
T0 = 1_767_225_600 * SECOND
RID = "acme/report@20260101T000000Z"


def test_an_offer_is_the_webhook_envelope_plus_the_lease_terms() -> None:
    delivery = Delivery(RID, "acme", "report", T0, 2, "scheduled", '{"n":1}', 30.0)
    value = offer_value(envelope_text(delivery), "p", 3000, T0 + SECOND, T0 + 31 * SECOND, 5)
    assert json.loads(value) == {
        "kind": "offer", "run_id": RID, "tenant": "acme", "job_id": "report",
        "scheduled_at": "2026-01-01T00:00:00Z", "attempt": 2, "trigger": "scheduled",
        "payload": {"n": 1}, "pool": "p", "lease_ms": 3000, "offered_at_us": T0 + SECOND,
        "deadline_at_us": T0 + 31 * SECOND, "dispatcher_partition": 5,
    }  # fmt: skip
    offer = decode_work(RID.encode(), value)
    assert isinstance(offer, WorkOffer) and offer.job_key == "acme/report"
    assert offer.claim_until_us == T0 + 4 * SECOND  # one lease after the offer
    job = Job.from_offer(offer)
    assert (job.attempt, job.payload, job.pool, job.is_cancelled()) == (2, {"n": 1}, "p", False)
    cancel = decode_work(RID.encode(), cancel_value(RID, 2, "replaced", 5))
    assert cancel == WorkCancel(RID, 2, "replaced", 5)


def test_worker_events_round_trip_and_bad_ones_say_why() -> None:
    event = WorkerEvent("failed", RID, 1, "w1", T0, "boom", False, 12)
    assert decode_worker_event(RID.encode(), event.to_bytes()) == event
    beat = WorkerEvent("heartbeat", RID, 1, "w1", T0)
    assert json.loads(beat.to_bytes()) == {
        "kind": "heartbeat", "run_id": RID, "attempt": 1, "worker": "w1", "at_us": T0,
        "retryable": True,
    }  # fmt: skip
    good = json.loads(beat.to_bytes())
    cases = {
        b"{": "is not JSON",
        b"[1]": "must be a JSON object",
        json.dumps({**good, "kind": "done"}).encode(): "kind 'done' is not one of",
        json.dumps({**good, "run_id": "other@1"}).encode(): "differs from its key",
        json.dumps({**good, "attempt": 0}).encode(): "attempt must be at least 1",
        json.dumps({**good, "attempt": "1"}).encode(): "'attempt' is missing or of the wrong",
        json.dumps({**good, "worker": None}).encode(): "'worker' is missing",
        json.dumps({**good, "retryable": "no"}).encode(): "retryable must be true or false",
    }
    for value, reason in cases.items():
        with pytest.raises(RejectedRecord, match=reason):
            decode_worker_event(RID.encode(), value)
    with pytest.raises(RejectedRecord, match="no key"):
        decode_worker_event(None, beat.to_bytes())
    with pytest.raises(RejectedRecord, match="neither offer nor cancel"):
        decode_work(RID.encode(), json.dumps({"kind": "x", "run_id": RID}).encode())


def test_handlers_resolve_by_job_key_then_job_id_then_default() -> None:
    app = WorkerApp()

    @app.handler
    def default(job: Job) -> str:
        return "default"

    @app.handler(job="report")
    async def any_report(job: Job) -> str:
        return "any"

    app.add(lambda job: "acme's", job="acme/report")
    assert app.resolve("acme", "report") is not any_report
    assert app.resolve("other", "report") is any_report
    assert app.resolve("other", "x") is default
    assert WorkerApp.is_async(any_report) and not WorkerApp.is_async(default)
    with pytest.raises(ConfigError, match="already registered"):
        app.add(default, job="report")
    assert WorkerApp().resolve("a", "b") is None


def test_app_loading_says_what_is_wrong() -> None:
    assert len(load_app("tests.worker.apps:app")) == 2
    for spec, reason in [
        ("tests.worker.apps", "expected module:attribute"),
        ("tests.worker.nope:app", "cannot import"),
        ("tests.worker.apps:marker", "is not a WorkerApp"),
    ]:
        with pytest.raises(ConfigError, match=reason):
            load_app(spec)


def test_the_worker_command_refuses_a_bad_app_with_a_clear_error() -> None:
    result = CliRunner().invoke(main, ["worker", "--pool", "p", "--app", "tests.worker.apps"])
    assert result.exit_code == 1
    assert "Error: --app 'tests.worker.apps': expected module:attribute" in result.output
