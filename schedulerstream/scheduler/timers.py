"""What is due: turn a job's instants up to ``now + lookahead`` into emissions (pure logic).

Misfire rules (DESIGN.md §3): an instant is *late* when it is more than ``grace`` before now.
Late instants older than ``catch_up_window`` are always missed; within the window the policy
decides: ``skip`` emits none, ``fire_once`` the latest, ``catch_up`` all. Every dropped instant
is reported in a ``Missed`` record, never silently lost.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from schedulerstream.scheduler.plan import JobPlan
from schedulerstream.scheduler.state import JobState, PendingRun
from schedulerstream.timing import Schedule

NextAfter = Callable[[Schedule, int], int | None]


@dataclass(frozen=True, slots=True)
class TimerSettings:
    """``lookahead``: emit runs this early; ``burst_lead``: extra lead for sparse jobs (whose
    instants are at least ``sparse_interval`` apart); ``grace``: later than this is missed."""

    lookahead_us: int
    grace_us: int
    count_cap: int
    burst_lead_us: int = 0
    sparse_interval_us: int = 60_000_000


@dataclass(frozen=True, slots=True)
class Emission:
    run_id: str
    scheduled_at_us: int
    not_before_us: int
    trigger: str
    payload_json: str | None


@dataclass(frozen=True, slots=True)
class Missed:
    """Instants dropped for one reason; ``count`` is a lower bound when ``approximate``."""

    first_us: int
    last_us: int
    count: int
    approximate: bool
    reason: str


@dataclass(slots=True)
class Advance:
    emissions: list[Emission] = field(default_factory=list)
    missed: list[Missed] = field(default_factory=list)


def _count_before(
    next_after: NextAfter, schedule: Schedule, first: int, limit_us: int, cap: int
) -> tuple[int, int, bool]:
    """Count instants in ``[first, limit_us)``: (count, last instant, capped)."""
    count, last, current = 1, first, first
    while count < cap:
        instant = next_after(schedule, current)
        if instant is None or instant >= limit_us:
            return count, last, False
        count, last, current = count + 1, instant, instant
    return count, last, True


def advance(
    state: JobState, plan: JobPlan, now_us: int, timers: TimerSettings, next_after: NextAfter
) -> Advance:
    """Emit what is due for one job and move its watermark; mutates ``state``."""
    result = Advance()
    if state.paused:
        return result
    if state.pending:
        state.pending = [p for p in state.pending if p.not_before_us > now_us]
    horizon = now_us + timers.lookahead_us + plan.lead_us
    window_start = now_us - plan.catch_up_window_us
    late_cut = now_us - timers.grace_us
    schedule = plan.schedule
    cursor = state.fired_through_us

    first = next_after(schedule, cursor)
    if first is not None and first < window_start and first < late_cut:
        count, last, capped = _count_before(
            next_after, schedule, first, window_start, timers.count_cap
        )
        result.missed.append(Missed(first, last, count, capped, "older than catch_up_window"))
        cursor = max(last, window_start - 1)

    late: list[int] = []
    chosen: list[tuple[int, int, str, str]] = []  # on time first; the late are put before
    budget = timers.count_cap
    while budget > 0:
        instant = next_after(schedule, cursor)
        if instant is None:
            break
        not_before = instant + plan.jitter_at(instant)
        if not_before > horizon:
            break
        if instant < late_cut:
            late.append(instant)
        else:
            chosen.append((instant, not_before, plan.run_id(instant), "scheduled"))
        cursor = instant
        budget -= 1

    if late:
        keep = _apply_policy(plan.misfire_policy, late, result)
        chosen[:0] = [(i, now_us, plan.run_id(i), "catch_up") for i in keep]
    cap = plan.runs_per_tick(timers.count_cap)
    if len(chosen) > cap:  # large records: the rest from the next tick (instants ascend)
        del chosen[cap:]
        cursor = chosen[-1][0]

    for instant, not_before, run_id, trigger in chosen:
        if plan.max_runs is not None and state.runs_emitted >= plan.max_runs:
            result.missed.append(Missed(instant, instant, 1, False, "max_runs reached"))
            continue
        state.runs_emitted += 1
        result.emissions.append(Emission(run_id, instant, not_before, trigger, plan.payload_json))
        if not_before > now_us:
            state.pending.append(PendingRun(run_id, instant, not_before))

    state.fired_through_us = max(state.fired_through_us, cursor)
    schedule_next(state, plan, next_after)
    return result


def _apply_policy(policy: str, late: list[int], result: Advance) -> list[int]:
    if policy == "catch_up":
        return late
    if policy == "fire_once":
        if len(late) > 1:
            result.missed.append(
                Missed(late[0], late[-2], len(late) - 1, False, "misfire fire_once")
            )
        return late[-1:]
    result.missed.append(Missed(late[0], late[-1], len(late), False, "misfire skip"))
    return []


def schedule_next(state: JobState, plan: JobPlan, next_after: NextAfter) -> None:
    """Set the job's next instant (None when paused, finished, or out of runs)."""
    finished = plan.max_runs is not None and state.runs_emitted >= plan.max_runs
    instant = (
        None if state.paused or finished else next_after(plan.schedule, state.fired_through_us)
    )
    state.next_fire_us = instant
    if instant is None:
        state.next_not_before_us = state.next_emit_us = None
    else:
        state.next_not_before_us = instant + plan.jitter_at(instant)
        state.next_emit_us = state.next_not_before_us - plan.lead_us


def next_instant(schedule: Schedule, after_us: int) -> int | None:
    # Schedules are shared per definition (parse_cron is cached) and each remembers its last
    # answer, so 100k jobs on one expression asking about one instant compute it once.
    return schedule.next_after(after_us)


def revoke_pending(state: JobState, now_us: int) -> list[PendingRun]:
    """Withdraw runs emitted ahead of time that are not yet due; roll the watermark back."""
    revoked = [p for p in state.pending if p.not_before_us > now_us]
    state.pending = []
    if revoked:
        earliest = min(p.scheduled_at_us for p in revoked)
        state.fired_through_us = min(state.fired_through_us, earliest - 1)
        state.runs_emitted = max(0, state.runs_emitted - len(revoked))
    return revoked
