"""The read model's one interface on both backends (SQLite file, real PostgreSQL server)."""

from __future__ import annotations

import dataclasses

import pytest

from schedulerstream.errors import ConfigError, ValidationError
from schedulerstream.readmodel import (
    AttemptRow,
    Changes,
    JobRow,
    RunRow,
    SqlReadModel,
    open_read_model,
)
from schedulerstream.settings import Settings
from tests.projector.records import T0


def job(tenant: str, job_id: str, created: int, **fields: object) -> JobRow:
    row = JobRow(
        tenant=tenant, job_id=job_id, version=1, definition={"tenant": tenant, "n": "\u0000é"},
        paused=False, deleted=False, next_fire_at_us=[T0, T0 + 1], last_run_id=None,
        last_run_status=None, last_run_at_us=None, created_at_us=created, updated_at_us=created,
    )  # fmt: skip
    return dataclasses.replace(row, **fields)  # type: ignore[arg-type]


def run(tenant: str, job_id: str, scheduled: int, status: str = "pending") -> RunRow:
    return RunRow(
        run_id=f"{tenant}/{job_id}@{scheduled}", tenant=tenant, job_id=job_id,
        trigger="scheduled", status=status, scheduled_at_us=scheduled, started_at_us=None,
        finished_at_us=None, attempts=0, last_error=None, updated_at_us=scheduled,
    )  # fmt: skip


def attempt(run_id: str, number: int, kind: str, at: int, seq: int) -> AttemptRow:
    return AttemptRow(run_id, number, kind, at, "why", 500, None, 12, 1, seq)


def changes(
    jobs: list[JobRow] = (),  # type: ignore[assignment]
    runs: list[RunRow] = (),  # type: ignore[assignment]
    attempts: list[AttemptRow] = (),  # type: ignore[assignment]
    deleted: set[str] | None = None,
) -> Changes:
    return Changes(
        {(j.tenant, j.job_id): j for j in jobs},
        {r.run_id: r for r in runs},
        list(attempts),
        deleted or set(),
    )


def test_upserts_are_idempotent_and_reads_round_trip(read_model: SqlReadModel) -> None:
    one = run("acme", "a", T0)
    batch = changes(
        [job("acme", "a", T0)], [one], [attempt(one.run_id, 1, "failed", T0 + 5, seq=9)]
    )
    read_model.apply(batch)
    first = read_model.snapshot()
    read_model.apply(batch)
    assert read_model.snapshot() == first
    assert read_model.get_job("acme", "a") == job("acme", "a", T0)
    detail = read_model.get_run("acme", one.run_id)
    assert detail is not None and detail.run == one
    assert detail.attempts == [attempt(one.run_id, 1, "failed", T0 + 5, seq=9)]
    # an upsert replaces every column
    done = dataclasses.replace(one, status="succeeded", attempts=1, finished_at_us=T0 + 9)
    read_model.apply(changes(runs=[done]))
    assert read_model.get_run("acme", one.run_id).run == done  # type: ignore[union-attr]


def test_queries_are_tenant_scoped(read_model: SqlReadModel) -> None:
    theirs = run("other", "a", T0)
    read_model.apply(changes([job("other", "a", T0)], [theirs]))
    assert read_model.get_job("acme", "a") is None
    assert read_model.get_run("acme", theirs.run_id) is None
    assert read_model.list_jobs("acme").items == []
    assert read_model.list_runs("acme").items == []


def test_pages_are_newest_first_and_cursors_walk_them(read_model: SqlReadModel) -> None:
    jobs = [job("acme", f"j{i}", T0 + i // 2) for i in range(7)]  # equal times: id breaks ties
    runs = [run("acme", "j0" if i % 2 else "j1", T0 + i) for i in range(9)]
    read_model.apply(changes(jobs, runs))
    seen, cursor = [], None
    while True:
        page = read_model.list_jobs("acme", cursor, limit=3)
        seen += [j.job_id for j in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == ["j6", "j5", "j4", "j3", "j2", "j1", "j0"]
    first = read_model.list_runs("acme", "j0", limit=2)
    second = read_model.list_runs("acme", "j0", first.next_cursor, limit=2)
    assert [r.scheduled_at_us - T0 for p in (first, second) for r in p.items] == [7, 5, 3, 1]
    assert second.next_cursor is None
    assert len(read_model.list_runs("acme", limit=100).items) == 9


def test_filters_deleted_jobs_and_status(read_model: SqlReadModel) -> None:
    read_model.apply(
        changes(
            [job("acme", "live", T0), job("acme", "gone", T0 + 1, deleted=True)],
            [run("acme", "live", T0, "failed"), run("acme", "live", T0 + 1, "succeeded")],
        )
    )
    assert [j.job_id for j in read_model.list_jobs("acme").items] == ["live"]
    assert len(read_model.list_jobs("acme", include_deleted=True).items) == 2
    gone = read_model.get_job("acme", "gone")
    assert gone is not None and gone.deleted
    failed = read_model.list_runs("acme", status="failed").items
    assert [r.status for r in failed] == ["failed"]


def test_deleting_a_run_removes_its_attempts(read_model: SqlReadModel) -> None:
    one = run("acme", "a", T0)
    read_model.apply(changes(runs=[one], attempts=[attempt(one.run_id, 1, "started", T0, 1)]))
    read_model.apply(changes(deleted={one.run_id}))
    assert read_model.get_run("acme", one.run_id) is None
    assert read_model.snapshot()["attempts"] == []


def test_bad_arguments_are_validation_errors(read_model: SqlReadModel) -> None:
    with pytest.raises(ValidationError, match="cursor"):
        read_model.list_runs("acme", cursor="not-a-cursor")
    with pytest.raises(ValidationError, match="limit"):
        read_model.list_jobs("acme", limit=0)
    with pytest.raises(ValidationError, match="status"):
        read_model.list_runs("acme", status="exploded")


def test_reopening_keeps_the_rows_and_the_identity(model_settings: Settings) -> None:
    first = open_read_model(model_settings)
    first.apply(changes([job("acme", "a", T0)]))
    identity = first.identity()
    first.close()
    again = open_read_model(model_settings)
    assert again.identity() == identity
    assert again.get_job("acme", "a") is not None
    again.close()


def test_an_unknown_database_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="DATABASE_URL"):
        open_read_model(Settings(database_url="mysql://nope"))
