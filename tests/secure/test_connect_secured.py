"""Kafka Connect on the secured broker (SASL_SSL, SCRAM-SHA-512, StandardAuthorizer): the worker
runs as User:connect with only the ACLs of ``acls plan``, and its sink reads cron.attempts into a
file; without them, ``connect up`` stops at once naming what is missing."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from harness.procs import settings_env
from schedulerstream.kafka import acls, topics
from schedulerstream.kafka.connect import LocalConnect, decode_attempts_line
from schedulerstream.settings import Settings
from tests.connect.conftest import free_port
from tests.projector.records import T0, Feed, attempt, run_id
from tests.secure.conftest import SecureCluster, cli

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(600)]  # a clean machine fetches jars first
QUICK_S = 10.0  # "at once": a start-up refusal, never a timeout


def _lines(path: Path) -> list[str]:
    """The complete lines the sink has written so far."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    return text.splitlines()[: text.count("\n")]


def _wait_lines(path: Path, count: int, worker: LocalConnect, timeout: float = 90.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while len(lines := _lines(path)) < count:
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{path}: {len(lines)} of {count} lines after {timeout:.0f} s; worker log:\n"
                f"{worker.log_tail(120)}"
            )
        time.sleep(0.2)
    return lines


def test_connect_runs_as_its_own_principal_with_only_its_planned_acls(
    secure_cluster: SecureCluster, prefix: str, tmp_path: Path
) -> None:
    admin = secure_cluster.settings(prefix, tmp_path)
    topics.apply(admin)
    connect: Settings = secure_cluster.settings(prefix, tmp_path, "connect")
    sink_file = tmp_path / "attempts.log"
    port = str(free_port())
    up_args = ("connect", "up", "attempts-file", "--port", port,
               "--set", f"ATTEMPTS_FILE={sink_file}")  # fmt: skip
    worker = LocalConnect(connect, int(port))

    started = time.monotonic()
    refused = cli(settings_env(connect), *up_args)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert time.monotonic() - started < QUICK_S
    assert "connect cannot start" in refused.stderr and "principal User:connect" in refused.stderr
    assert f"  - Read on Group {prefix}connect\n" in refused.stderr, refused.stderr
    assert f"  - Create on Topic names starting with {prefix}connect-\n" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert worker.recorded_pid() is None  # nothing was started

    applied = acls.apply(admin, acls.plan(admin, {"connect": "User:connect"}))
    assert applied, "the plan granted nothing"
    try:
        up = cli(settings_env(connect), *up_args, timeout=300)
        assert up.returncode == 0, up.stderr + worker.log_tail(120)
        assert f"{prefix}attempts-file: RUNNING (1 task(s))" in up.stderr

        runs = [run_id(f"acme/job{i}", T0) for i in range(5)]
        events = [attempt(r, "succeeded", 1, T0 + 10, status_code=200) for r in runs]
        feed = Feed(admin)
        for event in events:
            feed.event(event)
        feed.flush()

        decoded = [decode_attempts_line(line) for line in _wait_lines(sink_file, 5, worker)]
        assert sorted(json.dumps(record, sort_keys=True) for _, record in decoded) == sorted(
            json.dumps(record, sort_keys=True) for _, record in events
        )
        log = worker.log_tail(2000)
        assert "AuthorizationException" not in log and "uthentication failed" not in log, log
    finally:
        down = cli(settings_env(connect), "connect", "down")
    assert down.returncode == 0 and "connect stopped" in down.stdout, down
