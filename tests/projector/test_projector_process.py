"""The ``projector`` command as a process: kill -9 mid-stream, restart, and the read model and
cron.run-state converge to exactly what a clean projection gives."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest

from schedulerstream.readmodel import open_read_model
from schedulerstream.settings import Settings
from tests.projector.kafka_helpers import ProjectorProcess, run_state
from tests.projector.memory import Driver
from tests.projector.records import (
    MINUTE,
    SCHEDULE_STAMP_MS,
    T0,
    Feed,
    attempt,
    job_avro,
    run_id,
    triggered,
)

pytestmark = pytest.mark.kafka
JOBS = [("acme", f"job{i}") for i in range(4)]
KEEP = 50


def _events(first: int, count: int, outcome: str) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for tenant, job_id in JOBS:
        for i in range(first, first + count):
            rid = run_id(f"{tenant}/{job_id}", T0 + i * MINUTE)
            events.append(triggered(rid, T0 + i * MINUTE))
            events.append(attempt(rid, "started", 1, T0 + i * MINUTE + 5))
            if outcome:
                events.append(attempt(rid, outcome, 1, T0 + i * MINUTE + 9, reason="done"))
    return events


def _tables(settings: Settings) -> dict[str, Any]:
    with open_read_model(settings) as model:
        snapshot = model.snapshot()
    snapshot["attempts"] = [row[:-1] for row in snapshot["attempts"]]  # seq is the offset
    return snapshot


def _expected(events: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    driver = Driver(KEEP)
    for tenant, job_id in JOBS:
        driver.schedule(f"{tenant}/{job_id}", job_avro(tenant, job_id, 1), SCHEDULE_STAMP_MS * 1000)
    for event in events:
        driver.event(event)
    jobs, runs, attempts, _ = driver.tables()
    return {
        "jobs": [
            tuple(int(v) if isinstance(v, bool) else v for v in dataclasses.astuple(row))
            for _, row in jobs
        ],
        "runs": [dataclasses.astuple(row) for _, row in runs],
        "attempts": [dataclasses.astuple(a)[:-1] for a in attempts],
    }


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_kill_9_mid_stream_then_restart_converges(
    topo: Settings, backend: str, tmp_path: Path
) -> None:
    feed = Feed(topo)
    for tenant, job_id in JOBS:
        feed.schedule(tenant, job_id, 1)
    first = _events(0, 120, "")
    for event in first:
        feed.event(event)
    feed.flush()
    proc = ProjectorProcess(topo, "p1", tmp_path, "--keep-runs", str(KEEP)).start()
    local = topo.model_copy(update={"data_dir": tmp_path / "p1"})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if (local.data_dir / "readmodel.sqlite3").exists() and _tables(local)["runs"]:
            break
        assert proc.alive(), proc.log()[-3000:]
        time.sleep(0.05)
    proc.kill()
    partial = _tables(local)
    second = _events(100, 60, "succeeded") + _events(160, 10, "failed")
    for event in second:
        feed.event(event)
    feed.flush()
    expected = _expected(first + second)
    assert partial != expected
    proc = ProjectorProcess(topo, "p1", tmp_path, "--keep-runs", str(KEEP)).start()
    try:
        deadline = time.monotonic() + 90
        while _tables(local) != expected:
            assert time.monotonic() < deadline, "no convergence:\n" + proc.log()[-3000:]
            assert proc.alive(), proc.log()[-3000:]
            time.sleep(0.2)
    finally:
        assert proc.stop() == 0, proc.log()[-3000:]
    latest, tombstones = run_state(topo)
    assert sorted(latest) == [row[0] for row in expected["runs"]]
    assert {k: v["status"] for k, v in latest.items()} == {r[0]: r[4] for r in expected["runs"]}
    assert tombstones >= len(JOBS) * (170 - KEEP)
