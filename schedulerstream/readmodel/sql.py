"""The SQL both backends share: tables, upserts, paged queries and row mapping.

Statements are written with ``?`` placeholders; a backend with another paramstyle rewrites
them once. Upserts use ``INSERT ... ON CONFLICT ... DO UPDATE`` (SQLite 3.24+, PostgreSQL 9.5+).
"""

from __future__ import annotations

import json
import uuid
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from schedulerstream.readmodel.base import (
    AttemptRow,
    Changes,
    JobRow,
    Page,
    ReadModelUnavailable,
    RunDetail,
    RunRow,
    check_limit,
    check_status,
    decode_cursor,
    encode_cursor,
)
from schedulerstream.readmodel.console import ConsoleQueries

SCHEMA_VERSION = "1"
IDENTITY_QUERY = "SELECT value FROM readmodel_meta WHERE name = 'identity'"
JOB_COLUMNS = (
    "tenant", "job_id", "version", "definition", "paused", "deleted", "next_fire_at_us",
    "last_run_id", "last_run_status", "last_run_at_us", "created_at_us", "updated_at_us",
)  # fmt: skip
RUN_COLUMNS = (
    "run_id", "tenant", "job_id", '"trigger"', "status", "scheduled_at_us", "started_at_us",
    "finished_at_us", "attempts", "last_error", "updated_at_us",
)  # fmt: skip
ATTEMPT_COLUMNS = (
    "run_id", "attempt", "kind", "at_us", "reason", "status_code", "retry_at_us",
    "duration_us", "count", "seq",
)  # fmt: skip
TABLES = ("jobs", "runs", "attempts")
_ORDER = {"jobs": "tenant, job_id", "runs": "run_id", "attempts": "run_id, attempt, kind, at_us"}
Statement = tuple[str, Sequence[Sequence[Any]]]


def ddl(boolean: str, json_type: str) -> list[str]:
    """CREATE statements for the tables and indexes, with the backend's type names."""
    return [
        "CREATE TABLE IF NOT EXISTS readmodel_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
        f"""CREATE TABLE IF NOT EXISTS jobs (
            tenant TEXT NOT NULL, job_id TEXT NOT NULL, version BIGINT NOT NULL,
            definition {json_type} NOT NULL, paused {boolean} NOT NULL, deleted {boolean} NOT NULL,
            next_fire_at_us {json_type} NOT NULL, last_run_id TEXT, last_run_status TEXT,
            last_run_at_us BIGINT, created_at_us BIGINT NOT NULL, updated_at_us BIGINT NOT NULL,
            PRIMARY KEY (tenant, job_id))""",
        "CREATE INDEX IF NOT EXISTS jobs_by_created"
        " ON jobs (tenant, created_at_us DESC, job_id DESC)",
        """CREATE TABLE IF NOT EXISTS runs (
            run_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, job_id TEXT NOT NULL,
            "trigger" TEXT NOT NULL, status TEXT NOT NULL, scheduled_at_us BIGINT NOT NULL,
            started_at_us BIGINT, finished_at_us BIGINT, attempts INTEGER NOT NULL,
            last_error TEXT, updated_at_us BIGINT NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS runs_by_job"
        " ON runs (tenant, job_id, scheduled_at_us DESC, run_id DESC)",
        "CREATE INDEX IF NOT EXISTS runs_by_tenant"
        " ON runs (tenant, scheduled_at_us DESC, run_id DESC)",
        """CREATE TABLE IF NOT EXISTS attempts (
            run_id TEXT NOT NULL, attempt INTEGER NOT NULL, kind TEXT NOT NULL,
            at_us BIGINT NOT NULL, reason TEXT, status_code INTEGER, retry_at_us BIGINT,
            duration_us BIGINT, count BIGINT NOT NULL, seq BIGINT NOT NULL,
            PRIMARY KEY (run_id, attempt, kind, at_us))""",
    ]


def _upsert(table: str, columns: Sequence[str], key: Sequence[str], json_param: str) -> str:
    params = [json_param if c in ("definition", "next_fire_at_us") else "?" for c in columns]
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in key)
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(params)})"
        f" ON CONFLICT ({', '.join(key)}) DO UPDATE SET {updates}"
    )


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str | bytes) else value


def _job(row: Sequence[Any]) -> JobRow:
    return JobRow(
        tenant=row[0], job_id=row[1], version=row[2], definition=_json(row[3]),
        paused=bool(row[4]), deleted=bool(row[5]), next_fire_at_us=list(_json(row[6])),
        last_run_id=row[7], last_run_status=row[8], last_run_at_us=row[9],
        created_at_us=row[10], updated_at_us=row[11],
    )  # fmt: skip


def _job_params(job: JobRow) -> tuple[Any, ...]:
    return (
        job.tenant, job.job_id, job.version, json.dumps(job.definition, sort_keys=True),
        job.paused, job.deleted, json.dumps(job.next_fire_at_us), job.last_run_id,
        job.last_run_status, job.last_run_at_us, job.created_at_us, job.updated_at_us,
    )  # fmt: skip


def _run_params(run: RunRow) -> tuple[Any, ...]:
    return (
        run.run_id, run.tenant, run.job_id, run.trigger, run.status, run.scheduled_at_us,
        run.started_at_us, run.finished_at_us, run.attempts, run.last_error, run.updated_at_us,
    )  # fmt: skip


def _attempt_params(a: AttemptRow) -> tuple[Any, ...]:
    return (
        a.run_id, a.attempt, a.kind, a.at_us, a.reason, a.status_code, a.retry_at_us,
        a.duration_us, a.count, a.seq,
    )  # fmt: skip


class SqlReadModel(ConsoleQueries, ABC):
    """A ReadModel over one DB-API connection; subclasses open it and run statements."""

    json_param = "?"

    def __init__(self) -> None:
        self._upsert_job = _upsert("jobs", JOB_COLUMNS, ("tenant", "job_id"), self.json_param)
        self._upsert_run = _upsert("runs", RUN_COLUMNS, ("run_id",), self.json_param)
        self._upsert_attempt = _upsert(
            "attempts", ATTEMPT_COLUMNS, ("run_id", "attempt", "kind", "at_us"), self.json_param
        )

    # -- what a backend provides ----------------------------------------------------------
    @abstractmethod
    def _execute(self, statements: list[Statement]) -> None:
        """Run every statement (each with its parameter rows) in one transaction."""

    @abstractmethod
    def _query(self, sql: str, params: Sequence[Any]) -> list[Sequence[Any]]:
        """Rows of one SELECT."""

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> SqlReadModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _create_schema(self, boolean: str, json_type: str, prelude: Sequence[str] = ()) -> None:
        """Create what is missing and refuse a database of another schema version."""
        statements: list[Statement] = [(s, [()]) for s in (*prelude, *ddl(boolean, json_type))]
        statements.append(
            (
                "INSERT INTO readmodel_meta (name, value) VALUES (?, ?)"
                " ON CONFLICT (name) DO NOTHING",
                [("schema_version", SCHEMA_VERSION), ("identity", uuid.uuid4().hex)],
            )
        )
        self._execute(statements)
        rows = self._query("SELECT value FROM readmodel_meta WHERE name = 'schema_version'", ())
        if rows[0][0] != SCHEMA_VERSION:
            raise ReadModelUnavailable(
                f"the read model has schema version {rows[0][0]}; this version needs "
                f"{SCHEMA_VERSION}"
            )
        self._identity = str(self._query(IDENTITY_QUERY, ())[0][0])

    def identity(self) -> str:
        return self._identity

    # -- writes ---------------------------------------------------------------------------
    def apply(self, changes: Changes) -> None:
        if changes.empty():
            return
        statements: list[Statement] = []
        if changes.runs:
            statements.append((self._upsert_run, [_run_params(r) for r in changes.runs.values()]))
        if changes.attempts:
            attempts = [_attempt_params(a) for a in changes.attempts]
            statements.append((self._upsert_attempt, attempts))
        if changes.jobs:
            statements.append((self._upsert_job, [_job_params(j) for j in changes.jobs.values()]))
        if changes.deleted_runs:
            gone = [(run_id,) for run_id in sorted(changes.deleted_runs)]
            statements.append(("DELETE FROM attempts WHERE run_id = ?", gone))
            statements.append(("DELETE FROM runs WHERE run_id = ?", gone))
        self._execute(statements)

    # -- queries --------------------------------------------------------------------------
    def get_job(self, tenant: str, job_id: str) -> JobRow | None:
        rows = self._query(
            f"SELECT {', '.join(JOB_COLUMNS)} FROM jobs WHERE tenant = ? AND job_id = ?",
            (tenant, job_id),
        )
        return _job(rows[0]) if rows else None

    def list_jobs(
        self, tenant: str, cursor: str | None = None, limit: int = 50, include_deleted: bool = False
    ) -> Page[JobRow]:
        where: list[str] = ["tenant = ?"]
        params: list[Any] = [tenant]
        if not include_deleted:
            where.append("deleted = ?")
            params.append(False)
        if cursor is not None:
            created, job_id = decode_cursor(cursor, (int, str))
            where.append("(created_at_us, job_id) < (?, ?)")
            params += [created, job_id]
        rows = self._query(
            f"SELECT {', '.join(JOB_COLUMNS)} FROM jobs WHERE {' AND '.join(where)}"
            " ORDER BY created_at_us DESC, job_id DESC LIMIT ?",
            [*params, check_limit(limit) + 1],
        )
        jobs = [_job(r) for r in rows[:limit]]
        last = jobs[-1] if len(rows) > limit else None
        return Page(jobs, None if last is None else encode_cursor(last.created_at_us, last.job_id))

    def list_runs(
        self,
        tenant: str,
        job_id: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
        status: str | None = None,
    ) -> Page[RunRow]:
        where: list[str] = ["tenant = ?"]
        params: list[Any] = [tenant]
        if job_id is not None:
            where.append("job_id = ?")
            params.append(job_id)
        if check_status(status) is not None:
            where.append("status = ?")
            params.append(status)
        if cursor is not None:
            scheduled, run_id = decode_cursor(cursor, (int, str))
            where.append("(scheduled_at_us, run_id) < (?, ?)")
            params += [scheduled, run_id]
        rows = self._query(
            f"SELECT {', '.join(RUN_COLUMNS)} FROM runs WHERE {' AND '.join(where)}"
            " ORDER BY scheduled_at_us DESC, run_id DESC LIMIT ?",
            [*params, check_limit(limit) + 1],
        )
        runs = [RunRow(*r) for r in rows[:limit]]
        last = runs[-1] if len(rows) > limit else None
        cursor = None if last is None else encode_cursor(last.scheduled_at_us, last.run_id)
        return Page(runs, cursor)

    def get_run(self, tenant: str, run_id: str) -> RunDetail | None:
        rows = self._query(
            f"SELECT {', '.join(RUN_COLUMNS)} FROM runs WHERE tenant = ? AND run_id = ?",
            (tenant, run_id),
        )
        if not rows:
            return None
        attempts = self._query(
            f"SELECT {', '.join(ATTEMPT_COLUMNS)} FROM attempts WHERE run_id = ?"
            " ORDER BY at_us, seq, attempt, kind",
            (run_id,),
        )
        return RunDetail(RunRow(*rows[0]), [AttemptRow(*a) for a in attempts])

    def _select_jobs(self, where: str, params: Sequence[Any]) -> list[JobRow]:
        rows = self._query(f"SELECT {', '.join(JOB_COLUMNS)} FROM jobs WHERE {where}", params)
        return [_job(r) for r in rows]

    def _select_runs(self, where: str, params: Sequence[Any]) -> list[RunRow]:
        rows = self._query(f"SELECT {', '.join(RUN_COLUMNS)} FROM runs WHERE {where}", params)
        return [RunRow(*r) for r in rows]

    def snapshot(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of every table in key order, JSON decoded (for tests and debugging)."""
        result: dict[str, list[tuple[Any, ...]]] = {}
        for table in TABLES:
            rows = self._query(f"SELECT * FROM {table} ORDER BY {_ORDER[table]}", ())
            result[table] = [
                tuple(_json(v) if table == "jobs" and i in (3, 6) else v for i, v in enumerate(r))
                for r in rows
            ]
        return result
