"""Request and response bodies (pydantic), as they appear in /openapi.json."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    field_validator,
    model_validator,
)

from schedulerstream.contracts.policies import DeliveryMode, MisfirePolicy, OverlapPolicy
from schedulerstream.errors import ValidationError
from schedulerstream.model import (
    MAX_PAUSE_AFTER_FAILURES,
    MAX_PAUSED_REASON,
    Duration,
    Identifier,
    JobDefinition,
    NotifySpec,
    RetryPolicy,
    ScheduleSpec,
    Target,
)
from schedulerstream.readmodel.base import RUN_STATUSES

FIRST = datetime(1970, 1, 1, tzinfo=UTC)
LAST = datetime(9000, 1, 1, tzinfo=UTC)
RequestId = Annotated[str, Field(pattern=r"^[A-Za-z0-9._:-]{1,128}$")]
RunStatus = Literal[
    "pending", "running", "succeeded", "failed", "timed_out", "cancelled", "skipped",
    "dead_lettered",
]  # fmt: skip
assert set(RUN_STATUSES) == set(RunStatus.__args__)  # type: ignore[attr-defined]


def iso(instant_us: int | None) -> str | None:
    """ISO 8601 UTC text of an epoch-µs instant (None stays None)."""
    if instant_us is None:
        return None
    moment = datetime.fromtimestamp(instant_us / 1_000_000, tz=UTC)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class JobBody(_In):
    """A job definition without ``tenant`` and ``job_id`` (if given they must match the key and
    the path); ``version`` is assigned by the server (use If-Match for optimistic locking)."""

    tenant: Identifier | None = None
    job_id: Identifier | None = None
    schedule: ScheduleSpec
    target: Target
    payload: JsonValue = None
    paused: bool = False
    max_runs: Annotated[int, Field(ge=1)] | None = None
    misfire_policy: MisfirePolicy = "fire_once"
    catch_up_window: Duration = 3600.0
    overlap_policy: OverlapPolicy = "allow"
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    timeout: Annotated[Duration, Field(gt=0)] = 30.0
    delivery: DeliveryMode = "at_least_once"
    paused_reason: Annotated[str, Field(min_length=1, max_length=MAX_PAUSED_REASON)] | None = Field(
        None, description="Why the job is paused (only with paused=true); resume clears it."
    )
    pause_after_failures: Annotated[int, Field(ge=1, le=MAX_PAUSE_AFTER_FAILURES)] | None = Field(
        None,
        description="Pause the job after this many consecutive runs ended dead-lettered, failed "
        "or timed out for good (null: never); a success resets the count.",
    )
    notify: NotifySpec | None = Field(
        None,
        description="Send a notification run to a target of any kind when a run is "
        'dead-lettered or the job is paused by the system: {"on": [...], "target": {...}}.',
    )

    @model_validator(mode="after")
    def _reason_only_when_paused(self) -> JobBody:
        if self.paused_reason is not None and not self.paused:
            raise ValueError("paused_reason is only allowed when paused is true")
        return self

    def definition(self, tenant: str, job_id: str) -> JobDefinition:
        """The full definition; raises ValidationError naming an instant out of range."""
        fields = {name: getattr(self, name) for name in type(self).model_fields}
        for name in ("at", "start_at", "end_at"):
            value = getattr(self.schedule, name)
            if value is not None:
                try:
                    in_range(value)
                except ValueError as exc:
                    raise ValidationError(f"schedule.{name}", str(exc)) from None
        return JobDefinition.model_validate({**fields, "tenant": tenant, "job_id": job_id})


class TriggerBody(_In):
    request_id: RequestId | None = Field(
        None, description="Idempotency key: the same id never makes a second run."
    )
    payload: JsonValue = Field(None, description="Overrides the job's payload for this run.")


class PauseBody(_In):
    reason: Annotated[str, Field(min_length=1, max_length=MAX_PAUSED_REASON)] | None = Field(
        None, description="Why the job is paused (shown with it until resumed)."
    )


class BackfillBody(_In):
    start: AwareDatetime
    end: AwareDatetime
    rerun: bool = Field(False, description="New run ids instead of re-emitting the scheduled ones.")
    request_id: RequestId | None = None

    @field_validator("start", "end")
    @classmethod
    def _in_range(cls, value: datetime) -> datetime:
        return in_range(value)


def in_range(value: datetime) -> datetime:
    """``value`` if it lies in 1970..9000 UTC (ValueError otherwise, also on overflow)."""
    try:
        utc = value.astimezone(UTC)
    except OverflowError:
        utc = None
    if utc is None or not FIRST <= utc <= LAST:
        raise ValueError("must be between 1970-01-01 and 9000-01-01 (UTC)")
    return value


class WriteResult(BaseModel):
    job_id: str
    version: int
    paused: bool


class DeleteResult(BaseModel):
    job_id: str
    deleted: bool = True


class LastRun(BaseModel):
    run_id: str
    status: str
    scheduled_at: str | None


class JobOut(BaseModel):
    """A job: its definition (webhook secrets redacted) and status."""

    job_id: str
    version: int
    paused: bool
    paused_reason: str | None = Field(
        None,
        description="Why the job is paused, when known: e.g. the scheduler paused it because "
        "its webhook answered HTTP 410. Cleared by resume or any newer definition.",
    )
    deleted: bool
    projection: Literal["current", "pending"] = Field(
        description="'pending': written through this API but not yet in the read model."
    )
    next_fire_at: list[str]
    last_run: LastRun | None
    created_at: str | None
    updated_at: str | None
    definition: dict[str, Any]


class JobPage(BaseModel):
    items: list[JobOut]
    next_cursor: str | None


class RunOut(BaseModel):
    run_id: str
    job_id: str
    trigger: str
    status: RunStatus
    scheduled_at: str | None
    started_at: str | None
    finished_at: str | None
    attempt_count: int
    last_error: str | None
    updated_at: str | None


class RunPage(BaseModel):
    items: list[RunOut]
    next_cursor: str | None


class AttemptOut(BaseModel):
    attempt: int
    kind: str
    at: str | None
    reason: str | None
    status_code: int | None
    retry_at: str | None
    duration_ms: float | None
    count: int


class RunDetailOut(RunOut):
    attempts: list[AttemptOut]


class TriggerResult(BaseModel):
    run_id: str
    request_id: str


class BackfillResult(BaseModel):
    request_id: str
    runs: int = Field(description="Runs the backfill will create (instants up to now).")


class CancelResult(BaseModel):
    run_id: str
    cancel_requested: bool = True


class CronInstant(BaseModel):
    utc: str
    local: str
    note: str
    expressions: list[str] = Field(description="The expressions that fire at this instant.")


class CronNext(BaseModel):
    expr: str
    timezone: str
    instants: list[CronInstant]
    or_: list[str] = Field(default_factory=list, alias="or", description="The other expressions.")
    exclude: list[str] = Field(
        default_factory=list, description="Local dates and FROM..TO ranges without fires."
    )

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)


class FieldError(BaseModel):
    field: str
    message: str


class ValidationProblem(BaseModel):
    detail: list[FieldError]


class Problem(BaseModel):
    detail: str
