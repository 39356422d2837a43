"""The projection without Kafka: status precedence, order independence, retention, jobs."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedulerstream.ingest import RejectedRecord
from schedulerstream.projector import keys
from schedulerstream.projector.logic import Projection
from tests.projector.memory import Driver, MemoryStore
from tests.projector.records import MINUTE, T0, attempt, job_avro, revoked, run_id, triggered

JOB = "acme/backup"
R1 = run_id(JOB, T0)


def _final(events: list[tuple[str, dict[str, Any]]], keep: int = 100) -> tuple[Any, ...]:
    driver = Driver(keep)
    for event in events:
        driver.event(event)
    jobs, runs, attempts, state = driver.tables()
    return jobs, runs, [dataclasses.replace(a, seq=0) for a in attempts], state


def _status(events: list[tuple[str, dict[str, Any]]]) -> str:
    driver = Driver()
    for event in events:
        driver.event(event)
    return str(driver.runs[R1].status)


LIFECYCLE = [
    triggered(R1, T0, emitted=T0 - 1000),
    attempt(R1, "accepted", 0, T0 - 900),
    attempt(R1, "started", 1, T0 + 10),
    attempt(R1, "failed", 1, T0 + 20, reason="HTTP 500", status_code=500),
    attempt(R1, "retry_scheduled", 1, T0 + 21, retry_at=T0 + 5_000_000),
    attempt(R1, "started", 2, T0 + 5_000_010),
    attempt(R1, "succeeded", 2, T0 + 5_000_020, status_code=200),
]


@settings(max_examples=60, deadline=None)
@given(st.permutations(LIFECYCLE), st.lists(st.sampled_from(LIFECYCLE), max_size=4))
def test_any_order_and_any_duplicates_converge(
    order: list[tuple[str, dict[str, Any]]], again: list[tuple[str, dict[str, Any]]]
) -> None:
    assert _final(order + again) == _final(LIFECYCLE)


def test_a_full_lifecycle_reads_as_expected() -> None:
    driver = Driver()
    for event in LIFECYCLE:
        driver.event(event)
    run = driver.runs[R1]
    assert (run.status, run.attempts, run.trigger) == ("succeeded", 2, "scheduled")
    assert run.started_at_us == T0 + 10 and run.finished_at_us == T0 + 5_000_020
    assert run.last_error == "HTTP 500"
    assert run.scheduled_at_us == T0 and run.updated_at_us == T0 + 5_000_020
    payload = json.loads(driver.run_state[R1] or b"")["payload"]
    assert payload["status"] == "succeeded" and payload["attempts"] == 2


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        # a late "started" of the same attempt never overwrites the outcome
        ([attempt(R1, "succeeded", 1, T0 + 20), attempt(R1, "started", 1, T0 + 10)], "succeeded"),
        # an older attempt's late failure loses to the newer attempt
        ([attempt(R1, "started", 2, T0 + 30), attempt(R1, "failed", 1, T0 + 40)], "running"),
        ([attempt(R1, "failed", 1, T0 + 20)], "failed"),
        ([attempt(R1, "timed_out", 1, T0 + 20)], "timed_out"),
        ([attempt(R1, "lease_expired", 1, T0 + 20)], "timed_out"),
        ([attempt(R1, "failed", 1, T0 + 20), attempt(R1, "retry_scheduled", 1, T0 + 21)],
         "pending"),
        ([attempt(R1, "failed", 3, T0 + 20), attempt(R1, "dead_lettered", 3, T0 + 21)],
         "dead_lettered"),
        ([attempt(R1, "started", 1, T0), attempt(R1, "cancelled", 1, T0 + 5)], "cancelled"),
        # the scheduler's revocation (RunRevoked + the "revoked" attempt event)
        ([triggered(R1, T0, emitted=T0 - 10), revoked(R1, T0, T0 - 5),
          attempt(R1, "revoked", 0, T0 - 5, reason="job paused")], "cancelled"),
        # ... re-armed by a later trigger of the same run id
        ([triggered(R1, T0, emitted=T0 - 10), revoked(R1, T0, T0 - 5),
          triggered(R1, T0, emitted=T0 - 2, version=2)], "pending"),
        # the dispatcher started it before the revocation reached it: it runs
        ([triggered(R1, T0, emitted=T0 - 10), attempt(R1, "started", 1, T0 + 1),
          revoked(R1, T0, T0 + 2)], "running"),
        # a missed instant is a skipped run; a backfill of it re-arms it
        ([attempt(R1, "missed", 0, T0 + MINUTE, reason="misfire skip", scheduled=T0, count=3)],
         "skipped"),
        ([attempt(R1, "missed", 0, T0 + MINUTE, scheduled=T0),
          triggered(R1, T0, emitted=T0 + 2 * MINUTE, trigger="backfill")], "pending"),
        ([triggered(R1, T0), attempt(R1, "skipped", 0, T0 + 1, reason="overlap forbid")],
         "skipped"),
        ([attempt(R1, "accepted", 0, T0)], "pending"),
    ],
)  # fmt: skip
def test_status_precedence(events: list[tuple[str, dict[str, Any]]], expected: str) -> None:
    assert _status(events) == expected
    assert _status(list(reversed(events))) == expected


def test_missed_and_revoked_runs_carry_the_reason_and_finish_time() -> None:
    driver = Driver()
    driver.event(attempt(R1, "missed", 0, T0 + MINUTE, reason="3 instant(s) not run", count=3))
    run = driver.runs[R1]
    assert (run.status, run.last_error, run.finished_at_us) == (
        "skipped",
        "3 instant(s) not run",
        T0 + MINUTE,
    )
    assert run.trigger == "scheduled" and run.scheduled_at_us == T0  # from the run id


def test_manual_run_ids_take_the_scheduled_instant_from_the_events() -> None:
    manual = f"{JOB}@manual-req.1"
    driver = Driver()
    driver.event(attempt(manual, "started", 1, T0 + 50, scheduled=T0 + 7))
    assert driver.runs[manual].scheduled_at_us == T0 + 7
    driver.event(triggered(manual, T0 + 5, trigger="manual"))
    assert driver.runs[manual].scheduled_at_us == T0 + 5  # cron.runs wins
    assert driver.runs[manual].trigger == "manual"


def test_retention_keeps_the_newest_runs_and_ignores_late_events_of_pruned_ones() -> None:
    driver = Driver(keep_per_job=3)
    driver.schedule(JOB, job_avro("acme", "backup", 1), T0 - MINUTE)
    ids = [run_id(JOB, T0 + i * MINUTE) for i in range(6)]
    for i, rid in enumerate(ids):
        driver.event(triggered(rid, T0 + i * MINUTE))
        driver.event(attempt(rid, "succeeded", 1, T0 + i * MINUTE + 5))
    assert sorted(driver.runs) == ids[3:]
    assert all(driver.run_state[rid] is None for rid in ids[:3])  # tombstoned
    assert {a[0] for a in driver.attempts} == set(ids[3:])
    late = driver.event(attempt(ids[0], "started", 1, T0 + 10 * MINUTE))
    assert late.changes.empty() and not late.run_state
    job = driver.jobs[("acme", "backup")]
    assert (job.last_run_id, job.last_run_status) == (ids[5], "succeeded")
    # an older instant that arrives after newer ones is pruned at once
    older = run_id(JOB, T0 - 10 * MINUTE)
    effects = driver.event(triggered(older, T0 - 10 * MINUTE))
    assert effects.changes.empty()
    assert older not in driver.runs
    runs_state = driver.store.get(keys.runs_key(JOB))
    assert runs_state is not None and json.loads(runs_state)["count"] == 3


def test_jobs_versions_tombstones_and_next_fire_times() -> None:
    driver = Driver()
    driver.schedule(JOB, job_avro("acme", "backup", 5), T0)
    job = driver.jobs[("acme", "backup")]
    assert job.version == 5 and not job.deleted
    assert job.next_fire_at_us == [T0 + 5 * MINUTE, T0 + 10 * MINUTE, T0 + 15 * MINUTE]
    assert driver.schedule(JOB, job_avro("acme", "backup", 4), T0 + 1).changes.empty()
    driver.event(triggered(run_id(JOB, T0 + 5 * MINUTE), T0 + 5 * MINUTE))
    job = driver.jobs[("acme", "backup")]
    assert job.next_fire_at_us[0] == T0 + 10 * MINUTE  # after the last instant fired
    assert job.last_run_id == run_id(JOB, T0 + 5 * MINUTE) and job.last_run_status == "pending"
    driver.schedule(JOB, job_avro("acme", "backup", 6, paused=True), T0 + 2)
    assert driver.jobs[("acme", "backup")].next_fire_at_us == []
    driver.schedule(JOB, None, T0 + 3)
    job = driver.jobs[("acme", "backup")]
    assert job.deleted and job.version == 6 and job.created_at_us == T0
    # a job created again after its deletion starts over (any version)
    driver.schedule(JOB, job_avro("acme", "backup", 1), T0 + 4)
    job = driver.jobs[("acme", "backup")]
    assert not job.deleted and job.version == 1 and job.created_at_us == T0 + 4


def test_webhook_secrets_are_redacted() -> None:
    driver = Driver()
    target = {"type": "http", "url": "https://example.com/h", "secret": "whsec_" + "QUJD" * 8}
    driver.schedule(JOB, job_avro("acme", "backup", 1, target=target), T0)
    assert driver.jobs[("acme", "backup")].definition["target"]["secret"] == "redacted"


def test_bad_schedules_are_rejected() -> None:
    driver = Driver()
    with pytest.raises(RejectedRecord):
        driver.schedule(JOB, b"\xc3\x01garbage-garbage", T0)
    with pytest.raises(RejectedRecord):
        driver.schedule("acme/other", job_avro("acme", "backup", 1), T0)  # key mismatch
    with pytest.raises(RejectedRecord):
        driver.schedule("not a key", None, T0)


def test_restore_rebuilds_the_run_index_from_logged_records() -> None:
    driver = Driver(keep_per_job=2)
    for i in range(4):
        driver.event(triggered(run_id(JOB, T0 + i * MINUTE), T0 + i * MINUTE))
    restored = MemoryStore()
    projection = Projection(driver.projection.codec, 2)
    for key, value in driver.store.logged.items():
        projection.restore_record(restored, key, value)
    assert restored.data == driver.store.data  # the index included
