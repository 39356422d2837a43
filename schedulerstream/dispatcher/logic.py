"""DispatchLogic: the dispatcher's pure state machine for the partitions of one process.

Input records, outcomes and ticks change the partition's store and produce AttemptEvents (and
retry records) through an ``Output``; what must happen outside (start a delivery, abort one)
is returned as ``Start``/``Cancel`` actions. No Kafka, no HTTP, no clock of its own.

A run's status moves only as ``states`` allows. Each call works on one ``PartitionContext``:
the store and output it was given, and the partition's in-memory ``PartitionIndex`` (rebuilt
in ``on_running``, so a start costs point reads, never a range scan) and tenant ring. Runs
arriving and revoked are ``arrivals``'; which runs start is ``selection``'s; an attempt's end
and a run's (finish, cancel) are ``endings``'; the overlap policy is ``overlap``'s, the next
attempt after a failure ``retries``', a 410 ``gone``'s, forgetting finished runs
``retention``'s.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

from schedulerstream import notices
from schedulerstream.codec import Codec
from schedulerstream.dispatch_spec import DispatchSpec
from schedulerstream.dispatcher import records as rk
from schedulerstream.dispatcher.actions import (
    Action,
    Cancel,
    Start,
    in_transaction,
    target_host,
)
from schedulerstream.dispatcher.arrivals import Arrivals
from schedulerstream.dispatcher.context import NO_OUTPUT, Counters, PartitionContext, Topics
from schedulerstream.dispatcher.endings import Endings
from schedulerstream.dispatcher.events import EventWriter, Output
from schedulerstream.dispatcher.fairness import DeficitRing
from schedulerstream.dispatcher.index import PartitionIndex
from schedulerstream.dispatcher.limits import Limits
from schedulerstream.dispatcher.overlap import OverlapPolicy
from schedulerstream.dispatcher.records import RunRecord
from schedulerstream.dispatcher.retention import DEDUPE_RETENTION_US, Retention
from schedulerstream.dispatcher.retries import Retries
from schedulerstream.dispatcher.selection import FairSelection, Ready
from schedulerstream.dispatcher.spec import SpecReader
from schedulerstream.dispatcher.states import (
    IN_FLIGHT,
    QUEUED,
    TERMINAL,
    WAITING,
    AttemptOutcome,
    move,
)
from schedulerstream.errors import StateError
from schedulerstream.ingest import decode_command
from schedulerstream.runtime.store import StateStore
from schedulerstream.targets.base import Delivery, Outcome

__all__ = ["Action", "Cancel", "DispatchLogic", "Start"]

FAILED = AttemptOutcome.FAILED  # (hot: no class lookup)


class DispatchLogic:
    """Runs, revocations, cancellations, outcomes and ticks → state, events and actions."""

    def __init__(
        self,
        codec: Codec,
        topics: Topics,
        limits: Limits,
        instance: str,
        *,
        weights: Mapping[str, float] | None = None,
        start_budget: int = 2000,
        record_budget: int = 100,
        retention_us: int = DEDUPE_RETENTION_US,
        prune_budget: int = 1000,
        arm_us: int = 0,
        ready: Ready | None = None,
    ) -> None:
        self.codec = codec
        self.topics = topics
        self.limits = limits
        self.events = EventWriter(codec, topics.attempts, instance)
        self.counters = Counters()
        self.specs = SpecReader(codec)
        self._weights: Mapping[str, float] = weights if weights is not None else {}
        self._kept: dict[int, tuple[PartitionIndex, DeficitRing]] = {}  # per partition
        self._unsaved: dict[str, RunRecord] = {}  # records' runs started in memory this tick
        self._unblocked: dict[int, set[str]] = {}  # per partition: see ``unblock``
        self.retention = Retention(retention_us, prune_budget)
        self.overlap = OverlapPolicy(self)
        self.retries = Retries(topics.tiers, self.events, self)
        self.endings = Endings(codec, topics, self.events, self.counters, self._unblocked,
                               self.overlap, self.retries, self)  # fmt: skip
        # the parts' entries, bound once (a run's path calls them)
        self.finish, self.cancel, self._ended = (self.endings.finish, self.endings.cancel,
                                                 self.endings.ended)  # fmt: skip
        self.arrivals = Arrivals(self.specs, self.events, self.counters, ready, self)
        self._triggered, self._revoked = self.arrivals.triggered, self.arrivals.revoked
        self.selection = FairSelection(limits, start_budget, self.spec, self.overlap.admit,
                                       self._start, self._armable, arm_us,
                                       record_budget, ready, self.current)  # fmt: skip

    def spec(self, run: RunRecord) -> DispatchSpec:
        """The run's DispatchSpec (an unfinished run always has one)."""
        if run.spec is None:
            raise StateError(f"run {run.run_id} has no dispatch spec: it ended")
        return run.spec

    def queue_depths(self, partition: int) -> dict[str, int]:
        """Queued runs per tenant of ``partition`` (for metrics; stale entries included)."""
        kept = self._kept.get(partition)
        return {} if kept is None else {t: kept[0].queued(t) for t in kept[0].tenants()}

    def _context(self, store: StateStore, out: Output, partition: int) -> PartitionContext:
        kept = self._kept.get(partition)
        if kept is None:
            kept = self._kept[partition] = (PartitionIndex(), DeficitRing(self._weights))
        return PartitionContext(store, out, partition, kept[0], kept[1])

    # -- inputs ---------------------------------------------------------------------------
    def on_run(self, store: StateStore, out: Output, partition: int, value: bytes | None,
               now_us: int) -> list[Action]:  # fmt: skip
        """A cron.runs record: RunTriggered or RunRevoked (which may abort an armed start)."""
        name, record = self.codec.decode(value)
        if name == "RunTriggered":
            self._triggered(self._context(store, out, partition), record, now_us)
            return []
        if name == "RunRevoked":
            return self._revoked(self._context(store, out, partition), record, now_us)
        raise ValueError(f"{name} does not belong on the runs topic")

    def on_retry(self, store: StateStore, partition: int, value: bytes | None) -> None:
        """A delay-topic record came back: the retry is queued locally for its due time."""
        record = self.codec.decode_as("AttemptEvent", value)
        run = rk.load(store, record["run_id"])
        if run is None or run.status != WAITING or run.attempt != record["attempt"]:
            return  # cancelled or superseded while it waited on the topic
        self.enqueue(self._context(store, NO_OUTPUT, partition), run, record["retry_at_us"] or 0)

    def on_command(self, store: StateStore, out: Output, partition: int, key: bytes | None,
                   value: bytes | None, now_us: int) -> list[Action]:  # fmt: skip
        """A cron.commands record: CancelRun is ours; trigger and backfill are the scheduler's."""
        _, kind, fields = decode_command(self.codec, key, value)
        if kind != "CancelRun":
            return []
        run = rk.load(store, fields["run_id"])
        if run is None or run.status in TERMINAL:
            return []
        return self.cancel(self._context(store, out, partition), run, fields["reason"], now_us)

    def on_outcome(self, store: StateStore, out: Output, partition: int, run_id: str,
                   attempt: int, outcome: Outcome, now_us: int) -> bool:  # fmt: skip
        """The end of one attempt; False when it is late (cancelled, superseded: ignored)."""
        run = rk.load(store, run_id)
        if run is None or run.status != IN_FLIGHT or run.attempt != attempt:
            self.counters.late_outcomes += 1
            return False
        self._ended(self._context(store, out, partition), run, outcome, now_us)
        return True

    def on_record_outcome(self, store: StateStore, out: Output, partition: int, start: Start,
                          outcome: Outcome, now_us: int) -> None:  # fmt: skip
        """The outcome of a record started in this tick: ``start.run``, in memory only, is
        saved as it ends (its in-flight state is never written: no reader sees it)."""
        run = start.run
        assert run is not None
        self._unsaved.pop(run.run_id, None)
        self._ended(self._context(store, out, partition), run, outcome, now_us, unsaved=True)

    def started(self, partition: int, start: Start) -> bool:
        """Is ``start``'s run still in flight? A record's run cancelled in the tick that
        started it (a run of its job replaced it) is not: its record is not produced."""
        kept, run = self._kept.get(partition), start.run
        if kept is None or run is None or kept[0].is_active(run.job_key, run.run_id):
            return True
        self._unsaved.pop(run.run_id, None)
        return False

    def current(self, store: StateStore, run_id: str) -> RunRecord | None:
        """The run as it stands: a record's started in memory this tick, else the store's."""
        run = self._unsaved.get(run_id)
        return run if run is not None else rk.load(store, run_id)

    def unblock(self, partition: int, run_id: str) -> None:
        """``run_id``'s attempt could not be recorded, even as a failure (a bug its record
        meets): it stays in flight in the store, re-dispatched when the partition next
        starts, but its job's other runs no longer wait for it (overlap policy), also after
        a ``reindex``, until it starts or ends again."""
        self._unblocked.setdefault(partition, set()).add(run_id)
        kept = self._kept.get(partition)
        if kept is not None:
            kept[0].forget_active(run_id)

    def save_start(self, store: StateStore, partition: int, start: Start) -> None:
        """Save in flight the run of a record's start whose step raised (its in-memory run may
        be half-ended), so that its failure is recorded as any attempt's is."""
        started = self._unsaved.pop(start.delivery.run_id, None) or start.run
        run = rk.load(store, start.delivery.run_id)
        if run is None or started is None or run.status != QUEUED:
            return
        run.attempt = start.delivery.attempt
        move(run, IN_FLIGHT)
        run.deadline_us = started.deadline_us
        self._save_started(store, run)
        self._context(store, NO_OUTPUT, partition).index.activate(run.job_key, run.run_id)

    def requeue(self, store: StateStore, partition: int, start: Start) -> None:
        """A record's start that could not even be saved in flight (``save_start`` raised): its
        run stays queued in the store with its queue key back, so the partition's next start
        (or ``reindex``) queues it again; it counts as active no more. Its "started" event
        stays without an end: the attempt starts again as the same attempt."""
        run = rk.load(store, start.delivery.run_id)
        if run is None or run.status != QUEUED:
            return
        store.put(rk.queue_key(run.tenant, run.due_us, run.seq), run.run_id.encode(),
                  logged=False)  # fmt: skip
        self._context(store, NO_OUTPUT, partition).index.deactivate(run.job_key, run.run_id)

    def on_tick(self, store: StateStore, out: Output, partition: int,
                now_us: int) -> list[Action]:  # fmt: skip
        """Forget long-finished runs; start the due runs that fairness and the limits allow."""
        pc = self._context(store, out, partition)
        self.retention.tick(pc, now_us)
        self._unsaved.clear()  # a failed tick's
        return self.selection.select(pc, now_us)

    def on_running(self, store: StateStore, out: Output, partition: int, now_us: int,
                   adopt: Callable[[RunRecord], bool] | None = None) -> None:  # fmt: skip
        """The task (re)started from committed state: rebuild the index and the tenant ring;
        runs that were in flight are re-queued for their next attempt (at_least_once) or
        failed as "outcome unknown" (at_most_once), except those ``adopt`` keeps in flight (a
        worker still holds their lease)."""
        index, active = PartitionIndex.restored(store)
        ring = DeficitRing(self._weights)
        for tenant in index.tenants():
            ring.add(tenant)
        self._kept[partition] = (index, ring)
        self._unblocked.pop(partition, None)
        self.retention.restart(partition)
        pc = PartitionContext(store, out, partition, index, ring)
        kept = adopt or (lambda run: False)
        in_flight = [run for run in active if run.status == IN_FLIGHT and not kept(run)]
        for run in in_flight:
            spec = self.spec(run)
            reason = f"outcome unknown: the dispatcher stopped during attempt {run.attempt}"
            if spec.delivery == "at_most_once":
                reason += " (delivery at_most_once: not re-dispatched)"
                self.finish(pc, run, FAILED, now_us, reason)
                continue
            run.last_error = reason
            self.events.emit(out, partition, run, FAILED, now_us, reason=reason)
            if run.attempt >= spec.retry[0]:
                self.retries.dead_letter(pc, run, now_us, "attempts exhausted")
            else:  # an attempt armed ahead of its due time is not sent early now either
                self.enqueue(pc, run, max(now_us, run.due_us))

    def reindex(self, store: StateStore, partition: int) -> None:
        """Rebuild the partition's in-memory queues from ``store`` (a failed tick's rollback
        kept queue entries it had popped); its tenant ring keeps its deficits."""
        index, _ = PartitionIndex.restored(store)
        for run_id in self._unblocked.get(partition, ()):
            index.forget_active(run_id)
        kept = self._kept.get(partition)
        ring = kept[1] if kept is not None else DeficitRing(self._weights)
        for tenant in index.tenants():
            ring.add(tenant)
        self._kept[partition] = (index, ring)

    # -- queues ---------------------------------------------------------------------------
    def enqueue(self, pc: PartitionContext, run: RunRecord, due_us: int) -> None:
        """Queue ``run`` in its tenant's queue, due at ``due_us``."""
        store = pc.store
        seq = rk.next_seq(store)
        move(run, QUEUED)
        run.seq, run.due_us = seq, due_us
        store.put(rk.queue_key(run.tenant, due_us, seq), run.run_id.encode(), logged=False)
        rk.save(store, run)
        pc.index.push(run.tenant, max(0, due_us), seq, run.run_id)
        pc.ring.add(run.tenant)

    # -- attempts -------------------------------------------------------------------------
    def _armable(self, pc: PartitionContext, run: RunRecord) -> bool:
        """May ``run`` start before it is due: a request the delivery loop sends at its due
        time (not a record of this transaction, nor a worker's offer), and, for a first
        attempt, no other run of its job active that the overlap policy would weigh."""
        if target_host(self.spec(run).target) is None:
            return False
        if run.attempt > 0 or run.trigger == notices.NOTIFICATION:
            return True
        return not self.overlap.may_have_others(pc, run)

    def _start(self, pc: PartitionContext, run: RunRecord, now_us: int, host: str | None,
               due_us: int = 0) -> Start | None:  # fmt: skip
        """The run's next attempt; sent at ``due_us`` when that is later than now (armed).
        None when it cannot be sent at all (its payload is not JSON, checked at its first
        attempt; later ones carry the same text): the attempt fails, for good, and only this
        run with it."""
        spec = self.spec(run)
        try:
            if run.attempt == 0 and run.payload_json is not None:
                json.loads(run.payload_json)
            delivery = Delivery.from_run(run.run_view(), attempt=run.attempt + 1,
                                         deadline=spec.timeout)  # fmt: skip
        except (ValueError, TypeError, RecursionError) as exc:  # json.loads of its payload
            run.attempt += 1
            move(run, IN_FLIGHT)
            reason = f"the run cannot be sent: its payload: {type(exc).__name__}: {exc}"
            self.finish(pc, run, FAILED, now_us, reason[:1000])
            return None
        run.attempt += 1
        move(run, IN_FLIGHT)
        if self._unblocked:  # it starts or ends again: blocking as any run
            self._unblocked.get(pc.partition, set()).discard(run.run_id)
        send_us = max(now_us, due_us)
        run.deadline_us = send_us + round(spec.timeout * 1e6)
        pc.index.activate(run.job_key, run.run_id)
        record = in_transaction(spec.target)
        if record:  # saved by its outcome, in this tick
            self._unsaved[run.run_id] = run
        else:
            self._save_started(pc.store, run)
        self.counters.started += 1
        deadline = f"deadline {run.deadline_us} µs"
        self.events.emit(pc.out, pc.partition, run, "started", send_us, reason=deadline)
        return Start(pc.partition, run.tenant, delivery, spec.target, host,
                     send_us if send_us > now_us else 0, run if record else None)  # fmt: skip

    @staticmethod
    def _save_started(store: StateStore, run: RunRecord) -> None:
        store.put(rk.active_key(run.job_key, run.run_id), b"", logged=False)
        rk.save(store, run)

    # -- records --------------------------------------------------------------------------
    restore_record = staticmethod(rk.restore)
    load = staticmethod(rk.load)
    save = staticmethod(rk.save)
