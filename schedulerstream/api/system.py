"""Cron previews, health, readiness and Prometheus metrics."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from schedulerstream.api.auth import State, Tenant
from schedulerstream.api.jobs import ERRORS
from schedulerstream.api.schemas import CronInstant, CronNext, in_range
from schedulerstream.contracts.policies import DstGap, DstRepeat
from schedulerstream.errors import ValidationError
from schedulerstream.model import MAX_CRON_EXPRESSIONS, MAX_EXCLUDED_DATES
from schedulerstream.readmodel import ReadModelUnavailable
from schedulerstream.timing import parse_fields, preview
from schedulerstream.timing.combine import parse_excluded

router = APIRouter()


@router.get("/v1/cron/next", tags=["cron"], responses=ERRORS)
def cron_next(
    _tenant: Tenant,
    expr: Annotated[str, Query(max_length=1000, description="5 or 6 fields, or @daily etc.")],
    tz: Annotated[str, Query(max_length=100)] = "UTC",
    count: Annotated[int, Query(ge=1, le=1000)] = 5,
    after: datetime | None = None,
    dst_gap: DstGap = "auto",
    dst_repeat: DstRepeat = "auto",
    more: Annotated[
        list[str],
        Query(
            alias="or",
            max_length=MAX_CRON_EXPRESSIONS - 1,
            description="Another expression (repeat the parameter): the union of the instants.",
        ),
    ] = [],  # noqa: B006 (FastAPI copies query defaults)
    exclude: Annotated[
        list[str],
        Query(
            max_length=MAX_EXCLUDED_DATES,
            description="A local date YYYY-MM-DD or range FROM..TO without fires (repeatable).",
        ),
    ] = [],  # noqa: B006
) -> CronNext:
    """The next instants of a cron expression (or several: ``or``) without ``exclude``d local
    dates, with their local time and DST notes."""
    start = after or datetime.now(UTC)
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    try:
        in_range(start)
    except ValueError as exc:
        raise ValidationError("after", str(exc)) from None
    texts = [expr, *more]
    for index, text in enumerate(texts):
        try:
            parse_fields(text)
        except ValidationError as exc:
            where = "expr" if index == 0 else f"or.{index - 1}"
            raise ValidationError(where, f"{exc.field}: {exc.message}") from None
    excluded = []
    for index, text in enumerate(exclude):
        try:
            excluded.append(parse_excluded(text))
        except ValidationError as exc:
            raise ValidationError(f"exclude.{index}", exc.message) from None
    try:
        entries = preview(texts, tz, start, count, dst_gap, dst_repeat, excluded)
    except ValidationError as exc:
        if exc.field == "timezone":
            raise ValidationError("tz", exc.message) from None
        raise ValidationError("expr", f"{exc.field}: {exc.message}") from None
    instants = [
        CronInstant(
            utc=e.utc.strftime("%Y-%m-%dT%H:%M:%SZ"),
            local=e.local.isoformat(timespec="seconds"),
            note=e.note,
            expressions=[texts[i] for i in e.sources],
        )
        for e in entries
    ]
    return CronNext(expr=expr, timezone=tz, instants=instants, or_=more, exclude=exclude)


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
