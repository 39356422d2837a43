"""The logic's actions carried out on a task context: a Start becomes a request sent after the
commit, a worker offer, a Kafka record or a refusal; a Cancel ends a lease, drops an unsent
start or aborts a request; attempts' outcomes are recorded, each run's step kept to that run."""

from __future__ import annotations

import functools
import logging
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from schedulerstream.clock import Clock
from schedulerstream.contracts.worker import cancel_value, offer_value
from schedulerstream.dispatcher.actions import Action, Cancel, Start, in_transaction
from schedulerstream.dispatcher.context import ContextOutput
from schedulerstream.dispatcher.deliveries import Completion, Deliveries
from schedulerstream.dispatcher.kafka_records import KafkaRecords
from schedulerstream.dispatcher.leases import Lease, WorkerLeases
from schedulerstream.dispatcher.limits import Limits
from schedulerstream.dispatcher.logic import DispatchLogic
from schedulerstream.dispatcher.work_topics import WorkTopics
from schedulerstream.errors import (
    DependencyDown,
    SchedulerStreamError,
    StateError,
    TooManyWorkPools,
)
from schedulerstream.histogram import Histogram
from schedulerstream.model import HttpTarget as HttpConfig
from schedulerstream.model import KafkaTarget as KafkaConfig
from schedulerstream.model import SqsTarget as SqsConfig
from schedulerstream.model import WorkerTarget as WorkerConfig
from schedulerstream.runtime.context import TaskContext
from schedulerstream.settings import Settings
from schedulerstream.targets.base import Outcome, Sender
from schedulerstream.targets.envelope import envelope_text
from schedulerstream.targets.http import HttpSender
from schedulerstream.tenants.policy import TenantPolicy

log = logging.getLogger(__name__)
JSON = b"application/json"


@dataclass(eq=False)
class ActionApplier:
    """Start and Cancel actions → requests held for the commit, offers and outcomes; the
    topology owns one and calls it once per batch of actions or completions."""

    settings: Settings
    clock: Clock
    logic: DispatchLogic
    limits: Limits
    leases: WorkerLeases
    executor: Deliveries
    kafka: KafkaRecords
    work_topics: WorkTopics
    tenants: TenantPolicy
    dispatch_lateness: Histogram  # first attempts (metrics)
    unsent: dict[int, list[Start]] = field(init=False)  # waiting for the commit
    applying: int = field(init=False, default=0)  # this tick's actions ``apply`` has reached

    def __post_init__(self) -> None:
        self.http = HttpSender.from_settings(self.settings)
        self._sqs: Sender[Any] | None = None
        self.unsent = defaultdict(list)
        self._settled = False  # the last ``_settle`` gave its start's slot back

    # -- actions ------------------------------------------------------------------------
    def apply(self, ctx: TaskContext, actions: list[Action]) -> None:
        for action in actions:
            self.applying += 1  # a tick that fails past here: this action settled its slot
            if isinstance(action, Cancel):
                self._cancel(ctx, action)
                continue
            self._settled = False
            start = functools.partial(self._start, ctx, action)
            failed = self.contained(ctx, action.delivery.run_id, start, "starting its attempt")
            if failed is not None:
                self._unstarted(ctx.partition, action)
                self._start_failed(ctx, action, failed)

    def _start_failed(self, ctx: TaskContext, start: Start, exc: Exception) -> None:
        """The selection left the run in flight; its attempt fails (retried as a failure is)
        instead of waiting for the partition's next start."""
        d = start.delivery
        if start.run is not None:  # a record's: its run was not saved in flight
            save = functools.partial(self.logic.save_start, ctx.store, ctx.partition, start)
            if self.contained(ctx, d.run_id, save, "saving its start") is not None:
                requeue = functools.partial(self.logic.requeue, ctx.store, ctx.partition, start)
                self.contained(ctx, d.run_id, requeue, "queueing it again")
                return
        reason = f"the attempt could not start ({type(exc).__name__}: {exc})"[:1000]
        done = Completion(start.partition, start.tenant, d.run_id, d.attempt,
                          Outcome("failed", reason, True, 0), start.host)  # fmt: skip
        if self._record(ctx, done, ctx.now_us(), "recording its failed start") is not None:
            self.logic.unblock(ctx.partition, d.run_id)

    def _cancel(self, ctx: TaskContext, action: Cancel) -> None:
        lease = self.leases.get(ctx.store, action.run_id)
        if lease is not None and lease.attempt == action.attempt:
            self.leases.end(ctx.store, ctx.partition, lease)
            run = self.logic.load(ctx.store, action.run_id)
            self.tell_worker(ctx, lease, (run and run.last_error) or "cancelled")
        elif not self._drop_unsent(action):
            self.executor.cancel(action.partition, action.run_id, action.attempt)

    def _unstarted(self, partition: int, start: Start) -> None:
        """A start whose step raised: it is not sent, and its slot (if it took one and still
        holds it) is free again."""
        unsent = self.unsent.get(partition, [])
        if start in unsent:
            unsent.remove(start)
        if self.leases.drop_slot(partition, start.delivery.run_id):
            return  # an offer's slot, given back with its lease
        if not in_transaction(start.target) and not self._settled:
            self.limits.release(start.tenant, start.host)

    def _start(self, ctx: TaskContext, start: Start) -> None:
        if not self.logic.started(ctx.partition, start):
            return  # a record's run a run of its job replaced in this tick: not produced
        if start.delivery.attempt == 1 and start.delivery.trigger != "backfill":
            lateness_us = max(ctx.now_us(), start.at_us) - start.delivery.scheduled_at_us
            self.dispatch_lateness.observe(lateness_us / 1e6)
        config = start.target
        if isinstance(config, HttpConfig | SqsConfig):
            self.unsent[start.partition].append(start)
            ctx.request_commit()
        elif (refused := self._not_granted(start)) is not None:
            self._settle(ctx, start, Outcome("refused", refused, False, 0))
        elif isinstance(config, KafkaConfig):
            self._settle(ctx, start, self.kafka.produce(ctx, start, config))
        else:
            self._offer(ctx, start, config)

    def _drop_unsent(self, cancel: Cancel) -> bool:
        """Cancel an attempt not sent yet (cancelled or replaced in the same transaction)."""
        unsent = self.unsent.get(cancel.partition, [])
        for i, start in enumerate(unsent):
            d = start.delivery
            if (d.run_id, d.attempt) == (cancel.run_id, cancel.attempt):
                del unsent[i]
                self.limits.release(start.tenant, start.host)
                return True
        return False

    def _offer(self, ctx: TaskContext, start: Start, config: WorkerConfig) -> None:
        """Offer the attempt on the pool's topic (in this transaction) under a lease; the
        Limits slot stays held until the lease ends."""
        run = self.logic.load(ctx.store, start.delivery.run_id)
        assert run is not None
        now = run.deadline_us - round(start.delivery.deadline * 1e6)  # the attempt's start
        origin = f"{run.run_id}#{start.delivery.attempt}"
        refused = ctx.failed(origin)
        if refused is not None:  # the work topic was deleted, say: created again next time
            self.work_topics.forget(config.pool)
            ctx.isolated("worker_offer", f"{run.run_id}: {refused}")
            self._settle(ctx, start, Outcome("failed", f"worker pool {config.pool!r}: {refused}",
                                             True, 0))  # fmt: skip
            return
        try:
            topic = self.work_topics.topic(config.pool)  # made sure of off the loop (ready)
        except TooManyWorkPools as exc:  # a new pool past the cap: not retried, as a grant
            self._settle(ctx, start, Outcome("refused", str(exc), False, 0))
            return
        except SchedulerStreamError as exc:
            reason = f"worker pool {config.pool!r}: no work topic ({exc})"
            self._settle(ctx, start, Outcome("failed", reason, True, 0))
            return
        lease = self.leases.offer(ctx.store, ctx.partition, run, config.pool, now)
        value = offer_value(envelope_text(start.delivery), config.pool, lease.lease_ms, now,
                            run.deadline_us, ctx.partition)  # fmt: skip
        ctx.produce(topic, run.run_id.encode(), value, None, [("content-type", JSON)],
                    origin=origin)  # fmt: skip

    def tell_worker(self, ctx: TaskContext, lease: Lease, reason: str) -> None:
        """A cancel record for ``lease``'s attempt on its pool's topic."""
        topic = self.settings.topics.work(lease.pool)
        value = cancel_value(lease.run_id, lease.attempt, reason, ctx.partition)
        ctx.produce(topic, lease.run_id.encode(), value, None)

    def _not_granted(self, start: Start) -> str | None:
        """Why ``start``'s tenant may not reach its pool or topic (cron.tenants grants)."""
        grants = self.tenants.grants.get(start.tenant)
        return None if grants is None else grants.refusal(start.tenant, start.target)

    def _settle(self, ctx: TaskContext, start: Start, outcome: Outcome) -> None:
        """An attempt that ended as it started (Kafka, refused)."""
        d = start.delivery
        self._settled = False
        out = ContextOutput(ctx)
        if start.run is not None:  # a record's run, started in memory
            self.logic.on_record_outcome(ctx.store, out, ctx.partition, start, outcome,
                                         ctx.now_us())  # fmt: skip
        else:
            self.logic.on_outcome(ctx.store, out, ctx.partition, d.run_id, d.attempt, outcome,
                                  ctx.now_us())  # fmt: skip
        if not in_transaction(start.target):  # a Kafka record took no slot
            self.limits.release(start.tenant, start.host)
            self._settled = True

    def _sqs_target(self) -> Sender[Any]:
        if self._sqs is None:
            from schedulerstream.targets.sqs import SqsSender  # aiobotocore only where used

            self._sqs = SqsSender()
        return self._sqs

    # -- outcomes -----------------------------------------------------------------------
    def record(self, ctx: TaskContext, applied: list[Completion], now_us: int) -> None:
        """The outcomes of the attempts that ended, each recorded alone (``contained``)."""
        for done in applied:
            failed = self._record(ctx, done, now_us, "recording its attempt's outcome")
            if failed is None:
                continue
            instead = _unrecorded(done, failed)
            what = "recording its attempt's failure"
            if instead is None or self._record(ctx, instead, now_us, what) is not None:
                self.logic.unblock(ctx.partition, done.run_id)  # left in flight: see unblock

    def _record(self, ctx: TaskContext, done: Completion, now_us: int,
                what: str) -> Exception | None:  # fmt: skip
        outcome = done.outcome
        assert outcome is not None

        def record() -> None:
            self.logic.on_outcome(ctx.store, ContextOutput(ctx), ctx.partition, done.run_id,
                                  done.attempt, outcome, now_us)  # fmt: skip

        return self.contained(ctx, done.run_id, record, what)

    def contained(self, ctx: TaskContext, run_id: str, call: Callable[[], object],
                  what: str) -> Exception | None:  # fmt: skip
        """One run's step of a tick; when it raises (a bug its input met), its store writes
        and records are undone and it is reported, and the tick goes on with the others.
        A start that raised fails its attempt (``_start_failed``); a run left in flight when
        that raises too is re-dispatched when the partition next starts, and its job's other
        runs do not wait for it meanwhile (``DispatchLogic.unblock``). An error of the
        store or a dependency still fails the tick."""
        mark = ctx.mark()
        try:
            call()
        except (StateError, DependencyDown):
            raise
        except Exception as exc:
            ctx.undo_to(mark)
            log.error("run %s: %s failed; its changes were dropped", run_id, what, exc_info=exc)
            ctx.isolated("dispatch_step", f"{run_id}: {what}: {type(exc).__name__}: {exc}")
            return exc
        return None

    # -- sending ------------------------------------------------------------------------
    def undo(self, partition: int, unsent: int) -> None:
        """A failed tick's starts are not sent and give their slots back: those ``apply`` did
        not reach, and those waiting to be sent past the first ``unsent``."""
        for start in selection_starts(self.logic.selection.actions[self.applying :]):
            self.limits.release(start.tenant, start.host)
        for start in self.unsent[partition][unsent:]:
            self.limits.release(start.tenant, start.host)
        del self.unsent[partition][unsent:]

    def send(self, validated: float, revoking: set[int]) -> None:
        """Send the committed starts, except those of the partitions in ``revoking``; their
        time to live counts from ``validated``."""
        now = self.clock.now_us()
        committed = validated
        for partition in [p for p in self.unsent if p not in revoking]:
            for start in self.unsent.pop(partition):
                target = self.http if isinstance(start.target, HttpConfig) else self._sqs_target()
                self.executor.submit(start.partition, start.tenant, start.delivery, target,
                                     start.target, start.host,
                                     (start.at_us - now) / 1e6 if start.at_us else 0.0,
                                     committed)  # fmt: skip
        self.executor.flush()

    def drop(self, partition: int) -> None:
        """Drop ``partition``'s starts never committed (never sent): their slots are free."""
        for start in self.unsent.pop(partition, []):
            self.limits.release(start.tenant, start.host)

    def close(self) -> None:
        """Close the targets (on the delivery loop)."""
        self.executor.call(self.http.close)
        if self._sqs is not None:
            self.executor.call(self._sqs.close)


_UNRECORDED = "the attempt's outcome could not be recorded"


def _unrecorded(done: Completion, exc: Exception) -> Completion | None:
    """What a tick whose recording of ``done`` raised applies instead: a plain failure (retried
    as the attempt's own outcome would have been), or nothing when that failed too."""
    outcome = done.outcome
    if outcome is None or outcome.reason.startswith(_UNRECORDED):
        return None
    reason = f"{_UNRECORDED} ({type(exc).__name__}: {exc}); the target said: {outcome.reason}"
    return done._replace(outcome=Outcome("failed", reason[:1000], outcome.retryable,
                                         outcome.duration_us, outcome.status_code))  # fmt: skip


def selection_starts(actions: Sequence[Action]) -> Iterator[Start]:
    """The starts of ``actions`` that took a Limits slot (not Kafka records)."""
    for action in actions:
        if isinstance(action, Start) and not in_transaction(action.target):
            yield action
