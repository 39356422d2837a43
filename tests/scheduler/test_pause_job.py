"""PauseJob (a webhook answered 410): the scheduler writes a paused version and stops firing."""

from __future__ import annotations

from typing import Any

import pytest

from schedulerstream.ingest import RejectedRecord, pause_job_command
from schedulerstream.limits import RecordLimits
from schedulerstream.model import MAX_PAUSED_REASON, JobDefinition

from .harness import CODEC, Harness, command, definition, us

T0 = us("2025-01-06T10:00:30Z")
REASON = "target gone: HTTP 410: removed (run acme/j1@20250106T100100Z)"


def started() -> Harness:
    h = Harness()
    h.now = T0
    return h


def pause(version: int, reason: str = REASON) -> bytes:
    return command("PauseJob", {"job_version": version, "reason": reason})


def written(h: Harness) -> list[tuple[bytes, dict[str, Any], int]]:
    """The definitions the scheduler produced to cron.schedules (key, record, partition)."""
    return [(k, r, p) for t, k, r, _, p in h.out.records if t == "schedules" and r is not None]


def test_pause_writes_the_next_version_paused_with_the_reason_and_stops_the_runs() -> None:
    h = started()
    h.put(definition(7))
    h.tick_until(us("2025-01-06T10:01:59.5Z"))  # 10:01 ran, 10:02 emitted ahead of time
    assert h.run_ids()[-1] == "acme/j1@20250106T100200Z"
    h.command(pause(7))
    [(key, record, partition)] = written(h)
    assert (key, partition) == (b"acme/j1", 0)
    job = JobDefinition.from_avro(record)
    assert (job.version, job.paused, job.paused_reason) == (8, True, REASON)
    before = JobDefinition.from_avro(CODEC.decode_as("JobDefinition", definition(7)))
    assert job.model_dump(exclude={"version", "paused", "paused_reason"}) == before.model_dump(
        exclude={"version", "paused", "paused_reason"}
    )
    assert [r["run_id"] for r in h.out.revoked()] == ["acme/j1@20250106T100200Z"]
    assert h.out.revoked()[0]["reason"] == "job paused"
    state = h.logic.jobs.load(h.store, "acme/j1")
    assert state is not None and (state.version, state.paused) == (8, True)
    h.out.clear()
    h.tick_until(us("2025-01-06T10:10:00Z"), step_s=0.5)
    assert h.out.runs() == []
    assert h.logic.counters.paused_by_command == 1


def test_the_scheduler_reading_back_its_own_paused_version_changes_nothing() -> None:
    h = started()
    h.put(definition(7))
    h.command(pause(7))
    [(_, record, _)] = written(h)
    h.out.clear()
    h.put(CODEC.encode("JobDefinition", record))
    assert h.out.records == [] and h.logic.counters.stale_versions == 1


def test_a_newer_version_wins_and_clears_the_pause() -> None:
    h = started()
    h.put(definition(7))
    h.command(pause(7))
    fixed = definition(1_736_157_700_000_000, target={"type": "http", "url": "https://ok.test/"})
    h.put(fixed)
    state = h.logic.jobs.load(h.store, "acme/j1")
    assert state is not None and not state.paused
    h.tick_until(us("2025-01-06T10:02:00Z"))
    assert h.run_ids() == ["acme/j1@20250106T100100Z", "acme/j1@20250106T100200Z"]


def test_a_410_of_an_old_version_after_the_user_fixed_the_url_is_ignored() -> None:
    h = started()
    h.put(definition(7))
    h.put(definition(9))  # the fix arrived first
    h.command(pause(7))
    assert written(h) == [] and h.logic.counters.pauses_ignored == 1
    h.tick_until(us("2025-01-06T10:01:00Z"))
    assert h.run_ids() == ["acme/j1@20250106T100100Z"]


def test_a_duplicate_pause_is_applied_once() -> None:
    h = started()
    h.put(definition(7))
    h.command(pause(7))
    h.command(pause(7))
    h.command(pause(8, "a second 410 from a manual run while paused"))
    assert len(written(h)) == 1
    assert h.logic.counters.pauses_ignored == 2


def test_a_job_the_user_already_paused_keeps_its_definition() -> None:
    h = started()
    h.put(definition(7, paused=True))
    h.command(pause(7))
    assert written(h) == []


def test_a_pause_for_a_deleted_or_unknown_job_is_ignored() -> None:
    h = started()
    h.command(pause(1))
    h.put(definition(7))
    h.put(None)
    h.command(pause(7))
    assert written(h) == [] and h.logic.counters.pauses_ignored == 2
    assert h.logic.jobs.load(h.store, "acme/j1") is None


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"job_version": -1, "reason": "x"}, "negative"),
        ({"job_version": 7, "reason": "  "}, "reason must be"),
        ({"job_version": 7, "reason": "x" * 1001}, "reason must be"),
    ],
)
def test_a_malformed_pause_is_rejected_with_the_reason(
    fields: dict[str, Any], message: str
) -> None:
    h = started()
    h.put(definition(7))
    with pytest.raises(RejectedRecord, match=message):
        h.command(command("PauseJob", fields))
    assert written(h) == []


def test_pause_job_command_encodes_a_decodable_command_with_a_bounded_reason() -> None:
    value = pause_job_command(CODEC, "acme/j1", 7, "y" * 5000, 123)
    name, record = CODEC.decode(value)
    assert (name, record["tenant"], record["job_id"], record["issued_at_us"]) == (
        "Command", "acme", "j1", 123,
    )  # fmt: skip
    kind, fields = record["command"]
    assert kind == "io.schedulerstream.PauseJob"
    assert fields["job_version"] == 7 and len(fields["reason"]) == 1000
    h = started()
    h.put(definition(7))
    h.command(value)
    assert len(written(h)) == 1


def test_paused_reason_belongs_to_a_paused_job() -> None:
    with pytest.raises(ValueError, match="only allowed when paused"):
        JobDefinition.from_avro(
            {**CODEC.decode_as("JobDefinition", definition(7)), "paused_reason": "why"}
        )


def test_a_job_at_the_size_limit_is_still_paused_by_the_system() -> None:
    limits = RecordLimits(max_payload_bytes=100_000, max_record_bytes=20_000)
    h = Harness(limits=limits)
    h.now = T0
    size = 0
    for filler in range(20_000, 0, -10):  # the largest payload the limits let in
        value = definition(7, payload={"x": "a" * filler})
        record = CODEC.decode_as("JobDefinition", value)
        size = limits.derived_bytes(len(value), len(record["payload_json"]))
        if size <= limits.max_record_bytes:
            break
    assert limits.max_record_bytes - size < 40
    h.put(value)
    h.command(pause(7, reason="x" * MAX_PAUSED_REASON))  # its reason does not fit beside it
    [(_, record, _)] = written(h)
    state = h.logic.jobs.load(h.store, "acme/j1")
    assert state is not None and (state.version, state.paused) == (8, True)
    assert record["paused_reason"] == "x" * MAX_PAUSED_REASON
