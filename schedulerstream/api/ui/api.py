"""/v1/console: the reads the web console needs beyond /v1 (searching, every tenant for the
operator, next instants with DST notes, a backfill's size before it is sent, the overview).
The console's writes use /v1 itself with the tenant's key."""

from __future__ import annotations

import time
from collections import defaultdict
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import AwareDatetime
from pydantic import ValidationError as PydanticValidationError

from schedulerstream.api.auth import State
from schedulerstream.api.errors import not_found
from schedulerstream.api.jobs import ERRORS, MAX_BACKFILL_RUNS, JobId, count_runs, live_job
from schedulerstream.api.schemas import RunDetailOut, RunPage, RunStatus, in_range, iso
from schedulerstream.api.ui.describe import in_words, status_of, upcoming
from schedulerstream.api.ui.models import (
    BackfillPreview,
    FailingJob,
    JobDetail,
    JobStatus,
    JobSummary,
    JobSummaryPage,
    LastRunSummary,
    MinuteCounts,
    OverviewOut,
    QueueRow,
    Session,
)
from schedulerstream.api.ui.viewer import ViewerDep
from schedulerstream.api.views import REDACTED, JobView, lookup, run_detail_out, run_out
from schedulerstream.errors import ValidationError
from schedulerstream.ids import ID_PATTERN, job_key_of_run
from schedulerstream.model import JobDefinition, instant_us
from schedulerstream.readmodel import JobRow, RunRow

MINUTE_US = 60_000_000
WINDOW_MINUTES = 60
TenantParam = Annotated[
    str | None,
    Query(pattern=ID_PATTERN.pattern, description="The tenant (operator key; a tenant key's own)."),
]
router = APIRouter(prefix="/v1/console", tags=["console"], responses=ERRORS)


def _now_us() -> int:
    return time.time_ns() // 1000


@router.get("/session")
def session(viewer: ViewerDep, state: State) -> Session:
    """Who the key signs in as, and which tenants it sees."""
    tenants = state.tenants.names() if viewer.operator else [str(viewer.tenant)]
    return Session(tenant=viewer.tenant, operator=viewer.operator, tenants=tenants)


def _summary(row: JobRow, runs: dict[str, RunRow]) -> JobSummary:
    words, expression = in_words(row.definition.get("schedule", {}))
    last = None
    if row.last_run_id is not None:
        run = runs.get(row.last_run_id)
        late = None
        if run is not None and run.started_at_us is not None:
            late = (run.started_at_us - run.scheduled_at_us) / 1000
        last = LastRunSummary(
            run_id=run.run_id if run else row.last_run_id,
            status=run.status if run else row.last_run_status or "pending",
            scheduled_at=iso(run.scheduled_at_us if run else row.last_run_at_us),
            lateness_ms=late,
        )
    return JobSummary(
        tenant=row.tenant,
        job_id=row.job_id,
        schedule=words,
        expression=expression,
        timezone=str(row.definition.get("schedule", {}).get("timezone", "UTC")),
        next_fire_at=iso(row.next_fire_at_us[0]) if row.next_fire_at_us else None,
        status=status_of(row.paused, row.next_fire_at_us),
        paused_reason=row.definition.get("paused_reason") if row.paused else None,
        last_run=last,
    )


@router.get("/jobs")
def search_jobs(
    viewer: ViewerDep,
    state: State,
    tenant: TenantParam = None,
    q: Annotated[str, Query(max_length=200, description="Part of the job id.")] = "",
    status: JobStatus | None = None,
    cursor: Annotated[str | None, Query(max_length=1000)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 25,
) -> JobSummaryPage:
    """Jobs whose id contains ``q``, newest first, filtered by status."""
    scope = viewer.scope(tenant)
    page = state.model.console(lambda m: m.search_jobs(scope, q, status, cursor, limit))
    ids = [r.last_run_id for r in page.items if r.last_run_id is not None]
    runs = state.model.console(lambda m: m.runs_by_id(ids))
    now = _now_us()
    for row in page.items:  # a run emitted ahead of its time: show the one before it
        ahead = runs.get(row.last_run_id or "")
        if ahead is not None and ahead.status == "pending" and ahead.scheduled_at_us > now:
            previous = state.model.list_runs(row.tenant, row.job_id, None, 2, None).items
            if len(previous) == 2:
                runs[ahead.run_id] = previous[1]
    return JobSummaryPage(
        items=[_summary(r, runs) for r in page.items], next_cursor=page.next_cursor
    )


def _definition(view: JobView) -> JobDefinition | None:
    """The job's definition for its schedule (None if the stored one no longer validates)."""
    if view.full is not None:
        return view.full
    data: dict[str, Any] = dict(view.definition)
    target = data.get("target")
    if isinstance(target, dict) and target.get("secret") == REDACTED:
        data["target"] = {**target, "secret": None}
    try:
        return JobDefinition.model_validate(data)
    except PydanticValidationError:
        return None


@router.get("/jobs/{job_id}")
def job_detail(
    job_id: JobId,
    viewer: ViewerDep,
    state: State,
    tenant: TenantParam = None,
    count: Annotated[int, Query(ge=1, le=100)] = 20,
) -> JobDetail:
    """A job with its next ``count`` instants in its zone and their DST notes."""
    owner = viewer.one(tenant)
    view = live_job(state, owner, job_id)
    out = view.out()
    job = _definition(view)
    schedule = view.definition.get("schedule", {})
    words, expression = in_words(schedule)
    return JobDetail(
        tenant=owner,
        status=status_of(view.paused, out.next_fire_at),
        schedule=words,
        expression=expression,
        timezone=str(schedule.get("timezone", "UTC")),
        job=out,
        upcoming=[] if job is None else upcoming(job, _now_us(), count),
    )


@router.get("/jobs/{job_id}/runs")
def job_runs(
    job_id: JobId,
    viewer: ViewerDep,
    state: State,
    tenant: TenantParam = None,
    cursor: Annotated[str | None, Query(max_length=1000)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 20,
    status: RunStatus | None = None,
) -> RunPage:
    """The job's runs, newest first (also of a deleted job)."""
    owner = viewer.one(tenant)
    if lookup(state, owner, job_id) is None and state.model.get_job(owner, job_id) is None:
        raise not_found("job")
    page = state.model.list_runs(owner, job_id, cursor, limit, status)
    return RunPage(items=[run_out(r) for r in page.items], next_cursor=page.next_cursor)


@router.get("/jobs/{job_id}/backfill-preview")
def backfill_preview(
    job_id: JobId,
    start: AwareDatetime,
    end: AwareDatetime,
    viewer: ViewerDep,
    state: State,
    tenant: TenantParam = None,
) -> BackfillPreview:
    """How many runs a backfill of [start, end) would create, before asking for it."""
    for name, value in (("start", start), ("end", end)):
        try:
            in_range(value)
        except ValueError as exc:
            raise ValidationError(name, str(exc)) from None
    start_us, end_us = instant_us(start), instant_us(end)
    if end_us <= start_us:
        raise ValidationError("end", "must be after start")
    job = _definition(live_job(state, viewer.one(tenant), job_id))
    if job is None:
        raise ValidationError("job_id", "the stored definition cannot be rebuilt")
    return BackfillPreview(
        runs=count_runs(job, start_us, min(end_us, _now_us()), MAX_BACKFILL_RUNS)
    )


@router.get("/runs/{run_id:path}")
def run_detail(run_id: str, viewer: ViewerDep, state: State) -> RunDetailOut:
    """One run with its attempts (the tenant comes from the run id)."""
    try:
        owner = job_key_of_run(run_id).partition("/")[0]
    except ValidationError:
        raise not_found("run") from None
    if not run_id.isprintable() or viewer.tenant not in (None, owner):
        raise not_found("run")
    detail = state.model.get_run(owner, run_id)
    if detail is None:
        raise not_found("run")
    return run_detail_out(detail)


def _percentile(values: list[int], share: float) -> float:
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, int(-(-share * len(ordered) // 1)) - 1))
    return ordered[index] / 1000


@router.get("/overview")
def overview(viewer: ViewerDep, state: State, tenant: TenantParam = None) -> OverviewOut:
    """The last hour: runs per minute by status, dispatch lateness p50/p99 per minute, the
    queue per tenant, and the jobs failing most."""
    scope = viewer.scope(tenant)
    now = _now_us()
    first = now // MINUTE_US - WINDOW_MINUTES + 1
    data = state.model.console(lambda m: m.overview(scope, first * MINUTE_US, now))
    counts: dict[int, dict[str, int]] = defaultdict(dict)
    for minute, status, runs in data.counts:
        counts[minute][status] = runs
    late: dict[int, list[int]] = defaultdict(list)
    for scheduled, started in data.lateness:
        late[scheduled // MINUTE_US].append(started - scheduled)
    minutes = []
    for minute in range(first, first + WINDOW_MINUTES):
        samples = late.get(minute, [])
        minutes.append(
            MinuteCounts(
                minute=_minute(minute),
                counts=counts.get(minute, {}),
                lateness_p50_ms=_percentile(samples, 0.5) if samples else None,
                lateness_p99_ms=_percentile(samples, 0.99) if samples else None,
            )
        )
    queue: dict[str, dict[str, int]] = defaultdict(lambda: {"pending": 0, "running": 0})
    for owner, status, runs in data.queue:
        queue[owner][status] = runs
    return OverviewOut(
        since=_minute(first),
        until=iso(now) or "",
        minutes=minutes,
        lateness_sampled=data.lateness_capped,
        queue=[QueueRow(tenant=t, **q) for t, q in sorted(queue.items())],
        failing=[FailingJob(tenant=t, job_id=j, failures=n) for t, j, n in data.failing],
    )


def _minute(minute: int) -> str:
    return datetime.fromtimestamp(minute * 60, tz=UTC).strftime("%Y-%m-%dT%H:%MZ")
