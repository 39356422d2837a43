"""What is due: turn a job's instants up to ``now + lookahead`` into emissions (pure logic).

Misfire rules (DESIGN.md §3): an instant is *late* when it is more than ``grace`` and the job's
``jitter`` before now (a run jittered past the grace is not late: it is due then).
Late instants older than ``catch_up_window`` are always missed; within the window the policy
decides: ``skip`` emits none, ``fire_once`` the latest, ``catch_up`` all: ``advance`` queues
them as a catch-up cursor among the job's backfills, emitted in order at the partition's backfill
rate (shared between tenants), so a tenant's jobs resumed far behind cannot flood the runs topic;
the job's on-time runs do not wait for them. A job with ``max_runs`` emits its late runs at once,
ahead of its on-time ones (they count first; ``max_runs`` bounds them). Every dropped instant
is reported in a ``Missed`` record, never silently lost.

Dropped instants are counted exactly by arithmetic when the schedule can (a
``CountableSchedule``: an interval, a one-shot, either bounded by start/end). Otherwise they are
counted one by one up to ``MISFIRE_SCAN``; past it the count is a lower bound and the latest
instants are found by bisection, so a job years behind costs a few dozen ``next_after`` calls,
not one per instant (a tenant's resumed jobs would hold the whole tick).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from schedulerstream.scheduler.plan import JobPlan
from schedulerstream.scheduler.state import CATCH_UP_REQUEST, BackfillCursor, JobState, PendingRun
from schedulerstream.timing import CountableSchedule, Schedule

NextAfter = Callable[[Schedule, int], int | None]
MISFIRE_SCAN = 100  # dropped instants walked one by one (if not counted); past it, bisection


@dataclass(frozen=True, slots=True)
class TimerSettings:
    """``lookahead``: emit runs this early; ``burst_lead``: extra lead for sparse jobs (whose
    instants are at least ``sparse_interval`` apart); ``grace``: later than this is missed."""

    lookahead_us: int
    grace_us: int
    count_cap: int
    burst_lead_us: int = 0
    sparse_interval_us: int = 60_000_000
    inline_catch_up: bool = False  # catch_up's late runs at once, as before session 37


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
    """What ``advance`` emits and drops; ``examined``: about how many instants it computed."""

    emissions: list[Emission] = field(default_factory=list)
    missed: list[Missed] = field(default_factory=list)
    examined: int = 0


@dataclass(frozen=True, slots=True)
class Span:
    """Instants in ``[first, limit)``: ``count`` (a lower bound when ``capped``), the latest,
    the one before it (None when alone) and how many instants finding them computed."""

    count: int
    last: int
    before_last: int | None
    capped: bool
    examined: int


def span(next_after: NextAfter, schedule: Schedule, first: int, limit_us: int) -> Span:
    """The instants from ``first`` (one of them, below ``limit_us``) to ``limit_us``: counted
    by the schedule when it can, else one by one up to ``MISFIRE_SCAN``, the latest two found
    by bisection past it."""
    counted = _counted(schedule, first, limit_us)
    if counted is not None:
        return counted
    count, before, last = 1, None, first
    while True:
        instant = next_after(schedule, last)
        if instant is None or instant >= limit_us:
            return Span(count, last, before, False, count)
        if count >= MISFIRE_SCAN:
            break
        count, before, last = count + 1, last, instant
    latest, steps = _latest_before(next_after, schedule, last, limit_us)
    previous, more = _latest_before(next_after, schedule, last, latest)
    return Span(count, latest, previous, True, count + steps + more)


def _counted(schedule: Schedule, first: int, limit_us: int) -> Span | None:
    """The span by the schedule's arithmetic, exact; None when it cannot count exactly."""
    if not isinstance(schedule, CountableSchedule):
        return None
    count = schedule.count_between(first, limit_us)  # at least 1: ``first`` is one
    last = schedule.last_before(limit_us) if count else None
    before = schedule.last_before(last) if count and count > 1 and last is not None else None
    if count is None or last is None or (count > 1 and before is None):
        return None
    return Span(count, last, before, False, 2 if before is None else 3)


def _latest_before(
    next_after: NextAfter, schedule: Schedule, after: int, limit_us: int
) -> tuple[int, int]:
    """The latest instant below ``limit_us`` (``after`` when none is after it), by bisection
    on ``next_after``, and the instants computed."""
    first = next_after(schedule, after)
    if first is None or first >= limit_us:
        return after, 1
    low, high, steps = after, limit_us - 1, 1  # next_after(low) < limit <= next_after(high)
    while high - low > 1:
        middle = (low + high) // 2
        instant = next_after(schedule, middle)
        steps += 1
        if instant is not None and instant < limit_us:
            low = middle
        else:
            high = middle
    latest = next_after(schedule, low)
    assert latest is not None and latest < limit_us, "next_after is not monotonic"
    return latest, steps + 1


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
    late_cut = now_us - timers.grace_us - plan.jitter_us
    schedule = plan.schedule
    cursor = state.fired_through_us

    first = next_after(schedule, cursor)
    if first is not None and first < window_start and first < late_cut:
        old = span(next_after, schedule, first, window_start)
        result.missed.append(
            Missed(first, old.last, old.count, old.capped, "older than catch_up_window")
        )
        result.examined += old.examined
        cursor = max(old.last, window_start - 1)
        first = next_after(schedule, cursor)

    chosen: list[tuple[int, int, str, str]] = []  # on time; the inline late are put before
    if first is not None and first < late_cut:
        if plan.misfire_policy != "catch_up":
            cursor = _drop_late(plan, span(next_after, schedule, first, late_cut), first,
                                now_us, chosen, result)  # fmt: skip
        elif not timers.inline_catch_up and plan.max_runs is None:
            add_catch_up(state, cursor, late_cut)  # emitted at the backfill rate, in order
            cursor = late_cut - 1

    # catch_up's, at once: with TimerSettings.inline_catch_up, or max_runs (they count first)
    late: list[int] = []
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
    result.examined += timers.count_cap - budget + 1

    if late:
        chosen[:0] = [(i, now_us, plan.run_id(i), "catch_up") for i in late]
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


def _drop_late(
    plan: JobPlan, late: Span, first: int, now_us: int,
    chosen: list[tuple[int, int, str, str]], result: Advance,
) -> int:  # fmt: skip
    """Apply ``skip`` or ``fire_once`` to the late instants from ``first``: the latest is
    fired (``fire_once``) and the rest reported missed; returns the new cursor."""
    result.examined += late.examined
    if plan.misfire_policy == "fire_once":
        chosen.append((late.last, now_us, plan.run_id(late.last), "catch_up"))
        if late.before_last is not None:
            missed = Missed(first, late.before_last, late.count - 1, late.capped,
                            "misfire fire_once")  # fmt: skip
            result.missed.append(missed)
    else:
        result.missed.append(Missed(first, late.last, late.count, late.capped, "misfire skip"))
    return late.last


def add_catch_up(state: JobState, after_us: int, before_us: int) -> None:
    """Queue a catch_up job's late instants in (``after_us``, ``before_us``) after the catch-up
    cursors it has (they go before its Backfill commands'); one that ends where these start
    is extended."""
    n = 0
    while n < len(state.backfills) and state.backfills[n].catch_up:
        n += 1
    last = state.backfills[n - 1] if n else None
    if last is not None and last.end_us > after_us:
        last.end_us = max(last.end_us, before_us)
        return
    state.backfills.insert(n, BackfillCursor(CATCH_UP_REQUEST, after_us, before_us, False))


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
