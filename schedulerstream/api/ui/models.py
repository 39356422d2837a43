"""The console's response bodies (they appear in /openapi.json under the "console" tag)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from schedulerstream.api.schemas import JobOut

JobStatus = Literal["active", "paused", "ended"]


class Session(BaseModel):
    """Who a key signs in as: one tenant, or the operator (every tenant, read-only)."""

    tenant: str | None = Field(description="The key's tenant (None for the operator key).")
    operator: bool
    tenants: list[str] = Field(description="The tenants this key may see.")


class LastRunSummary(BaseModel):
    run_id: str
    status: str
    scheduled_at: str | None
    lateness_ms: float | None = Field(description="Started minus scheduled, when started.")


class JobSummary(BaseModel):
    tenant: str
    job_id: str
    schedule: str = Field(description="The schedule in words.")
    expression: str = Field(description="The cron expression, interval or instant.")
    timezone: str
    next_fire_at: str | None
    status: JobStatus
    paused_reason: str | None
    last_run: LastRunSummary | None


class JobSummaryPage(BaseModel):
    items: list[JobSummary]
    next_cursor: str | None


class Instant(BaseModel):
    utc: str
    local: str = Field(description="The instant in the job's zone, with its offset.")
    note: str = Field(description="The DST note of `cron next` (empty if none).")


class JobDetail(BaseModel):
    tenant: str
    status: JobStatus
    schedule: str
    expression: str
    timezone: str
    job: JobOut
    upcoming: list[Instant] = Field(description="The next instants (fire even while paused).")


class BackfillPreview(BaseModel):
    runs: int = Field(description="Runs a backfill of [start, end) would create (up to now).")


class MinuteCounts(BaseModel):
    minute: str = Field(description="The minute's start (UTC) of the runs' scheduled instant.")
    counts: dict[str, int] = Field(description="Runs by status.")
    lateness_p50_ms: float | None
    lateness_p99_ms: float | None


class QueueRow(BaseModel):
    tenant: str
    pending: int = Field(description="Runs due and not started.")
    running: int


class FailingJob(BaseModel):
    tenant: str
    job_id: str
    failures: int


class OverviewOut(BaseModel):
    """The last hour of runs by their scheduled minute (UTC), as the read model has them."""

    since: str
    until: str
    minutes: list[MinuteCounts]
    lateness_sampled: bool = Field(description="True when only the newest runs were measured.")
    queue: list[QueueRow]
    failing: list[FailingJob]
