"""/v1/jobs/{job_id}/runs, /v1/runs/{run_id} and cancel (run ids are URL-encoded)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from schedulerstream.api.auth import State, Tenant
from schedulerstream.api.errors import ApiError, not_found
from schedulerstream.api.jobs import ERRORS, JobId
from schedulerstream.api.schemas import CancelResult, Problem, RunDetailOut, RunPage, RunStatus
from schedulerstream.api.state import ApiState
from schedulerstream.api.views import lookup, run_detail_out, run_out
from schedulerstream.errors import ValidationError
from schedulerstream.ids import job_key_of_run
from schedulerstream.readmodel import RunDetail

FINISHED = ("succeeded", "failed", "timed_out", "cancelled", "skipped", "dead_lettered")
router = APIRouter(tags=["runs"], responses=ERRORS)


@router.get("/v1/jobs/{job_id}/runs")
def list_runs(
    job_id: JobId,
    tenant: Tenant,
    state: State,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    status: RunStatus | None = None,
) -> RunPage:
    """The job's runs, newest first."""
    if lookup(state, tenant, job_id) is None and state.model.get_job(tenant, job_id) is None:
        raise not_found("job")
    page = state.model.list_runs(tenant, job_id, cursor, limit, status)
    return RunPage(items=[run_out(r) for r in page.items], next_cursor=page.next_cursor)


def _run(state: ApiState, tenant: str, run_id: str) -> RunDetail:
    """The tenant's run, or 404 (also for a malformed id or another tenant's run)."""
    try:
        key = job_key_of_run(run_id)
    except ValidationError:
        raise not_found("run") from None
    if not key.startswith(f"{tenant}/") or not run_id.isprintable():
        raise not_found("run")
    detail = state.model.get_run(tenant, run_id)
    if detail is None:
        raise not_found("run")
    return detail


@router.get("/v1/runs/{run_id:path}")
def get_run(run_id: str, tenant: Tenant, state: State) -> RunDetailOut:
    """One run with its attempt events."""
    return run_detail_out(_run(state, tenant, run_id))


@router.post("/v1/runs/{run_id:path}/cancel", status_code=202, responses={409: {"model": Problem}})
def cancel_run(run_id: str, tenant: Tenant, state: State) -> CancelResult:
    """Ask the dispatcher to cancel a run that has not finished."""
    detail = _run(state, tenant, run_id)
    if detail.run.status in FINISHED:
        raise ApiError(409, f"run already {detail.run.status}")
    state.publisher.cancel_run(run_id)
    state.metrics.writes.labels("cancel").inc()
    return CancelResult(run_id=run_id)
