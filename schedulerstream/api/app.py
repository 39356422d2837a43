"""The FastAPI application factory."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request, Response

from schedulerstream.api import content, errors, jobs, runs, system, ui
from schedulerstream.api.pools import ClusterPools
from schedulerstream.api.recent import RecentWrites
from schedulerstream.api.state import ApiState, LockedReadModel, Metrics
from schedulerstream.publish import Publisher
from schedulerstream.readmodel import ReadModel, open_read_model
from schedulerstream.settings import Settings, load_settings
from schedulerstream.tenants import TenantView

Next = Callable[[Request], Awaitable[Response]]


def create_app(
    settings: Settings,
    *,
    read_model: ReadModel | None = None,
    publisher: Publisher | None = None,
    tenants: TenantView | None = None,
) -> FastAPI:
    """The API for ``settings``; parts not given are opened here and closed at shutdown."""
    owned_view = tenants is None
    view = tenants or TenantView(settings)
    model = LockedReadModel(read_model or open_read_model(settings))
    metrics = Metrics(view)
    publisher = publisher or Publisher(settings)
    pools = ClusterPools(settings, publisher.topic_names)
    state = ApiState(settings, model, publisher, view, RecentWrites(), metrics, pools)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if owned_view:
            view.start()
        try:
            yield
        finally:
            if owned_view:
                view.stop()
            if read_model is None:
                model.close()

    app = FastAPI(
        title="schedulerstream",
        version="1",
        description="A multi-tenant distributed cron scheduler on Apache Kafka.",
        lifespan=lifespan,
        dependencies=[content.require_json_body],  # a 415 for a body not sent as JSON
    )
    app.state.api = state
    errors.install(app)
    app.include_router(jobs.router)
    app.include_router(runs.router)
    app.include_router(system.router)
    app.include_router(ui.router)
    ui.install(app)
    content.document(app)

    @app.middleware("http")
    async def count(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        started = time.monotonic()
        response = await call_next(request)
        route = getattr(request.scope.get("route"), "path", "unmatched")
        metrics.requests.labels(request.method, route, str(response.status_code)).inc()
        metrics.latency.labels(route).observe(time.monotonic() - started)
        return response

    return app


def from_environment() -> FastAPI:
    """The app for ``SCHEDULERSTREAM_*`` settings (``uvicorn --factory`` entry point)."""
    return create_app(load_settings())
