"""End to end on the real broker (issue #16): a job whose receiver always answers 500 pauses
after N failed runs, with the reason in the read model and the API; its notifications (one per
dead letter, one for the pause) reach a second receiver once each, signed; a healthy tenant's
job beside it goes on untouched.

Scheduler, dispatcher and projector run as processes, the targets are real HTTP receivers.
"""

from __future__ import annotations

import base64
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from harness.procs import ReceiverProcess
from schedulerstream.api import create_app
from schedulerstream.codec import default_codec
from schedulerstream.kafka.reader import read_topic
from schedulerstream.model import JobDefinition
from schedulerstream.publish import Publisher
from schedulerstream.settings import Settings
from schedulerstream.targets.signing import secret_key, signature
from schedulerstream.tenants import TenantAdmin
from tests.dispatcher.conftest import SpawnDispatcher
from tests.dispatcher.support import body, wait_for
from tests.projector.kafka_helpers import ProjectorProcess
from tests.support.fixtures import Spawn

pytestmark = pytest.mark.kafka
CODEC = default_codec()
N = 3
SECRET = "whsec_" + base64.b64encode(b"notify-secret-of-16-bytes").decode()


def definitions(settings: Settings) -> list[dict[str, Any]]:
    return [
        CODEC.decode_as("JobDefinition", m.value())
        for m in read_topic(settings, settings.topic("schedules"), True, 1.0)
        if m.value() is not None and m.key() == b"acme/fragile"
    ]


def jobs(failing: ReceiverProcess, alerts: ReceiverProcess) -> list[JobDefinition]:
    fragile = {
        "tenant": "acme", "job_id": "fragile", "schedule": {"every": 1},
        "target": {"type": "http", "url": failing.url("/status/500")},
        "retry": {"max_attempts": 1}, "pause_after_failures": N,
        "notify": {"on": ["dead_lettered", "paused"],
                   "target": {"type": "http", "url": alerts.url("/ok"), "secret": SECRET}},
    }  # fmt: skip
    steady = {"tenant": "globex", "job_id": "steady", "schedule": {"every": 1},
              "target": {"type": "http", "url": failing.url("/ok")}}  # fmt: skip
    return [JobDefinition.model_validate(d) for d in (fragile, steady)]


def ids(receiver: ReceiverProcess, prefix: str) -> list[str]:
    return [
        r["headers"]["webhook-id"]
        for r in receiver.requests()
        if r["headers"].get("webhook-id", "").startswith(prefix)
    ]


def test_n_failed_runs_pause_the_job_and_notify_once_beside_a_healthy_tenant(
    topo: Settings, spawn: Spawn, dispatcher: SpawnDispatcher, tmp_path: Path
) -> None:
    _, key = TenantAdmin(topo).create("acme")
    failing, alerts = ReceiverProcess().start(), ReceiverProcess().start()
    projector = ProjectorProcess(topo, "p1", tmp_path).start()
    try:
        scheduler = spawn("s1")
        dispatcher()
        scheduler.wait_for_log(" running: restored", count=topo.partitions)
        [first, _] = Publisher(topo).put_jobs(jobs(failing, alerts))
        assert first.version is not None

        # The scheduler writes the paused version with the dispatcher's reason.
        paused = wait_for(lambda: next((d for d in definitions(topo) if d["paused"]), None),
                          90, "the paused version on cron.schedules")  # fmt: skip
        assert paused["version"] == first.version + 1
        reason = paused["paused_reason"]
        assert reason.startswith(f"paused after {N} consecutive failed runs (last: acme/fragile@")
        assert "dead_lettered: 1 attempts; last error: HTTP 500" in reason

        # Every run that reached the failing receiver was dead-lettered and notified once; the
        # pause was notified once, naming the run that tripped the count.
        def settled() -> list[str] | None:
            runs = sorted(set(ids(failing, "acme/fragile@")))
            want = {f"{r}!dead_lettered" for r in runs} | {
                f"acme/fragile@v{first.version + 1}!paused"
            }
            got = ids(alerts, "acme/")
            return got if set(got) == want and len(runs) >= N else None

        wait_for(settled, 60, "one notification per dead letter and one for the pause")
        steady_before = len(ids(failing, "globex/steady@"))
        time.sleep(2)  # two instants of an every-1s job: nothing more for acme/fragile
        got = ids(alerts, "acme/")
        assert settled() == got and Counter(got).most_common(1)[0][1] == 1
        assert len(ids(alerts, "globex/")) == 0

        # Each notification is a signed delivery whose payload is the envelope.
        notes = {r["headers"]["webhook-id"]: r for r in alerts.requests()}
        for wid, request in notes.items():
            sent = base64.b64decode(request["body_b64"])
            ts = int(request["headers"]["webhook-timestamp"])
            assert request["headers"]["webhook-signature"] == signature(
                secret_key(SECRET), wid, ts, sent
            )
        pause_note = body(notes[f"acme/fragile@v{first.version + 1}!paused"])
        assert pause_note["trigger"] == "notification"
        envelope = pause_note["payload"]
        assert (envelope["event"], envelope["reason"], envelope["job_version"]) == (
            "paused", reason, first.version + 1,
        )  # fmt: skip
        assert envelope["run_id"] in ids(failing, "acme/fragile@")
        assert envelope["last_attempt"]["status_code"] == 500
        dead = [body(r)["payload"] for w, r in notes.items() if w.endswith("!dead_lettered")]
        assert {d["event"] for d in dead} == {"dead_lettered"}
        assert all(d["last_attempt"]["outcome"] == "failed" for d in dead)

        # The healthy tenant's job went on: it is still delivered, and always answered 200.
        wait_for(lambda: len(ids(failing, "globex/steady@")) > steady_before + 1, 30,
                 "globex/steady still running after the pause")  # fmt: skip

        # The API (the projector's read model) shows the pause and its reason.
        read = topo.model_copy(update={"data_dir": projector.overrides["data_dir"]})
        with TestClient(create_app(read)) as client:
            auth = {"Authorization": f"Bearer {key}"}

            def shown() -> dict[str, Any] | None:
                got: dict[str, Any] = client.get("/v1/jobs/fragile", headers=auth).json()
                ok = got.get("version") == first.version + 1 and got.get("paused")
                return got if ok else None

            job = wait_for(shown, 30, "the pause in the API")
            assert job["paused_reason"] == reason
            assert job["definition"]["notify"]["target"]["secret"] == "redacted"
    finally:
        projector.stop()
        failing.stop()
        alerts.stop()
