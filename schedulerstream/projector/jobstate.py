"""The projected state of one job: its definition (from cron.schedules) and a summary of its
runs (count, newest run, retention floor, latest scheduled instant seen)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from schedulerstream.jsontext import compact, compact_sorted
from schedulerstream.model import JobDefinition
from schedulerstream.readmodel import JobRow
from schedulerstream.timing.spec import schedule_of

REDACTED = "redacted"


def public_definition(job: JobDefinition) -> dict[str, Any]:
    """The job as users write it (JSON), with the webhook secrets (target, notify's target)
    redacted."""
    data: dict[str, Any] = job.model_dump(mode="json")
    for target in (data["target"], (data.get("notify") or {}).get("target") or {}):
        if target.get("secret") is not None:
            target["secret"] = REDACTED
    return data


@dataclass
class JobDef:
    """The latest accepted definition; a tombstone keeps it with ``deleted=True``."""

    version: int
    definition: dict[str, Any]
    spec: dict[str, Any]  # the Avro ScheduleSpec, for next fire times
    paused: bool
    deleted: bool
    created_at: int
    updated_at: int

    @classmethod
    def accept(cls, old: JobDef | None, job: JobDefinition, stamp_us: int) -> JobDef | None:
        """The new state for an upsert, or None when ``job`` is not newer than ``old``."""
        assert job.version is not None
        live = old is not None and not old.deleted
        if old is not None and live and job.version <= old.version:
            return None
        created = old.created_at if old is not None and live else stamp_us
        return cls(
            version=job.version,
            definition=public_definition(job),
            spec=job.to_avro()["schedule"],
            paused=job.paused,
            deleted=False,
            created_at=created,
            updated_at=stamp_us,
        )

    def delete(self, stamp_us: int) -> JobDef | None:
        """The state after a tombstone (None if already deleted)."""
        if self.deleted:
            return None
        return JobDef(
            self.version, self.definition, self.spec, self.paused, True, self.created_at, stamp_us
        )

    def encode(self) -> bytes:
        return compact_sorted(vars(self)).encode()

    @classmethod
    def decode(cls, data: bytes) -> JobDef:
        return cls(**json.loads(data))


@dataclass
class JobRuns:
    """What the projector keeps about a job's runs: how many, the newest, the retention floor
    (newest pruned run: older ones are ignored) and the latest scheduled instant fired."""

    count: int = 0
    last: list[Any] | None = None  # [scheduled_at, run_id, status]
    floor: list[Any] | None = None  # [scheduled_at, run_id]
    fired: int | None = None

    def encode(self) -> bytes:
        return compact(vars(self)).encode()

    @classmethod
    def decode(cls, data: bytes) -> JobRuns:
        return cls(**json.loads(data))

    def below_floor(self, order: tuple[int, str]) -> bool:
        return self.floor is not None and list(order) <= self.floor


def next_fires(job: JobDef, runs: JobRuns, count: int) -> list[int]:
    """The next ``count`` instants after the later of the last instant fired and the last
    definition change (the scheduler's rule); none when paused or deleted."""
    if job.paused or job.deleted or count <= 0:
        return []
    after = job.updated_at if runs.fired is None else max(runs.fired, job.updated_at)
    return schedule_of(job.spec).next_n(after, count)


def job_row(tenant: str, job_id: str, job: JobDef, runs: JobRuns, fires: int) -> JobRow:
    last = runs.last or [None, None, None]
    return JobRow(
        tenant=tenant,
        job_id=job_id,
        version=job.version,
        definition=job.definition,
        paused=job.paused,
        deleted=job.deleted,
        next_fire_at_us=next_fires(job, runs, fires),
        last_run_id=last[1],
        last_run_status=last[2],
        last_run_at_us=last[0],
        created_at_us=job.created_at,
        updated_at_us=job.updated_at,
    )
