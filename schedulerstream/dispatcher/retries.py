"""Retries: after a failed attempt, the next one after its backoff, or a dead letter.

A wait shorter than the shortest delay tier is kept here (the run is queued, due at
``retry_at``); a longer one parks the run (WAITING) on the largest tier below the wait, and
the record coming back queues it (``DispatchLogic.on_retry``). The policy's ``max_attempts``
and ``max_age`` bound the retries; past them the run is dead-lettered.
"""

from __future__ import annotations

from schedulerstream.dispatcher import records as rk
from schedulerstream.dispatcher.backoff import backoff_us, tier_for
from schedulerstream.dispatcher.context import PartitionContext, Runs
from schedulerstream.dispatcher.events import EventWriter
from schedulerstream.dispatcher.records import RunRecord
from schedulerstream.dispatcher.states import WAITING, AttemptOutcome, move

FAILED, DEAD_LETTERED = AttemptOutcome.FAILED, AttemptOutcome.DEAD_LETTERED
Last = tuple[str, int | None]  # how the last attempt ended: (kind, status code)


class Retries:
    """Schedules the next attempt of a run whose attempt failed, within its retry policy."""

    def __init__(self, tiers: tuple[tuple[str, int], ...], events: EventWriter,
                 runs: Runs) -> None:  # fmt: skip
        self.tiers = tiers  # (delay topic, delay µs), shortest first
        self.events = events
        self.runs = runs

    def after_failure(self, pc: PartitionContext, run: RunRecord, now_us: int,
                      retry_after_s: float | None,
                      last: Last = (FAILED, None)) -> None:  # fmt: skip
        """Retry ``run`` (in flight, its attempt ended as ``last``), or dead-letter it when its
        policy allows no more."""
        policy = self.runs.spec(run).retry_policy
        if run.attempt >= policy.max_attempts:
            self.dead_letter(pc, run, now_us, f"{run.attempt} attempts", last)
            return
        retry_at = now_us + backoff_us(policy, run.run_id, run.attempt, retry_after_s)
        if retry_at > run.accepted_at_us + round(policy.max_age * 1e6):
            self.dead_letter(pc, run, now_us, "max_age exceeded", last)
            return
        value = self.events.emit(pc.out, pc.partition, run, "retry_scheduled", now_us,
                                 reason=run.last_error, retry_at_us=retry_at)  # fmt: skip
        tier = tier_for(retry_at - now_us, self.tiers)
        if tier is None:
            self.runs.enqueue(pc, run, retry_at)
            return
        move(run, WAITING)
        run.due_us = retry_at
        pc.out.produce(tier, run.run_id.encode(), value, pc.partition)
        rk.save(pc.store, run)

    def dead_letter(self, pc: PartitionContext, run: RunRecord, now_us: int, why: str,
                    last: Last = (FAILED, None)) -> None:  # fmt: skip
        reason = f"{why}; last error: {run.last_error}"
        self.runs.finish(pc, run, DEAD_LETTERED, now_us, reason, status_code=last[1],
                         last_kind=last[0])  # fmt: skip
