"""Record limits where jobs enter: the API answers 422 naming the field and the limit, the CLI
exits 2, and nothing is produced for a refused job (real broker, API in-process)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from harness.procs import settings_env
from schedulerstream.cli.schedules_cmd import schedules
from schedulerstream.kafka.reader import read_topic
from schedulerstream.settings import Settings
from tests.api.helpers import auth, job_body

pytestmark = pytest.mark.kafka


def _schedule_keys(settings: Settings) -> list[bytes]:
    return [m.key() for m in read_topic(settings, settings.topic("schedules"), idle_timeout=1.0)]


def test_the_api_refuses_a_payload_over_the_limit_and_takes_one_at_it(
    client: TestClient, keys: dict[str, str], topo: Settings
) -> None:
    limit = topo.max_payload_bytes
    h = auth(keys["acme"])
    over = client.put("/v1/jobs/big", json=job_body(payload="x" * (limit - 1)), headers=h)
    assert over.status_code == 422, over.text
    [problem] = over.json()["detail"]
    assert problem["field"] == "payload"
    assert f"{limit:,}" in problem["message"] and "MAX_PAYLOAD_BYTES" in problem["message"]
    at = client.put("/v1/jobs/big", json=job_body(payload="x" * (limit - 2)), headers=h)
    assert at.status_code == 200, at.text
    assert _schedule_keys(topo) == [b"acme/big"]  # only the job at the limit was written


def test_the_cli_exits_2_and_produces_nothing_for_a_job_over_the_limit(topo: Settings) -> None:
    small = {"tenant": "acme", "job_id": "ok", "schedule": {"every": 60},
             "target": {"type": "kafka", "topic": "out"}}  # fmt: skip
    big = {**small, "job_id": "big", "payload": "y" * topo.max_payload_bytes}
    text = "\n".join(json.dumps(j) for j in (small, big))
    result = CliRunner().invoke(schedules, ["put", "-"], input=text, env=settings_env(topo))
    assert result.exit_code == 2, result.output
    assert "payload" in result.output and "acme/big" in result.output
    assert "nothing was produced" in result.output
    assert _schedule_keys(topo) == []
