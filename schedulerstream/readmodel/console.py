"""Read-model queries of the web console: job search, and the overview's aggregates.

A ``tenant`` of None means every tenant (the console's operator key). Overview queries are
bounded by ``scheduled_at_us`` so they use the runs' (tenant, scheduled_at_us) index.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from schedulerstream.readmodel.base import (
    JobRow,
    Page,
    RunRow,
    check_limit,
    decode_cursor,
    encode_cursor,
)

JobStatus = Literal["active", "paused", "ended"]
FAILED = ("failed", "timed_out", "dead_lettered")
MAX_LATENESS_SAMPLES = 20_000
_STATUS_SQL = {
    "active": "paused = ? AND CAST(next_fire_at_us AS TEXT) <> '[]'",
    "paused": "paused = ?",
    "ended": "paused = ? AND CAST(next_fire_at_us AS TEXT) = '[]'",
}
_STATUS_PARAM = {"active": False, "paused": True, "ended": False}


@dataclass(frozen=True, slots=True)
class Overview:
    """Runs scheduled since an instant: counts by minute and status, lateness samples
    (scheduled, started; backfills left out), the queue, and the jobs failing most."""

    counts: list[tuple[int, str, int]]  # (minute since the epoch, status, runs)
    lateness: list[tuple[int, int]]  # (scheduled_at_us, started_at_us), newest first
    lateness_capped: bool
    queue: list[tuple[str, str, int]]  # (tenant, "pending" | "running", runs)
    failing: list[tuple[str, str, int]]  # (tenant, job_id, failed runs)


def _tenant_clause(tenant: str | None) -> tuple[list[str], list[Any]]:
    return (["tenant = ?"], [tenant]) if tenant is not None else ([], [])


def _like(text: str) -> str:
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class ConsoleQueries(ABC):
    """The console's queries over a backend's ``_query`` (mixed into SqlReadModel)."""

    @abstractmethod
    def _query(self, sql: str, params: Sequence[Any]) -> list[Sequence[Any]]: ...

    @abstractmethod
    def _select_jobs(self, where: str, params: Sequence[Any]) -> list[JobRow]:
        """Jobs matching ``where`` (which may end with ORDER BY and LIMIT)."""

    @abstractmethod
    def _select_runs(self, where: str, params: Sequence[Any]) -> list[RunRow]:
        """Runs matching ``where``."""

    def search_jobs(
        self,
        tenant: str | None,
        text: str = "",
        status: JobStatus | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> Page[JobRow]:
        """Live jobs whose id contains ``text`` (any case), newest first, of one status."""
        where, params = _tenant_clause(tenant)
        where.append("deleted = ?")
        params.append(False)
        if text:
            where.append("LOWER(job_id) LIKE ? ESCAPE '\\'")
            params.append(_like(text))
        if status is not None:
            where.append(_STATUS_SQL[status])
            params.append(_STATUS_PARAM[status])
        if cursor is not None:
            created, owner, job_id = decode_cursor(cursor, (int, str, str))
            where.append("(created_at_us, tenant, job_id) < (?, ?, ?)")
            params += [created, owner, job_id]
        rows = self._select_jobs(
            f"{' AND '.join(where)} ORDER BY created_at_us DESC, tenant DESC, job_id DESC LIMIT ?",
            [*params, check_limit(limit) + 1],
        )
        jobs = rows[:limit]
        last = jobs[-1] if len(rows) > limit else None
        following = None if last is None else encode_cursor(last.created_at_us, last.tenant,
                                                            last.job_id)  # fmt: skip
        return Page(jobs, following)

    def runs_by_id(self, run_ids: Sequence[str]) -> dict[str, RunRow]:
        """The runs of ``run_ids`` that exist (at most 1000 ids)."""
        ids = list(dict.fromkeys(run_ids))[:1000]
        if not ids:
            return {}
        marks = ", ".join("?" for _ in ids)
        return {r.run_id: r for r in self._select_runs(f"run_id IN ({marks})", ids)}

    def overview(self, tenant: str | None, since_us: int, now_us: int) -> Overview:
        """What the console's overview shows for runs scheduled in [since_us, now_us]."""
        where, params = _tenant_clause(tenant)
        where.append("scheduled_at_us >= ?")
        params.append(since_us)
        scope = " AND ".join(where)
        counts = self._query(
            f"SELECT scheduled_at_us / 60000000, status, COUNT(*) FROM runs WHERE {scope}"
            " GROUP BY scheduled_at_us / 60000000, status",
            params,
        )
        lateness = self._query(
            f"SELECT scheduled_at_us, started_at_us FROM runs WHERE {scope}"
            " AND started_at_us IS NOT NULL AND \"trigger\" <> 'backfill'"
            " ORDER BY scheduled_at_us DESC LIMIT ?",
            [*params, MAX_LATENESS_SAMPLES + 1],
        )
        queue = self._query(
            f"SELECT tenant, status, COUNT(*) FROM runs WHERE {scope}"
            " AND scheduled_at_us <= ? AND status IN ('pending', 'running')"
            " GROUP BY tenant, status ORDER BY tenant, status",
            [*params, now_us],
        )
        failing = self._query(
            f"SELECT tenant, job_id, COUNT(*) FROM runs WHERE {scope}"
            f" AND status IN ({', '.join(repr(s) for s in FAILED)})"
            " GROUP BY tenant, job_id ORDER BY COUNT(*) DESC, tenant, job_id LIMIT 10",
            params,
        )
        return Overview(
            counts=[(int(m), str(s), int(n)) for m, s, n in counts],
            lateness=[(int(a), int(b)) for a, b in lateness[:MAX_LATENESS_SAMPLES]],
            lateness_capped=len(lateness) > MAX_LATENESS_SAMPLES,
            queue=[(str(t), str(s), int(n)) for t, s, n in queue],
            failing=[(str(t), str(j), int(n)) for t, j, n in failing],
        )
