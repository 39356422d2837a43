"""Cron previews, health, readiness and Prometheus metrics."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from schedulerstream.api.auth import State, Tenant
from schedulerstream.api.jobs import ERRORS
from schedulerstream.api.schemas import CronInstant, CronNext, in_range
from schedulerstream.errors import ValidationError
from schedulerstream.readmodel import ReadModelUnavailable
from schedulerstream.timing import preview

router = APIRouter()


@router.get("/v1/cron/next", tags=["cron"], responses=ERRORS)
def cron_next(
    _tenant: Tenant,
    expr: Annotated[str, Query(max_length=1000, description="5 or 6 fields, or @daily etc.")],
    tz: Annotated[str, Query(max_length=100)] = "UTC",
    count: Annotated[int, Query(ge=1, le=1000)] = 5,
    after: datetime | None = None,
    dst_gap: Literal["auto", "fire_after", "skip"] = "auto",
    dst_repeat: Literal["auto", "first", "both"] = "auto",
) -> CronNext:
    """The next instants of a cron expression with their local time and DST notes."""
    start = after or datetime.now(UTC)
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    try:
        in_range(start)
    except ValueError as exc:
        raise ValidationError("after", str(exc)) from None
    try:
        entries = preview(expr, tz, start, count, dst_gap, dst_repeat)
    except ValidationError as exc:
        if exc.field == "timezone":
            raise ValidationError("tz", exc.message) from None
        raise ValidationError("expr", f"{exc.field}: {exc.message}") from None
    instants = [
        CronInstant(
            utc=e.utc.strftime("%Y-%m-%dT%H:%M:%SZ"),
            local=e.local.isoformat(timespec="seconds"),
            note=e.note,
        )
        for e in entries
    ]
    return CronNext(expr=expr, timezone=tz, instants=instants)


@router.get("/healthz", tags=["health"])
def healthz() -> dict[str, str]:
    """The process answers."""
    return {"status": "ok"}


@router.get("/readyz", tags=["health"], responses={503: {"description": "Not ready yet."}})
def readyz(state: State) -> JSONResponse:
    """Ready once the tenant records are loaded and the read model answers."""
    problems = []
    if not state.tenants.ready:
        problems.append(
            f"tenants not loaded{': ' + state.tenants.error if state.tenants.error else ''}"
        )
    try:
        state.model.identity()
    except ReadModelUnavailable as exc:
        problems.append(str(exc))
    if problems:
        return JSONResponse({"status": "not ready", "problems": problems}, status_code=503)
    return JSONResponse({"status": "ready"})


@router.get("/metrics", tags=["health"], response_class=PlainTextResponse)
def metrics(state: State) -> PlainTextResponse:
    """Prometheus text exposition (names start ``schedulerstream_``)."""
    return PlainTextResponse(
        generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST
    )
