"""A tick's backfill pass: Backfill commands' runs, and ``catch_up`` jobs' late runs, in chunks.

Both are background work with a known end, and their runs share the ``runs`` topic with every
tenant's runs due now. Unbounded, one tenant's backfill of millions of runs (or its jobs resumed
hours behind) is emitted far faster than the dispatchers read it, and the healthy runs behind it
in the same partitions wait. ``BackfillBudget`` bounds them to ``rate`` runs a second a
partition, all tenants together; each pass splits its tokens evenly between the tenants with
work, in turns that start after the tenant served last (what one leaves goes round too).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from typing import Protocol

from schedulerstream.errors import DependencyDown, StateError
from schedulerstream.ids import rerun_run_id, scheduled_run_id
from schedulerstream.scheduler import keys
from schedulerstream.scheduler.counters import Counters
from schedulerstream.scheduler.jobs import JobRecords, Store
from schedulerstream.scheduler.pauses import Pauses
from schedulerstream.scheduler.plan import JobPlan
from schedulerstream.scheduler.state import JobState
from schedulerstream.scheduler.timers import Emission, Missed, next_instant, schedule_next, span
from schedulerstream.scheduler.writer import Output

BACKFILL_RATE = 50.0  # runs a second a partition, all tenants (the settings' default)
MICROS = 1_000_000


class Emitter(Protocol):
    """What the pass asks of ``SchedulerLogic``: write a run, or a ``missed`` event."""

    def emit(
        self, out: Output, partition: int, plan: JobPlan, e: Emission, now_us: int
    ) -> None: ...

    def missed(
        self, out: Output, partition: int, plan: JobPlan, m: Missed, now_us: int
    ) -> None: ...


class BackfillBudget:
    """Per partition: tokens (runs) refilled at ``rate_per_s`` up to one second's worth."""

    def __init__(self, rate_per_s: float) -> None:
        self.rate_per_s = rate_per_s
        self.burst = max(1.0, rate_per_s)
        self._tokens: dict[int, tuple[float, int]] = {}  # partition → (tokens, refilled at µs)
        self._last: dict[int, str] = {}  # partition → the tenant served last
        self._last_job: dict[int, dict[str, str]] = {}  # partition → tenant → its job, last

    def available(self, partition: int, now_us: int) -> int:
        """Whole runs this partition may emit now (refills first; a clock stepped back adds
        nothing)."""
        tokens, at_us = self._tokens.get(partition, (self.burst, now_us))
        if now_us > at_us:
            tokens = min(self.burst, tokens + (now_us - at_us) * self.rate_per_s / MICROS)
            at_us = now_us
        self._tokens[partition] = (tokens, at_us)
        return int(tokens)

    def spend(self, partition: int, runs: int) -> None:
        tokens, at_us = self._tokens[partition]
        self._tokens[partition] = (tokens - runs, at_us)

    def turns(self, partition: int, tenants: Iterable[str]) -> list[str]:
        """``tenants`` in name order, starting after the one ``served`` last."""
        ordered = sorted(tenants)
        jobs = self._last_job.get(partition)
        if jobs:  # only the tenants with work keep their place
            self._last_job[partition] = {t: jobs[t] for t in ordered if t in jobs}
        return _after(ordered, self._last.get(partition))

    def job_turns(self, partition: int, tenant: str, job_keys: list[str]) -> list[str]:
        """A tenant's ``job_keys`` (in key order), starting after its job ``served`` last."""
        return _after(job_keys, self._last_job.get(partition, {}).get(tenant))

    def served(self, partition: int, tenant: str, job_key: str) -> None:
        self._last[partition] = tenant
        self._last_job.setdefault(partition, {})[tenant] = job_key

    def forget(self, partition: int) -> None:
        """The partition moved away: a new owner starts with a full bucket."""
        self._tokens.pop(partition, None)
        self._last.pop(partition, None)
        self._last_job.pop(partition, None)


def _after(ordered: list[str], last: str | None) -> list[str]:
    """``ordered`` rotated to start after ``last`` (where it is, or would be)."""
    if last is None:
        return ordered
    at = bisect.bisect_right(ordered, last)
    return ordered[at:] + ordered[:at]


class Backfills:
    """The backfill pass of one tick, within the partition's ``BackfillBudget``."""

    def __init__(
        self, jobs: JobRecords, pauses: Pauses, counters: Counters, emitter: Emitter,
        chunk: int = 1000, rate_per_s: float = BACKFILL_RATE,
    ) -> None:  # fmt: skip
        self.jobs = jobs
        self.pauses = pauses
        self.counters = counters
        self.emitter = emitter
        self.chunk = chunk
        self.budget = BackfillBudget(rate_per_s)

    def tick(
        self, store: Store, out: Output, partition: int, now_us: int,
        broken: set[str] | tuple[()], over_budget: Callable[[], bool],
    ) -> bool:  # fmt: skip
        """Backfill chunks within the partition's budget, its tokens split evenly between the
        tenants backfilling (``broken`` jobs left out; none past ``over_budget``, the tick's bytes);
        True if a chunk is left that the budget still has tokens for."""
        if store.get(keys.BACKFILL_END) is None:
            store.put(keys.BACKFILL_END, b"", logged=False)
        by_tenant: dict[str, list[str]] = {}
        for bf_key, _ in store.range(keys.BACKFILL_PREFIX, keys.BACKFILL_END):
            job_key = bf_key[len(keys.BACKFILL_PREFIX) :].decode()
            if job_key not in broken:
                by_tenant.setdefault(job_key.partition("/")[0], []).append(job_key)
        if not by_tenant:
            return False
        budget = self.budget
        allowance = budget.available(partition, now_us)
        share = max(1, allowance // len(by_tenant))
        left = False  # a chunk is left for a later tick
        for tenant in budget.turns(partition, by_tenant):
            runs = min(share, allowance)
            for job_key in budget.job_turns(partition, tenant, by_tenant[tenant]):
                if runs < 1 or over_budget():
                    left = True
                    break
                try:
                    count, pending = self._chunk(store, out, partition, job_key, now_us, runs)
                except (StateError, DependencyDown):
                    raise
                except Exception as exc:
                    self.pauses.failed_job(partition, job_key, exc)
                    continue
                if count:
                    budget.spend(partition, count)
                    budget.served(partition, tenant, job_key)
                runs -= count
                allowance -= count
                left |= pending
        if left and allowance < 1:
            self.counters.backfill_rate_waits += 1
        return left and allowance >= 1

    def _chunk(
        self, store: Store, out: Output, partition: int, job_key: str, now_us: int, limit: int
    ) -> tuple[int, bool]:
        """Up to ``limit`` runs of the job's first backfill: (runs emitted, backfills left)."""
        old = self.jobs.load(store, job_key)
        if old is None or not old.backfills:
            store.delete(keys.backfill_key(job_key), logged=False)
            return 0, False
        state = old.copy()
        plan = self.jobs.plan_of(store, job_key, state)
        cursor = state.backfills[0]
        spent = plan.max_runs is not None and state.runs_emitted >= plan.max_runs
        if cursor.catch_up and (state.paused or spent):
            why = "job paused while catching up" if state.paused else "max_runs reached"
            self.drop_catch_up(out, partition, plan, state, now_us, why)
            self.jobs.save(store, job_key, old, state)
            return 0, bool(state.backfills)
        trigger = "catch_up" if cursor.catch_up else "backfill"
        count = 0
        limit = min(limit, plan.runs_per_tick(self.chunk))
        while count < limit:
            instant = next_instant(plan.schedule, cursor.next_after_us)
            if instant is None or instant >= cursor.end_us:
                state.backfills.pop(0)
                break
            cursor.next_after_us = instant
            cursor.emitted += 1
            count += 1
            if cursor.catch_up:
                state.runs_emitted += 1
                if plan.max_runs is not None and state.runs_emitted >= plan.max_runs:
                    limit = 0  # the rest are missed in the next pass; the job is done
                    schedule_next(state, plan, next_instant)
            if cursor.rerun:
                run_id = rerun_run_id(job_key, instant, cursor.request_id)
            else:
                run_id = scheduled_run_id(job_key, instant)
            emission = Emission(run_id, instant, now_us, trigger, plan.payload_json)
            self.emitter.emit(out, partition, plan, emission, now_us)
        self.jobs.save(store, job_key, old, state)
        return count, bool(state.backfills)

    def drop_catch_up(
        self, out: Output, partition: int, plan: JobPlan, state: JobState, now_us: int, why: str
    ) -> None:
        """A job paused, or out of runs, while catching up: the late instants it did not
        emit are missed."""
        cursor = state.backfills.pop(0)
        first = next_instant(plan.schedule, cursor.next_after_us)
        if first is None or first >= cursor.end_us:
            return
        dropped = span(next_instant, plan.schedule, first, cursor.end_us)
        missed = Missed(first, dropped.last, dropped.count, dropped.capped, why)
        self.emitter.missed(out, partition, plan, missed, now_us)
