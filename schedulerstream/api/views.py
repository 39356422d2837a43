"""A job as the API sees it: the read model's row, or this instance's newer write (pending)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from schedulerstream.api.schemas import AttemptOut, JobOut, LastRun, RunDetailOut, RunOut, iso
from schedulerstream.api.state import ApiState
from schedulerstream.model import JobDefinition
from schedulerstream.readmodel import JobRow, RunDetail, RunRow
from schedulerstream.timing.spec import schedule_of

REDACTED = "redacted"
NEXT_FIRES = 3


def public_definition(job: JobDefinition) -> dict[str, Any]:
    """The definition as JSON with the webhook secrets (target, notify's target) redacted (as
    the read model keeps it)."""
    data: dict[str, Any] = job.model_dump(mode="json")
    for target in (data["target"], (data.get("notify") or {}).get("target") or {}):
        if target.get("secret") is not None:
            target["secret"] = REDACTED
    return data


def next_fires(job: JobDefinition, count: int = NEXT_FIRES) -> list[int]:
    schedule = schedule_of(job.to_avro()["schedule"])
    return schedule.next_n(time.time_ns() // 1000, count)


@dataclass(frozen=True)
class JobView:
    """The newest known state of a live job; ``full`` holds the unredacted definition when
    this instance wrote it recently."""

    job_id: str
    version: int
    definition: dict[str, Any]
    paused: bool
    pending: bool
    row: JobRow | None
    full: JobDefinition | None

    def out(self) -> JobOut:
        row = self.row if not self.pending else None
        fires = row.next_fire_at_us if row is not None else _fires_of(self.full)
        last = None
        if row is not None and row.last_run_id is not None:
            last = LastRun(
                run_id=row.last_run_id,
                status=row.last_run_status or "pending",
                scheduled_at=iso(row.last_run_at_us),
            )
        return JobOut(
            job_id=self.job_id,
            version=self.version,
            paused=self.paused,
            paused_reason=self.definition.get("paused_reason") if self.paused else None,
            deleted=False,
            projection="pending" if self.pending else "current",
            next_fire_at=[t for t in (iso(f) for f in fires) if t is not None],
            last_run=last,
            created_at=iso(row.created_at_us) if row is not None else None,
            updated_at=iso(row.updated_at_us) if row is not None else None,
            definition=self.definition,
        )


def _fires_of(job: JobDefinition | None) -> list[int]:
    return [] if job is None or job.paused else next_fires(job)


def lookup(state: ApiState, tenant: str, job_id: str) -> JobView | None:
    """The live job ``tenant/job_id`` (None if unknown or deleted, here or in the read model)."""
    row = state.model.get_job(tenant, job_id)
    recent = state.recent.get(tenant, job_id)
    if recent is not None and (row is None or recent.version > row.version):
        if recent.job is None:
            return None
        return JobView(
            job_id, recent.version, public_definition(recent.job), recent.job.paused, True,
            row, recent.job,
        )  # fmt: skip
    if row is None or row.deleted:
        return None
    if recent is not None and recent.job is None and recent.version == row.version:
        return None  # deleted here, the tombstone not projected yet
    full = recent.job if recent is not None and recent.version == row.version else None
    return JobView(job_id, row.version, row.definition, row.paused, False, row, full)


def job_out_of_row(row: JobRow) -> JobOut:
    return JobView(row.job_id, row.version, row.definition, row.paused, False, row, None).out()


def run_out(row: RunRow) -> RunOut:
    return RunOut(
        run_id=row.run_id,
        job_id=row.job_id,
        trigger=row.trigger,
        status=row.status,
        scheduled_at=iso(row.scheduled_at_us),
        started_at=iso(row.started_at_us),
        finished_at=iso(row.finished_at_us),
        attempt_count=row.attempts,
        last_error=row.last_error,
        updated_at=iso(row.updated_at_us),
    )


def run_detail_out(detail: RunDetail) -> RunDetailOut:
    attempts = [
        AttemptOut(
            attempt=a.attempt,
            kind=a.kind,
            at=iso(a.at_us),
            reason=a.reason,
            status_code=a.status_code,
            retry_at=iso(a.retry_at_us),
            duration_ms=None if a.duration_us is None else a.duration_us / 1000,
            count=a.count,
        )
        for a in detail.attempts
    ]
    return RunDetailOut(**run_out(detail.run).model_dump(), attempts=attempts)
