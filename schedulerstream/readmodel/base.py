"""The read model's one interface: rows, pages, the write batch, and the ReadModel protocol.

Times are UTC epoch microseconds (``*_us``), as in the events. Every write is an idempotent
upsert keyed by job key, run id or attempt identity, so replaying the same input records
converges to the same rows.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from schedulerstream.errors import SchedulerStreamError, ValidationError

T = TypeVar("T")

RUN_STATUSES = (
    "pending",
    "running",
    "succeeded",
    "failed",
    "timed_out",
    "cancelled",
    "skipped",
    "dead_lettered",
)
MAX_LIMIT = 1000


class ReadModelUnavailable(SchedulerStreamError):
    """The database cannot be reached or written right now (retrying may help)."""


class ReadModelDataError(SchedulerStreamError):
    """The database refused a value (retrying the same write cannot help)."""


@dataclass(frozen=True, slots=True)
class JobRow:
    """One job: its latest definition (JSON, secrets redacted) and a summary of its runs."""

    tenant: str
    job_id: str
    version: int
    definition: dict[str, Any]
    paused: bool
    deleted: bool
    next_fire_at_us: list[int]
    last_run_id: str | None
    last_run_status: str | None
    last_run_at_us: int | None
    created_at_us: int
    updated_at_us: int


@dataclass(frozen=True, slots=True)
class RunRow:
    """The latest state of one run (the same fields as the RunState event)."""

    run_id: str
    tenant: str
    job_id: str
    trigger: str
    status: str
    scheduled_at_us: int
    started_at_us: int | None
    finished_at_us: int | None
    attempts: int
    last_error: str | None
    updated_at_us: int


@dataclass(frozen=True, slots=True)
class AttemptRow:
    """One AttemptEvent; ``seq`` is its cron.attempts offset (stable across replays)."""

    run_id: str
    attempt: int
    kind: str
    at_us: int
    reason: str | None
    status_code: int | None
    retry_at_us: int | None
    duration_us: int | None
    count: int
    seq: int


@dataclass(frozen=True, slots=True)
class RunDetail:
    run: RunRow
    attempts: list[AttemptRow]


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page, newest first; pass ``next_cursor`` back for the next (None: no more)."""

    items: list[T]
    next_cursor: str | None


@dataclass
class Changes:
    """What one input record changes; applied in one database transaction."""

    jobs: dict[tuple[str, str], JobRow] = field(default_factory=dict)
    runs: dict[str, RunRow] = field(default_factory=dict)
    attempts: list[AttemptRow] = field(default_factory=list)
    deleted_runs: set[str] = field(default_factory=set)

    def put_run(self, row: RunRow) -> None:
        self.deleted_runs.discard(row.run_id)
        self.runs[row.run_id] = row

    def delete_run(self, run_id: str) -> None:
        self.runs.pop(run_id, None)
        self.attempts = [a for a in self.attempts if a.run_id != run_id]
        self.deleted_runs.add(run_id)

    def empty(self) -> bool:
        return not (self.jobs or self.runs or self.attempts or self.deleted_runs)


class ReadModel(Protocol):
    """What the projector writes and the API reads. Queries are tenant-scoped."""

    def apply(self, changes: Changes) -> None:
        """Write ``changes`` atomically (idempotent upserts, then deletes).

        Raises ReadModelUnavailable when the database cannot be written now and
        ReadModelDataError when it refuses a value.
        """
        ...

    def get_job(self, tenant: str, job_id: str) -> JobRow | None:
        """The job (deleted ones too, with ``deleted=True``), or None."""
        ...

    def list_jobs(
        self, tenant: str, cursor: str | None = None, limit: int = 50, include_deleted: bool = False
    ) -> Page[JobRow]:
        """The tenant's jobs, most recently created first."""
        ...

    def list_runs(
        self,
        tenant: str,
        job_id: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
        status: str | None = None,
    ) -> Page[RunRow]:
        """Runs of the tenant (of one job if ``job_id``), latest scheduled instant first."""
        ...

    def get_run(self, tenant: str, run_id: str) -> RunDetail | None:
        """One run with its attempt events in time order, or None."""
        ...

    def identity(self) -> str:
        """A random id made when the tables were created: a new database has a new one."""
        ...

    def close(self) -> None: ...


def encode_cursor(*values: int | str) -> str:
    """An opaque page cursor holding the sort key of the last row returned."""
    return base64.urlsafe_b64encode(json.dumps(list(values)).encode()).decode().rstrip("=")


def decode_cursor(cursor: str, shape: tuple[type, ...]) -> list[Any]:
    """The sort key in ``cursor``; raises ValidationError("cursor") if it is not one of ours."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        values = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise ValidationError("cursor", "not a cursor returned by this API") from None
    if not isinstance(values, list) or len(values) != len(shape):
        raise ValidationError("cursor", "not a cursor returned by this API")
    for value, kind in zip(values, shape, strict=True):
        if type(value) is not kind:
            raise ValidationError("cursor", "not a cursor returned by this API")
    return values


def check_limit(limit: int) -> int:
    if not 1 <= limit <= MAX_LIMIT:
        raise ValidationError("limit", f"must be between 1 and {MAX_LIMIT}")
    return limit


def check_status(status: str | None) -> str | None:
    if status is not None and status not in RUN_STATUSES:
        raise ValidationError("status", f"must be one of {', '.join(RUN_STATUSES)}")
    return status
