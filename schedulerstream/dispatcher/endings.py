"""An attempt's end → its run's next step: finished (a terminal event and its aftermath),
retried or dead-lettered, a job paused after a 410; and a run cancelled."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from schedulerstream.codec import Codec
from schedulerstream.dispatcher import records as rk
from schedulerstream.dispatcher.actions import Action, Cancel
from schedulerstream.dispatcher.aftermath import after_finish
from schedulerstream.dispatcher.context import Counters, PartitionContext, Runs, Topics
from schedulerstream.dispatcher.events import EventWriter
from schedulerstream.dispatcher.gone import remember_gone
from schedulerstream.dispatcher.overlap import OverlapPolicy
from schedulerstream.dispatcher.records import RunRecord
from schedulerstream.dispatcher.retries import Retries
from schedulerstream.dispatcher.states import (
    IN_FLIGHT,
    OUTCOME_OF,
    UNKNOWN,
    AttemptOutcome,
    end,
)
from schedulerstream.targets.base import Outcome

SUCCEEDED, FAILED = AttemptOutcome.SUCCEEDED, AttemptOutcome.FAILED  # (hot: no class lookup)
DEAD_LETTERED, CANCELLED = AttemptOutcome.DEAD_LETTERED, AttemptOutcome.CANCELLED


@dataclass(eq=False)
class Endings:
    """``DispatchLogic``'s ends of attempts and runs (its ``finish`` and ``cancel``)."""

    codec: Codec
    topics: Topics
    events: EventWriter
    counters: Counters
    unblocked: dict[int, set[str]]  # the logic's, per partition: see ``DispatchLogic.unblock``
    overlap: OverlapPolicy
    retries: Retries
    runs: Runs

    def __post_init__(self) -> None:
        self.spec = self.runs.spec  # bound once (per run)
        self.enqueue = self.runs.enqueue

    def ended(self, pc: PartitionContext, run: RunRecord, outcome: Outcome, now_us: int,
               *, unsaved: bool = False) -> None:  # fmt: skip
        """``run``'s attempt ended with ``outcome`` (``unsaved``: a record's run, its start not
        written)."""
        out, store, partition = pc.out, pc.store, pc.partition
        extra: dict[str, Any] = {"status_code": outcome.status_code,
                                 "duration_us": outcome.duration_us}  # fmt: skip
        if outcome.succeeded:
            self.finish(pc, run, SUCCEEDED, now_us, outcome.reason, **extra)
            return
        if outcome.kind == "gone":
            pause = remember_gone(self.codec, store, pc.index, run, outcome, now_us)
            if pause is not None:
                out.produce(self.topics.commands, run.job_key.encode(), pause, partition)
            self.finish(pc, run, FAILED, now_us, f"target gone: {outcome.reason}", counts=False,
                        **extra)  # fmt: skip
            return
        kind = OUTCOME_OF[outcome.kind] if outcome.kind in UNKNOWN else FAILED
        unknown = kind in UNKNOWN and self.spec(run).delivery == "at_most_once"
        if not outcome.retryable or unknown:  # a timed-out request may have landed
            self.finish(pc, run, kind, now_us, outcome.reason, **extra)
            return
        if unsaved:  # active until it ends, through its retries
            store.put(rk.active_key(run.job_key, run.run_id), b"", logged=False)
        run.last_error = outcome.reason
        self.events.emit(out, partition, run, kind, now_us, reason=outcome.reason, **extra)
        self.retries.after_failure(pc, run, now_us, outcome.retry_after_s,
                                   (kind, outcome.status_code))  # fmt: skip

    def cancel(self, pc: PartitionContext, run: RunRecord, reason: str,
               now_us: int) -> list[Action]:  # fmt: skip
        """End ``run`` as cancelled; an attempt in flight is to be aborted."""
        actions: list[Action] = []
        if run.status == IN_FLIGHT:
            actions.append(Cancel(pc.partition, run.run_id, run.attempt))
        rk.unindex(pc.store, run)
        self.finish(pc, run, CANCELLED, now_us, reason)
        return actions

    def finish(self, pc: PartitionContext, run: RunRecord, kind: AttemptOutcome, now_us: int,
               reason: str | None, *, status_code: int | None = None,
               duration_us: int | None = None, last_kind: str | None = None,
               counts: bool = True) -> None:  # fmt: skip
        """A terminal event; the run leaves the job's active set, freeing a buffered run. Its
        aftermath (``aftermath``): a pause after N failed runs, a dead letter's notification."""
        store = pc.store
        if kind != DEAD_LETTERED:  # a dead letter's status code is its last attempt's
            self.events.emit(pc.out, pc.partition, run, kind, now_us, reason=reason,
                             status_code=status_code, duration_us=duration_us)  # fmt: skip
        else:
            self.events.emit(pc.out, pc.partition, run, kind, now_us, reason=reason)
        spec = run.spec
        after = after_finish(self.codec, store, run, spec, kind, reason, now_us,
                             status_code=status_code, last_kind=last_kind,
                             counts=counts)  # fmt: skip
        if after.pause is not None:
            pc.out.produce(self.topics.commands, run.job_key.encode(), after.pause, pc.partition)
        if after.notice is not None:
            self._admit(pc, after.notice, now_us)
        store.delete(rk.active_key(run.job_key, run.run_id), logged=False)
        pc.index.deactivate(run.job_key, run.run_id)
        if self.unblocked:  # it starts or ends again: blocking as any run
            self.unblocked.get(pc.partition, set()).discard(run.run_id)
        end(run, kind)
        run.last_error = reason if kind != SUCCEEDED else None
        rk.save_finished(store, run, now_us)
        self.counters.finished[kind] = self.counters.finished.get(kind, 0) + 1
        self.overlap.release(pc, run, now_us)

    def _admit(self, pc: PartitionContext, run: RunRecord, now_us: int) -> None:
        """Queue a run made here (a notification): once per id, like a RunTriggered."""
        if rk.load(pc.store, run.run_id) is not None:
            self.counters.duplicates += 1
            return
        self.counters.accepted += 1
        self.events.emit(pc.out, pc.partition, run, "accepted", now_us)
        self.enqueue(pc, run, run.not_before_us)
