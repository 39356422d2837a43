"""``schedulerstream jobs …`` and ``backfill`` against the read model and the broker."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from harness.procs import settings_env
from schedulerstream.cli.jobs_cmd import backfill, jobs
from schedulerstream.cli.runs_cmd import runs
from schedulerstream.codec import default_codec
from schedulerstream.kafka.reader import read_topic
from schedulerstream.model import JobDefinition
from schedulerstream.publish import Publisher
from schedulerstream.settings import Settings
from tests.api.helpers import seed_job, seed_run
from tests.support.fixtures import Spawn

pytestmark = pytest.mark.kafka


def _run(settings: Settings, command: object, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(command, list(args), env=settings_env(settings))  # type: ignore[arg-type]
    return result.exit_code, result.output


def _plain_job(settings: Settings, job_id: str) -> JobDefinition:
    job = JobDefinition.model_validate(
        {"tenant": "acme", "job_id": job_id, "schedule": {"every": 60},
         "target": {"type": "http", "url": "https://example.com/h"}}
    )  # fmt: skip
    [written] = Publisher(settings).put_jobs([job])
    seed_job(settings, "acme", job_id, written.version or 0, secret=False)
    return written


def test_list_get_pause_trigger_delete(topo: Settings) -> None:
    seed_job(topo, "acme", "secret", 7)
    code, out = _run(topo, jobs, "list", "acme", "--json")
    assert code == 0, out
    assert [json.loads(line)["job"] for line in out.splitlines()] == ["acme/secret"]
    code, out = _run(topo, jobs, "get", "acme/secret")
    assert code == 0 and json.loads(out)["definition"]["target"]["secret"] == "redacted"
    code, out = _run(topo, jobs, "pause", "acme/secret")
    assert code != 0 and "webhook secret" in out
    code, out = _run(topo, jobs, "get", "acme/missing")
    assert code != 0 and "no job acme/missing" in out

    code, out = _run(topo, jobs, "trigger", "acme/secret", "--request-id", "op-1")
    assert (code, out.strip()) == (0, "acme/secret@manual-op-1")
    code, out = _run(topo, jobs, "delete", "acme/secret")
    assert code == 0, out
    names = [
        None if m.value() is None else default_codec().decode(m.value())[0]
        for m in read_topic(topo, topo.topic("schedules"), idle_timeout=1.0)
    ]
    assert names == [None]  # the tombstone


def test_pause_a_job_without_secret(topo: Settings) -> None:
    written = _plain_job(topo, "plain")
    code, out = _run(topo, jobs, "pause", "acme/plain")
    assert code == 0 and "paused" in out, out
    records = [
        default_codec().decode(m.value())[1]
        for m in read_topic(topo, topo.topic("schedules"), idle_timeout=1.0)
    ]
    assert [(r["version"] > (written.version or 0), r["paused"]) for r in records[1:]] == [
        (True, True)
    ]


def test_backfill_shows_progress_until_every_run_exists(topo: Settings, spawn: Spawn) -> None:
    _plain_job(topo, "filled")
    spawn("s1").wait_for_log(" running: restored", count=topo.partitions)
    hour = int(time.time()) // 3600 * 3600 - 3600
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(hour))
    end = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(hour + 600))
    code, out = _run(topo, backfill, "acme/filled", "--start", start, "--end", end, "--rerun",
                     "--timeout", "60")  # fmt: skip
    assert code == 0, out
    assert out.strip().endswith("acme/filled: 10 of 10 backfill runs created")


def test_runs_list_get_cancel(topo: Settings) -> None:
    seed_job(topo, "acme", "j1", 5)
    seed_run(topo, "acme", "j1", "acme/j1@20250101T000000Z", "succeeded")
    seed_run(topo, "acme", "j1", "acme/j1@manual-x", "pending")
    code, out = _run(topo, runs, "list", "acme/j1", "--json")
    assert code == 0, out
    assert {json.loads(line)["run_id"] for line in out.splitlines()} == {
        "acme/j1@20250101T000000Z", "acme/j1@manual-x",
    }  # fmt: skip
    code, out = _run(topo, runs, "get", "acme/j1@manual-x")
    assert code == 0 and json.loads(out)["status"] == "pending", out
    code, out = _run(topo, runs, "cancel", "acme/j1@20250101T000000Z")
    assert code != 0 and "already succeeded" in out
    code, out = _run(topo, runs, "cancel", "acme/j1@manual-x")
    assert code == 0, out
    [command] = [
        default_codec().decode(m.value())[1]["command"]
        for m in read_topic(topo, topo.topic("commands"), idle_timeout=1.0)
    ]
    assert command[1] == {"run_id": "acme/j1@manual-x", "reason": "cancelled by an operator"}
