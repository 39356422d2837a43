"""`schedulerstream dev` brings up topics and the scheduler, reports readiness, stops on Ctrl-C."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from schedulerstream.settings import Settings
from tests.support.procs import settings_env
from tests.support.runs import read_runs

pytestmark = pytest.mark.kafka


def test_dev_runs_the_stack_and_stops_cleanly_on_ctrl_c(kafka_settings: Settings) -> None:
    env = settings_env(kafka_settings)
    dev = subprocess.Popen(
        [sys.executable, "-m", "schedulerstream.cli", "dev", "--port", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    assert dev.stdout is not None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = dev.stdout.readline()
        lines.append(line)
        if all(
            f"{c}: ready" in "".join(lines) for c in ("scheduler", "dispatcher", "projector", "api")
        ):
            break
    else:
        dev.kill()
        raise AssertionError("".join(lines))
    text = "".join(lines)
    assert "a broker already answers" in text  # the session broker: dev uses it
    assert "topics: ready" in text
    job = {
        "tenant": "dev",
        "job_id": "tick",
        "schedule": {"every": 1},
        "max_runs": 2,
        "target": {"type": "kafka", "topic": "x"},
    }
    subprocess.run(
        [sys.executable, "-m", "schedulerstream.cli", "schedules", "put", "-"],
        input=json.dumps(job), env=env, check=True, capture_output=True, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while len(read_runs(kafka_settings, idle_timeout=1).triggered) < 2:
        assert time.monotonic() < deadline, "no runs from the dev stack"
    dev.send_signal(signal.SIGINT)
    rest, _ = dev.communicate(timeout=60)
    assert dev.returncode == 0, rest
    assert "scheduler: stopped" in rest and "projector: stopped" in rest
