"""JobPlan: what the timer loop needs of a job definition, built once per (job, version)."""

from __future__ import annotations

import functools
import itertools
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from schedulerstream.dispatch_spec import spec_of_definition
from schedulerstream.ids import scheduled_run_id
from schedulerstream.scheduler.records import RunParts, run_parts
from schedulerstream.scheduler.state import definition_ref
from schedulerstream.timing import Schedule
from schedulerstream.timing.at import AtSchedule
from schedulerstream.timing.every import EverySchedule
from schedulerstream.timing.spec import schedule_of

JOB_TICK_BYTES = 16 << 20  # of run records, one job in one tick
RUN_FIXED_BYTES = 1024  # a run record beside its job's parts: header, ids, instants, trigger


@dataclass(frozen=True, slots=True)
class JobPlan:
    """The fields of a job definition the timer loop reads, plus its encoded bytes (kept
    under ``def/``; its runs carry ``dispatch_spec_json`` instead) and their ``ref``."""

    key: str
    tenant: str
    job_id: str
    version: int
    schedule: Schedule
    misfire_policy: str
    catch_up_window_us: int
    jitter_us: int
    max_runs: int | None
    payload_json: str | None
    definition: bytes
    run_parts: RunParts  # records.run_parts of this job
    dispatch_spec_json: str
    lead_us: int = 0
    ref: bytes = b""  # state.definition_ref(definition)

    def runs_per_tick(self, cap: int) -> int:
        """At most ``cap`` runs, and no more than ``JOB_TICK_BYTES`` of them, a tick (a job of
        large payloads catching up emits in many ticks, not one huge transaction)."""
        size = sum(map(len, self.run_parts)) + RUN_FIXED_BYTES
        return max(1, min(cap, JOB_TICK_BYTES // size))

    def jitter_of(self, run_id: str) -> int:
        """Deterministic, bounded delay in ``[0, jitter)`` for one run."""
        if self.jitter_us <= 0:
            return 0
        return zlib.crc32(run_id.encode()) * 2654435761 % self.jitter_us

    def jitter_at(self, instant_us: int) -> int:
        """``jitter_of`` the scheduled run at ``instant_us`` (its run id is only built when the
        job has a jitter)."""
        if self.jitter_us <= 0:
            return 0
        return self.jitter_of(self.run_id(instant_us))

    def run_id(self, instant_us: int) -> str:
        return scheduled_run_id(self.key, instant_us)


# A fixed reference instant (2024-01-01T00:00:00Z) so a job's spacing is computed the same way
# on every instance.
_SPACING_REFERENCE_US = 1_704_067_200_000_000


def spacing_us(schedule: Schedule) -> int | None:
    """The shortest gap between the schedule's next few instants after a fixed reference
    (memoized for the costly kinds: jobs that share a schedule share its answer)."""
    if isinstance(schedule, AtSchedule | EverySchedule):  # cheap, and one-shots rarely repeat
        return _spacing_us(schedule)
    return _shared_spacing_us(schedule)  # schedules hash by their definition


def _spacing_us(schedule: Schedule) -> int | None:
    instants = schedule.next_n(_SPACING_REFERENCE_US, 4)
    if len(instants) < 2:
        return None
    return min(b - a for a, b in itertools.pairwise(instants))


_shared_spacing_us = functools.lru_cache(maxsize=65_536)(_spacing_us)


def lead_for(schedule: Schedule, sparse_us: int, burst_lead_us: int) -> int:
    """Extra emission lead for sparse schedules (the top-of-the-hour kind), 0 for dense ones.

    Emitting sparse jobs ``burst_lead_us`` early lets a burst of 100,000 runs at one instant
    be committed before the instant; each such job has at most one run pending at a time.
    """
    gap = spacing_us(schedule)
    return burst_lead_us if gap is None or gap >= sparse_us else 0


def build_plan(
    record: dict[str, Any], definition: bytes, sparse_us: int = 0, burst_lead_us: int = 0
) -> JobPlan:
    schedule = schedule_of(record["schedule"])
    tenant, job_id, version = record["tenant"], record["job_id"], record["version"]
    spec = dispatch_spec_json(record)
    return JobPlan(
        key=f"{tenant}/{job_id}",
        tenant=tenant,
        job_id=job_id,
        version=version,
        schedule=schedule,
        misfire_policy=record["misfire_policy"],
        catch_up_window_us=record["catch_up_window_us"],
        jitter_us=record["schedule"]["jitter_us"],
        max_runs=record["max_runs"],
        payload_json=record["payload_json"],
        definition=definition,
        lead_us=lead_for(schedule, sparse_us, burst_lead_us) if burst_lead_us else 0,
        run_parts=run_parts(tenant, job_id, record["payload_json"], version, spec),
        dispatch_spec_json=spec,
        ref=definition_ref(definition),
    )


def dispatch_spec_json(record: dict[str, Any]) -> str:
    """The wire form of the job's dispatch spec. Not validated here: the scheduler's ingest
    validated the whole definition, and the dispatcher validates each distinct spec it reads."""
    return spec_of_definition(record, check=False).to_json()


class PlanCache:
    """Bounded LRU of JobPlans keyed by (job key, version)."""

    def __init__(
        self, decode: Any, maxsize: int = 200_000, sparse_us: int = 0, burst_lead_us: int = 0
    ) -> None:
        self._decode = decode
        self._sparse_us = sparse_us
        self._burst_lead_us = burst_lead_us
        self._maxsize = maxsize
        self._plans: OrderedDict[tuple[str, int], JobPlan] = OrderedDict()

    def get(
        self, job_key: str, version: int, definition: bytes, record: dict[str, Any] | None = None
    ) -> JobPlan:
        """The plan of ``definition`` (pass its decoded ``record`` if at hand)."""
        cache_key = (job_key, version)
        plan = self._plans.get(cache_key)
        if plan is not None and plan.definition == definition:
            self._plans.move_to_end(cache_key)
            return plan
        decoded = record if record is not None else self._decode(definition)
        plan = build_plan(decoded, definition, self._sparse_us, self._burst_lead_us)
        self._plans[cache_key] = plan
        if len(self._plans) > self._maxsize:
            self._plans.popitem(last=False)
        return plan

    def cached(self, job_key: str, version: int, ref: bytes) -> JobPlan | None:
        """The plan of the definition ``ref`` refers to, if this cache holds it."""
        cache_key = (job_key, version)
        plan = self._plans.get(cache_key)
        if plan is None or plan.ref != ref:
            return None
        self._plans.move_to_end(cache_key)
        return plan
