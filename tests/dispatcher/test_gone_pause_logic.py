"""A 410 asks the scheduler to pause the job: one PauseJob per job version, on the job's
partition of cron.commands, in the outcome's transaction (the dispatcher logic by hand)."""

from __future__ import annotations

import json
from typing import Any

from schedulerstream.targets.base import Outcome

from .harness import CODEC, Harness, cancel, run_id, run_triggered

GONE = Outcome("gone", "HTTP 410: removed", False, 10, 410)


def pauses(h: Harness) -> list[tuple[bytes, dict[str, Any], int]]:
    return [(k, r, p) for t, k, r, p in h.records if t == "commands"]


def test_a_410_produces_one_pause_job_per_version() -> None:
    h = Harness()
    for n in range(3):
        h.run(run_triggered(n))
    assert len(h.tick()) == 3
    h.finish(run_id(0), GONE)
    h.finish(run_id(1), GONE)  # a second run of the same version: no second ask
    [(key, record, partition)] = pauses(h)
    assert (key, partition) == (b"acme/j1", 0)
    assert (record["tenant"], record["job_id"], record["issued_at_us"]) == ("acme", "j1", h.now)
    kind, fields = record["command"]
    assert kind == "io.schedulerstream.PauseJob"
    last = json.loads(fields.pop("last_attempt_json"))
    assert fields == {
        "job_version": 1,
        "reason": f"target gone: HTTP 410: removed (run {run_id(0)})",
        "run_id": run_id(0),
    }
    assert last == {"attempt": 1, "outcome": "failed", "status_code": 410,
                    "error": "HTTP 410: removed", "at": "2026-01-01T00:00:00Z"}  # fmt: skip
    h.run(run_triggered(5, version=2))  # a resume or a new URL: a new version may be asked again
    assert len(h.tick()) == 1
    h.finish(run_id(5), GONE)
    assert [r["command"][1]["job_version"] for _, r, _ in pauses(h)] == [1, 2]


def test_the_dispatcher_ignores_the_pause_job_it_reads_back() -> None:
    h = Harness()
    h.run(run_triggered(0))
    h.tick()
    h.finish(run_id(0), GONE)
    [(key, record, _)] = pauses(h)
    before = len(h.records)
    h.command((key, CODEC.encode("Command", record)))
    h.command(cancel(run_id(0)))  # CancelRun still works beside it
    assert len(h.records) == before


def test_a_gone_version_stays_gone_for_a_new_process() -> None:
    """The gone key is found after a restart (the new process's index marks it)."""
    h = Harness()
    h.run(run_triggered(0))
    assert len(h.tick()) == 1
    h.finish(run_id(0), GONE)
    h.restart()
    h.run(run_triggered(2))  # the same version: skipped, not started
    assert h.tick() == []
    assert h.events(run_id(2))[-1] == ("skipped", 0)
    h.run(run_triggered(3, version=2))
    assert len(h.tick()) == 1
