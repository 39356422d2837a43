"""The overlap policy: whether a run's first attempt may start beside the job's active runs.

- ``allow``: it starts; ``replace``: the active runs are cancelled and it starts;
- ``forbid``: it is skipped; ``buffer_one``: it waits (BUFFERED, in ``buf/{job key}``) until
  the active runs end, unless another run already waits there: then it is skipped.

A run whose target answered 410 for its job version (``gone/{job key}``) is skipped before the
policy is asked. Notifications go to the notify target: they neither wait nor block.
"""

from __future__ import annotations

from schedulerstream import notices
from schedulerstream.dispatcher import records as rk
from schedulerstream.dispatcher.actions import Action
from schedulerstream.dispatcher.context import PartitionContext, Runs
from schedulerstream.dispatcher.gone import gone_reason
from schedulerstream.dispatcher.records import RunRecord
from schedulerstream.dispatcher.states import BUFFERED, TERMINAL, AttemptOutcome, move

SKIPPED = AttemptOutcome.SKIPPED


class OverlapPolicy:
    """Applies a job's overlap policy to its runs on one process."""

    def __init__(self, runs: Runs) -> None:
        self.runs = runs

    def admit(self, pc: PartitionContext, run: RunRecord, qkey: bytes, now_us: int,
              actions: list[Action]) -> bool:  # fmt: skip
        """May ``run`` (queued, at the head of its queue, attempt 0) start now? False when it
        was consumed instead (skipped or buffered); the runs it replaces get ``actions``."""
        if run.trigger == notices.NOTIFICATION:
            return True  # it goes to the notify target, whatever the job's target does
        store = pc.store
        gone = gone_reason(store, pc.index, run)
        if gone is not None:
            store.delete(qkey, logged=False)
            self.runs.finish(pc, run, SKIPPED, now_us, gone)
            return False
        policy = self.runs.spec(run).overlap_policy
        if policy == "allow":
            return True  # the job's active runs are not looked at (each is a record to read)
        others = self.active_others(pc, run)
        if not others:
            return True
        if policy == "replace":
            for other in others:
                reason = f"replaced by {run.run_id}"
                actions.extend(self.runs.cancel(pc, other, reason, now_us))
            return True
        store.delete(qkey, logged=False)
        key = rk.buffer_key(run.job_key)
        buffered = store.get(key) if pc.index.may_exist(key) else None
        if policy == "buffer_one" and (buffered is None or buffered.decode() == run.run_id):
            move(run, BUFFERED)
            pc.index.mark(key)
            store.put(key, run.run_id.encode())
            rk.save(store, run)
            return False
        reason = f"overlap_policy {policy}: {others[0].run_id} is still active"
        self.runs.finish(pc, run, SKIPPED, now_us, reason)
        return False

    def may_have_others(self, pc: PartitionContext, run: RunRecord) -> bool:
        """Are other runs of the job indexed active (some may have ended: no record is read)?"""
        return any(
            other_id != run.run_id and not notices.is_notification(other_id)
            for other_id in pc.index.active_ids(run.job_key)
        )

    def active_others(self, pc: PartitionContext, run: RunRecord) -> list[RunRecord]:
        """The job's other runs that started and have not finished."""
        others = []
        for other_id in pc.index.active(run.job_key):
            if other_id == run.run_id or notices.is_notification(other_id):
                continue  # a notification neither waits for nor blocks the job's runs
            other = self.runs.current(pc.store, other_id)
            if other is not None and other.status not in TERMINAL:
                others.append(other)
            else:
                pc.index.deactivate(run.job_key, other_id)
        return others

    def release(self, pc: PartitionContext, finished: RunRecord, now_us: int) -> None:
        """``finished`` ended: queue the job's buffered run if no other run is active."""
        store = pc.store
        key = rk.buffer_key(finished.job_key)
        buffered = store.get(key) if pc.index.may_exist(key) else None
        if buffered is None or buffered.decode() == finished.run_id:
            return
        waiting = rk.load(store, buffered.decode())
        if waiting is None or waiting.status != BUFFERED:
            store.delete(rk.buffer_key(finished.job_key))
        elif not self.active_others(pc, waiting):
            store.delete(rk.buffer_key(finished.job_key))
            self.runs.enqueue(pc, waiting, now_us)
