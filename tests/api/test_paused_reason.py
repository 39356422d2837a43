"""A job paused with a reason (the scheduler's answer to a webhook's HTTP 410): the API and the
CLI show the reason, and resume writes a new version without it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from harness.procs import settings_env
from schedulerstream.cli.jobs_cmd import jobs
from schedulerstream.codec import default_codec
from schedulerstream.kafka.reader import read_topic
from schedulerstream.readmodel import Changes, JobRow, open_read_model
from schedulerstream.settings import Settings
from tests.api.helpers import auth, job_body

pytestmark = pytest.mark.kafka
REASON = "target gone: HTTP 410: removed (run acme/gone@20260101T000000Z)"


def seed_paused(settings: Settings, job_id: str, version: int = 8) -> None:
    """A row as the projector writes it for the scheduler's paused version."""
    definition = {
        "tenant": "acme", "job_id": job_id, "version": version, "schedule": {"every": 60.0},
        "target": {"type": "http", "url": "https://example.com/h", "secret": None},
        "paused": True, "paused_reason": REASON,
    }  # fmt: skip
    row = JobRow("acme", job_id, version, definition, True, False, [], None, None, None, 1, 2)
    with open_read_model(settings) as model:
        model.apply(Changes(jobs={("acme", job_id): row}))


def written(settings: Settings) -> list[dict[str, Any]]:
    return [
        default_codec().decode_as("JobDefinition", m.value())
        for m in read_topic(settings, settings.topic("schedules"), idle_timeout=1.0)
    ]


def test_the_api_shows_the_reason_and_resume_clears_it(
    client: TestClient, keys: dict[str, str], topo: Settings
) -> None:
    h = auth(keys["acme"])
    seed_paused(topo, "gone")
    got = client.get("/v1/jobs/gone", headers=h).json()
    assert (got["paused"], got["paused_reason"]) == (True, REASON)
    assert got["definition"]["paused_reason"] == REASON and got["next_fire_at"] == []
    [listed] = client.get("/v1/jobs", headers=h).json()["items"]
    assert listed["paused_reason"] == REASON
    assert client.post("/v1/jobs/gone/pause", headers=h).json()["version"] == 8  # no change
    resumed = client.post("/v1/jobs/gone/resume", headers=h).json()
    assert resumed["paused"] is False and resumed["version"] > 8
    [record] = written(topo)
    assert (record["paused"], record["paused_reason"]) == (False, None)
    got = client.get("/v1/jobs/gone", headers=h).json()
    assert (got["projection"], got["paused"], got["paused_reason"]) == ("pending", False, None)


def test_a_reason_needs_a_paused_job(client: TestClient, keys: dict[str, str]) -> None:
    h = auth(keys["acme"])
    refused = client.put("/v1/jobs/j1", json=job_body(paused_reason="why"), headers=h)
    assert refused.status_code == 422 and "paused" in refused.text
    too_long = job_body(paused=True, paused_reason="x" * 1001)
    assert client.put("/v1/jobs/j1", json=too_long, headers=h).status_code == 422
    body = job_body(paused=True, paused_reason="maintenance until Monday")
    assert client.put("/v1/jobs/j1", json=body, headers=h).status_code == 200
    got = client.get("/v1/jobs/j1", headers=h).json()
    assert (got["paused"], got["paused_reason"]) == (True, "maintenance until Monday")


def test_the_cli_shows_the_reason_and_resume_clears_it(topo: Settings) -> None:
    seed_paused(topo, "gone")

    def run(*args: str) -> str:
        result = CliRunner().invoke(jobs, list(args), env=settings_env(topo))
        assert result.exit_code == 0, result.output
        return result.output

    shown = json.loads(run("get", "acme/gone"))
    assert (shown["paused"], shown["paused_reason"]) == (True, REASON)
    assert f"paused ({REASON})" in run("list", "acme")
    assert "resumed" in run("resume", "acme/gone")
    [record] = written(topo)
    assert (record["paused"], record["paused_reason"], record["version"] > 8) == (
        False, None, True,
    )  # fmt: skip
