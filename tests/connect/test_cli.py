"""``schedulerstream connect up|status|down`` as real processes on the session broker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from schedulerstream.kafka.connect import ConnectJars
from schedulerstream.settings import Settings
from tests.connect.conftest import free_port

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(600)]
CLI = [sys.executable, "-m", "schedulerstream.cli", "connect"]


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], env=env, capture_output=True, text=True, timeout=240, check=False
    )


def test_up_status_down(
    kafka_settings: Settings, connect_jars: ConnectJars, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULERSTREAM_")}
    env.update(
        SCHEDULERSTREAM_BOOTSTRAP_SERVERS=kafka_settings.bootstrap_servers,
        SCHEDULERSTREAM_TOPIC_PREFIX=kafka_settings.topic_prefix,
        SCHEDULERSTREAM_DATA_DIR=str(tmp_path),
    )
    port = str(free_port())
    refused = _run(env, "up", "--port", port)  # the JDBC sink needs a database: nothing starts
    assert refused.returncode == 1, refused
    assert "SCHEDULERSTREAM_DATABASE_URL" in refused.stderr
    assert not (tmp_path / "connect").exists()
    try:
        up = _run(env, "up", "attempts-file", "--port", port)
        log = tmp_path / "connect" / "connect.log"
        assert up.returncode == 0, up.stderr + (log.read_text()[-4000:] if log.exists() else "")
        assert "connect started" in up.stderr
        assert f"{kafka_settings.topic_prefix}attempts-file: RUNNING (1 task(s))" in up.stderr
        assert up.stdout.strip() == f"http://127.0.0.1:{port}"
        again = _run(env, "up", "attempts-file", "--port", port)
        assert again.returncode == 0 and "already running" in again.stderr, again
        status = _run(env, "status", "--port", port)
        assert status.returncode == 0, status
        name = f"{kafka_settings.topic_prefix}attempts-file"
        assert f"{name}: RUNNING, tasks RUNNING" in status.stdout, status
    finally:
        down = _run(env, "down")
    assert down.returncode == 0 and "connect stopped" in down.stdout, down
    after = _run(env, "status", "--port", port)
    assert after.returncode == 1 and after.stdout.startswith("down:"), after
