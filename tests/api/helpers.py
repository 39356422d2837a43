"""The API in tests: job bodies, a seeded read model, and ``schedulerstream api`` as a process."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from harness.procs import ProcessorProcess, settings_env
from schedulerstream.readmodel import Changes, JobRow, RunRow, open_read_model
from schedulerstream.settings import Settings

SECRET = "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldY"


def job_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "schedule": {"every": 60},
        "target": {"type": "http", "url": "https://example.com/hook"},
        "payload": {"n": 1},
    }
    body.update(overrides)
    return body


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def seed_job(
    settings: Settings, tenant: str, job_id: str, version: int, secret: bool = True, **fields: Any
) -> None:
    """Write a job row as the projector would (a webhook secret is kept only as "redacted")."""
    target = {
        "type": "http",
        "url": "https://example.com/h",
        "secret": "redacted" if secret else None,
    }
    definition = {
        "tenant": tenant, "job_id": job_id, "version": version, "schedule": {"every": 60.0},
        "target": target,
    }  # fmt: skip
    row = JobRow(
        tenant, job_id, version, definition, fields.get("paused", False), False,
        [version + 60_000_000], None, None, None, version, version,
    )  # fmt: skip
    with open_read_model(settings) as model:
        model.apply(Changes(jobs={(tenant, job_id): row}))


def seed_run(settings: Settings, tenant: str, job_id: str, run_id: str, status: str) -> None:
    run = RunRow(run_id, tenant, job_id, "schedule", status, 1_000, None, None, 0, None, 2_000)
    with open_read_model(settings) as model:
        model.apply(Changes(runs={run_id: run}))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class ApiProcess(ProcessorProcess):
    """``schedulerstream api`` (schedulerstream.cli.api_cmd) in its own process."""

    def __init__(self, settings: Settings, log_dir: Path, data_dir: Path) -> None:
        super().__init__(settings, "api", "api", log_dir, data_dir=data_dir)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> ApiProcess:
        env = settings_env(self.settings, instance_id=self.instance, **self.overrides)
        code = "from schedulerstream.cli.api_cmd import api; api()"
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-c", code, "--port", str(self.port)],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.alive(), self.log()[-3000:]
            try:
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"api not ready:\n{self.log()[-3000:]}")
