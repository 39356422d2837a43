"""``schedulerstream api`` as a real uvicorn process: a key works within a second of
``tenants create`` returning, and a job PUT flows through scheduler and projector to GET."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from click.testing import CliRunner

from harness.procs import settings_env
from schedulerstream.cli.tenants_cmd import tenants
from schedulerstream.settings import Settings
from tests.api.helpers import ApiProcess, auth, job_body
from tests.projector.kafka_helpers import ProjectorProcess
from tests.support.fixtures import Spawn

pytestmark = pytest.mark.kafka


@pytest.fixture
def api(topo: Settings, tmp_path: Path) -> Iterator[ApiProcess]:
    """The API process, ready; its read model is the projector ``p1``'s SQLite file."""
    proc = ApiProcess(topo, tmp_path, data_dir=tmp_path / "p1").start()
    try:
        proc.wait_ready()
        yield proc
    finally:
        assert proc.stop() == 0, proc.log()[-3000:]


def _create_tenant(settings: Settings, name: str) -> str:
    result = CliRunner().invoke(tenants, ["create", name, "--json"], env=settings_env(settings))
    assert result.exit_code == 0, result.output
    key: str = json.loads(result.output)["api_key"]
    return key


def test_key_works_within_a_second_of_create(topo: Settings, api: ApiProcess) -> None:
    with httpx.Client(base_url=api.url, timeout=5) as http:
        for name in ("acme", "globex"):
            key = _create_tenant(topo, name)
            returned = time.monotonic()
            while http.get("/v1/jobs", headers=auth(key)).status_code != 200:
                assert time.monotonic() - returned < 1.0, "key not accepted within a second"
                time.sleep(0.01)
        assert http.get("/v1/jobs", headers=auth("ss_acme_" + "1" * 64)).status_code == 401
        spec = http.get("/openapi.json").json()
        assert "/v1/runs/{run_id}/cancel" in spec["paths"]
        assert "schedulerstream_api_tenants 2.0" in http.get("/metrics").text


def _wait(what: str, check: object, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_put_flows_through_scheduler_and_projector(
    topo: Settings, api: ApiProcess, spawn: Spawn, tmp_path: Path
) -> None:
    key = _create_tenant(topo, "acme")
    spawn("s1")
    projector = ProjectorProcess(topo, "p1", tmp_path).start()
    try:
        with httpx.Client(base_url=api.url, headers=auth(key), timeout=10) as http:
            _wait("key", lambda: http.get("/v1/jobs").status_code == 200)
            put = http.put("/v1/jobs/tick", json=job_body(schedule={"every": 1}))
            assert put.status_code == 200, put.text
            version = put.json()["version"]

            def projected() -> bool:
                body = http.get("/v1/jobs/tick").json()
                return bool(body["projection"] == "current" and body["last_run"])

            _wait("the job and a run in the read model", projected)
            job = http.get("/v1/jobs/tick").json()
            assert job["version"] == version and job["next_fire_at"]
            run_id = http.post("/v1/jobs/tick/trigger", json={"request_id": "e2e"}).json()["run_id"]
            assert run_id == "acme/tick@manual-e2e"

            def manual_run_listed() -> bool:
                runs = http.get("/v1/jobs/tick/runs?limit=1000").json()["items"]
                return run_id in {r["run_id"] for r in runs}

            _wait("the manual run", manual_run_listed)
            detail = http.get(f"/v1/runs/{quote(run_id, safe='')}").json()
            assert detail["run_id"] == run_id and detail["trigger"] == "manual"
            paused = http.post("/v1/jobs/tick/pause").json()
            _wait(
                "the pause to be projected",
                lambda: (
                    http.get("/v1/jobs/tick").json()["version"] == paused["version"]
                    and http.get("/v1/jobs/tick").json()["projection"] == "current"
                ),
            )
            assert http.get("/v1/jobs/tick").json()["paused"] is True
    finally:
        assert projector.stop() == 0, projector.log()[-3000:]
