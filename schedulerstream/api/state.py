"""Everything one API process shares: settings, the read model (one connection, serialized),
the publisher, the tenant view, recent writes and metrics."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from schedulerstream.api.pools import ClusterPools
from schedulerstream.api.recent import RecentWrites
from schedulerstream.publish import Publisher
from schedulerstream.readmodel import JobRow, Page, ReadModel, RunDetail, RunRow
from schedulerstream.readmodel.console import ConsoleQueries
from schedulerstream.settings import Settings
from schedulerstream.tenants import TenantView

T = TypeVar("T")


class LockedReadModel:
    """Serializes calls on one read-model connection across the server's worker threads."""

    def __init__(self, model: ReadModel) -> None:
        self._model = model
        self._lock = threading.Lock()

    def get_job(self, tenant: str, job_id: str) -> JobRow | None:
        with self._lock:
            return self._model.get_job(tenant, job_id)

    def list_jobs(self, tenant: str, cursor: str | None, limit: int) -> Page[JobRow]:
        with self._lock:
            return self._model.list_jobs(tenant, cursor, limit)

    def list_runs(
        self, tenant: str, job_id: str, cursor: str | None, limit: int, status: str | None
    ) -> Page[RunRow]:
        with self._lock:
            return self._model.list_runs(tenant, job_id, cursor, limit, status)

    def get_run(self, tenant: str, run_id: str) -> RunDetail | None:
        with self._lock:
            return self._model.get_run(tenant, run_id)

    def console(self, query: Callable[[ConsoleQueries], T]) -> T:
        """Run one of the web console's queries (readmodel/console.py)."""
        if not isinstance(self._model, ConsoleQueries):
            raise TypeError(f"{type(self._model).__name__} has no console queries")
        with self._lock:
            return query(self._model)

    def identity(self) -> str:
        with self._lock:
            return self._model.identity()

    def close(self) -> None:
        with self._lock:
            self._model.close()


class Metrics:
    """The API's own Prometheus metrics, in a registry of its own."""

    def __init__(self, tenants: TenantView) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "schedulerstream_api_requests_total",
            "HTTP requests by method, route and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "schedulerstream_api_request_duration_seconds",
            "Time to answer a request.",
            ["route"],
            registry=self.registry,
        )
        self.writes = Counter(
            "schedulerstream_api_writes_total",
            "Events produced by the API, by kind.",
            ["kind"],
            registry=self.registry,
        )
        tenant_gauge = Gauge(
            "schedulerstream_api_tenants", "Tenants materialized.", registry=self.registry
        )
        tenant_gauge.set_function(lambda: float(tenants.count()))


@dataclass
class ApiState:
    settings: Settings
    model: LockedReadModel
    publisher: Publisher
    tenants: TenantView
    recent: RecentWrites
    metrics: Metrics
    pools: ClusterPools
