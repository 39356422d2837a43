"""Runs arriving on cron.runs: a RunTriggered queued (a duplicate dropped, an older version
replaced, a revoked run re-armed); a RunRevoked ends a run not started, or aborts an armed one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from schedulerstream import notices
from schedulerstream.dispatch_spec import DispatchSpec
from schedulerstream.dispatcher import records as rk
from schedulerstream.dispatcher.actions import Action, Cancel, waits_for_ready
from schedulerstream.dispatcher.context import Counters, PartitionContext, Runs
from schedulerstream.dispatcher.events import EventWriter
from schedulerstream.dispatcher.records import RunRecord
from schedulerstream.dispatcher.selection import Ready
from schedulerstream.dispatcher.spec import SpecReader
from schedulerstream.dispatcher.states import IN_FLIGHT, QUEUED, REVOKED, AttemptOutcome, end

# an armed attempt this close to its due time is left to be sent: a revocation does not abort it
ARM_MARGIN_US = 20_000


@dataclass(eq=False)
class Arrivals:
    """``DispatchLogic``'s RunTriggered and RunRevoked records → queued, replaced, revoked runs."""

    specs: SpecReader
    events: EventWriter
    counters: Counters
    ready: Ready | None
    runs: Runs

    def __post_init__(self) -> None:
        self.enqueue = self.runs.enqueue  # bound once (per run)
        self.finish = self.runs.finish

    def triggered(self, pc: PartitionContext, rec: dict[str, Any], now_us: int) -> None:
        old = rk.load(pc.store, rec["run_id"])
        if old is not None:
            rearm = old.status == REVOKED and rec["job_version"] >= old.job_version
            update = old.not_started and rec["job_version"] > old.job_version
            if not (rearm or update):
                self.counters.duplicates += 1
                return
            rk.unindex(pc.store, old)
        spec = self._spec(rec)  # validates (else: rejected)
        if rec["trigger"] == notices.NOTIFICATION:
            spec = spec.notice()  # the job's notify target (the scheduler's "paused" notice)
        run = RunRecord(
            run_id=rec["run_id"], tenant=rec["tenant"], job_id=rec["job_id"],
            scheduled_at_us=rec["scheduled_at_us"], not_before_us=rec["not_before_us"],
            accepted_at_us=now_us, trigger=rec["trigger"], payload_json=rec["payload_json"],
            job_version=rec["job_version"], spec=spec,
            status=QUEUED if old is None else old.status,  # it replaces ``old``
        )  # fmt: skip
        self.counters.accepted += 1
        self.events.emit(pc.out, pc.partition, run, "accepted", now_us)
        self.enqueue(pc, run, run.not_before_us)
        if self.ready is not None and waits_for_ready(spec.target):
            self.ready(spec.target, run.tenant)  # asks for its topic now, before it is due

    def _spec(self, rec: dict[str, Any]) -> DispatchSpec:
        """The run's spec: the one it carries, else its definition snapshot's."""
        text = rec.get("dispatch_spec_json")
        if text is not None:
            return self.specs.read_json(text)
        if not rec["job_definition"]:
            raise ValueError(f"run {rec['run_id']!r} carries neither a dispatch spec nor the "
                             "job's definition")  # fmt: skip
        run_key = f"{rec['tenant']}/{rec['job_id']}"
        job_key, spec = self.specs.read(rec["job_definition"], run_key, rec["job_version"])
        if job_key != run_key:
            raise ValueError(f"run {rec['run_id']!r} carries the definition of {job_key!r}")
        return spec

    def revoked(self, pc: PartitionContext, rec: dict[str, Any],
                 now_us: int) -> list[Action]:  # fmt: skip
        store = pc.store
        run = rk.load(store, rec["run_id"])
        if run is None:  # keep the revocation: an older RunTriggered must not arm it
            run = RunRecord(
                rec["run_id"], rec["tenant"], rec["job_id"], rec["scheduled_at_us"],
                rec["scheduled_at_us"], now_us, "scheduled", None, rec["job_version"], None,
                status=REVOKED, outcome=AttemptOutcome.REVOKED,
            )  # fmt: skip
            rk.save_finished(store, run, now_us)
            return []
        if run.job_version >= rec["job_version"]:
            return []
        if self.armed(run, now_us):
            run.job_version = rec["job_version"]
            reason = f"{rec['reason']} (before its armed attempt was sent)"
            self.finish(pc, run, AttemptOutcome.REVOKED, now_us, reason)
            return [Cancel(pc.partition, run.run_id, run.attempt)]
        if not run.not_started:
            return []
        rk.unindex(store, run)
        end(run, AttemptOutcome.REVOKED)
        run.job_version = rec["job_version"]
        self.events.emit(pc.out, pc.partition, run, "revoked", now_us, reason=rec["reason"])
        rk.save_finished(store, run, now_us)
        return []

    def armed(self, run: RunRecord, now_us: int) -> bool:
        """Is ``run``'s first attempt started ahead and not due for ``ARM_MARGIN_US`` yet (so
        an abort reaches the delivery loop before it sends)?"""
        return (run.status == IN_FLIGHT and run.attempt == 1
                and run.due_us > now_us + ARM_MARGIN_US)  # fmt: skip
