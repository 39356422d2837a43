"""End to end on the real broker: a webhook answering HTTP 410 pauses its job, visibly.

Scheduler, dispatcher and projector run as processes, the target is a real HTTP receiver; the
API (in-process, on the projector's read model) and the CLI show the pause and its reason, and a
new version with a fixed URL fires again.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from harness.procs import ReceiverProcess, settings_env
from schedulerstream.api import create_app
from schedulerstream.cli.jobs_cmd import jobs
from schedulerstream.codec import default_codec
from schedulerstream.kafka.reader import read_topic
from schedulerstream.model import JobDefinition
from schedulerstream.publish import Publisher
from schedulerstream.settings import Settings
from schedulerstream.tenants import TenantAdmin
from tests.dispatcher.conftest import SpawnDispatcher
from tests.dispatcher.support import wait_for
from tests.projector.kafka_helpers import ProjectorProcess
from tests.support.fixtures import Spawn
from tests.support.runs import read_runs

pytestmark = pytest.mark.kafka
CODEC = default_codec()


def definitions(settings: Settings) -> list[dict[str, Any]]:
    """Every committed job definition on cron.schedules, in log order."""
    return [
        CODEC.decode_as("JobDefinition", m.value())
        for m in read_topic(settings, settings.topic("schedules"), True, 1.0)
        if m.value() is not None
    ]


def triggered(settings: Settings, version: int | None = None) -> list[dict[str, Any]]:
    return [
        r
        for r in read_runs(settings, idle_timeout=1.0).triggered
        if r["job_id"] == "hook" and (version is None or r["job_version"] == version)
    ]


def job(url: str) -> JobDefinition:
    return JobDefinition.model_validate(
        {"tenant": "acme", "job_id": "hook", "schedule": {"every": 1},
         "target": {"type": "http", "url": url}}
    )  # fmt: skip


def test_a_410_pauses_the_job_with_its_reason_and_a_fixed_url_fires_again(
    topo: Settings,
    spawn: Spawn,
    dispatcher: SpawnDispatcher,
    receiver: ReceiverProcess,
    tmp_path: Path,
) -> None:
    _, key = TenantAdmin(topo).create("acme")
    projector = ProjectorProcess(topo, "p1", tmp_path).start()
    try:
        scheduler = spawn("s1")
        dispatcher()
        scheduler.wait_for_log(" running: restored", count=topo.partitions)
        [first] = Publisher(topo).put_jobs([job(receiver.url("/gone"))])
        assert first.version is not None

        # The scheduler writes the paused version (job_version + 1) with the dispatcher's reason.
        def paused_version() -> dict[str, Any] | None:
            return next((d for d in definitions(topo) if d["paused"]), None)

        paused = wait_for(paused_version, 60, "the paused version on cron.schedules")
        assert paused["version"] == first.version + 1
        reason = paused["paused_reason"]
        assert reason.startswith("target gone: HTTP 410: this endpoint was removed (run acme/hook@")

        # No run is emitted after the pause, and none reaches the target any more.
        assert triggered(topo, first.version + 1) == []
        emitted, requests = len(triggered(topo)), len(receiver.requests())
        time.sleep(2)  # two instants of an every-1s job
        assert (len(triggered(topo)), len(receiver.requests())) == (emitted, requests)

        # The API and the CLI (the projector's read model) show the pause and its reason.
        read = topo.model_copy(update={"data_dir": projector.overrides["data_dir"]})
        with TestClient(create_app(read)) as client:
            auth = {"Authorization": f"Bearer {key}"}

            def shown(version: int) -> dict[str, Any] | None:
                got: dict[str, Any] = client.get("/v1/jobs/hook", headers=auth).json()
                current = got.get("version") == version and got.get("projection") == "current"
                return got if current else None

            got = wait_for(lambda: shown(first.version + 1), 30, "the pause in the API")
            assert (got["paused"], got["paused_reason"], got["next_fire_at"]) == (
                True, reason, [],
            )  # fmt: skip
            result = CliRunner().invoke(jobs, ["get", "acme/hook"], env=settings_env(read))
            assert result.exit_code == 0, result.output
            cli = json.loads(result.output)
            assert (cli["paused"], cli["paused_reason"]) == (True, reason)

            # A new version with a fixed URL (a µs version, above the pause) fires again (only
            # that version has the /ok URL; cron.runs is not read: it is never idle now).
            [fixed] = Publisher(topo).put_jobs([job(receiver.url("/ok"))])
            assert fixed.version is not None and fixed.version > first.version + 1
            wait_for(
                lambda: [r for r in receiver.requests() if r["path"] == "/ok"],
                30, "a delivery to the fixed URL",
            )  # fmt: skip
            got = wait_for(lambda: shown(fixed.version or 0), 30, "the fix in the API")
            assert (got["paused"], got["paused_reason"]) == (False, None)
        assert [d["version"] for d in definitions(topo)] == [
            first.version, first.version + 1, fixed.version,
        ]  # fmt: skip
    finally:
        projector.stop()
