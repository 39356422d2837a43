"""/v1/jobs: create or replace, read, list, delete, pause, resume, trigger, backfill."""

from __future__ import annotations

import json
import time
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Query, Response
from pydantic import ValidationError as PydanticValidationError

from schedulerstream.api.auth import State, Tenant
from schedulerstream.api.errors import ApiError, not_found
from schedulerstream.api.schemas import (
    BackfillBody,
    BackfillResult,
    DeleteResult,
    JobBody,
    JobOut,
    JobPage,
    PauseBody,
    Problem,
    TriggerBody,
    TriggerResult,
    ValidationProblem,
    WriteResult,
)
from schedulerstream.api.state import ApiState
from schedulerstream.api.views import REDACTED, JobView, job_out_of_row, lookup
from schedulerstream.errors import ValidationError
from schedulerstream.ids import ID_PATTERN, job_key, manual_run_id
from schedulerstream.model import JobDefinition, WorkerTarget, instant_us, topic_refusals
from schedulerstream.sqs_regions import region_refusals
from schedulerstream.timing.spec import schedule_of

MAX_BACKFILL_RUNS = 100_000
JobId = Annotated[str, Path(pattern=ID_PATTERN.pattern, description="The job's id.")]
ERRORS: dict[int | str, dict[str, object]] = {
    401: {"model": Problem, "description": "Missing or invalid API key."},
    404: {"model": Problem, "description": "No such job for this tenant."},
    422: {"model": ValidationProblem, "description": "A field is invalid."},
}
router = APIRouter(prefix="/v1/jobs", tags=["jobs"], responses=ERRORS)


def _now_us() -> int:
    return time.time_ns() // 1000


def _expected_version(if_match: str | None) -> int | None:
    if if_match is None:
        return None
    text = if_match.strip().removeprefix("W/").strip('"')
    if not text.isdigit():
        raise ValidationError("If-Match", "must be the job's version (an integer)")
    return int(text)


def _publish(state: ApiState, job: JobDefinition, current: JobView | None) -> JobDefinition:
    """Produce ``job`` with a version above the current one and remember it."""
    floor = current.version + 1 if current is not None else 0
    versioned = job.with_version(max(_now_us(), floor))
    state.publisher.codec.encode("JobDefinition", versioned.to_avro())  # 422 if unencodable
    state.publisher.put_jobs([versioned])
    state.recent.put(job.tenant, job.job_id, versioned.version or 0, versioned)
    state.metrics.writes.labels("put").inc()
    return versioned


def _check_targets(state: ApiState, job: JobDefinition) -> None:
    """422 for an SQS region no client may be made for, a topic reserved for the deployment
    or Kafka, a pool or topic the tenant's grants leave out, or a new worker pool when the
    cluster holds SCHEDULERSTREAM_MAX_WORK_POOLS (the dispatcher refuses such runs too: this
    says so at once). Only where a definition is given: a pause or resume of a job whose
    grants narrowed since still goes through."""
    refusals = region_refusals(job) + topic_refusals(job, state.settings.topic_prefix)
    if refusals:
        raise ValidationError(*refusals[0])
    grants = state.tenants.grants(job.tenant)
    for field, target in job.targets():
        refused = None if grants is None else grants.refusal(job.tenant, target)
        if refused is not None:
            raise ValidationError(field, refused)
    for field, target in job.targets():
        if isinstance(target, WorkerTarget) and (why := state.pools.refusal(target.pool)):
            raise ValidationError(f"{field}.pool", why)


def live_job(state: ApiState, tenant: str, job_id: str) -> JobView:
    """The tenant's job as the API knows it (the read model, or this instance's own write),
    or 404."""
    view = lookup(state, tenant, job_id)
    if view is None:
        raise not_found("job")
    return view


@router.put("/{job_id}", responses={409: {"model": Problem}})
def put_job(
    job_id: JobId,
    body: JobBody,
    tenant: Tenant,
    state: State,
    response: Response,
    if_match: Annotated[str | None, Header(alias="If-Match")] = None,
) -> WriteResult:
    """Create or replace a job; with If-Match, only if its version is still that one."""
    if body.tenant is not None and body.tenant != tenant:
        raise ValidationError("tenant", "must match the API key's tenant (or be left out)")
    if body.job_id is not None and body.job_id != job_id:
        raise ValidationError("job_id", "must match the job id in the path (or be left out)")
    job = body.definition(tenant, job_id)
    _check_targets(state, job)
    expected = _expected_version(if_match)
    current = lookup(state, tenant, job_id)
    if expected is not None and (current is None or current.version != expected):
        have = "no such job" if current is None else f"the version is {current.version}"
        raise ApiError(409, f"If-Match {expected} does not hold: {have}")
    written = _publish(state, job, current)
    response.headers["ETag"] = f'"{written.version}"'
    return WriteResult(job_id=job_id, version=written.version or 0, paused=written.paused)


@router.get("/{job_id}")
def get_job(job_id: JobId, tenant: Tenant, state: State) -> JobOut:
    """A job with its status: paused, next fire times, last run."""
    return live_job(state, tenant, job_id).out()


@router.get("")
def list_jobs(
    tenant: Tenant,
    state: State,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
) -> JobPage:
    """The tenant's jobs, newest first; pass ``next_cursor`` back as ``cursor``."""
    page = state.model.list_jobs(tenant, cursor, limit)
    return JobPage(items=[job_out_of_row(r) for r in page.items], next_cursor=page.next_cursor)


@router.delete("/{job_id}")
def delete_job(job_id: JobId, tenant: Tenant, state: State) -> DeleteResult:
    """Delete a job: no run starts after the scheduler applies it."""
    view = live_job(state, tenant, job_id)
    state.publisher.delete_job(job_key(tenant, job_id))
    state.recent.put(tenant, job_id, view.version, None)
    state.metrics.writes.labels("delete").inc()
    return DeleteResult(job_id=job_id)


def _set_paused(
    state: ApiState, tenant: str, job_id: str, paused: bool, reason: str | None = None
) -> WriteResult:
    view = live_job(state, tenant, job_id)
    if view.paused == paused and (reason is None or reason == view.definition.get("paused_reason")):
        return WriteResult(job_id=job_id, version=view.version, paused=paused)
    if view.full is not None:
        job = view.full
    elif _redacted(view.definition):
        raise ApiError(
            409,
            "this job's webhook secret is not kept by the API; PUT the full definition "
            f"with paused={str(paused).lower()}",
        )
    else:
        job = stored_definition(view.definition)
    update = {"paused": paused, "paused_reason": reason}  # a resume clears a 410's reason
    written = _publish(state, job.model_copy(update=update), view)
    return WriteResult(job_id=job_id, version=written.version or 0, paused=paused)


@router.post("/{job_id}/pause", responses={409: {"model": Problem}})
def pause_job(
    job_id: JobId, tenant: Tenant, state: State, body: PauseBody | None = None
) -> WriteResult:
    """Stop scheduled runs (manual triggers still run), with an optional reason."""
    return _set_paused(state, tenant, job_id, True, body.reason if body else None)


@router.post("/{job_id}/resume", responses={409: {"model": Problem}})
def resume_job(job_id: JobId, tenant: Tenant, state: State) -> WriteResult:
    """Resume scheduled runs."""
    return _set_paused(state, tenant, job_id, False)


@router.post("/{job_id}/trigger", status_code=202)
def trigger_job(
    job_id: JobId, tenant: Tenant, state: State, body: TriggerBody | None = None
) -> TriggerResult:
    """Run the job now (also while paused); the same request_id never runs twice."""
    body = body or TriggerBody()
    live_job(state, tenant, job_id)
    request_id = body.request_id or uuid.uuid4().hex
    key = job_key(tenant, job_id)
    payload = None if body.payload is None else _json(body.payload)
    state.publisher.command(key, "TriggerNow", {"request_id": request_id, "payload_json": payload})
    state.metrics.writes.labels("trigger").inc()
    return TriggerResult(run_id=manual_run_id(key, request_id), request_id=request_id)


def _json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def count_runs(job: JobDefinition, start_us: int, end_us: int, limit: int) -> int:
    """Instants of ``job`` in ``[start_us, end_us)``; raises past ``limit``."""
    schedule = schedule_of(job.to_avro()["schedule"])
    count, after = 0, start_us - 1
    while True:
        batch = [t for t in schedule.next_n(after, 1000) if t < end_us]
        count += len(batch)
        if count > limit:
            raise ValidationError("end", f"the window holds more than {limit} runs; split it")
        if len(batch) < 1000:
            return count
        after = batch[-1]


@router.post("/{job_id}/backfill", status_code=202)
def backfill_job(job_id: JobId, body: BackfillBody, tenant: Tenant, state: State) -> BackfillResult:
    """Create the runs of the job's schedule in [start, end) (clipped to now)."""
    start_us, end_us = instant_us(body.start), instant_us(body.end)
    if end_us <= start_us:
        raise ValidationError("end", "must be after start")
    view = live_job(state, tenant, job_id)
    job = view.full or stored_definition(_without_secret(view.definition))
    runs = count_runs(job, start_us, min(end_us, _now_us()), MAX_BACKFILL_RUNS)
    request_id = body.request_id or uuid.uuid4().hex
    fields = {"request_id": request_id, "start_us": start_us, "end_us": end_us,
              "rerun": body.rerun}  # fmt: skip
    state.publisher.command(job_key(tenant, job_id), "Backfill", fields)
    state.metrics.writes.labels("backfill").inc()
    return BackfillResult(request_id=request_id, runs=runs)


def stored_definition(definition: dict[str, object]) -> JobDefinition:
    """The read model's JSON definition as a JobDefinition (409 if it no longer validates)."""
    try:
        return JobDefinition.model_validate(definition)
    except PydanticValidationError as exc:
        raise ApiError(
            409,
            f"the stored definition cannot be rebuilt ({exc.error_count()} "
            "problems); PUT the full definition",
        ) from None


def _redacted(definition: dict[str, Any]) -> bool:
    """Whether a webhook secret of the definition (target, notify's target) is redacted."""
    notify = definition.get("notify") or {}
    targets = (definition.get("target") or {}, notify.get("target") or {})
    return any(target.get("secret") == REDACTED for target in targets)


def _without_secret(definition: dict[str, object]) -> dict[str, object]:
    """The definition with redacted secrets dropped (only the schedule is needed)."""
    found = dict(definition)
    target = definition.get("target")
    if isinstance(target, dict) and target.get("secret") == REDACTED:
        found["target"] = {**target, "secret": None}
    notify = definition.get("notify")
    hook = notify.get("target") if isinstance(notify, dict) else None
    if isinstance(notify, dict) and isinstance(hook, dict) and hook.get("secret") == REDACTED:
        found["notify"] = {**notify, "target": {**hook, "secret": None}}
    return found
