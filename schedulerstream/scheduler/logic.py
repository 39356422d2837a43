"""The scheduler's state machine for one partition: mutations, commands, and the timer tick.

It works on a store, through ``JobRecords`` (job states and definitions changelogged; the
``due/`` and ``bf/`` indexes derived), and an output that produces into the current
transaction. The pauses it writes itself (a PauseJob command, a quarantine) are
``pauses.Pauses``'. No Kafka consumer code lives here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from schedulerstream.codec import Codec
from schedulerstream.errors import CodecError, DependencyDown, StateError
from schedulerstream.ids import manual_run_id
from schedulerstream.ingest import (
    RejectedRecord,
    decode_command,
    decode_schedule,
    job_key_from_record_key,
)
from schedulerstream.limits import RecordLimits
from schedulerstream.scheduler import keys
from schedulerstream.scheduler.backfills import BACKFILL_RATE, Backfills
from schedulerstream.scheduler.counters import Counters
from schedulerstream.scheduler.jobs import JobRecords, Store
from schedulerstream.scheduler.pauses import Pauses
from schedulerstream.scheduler.plan import JobPlan, PlanCache
from schedulerstream.scheduler.state import BackfillCursor, JobState, PendingRun
from schedulerstream.scheduler.timers import (
    Emission,
    Missed,
    TimerSettings,
    advance,
    next_instant,
    revoke_pending,
    schedule_next,
)
from schedulerstream.scheduler.writer import Output, RecordWriter, Topics

MAX_VERSION = (1 << 63) - 1
TICK_BYTES = 64 << 20  # of run records in one tick: past it, the next jobs wait a tick
TICK_INSTANTS = 20_000  # instants computed in one tick (~0.1 s with their runs): past it, the same
INLINE_CHUNK = 1000  # job records a tick rewrites with their definition (inline_definitions)


log = logging.getLogger(__name__)


class SchedulerLogic:
    """Applies inputs and ticks to one partition's state, emitting runs and attempt events."""

    def __init__(
        self, codec: Codec, topics: Topics, timers: TimerSettings, instance: str,
        due_batch: int = 5000, backfill_chunk: int = 1000, limits: RecordLimits | None = None,
        inline_definitions: bool = False, backfill_rate: float = BACKFILL_RATE,
    ) -> None:  # fmt: skip
        self.codec = codec
        self.limits = limits or RecordLimits()
        self.topics = topics
        self.timers = timers
        self.instance = instance
        self.due_batch = due_batch
        self.emitted_bytes = 0  # of run records, ever (a tick's share bounds the tick)
        self.examined = 0  # instants computed for due jobs, ever (the same)
        self.plans = PlanCache(
            lambda data: codec.decode_as("JobDefinition", data),
            sparse_us=timers.sparse_interval_us,
            burst_lead_us=timers.burst_lead_us,
        )
        self.jobs = JobRecords(codec, self.plans, inline_definitions=inline_definitions)
        self.writer = RecordWriter(codec, topics, instance, self.jobs.records)
        self.counters = Counters()
        self._latest_us: dict[int, int] = {}  # per partition: the latest "now" seen
        self.pauses = Pauses(codec, self.limits, topics, self.jobs, self.plans, self.writer,
                             self.counters, self)  # fmt: skip
        self.backfills = Backfills(self.jobs, self.pauses, self.counters, self, backfill_chunk,
                                   backfill_rate)  # fmt: skip

    def clock(self, partition: int, now_us: int) -> int:
        """``now_us``, never earlier than a "now" this partition already saw.

        A wall clock stepped back must not make runs that were already due look ahead of time
        again (a mutation would revoke and re-emit them): time holds still until it catches up.
        """
        latest = max(now_us, self._latest_us.get(partition, now_us))
        self._latest_us[partition] = latest
        return latest

    # -- inputs -----------------------------------------------------------------------------
    def on_schedule(
        self, store: Store, out: Output, partition: int, key: bytes | None, value: bytes | None,
        timestamp_us: int, now_us: int,
    ) -> None:  # fmt: skip
        """Apply one cron.schedules record; raises RejectedRecord for bad input."""
        now_us = self.clock(partition, now_us)
        if value is None:
            job_key = job_key_from_record_key(key)
            self.pauses.broken.get(partition, set()).discard(job_key)  # a fresh start
            old = self.jobs.load(store, job_key)
            if old is not None:
                last = self._settle(store, out, partition, job_key, old, now_us, "job deleted")
                revoking = last.copy()
                self.revoke(out, partition, job_key, revoking, now_us, MAX_VERSION, "job deleted")
                self.jobs.save(store, job_key, last, None)
            return
        upsert = decode_schedule(self.codec, key, value, timestamp_us, self.limits)
        job = upsert.job
        assert job.version is not None
        job_key = job.key
        old = self.jobs.load(store, job_key)
        if old is not None and job.version <= old.version:
            self.counters.stale_versions += 1
            return
        self.pauses.broken.get(partition, set()).discard(job_key)  # a new version is a fresh start
        current = None
        if old is not None:
            why = "job paused" if job.paused else "job updated"
            current = self._settle(store, out, partition, job_key, old, now_us, why)
        if current is not None:
            state = current.copy()
            reason = "job paused" if job.paused else "job updated"
            self.revoke(out, partition, job_key, state, now_us, job.version, reason)
            state.version, state.definition, state.paused = (
                job.version,
                upsert.definition,
                job.paused,
            )
        else:
            state = JobState(job.version, upsert.definition, job.paused, min(timestamp_us, now_us))
        plan = self.plans.get(job_key, state.version, state.definition, upsert.record)
        schedule_next(state, plan, next_instant)
        if current is None and state.next_fire_us is None:
            reason = "the job has no instant after it was created (an 'at' or end_at in the past?)"
            self.writer.attempt(out, partition, f"{job_key}@never", plan.tenant, plan.job_id,
                                "missed", now_us, None, reason, 0)  # fmt: skip
        self.jobs.save(store, job_key, current, state)
        self.pauses.quarantine_jobs(store, out, partition, now_us)

    def on_command(
        self, store: Store, out: Output, partition: int, key: bytes | None, value: bytes | None,
        now_us: int,
    ) -> None:  # fmt: skip
        """Apply one cron.commands record (trigger, backfill, pause; cancel is the dispatcher's)."""
        now_us = self.clock(partition, now_us)
        job_key, kind, fields = decode_command(self.codec, key, value,
                                               self.limits.max_payload_bytes)  # fmt: skip
        if kind == "CancelRun":
            return
        if kind == "PauseJob":
            self.pauses.pause_job(store, out, partition, job_key, fields, now_us)
            return
        old = self.jobs.load(store, job_key)
        if old is None:
            raise RejectedRecord(f"{kind} for unknown job {job_key!r}")
        state = old.copy()
        if not state.remember_request(fields["request_id"]):
            self.counters.duplicate_requests += 1
            return
        plan = self.jobs.plan_of(store, job_key, state)
        if kind == "TriggerNow":
            run_id = manual_run_id(job_key, fields["request_id"])
            payload = (
                fields["payload_json"] if fields["payload_json"] is not None else plan.payload_json
            )
            self.emit(
                out, partition, plan, Emission(run_id, now_us, now_us, "manual", payload), now_us
            )
        elif kind == "Backfill":
            end = min(fields["end_us"], now_us)
            if not fields["rerun"]:
                end = min(end, state.fired_through_us + 1)
            if end > fields["start_us"]:
                state.backfills.append(
                    BackfillCursor(
                        fields["request_id"], fields["start_us"] - 1, end, fields["rerun"]
                    )
                )
        self.jobs.save(store, job_key, old, state)
        self.pauses.quarantine_jobs(store, out, partition, now_us)

    def _settle(self, store: Store, out: Output, partition: int, job_key: str, old: JobState,
                now_us: int, why: str) -> JobState:  # fmt: skip
        """``old`` after emitting what is due of it, before a new version replaces it (``why``):
        its catch-up not emitted yet is reported missed, as the old version's. A version
        whose definition cannot be read emits nothing: the new one is its fix."""
        try:
            plan = self.jobs.plan_of(store, job_key, old)
        except CodecError as exc:
            log.warning("job %s: version %d is replaced without emitting what was due (nor "
                        "its catch-up): %s", job_key, old.version, exc)  # fmt: skip
            if not (old.backfills and old.backfills[0].catch_up):
                return old
            kept = old.copy()
            kept.backfills = [b for b in kept.backfills if not b.catch_up]
            self.jobs.save(store, job_key, old, kept)
            return kept
        settled = self._emit_due(store, out, partition, job_key, old, now_us)
        if not (settled.backfills and settled.backfills[0].catch_up):
            return settled
        dropped = settled.copy()
        while dropped.backfills and dropped.backfills[0].catch_up:
            self.backfills.drop_catch_up(out, partition, plan, dropped, now_us,
                                         f"{why} while catching up")  # fmt: skip
        self.jobs.save(store, job_key, settled, dropped)
        return dropped

    # -- the tick ---------------------------------------------------------------------------
    def on_tick(self, store: Store, out: Output, partition: int, now_us: int) -> bool:
        """Emit due runs and backfill chunks; True if work was left for the next tick."""
        floor = self.jobs.due_floor.get(store, keys.DUE_PREFIX)
        try:
            return self._tick(store, out, partition, now_us, floor)
        except BaseException:
            # the runtime undoes the tick's store changes: the due keys it read are due again
            self.jobs.due_floor[store] = floor
            raise

    def _tick(self, store: Store, out: Output, partition: int, now_us: int, floor: bytes) -> bool:
        now_us = self.clock(partition, now_us)
        upper = keys.due_upper_bound(now_us + self.timers.lookahead_us)
        # below ``late``: jobs whose instant is past the grace (resumed, or behind). They go
        # after the jobs due now, on a budget of their own: thousands of one tenant's jobs
        # resumed hours behind sort first, and would hold every job due now behind them.
        late = min(upper, keys.due_upper_bound(
            now_us - self.timers.grace_us - self.timers.burst_lead_us))  # fmt: skip
        emitted = self.emitted_bytes
        broken = self.pauses.broken.get(partition, ())
        floors = self.jobs.due_floor  # a key written below the store's floor lowers it
        floors[store] = upper
        examined = self.examined
        more, resume = self._scan(store, out, partition, now_us, max(floor, late), upper, broken,
                                  TICK_BYTES, TICK_INSTANTS)  # fmt: skip
        if resume is not None:
            floors[store] = min(floors[store], resume)
        if floor < late:  # what the jobs due now left of the tick, and at least a quarter
            budget_bytes = max(1, TICK_BYTES // 4, TICK_BYTES - (self.emitted_bytes - emitted))
            budget_instants = max(1, TICK_INSTANTS // 4, TICK_INSTANTS - (self.examined - examined))
            late_more, resume = self._scan(store, out, partition, now_us, floor, late, broken,
                                           budget_bytes, budget_instants)  # fmt: skip
            more |= late_more
            if resume is not None:
                floors[store] = min(floors[store], resume)
        more |= self.backfills.tick(
            store, out, partition, now_us, broken,
            lambda: self.emitted_bytes - emitted >= TICK_BYTES,
        )  # fmt: skip
        self.pauses.quarantine_jobs(store, out, partition, now_us)
        if self.jobs.inline_definitions:
            self.jobs.inline_chunk(store, INLINE_CHUNK)
        return more

    def _scan(
        self,
        store: Store,
        out: Output,
        partition: int,
        now_us: int,
        low: bytes,
        high: bytes,
        broken: set[str] | tuple[()],
        budget_bytes: int,
        budget_instants: int,
    ) -> tuple[bool, bytes | None]:
        """Emit what is due of the jobs whose due keys are in [low, high), until they emitted
        ``budget_bytes`` of runs or computed ``budget_instants``: (keys were left, the key the
        next scan must start at; None: past ``high``)."""
        due = [k for k, _ in _take(store.range(low, high), self.due_batch)]
        more = len(due) >= self.due_batch
        resume = due[-1] if more else None
        emitted, examined = self.emitted_bytes, self.examined
        for n, due_key in enumerate(due):
            if self.emitted_bytes - emitted >= budget_bytes or (
                self.examined - examined >= budget_instants
            ):  # the rest in the next tick
                # a job handled before it may be due again below it (still catching up)
                resume = due_key if resume is None else min(due_key, resume)
                more = True
                due = due[:n]
                break
            due_us, job_key = keys.parse_due_key(due_key)
            if job_key in broken:
                continue
            try:
                state = self.jobs.load(store, job_key)
                if state is None:
                    store.delete(due_key, logged=False)
                    continue
                known = due_key if due_us == state.next_emit_us else None
                self._emit_due(store, out, partition, job_key, state, now_us, known)
            except (StateError, DependencyDown):
                raise  # the store or a dependency, not this job: the runtime's to handle
            except Exception as exc:
                self.pauses.failed_job(partition, job_key, exc)
        kept = next((k for k in due if store.get(k) is not None), None)  # an unchanged job
        if kept is not None and (resume is None or kept < resume):
            resume = kept
        return more, resume

    def _emit_due(
        self, store: Store, out: Output, partition: int, job_key: str, state: JobState,
        now_us: int, due_key: bytes | None = None,
    ) -> JobState:  # fmt: skip
        """Emit what is due for one job; return its new state (``state`` is left untouched;
        ``due_key``: its due key, when the caller has it)."""
        new = state.copy()
        plan = self.jobs.plan_of(store, job_key, new)
        result = advance(new, plan, now_us, self.timers, next_instant)
        self.examined += result.examined
        for emission in result.emissions:
            self.emit(out, partition, plan, emission, now_us)
        for missed in result.missed:
            self.missed(out, partition, plan, missed, now_us)
        if (
            result.emissions
            or result.missed
            or _indexed(state) != _indexed(new)
            or state.backfills != new.backfills
        ):
            self.jobs.save(store, job_key, state, new, due_key)
            return new
        return state

    # -- outputs ----------------------------------------------------------------------------
    def emit(self, out: Output, partition: int, plan: JobPlan, e: Emission, now_us: int) -> None:
        reason = out.failed(plan.key)
        if reason is not None:
            self._not_emitted(out, partition, plan, e, reason, now_us)
            return
        value = self.writer.run_record(plan, e, now_us)
        if len(value) + len(e.run_id) > self.limits.max_record_bytes:
            reason = (
                f"its run record is {len(value):,} bytes, over the limit of "
                f"{self.limits.max_record_bytes:,} (SCHEDULERSTREAM_MAX_RECORD_BYTES)"
            )
            self._not_emitted(out, partition, plan, e, reason, now_us)
            return
        out.produce(self.topics.runs, e.run_id.encode(), value, partition, origin=plan.key)
        self.emitted_bytes += len(value)
        self.counters.by_trigger[e.trigger] = self.counters.by_trigger.get(e.trigger, 0) + 1

    def _not_emitted(
        self, out: Output, partition: int, plan: JobPlan, e: Emission, reason: str, now_us: int
    ) -> None:
        """A run that cannot be written: a ``missed`` event with the reason, and its job is
        quarantined (paused) once the current input or tick is done."""
        job_key = f"{plan.tenant}/{plan.job_id}"
        self.writer.attempt(out, partition, e.run_id, plan.tenant, plan.job_id, "missed", now_us,
                            e.scheduled_at_us, f"not emitted: {reason}", 1)  # fmt: skip
        self.pauses.quarantine(partition, job_key, reason)

    def revoke(
        self, out: Output, partition: int, job_key: str, state: JobState, now_us: int,
        version: int, reason: str,
    ) -> list[PendingRun]:  # fmt: skip
        revoked = revoke_pending(state, now_us)
        self.writer.revoked(out, partition, job_key, revoked, now_us, version, reason)
        self.counters.runs_revoked += len(revoked)
        return revoked

    def missed(self, out: Output, partition: int, plan: JobPlan, m: Missed, now_us: int) -> None:
        self.writer.missed(out, partition, plan, m, now_us)
        self.counters.instants_missed += m.count


def _indexed(state: JobState) -> tuple[int | None, bool]:
    return state.next_emit_us, bool(state.backfills)


def _take(items: Iterator[tuple[bytes, bytes]], limit: int) -> list[tuple[bytes, bytes]]:
    taken = []
    for item in items:
        taken.append(item)
        if len(taken) >= limit:
            break
    return taken
