"""The dispatcher as a topology on the processor runtime.

Inputs: cron.runs, cron.commands (CancelRun) and the retry delay topics; changelog
cron.dispatcher-state. HTTP and SQS attempts run on the ``Executor``'s loop and come back
through ``punctuate``; a Kafka target is produced inside the transaction (exactly once). The
logic's actions and the attempts' outcomes are carried out by its ``ActionApplier``.

An HTTP or SQS attempt is sent only after the transaction that records it as started has
committed (``after_commit``; the start asks for a commit at once). A zombie that lost its
partitions cannot commit (the broker refuses its offsets), so it sends nothing: split brain
never makes two dispatchers deliver the same attempt. With ``dispatch_prefetch`` the Limits
admit more starts than they let run; the executor holds the committed ones until a slot
frees (within half the session timeout, before a successor could own their partition).
An HTTP or SQS run due within ``dispatch_arm_ms`` starts ahead (``FairSelection``): its start
commits before it is due and the executor sends it at its due time, so the due instant costs
no tick and no commit round trip. A revocation that arrives before the send aborts it.

Delay topics: a retry record is held (its partition paused, ``TaskContext.hold``) until its
record timestamp plus the tier's delay, so no sleeping and no scan; then the run waits in its
tenant queue for the rest of the wait (a tier's records carry waits from its delay up to the
next tier's), due at ``retry_at``.

Worker pools and Kafka topics a tenant's record does not grant it fail its run, refused,
without reaching them; until cron.tenants is read, their starts wait.

Worker pools: an attempt is offered on ``work.<pool>`` inside the transaction that records it
in flight, under a lease (``leases``); cron.worker-events (claimed, heartbeats, outcomes)
extend or end the lease, ``punctuate`` expires the leases whose time passed, and a cancelled,
replaced or expired attempt gets a cancel record on the same work topic. A pool's topic is
made on its first run (``work_topics``), while the cluster holds fewer than
``max_work_pools``; a run to a new pool past it fails, refused, naming the cap.
"""

from __future__ import annotations

import functools
import logging
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from schedulerstream.clock import Clock, SystemClock
from schedulerstream.codec import Codec, default_codec
from schedulerstream.contracts.worker import decode_worker_event
from schedulerstream.dispatcher.applier import ActionApplier
from schedulerstream.dispatcher.context import ContextOutput, Topics
from schedulerstream.dispatcher.deliveries import Completion, Deliveries
from schedulerstream.dispatcher.delivery_process import DeliveryProcess
from schedulerstream.dispatcher.executor import Executor
from schedulerstream.dispatcher.kafka_records import KafkaRecords
from schedulerstream.dispatcher.leases import WorkerLeases
from schedulerstream.dispatcher.limits import Limits
from schedulerstream.dispatcher.logic import DispatchLogic
from schedulerstream.dispatcher.records import RunRecord
from schedulerstream.dispatcher.work_topics import WorkTopics
from schedulerstream.histogram import LATENESS_BUCKETS, Histogram
from schedulerstream.ingest import job_key_from_record_key
from schedulerstream.kafka.topics import ensure_work_topic, retry_tiers
from schedulerstream.model import WorkerTarget as WorkerConfig
from schedulerstream.runtime.context import TaskContext
from schedulerstream.runtime.copartition import check_home_partition
from schedulerstream.runtime.store import StateStore
from schedulerstream.runtime.topology import Topology
from schedulerstream.settings import Settings
from schedulerstream.tenants.policy import TenantPolicy

log = logging.getLogger(__name__)


class DispatcherTopology(Topology):
    """Runs → per-tenant queues → fair dispatch → attempts; see the module docstring."""

    def __init__(
        self,
        settings: Settings,
        codec: Codec | None = None,
        executor: Deliveries | None = None,
        tenants: TenantPolicy | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.settings = settings
        self.clock: Clock = clock or SystemClock()
        # per-tenant weights and limits from cron.tenants, live (tests may inject a fixed one)
        self.tenants = tenants if tenants is not None else TenantPolicy.following(settings, 5.0)
        self.runs_topic = settings.topics.runs
        self.commands_topic = settings.topics.commands
        tiers = tuple((t.name, (t.delay_ms or 0) * 1000) for t in retry_tiers(settings))
        self.tier_delay_us = dict(tiers)
        self.kafka = KafkaRecords(settings, self.clock)  # Kafka targets' records
        # a committed start waits for a slot at most half a session: a paused or cut-off
        # member's successor cannot have taken its partitions over yet; one armed ahead of
        # its due time waits at most half of that for the due time, and the Limits admit
        # to a host only as many waiting starts as its attempt time lets start within that
        ttl_ms = settings.session_timeout_ms / 2
        self.limits = Limits(
            settings.dispatch_concurrency,
            settings.tenant_concurrency,
            settings.tenant_rate_per_s,
            settings.host_concurrency,
            overrides=self.tenants.limits,
            depth=1 + settings.dispatch_prefetch,
            wait_budget_s=ttl_ms / 2000,
        )
        self.logic = DispatchLogic(
            codec or default_codec(),
            Topics(settings.topics.attempts, settings.topics.commands, tiers),
            self.limits,
            settings.instance_id,
            weights=self.tenants.weights,
            arm_us=round(min(settings.dispatch_arm_ms, ttl_ms / 2) * 1000),
            ready=self._ready,
        )
        self.executor = executor or _deliveries(settings)
        self.executor.set_gate(self.limits, ttl_ms / 1000)
        self.dispatch_lateness = Histogram(LATENESS_BUCKETS)  # first attempts (metrics)
        self._completed: dict[int, list[Completion]] = defaultdict(list)
        # applied in the open transaction: given back if it aborts (``on_rebuild``)
        self._applied: dict[int, list[Completion]] = defaultdict(list)
        self._held_since: dict[tuple[str, int, int], int] = {}  # delay-topic record: first seen
        self.worker_events_topic = settings.topics.worker_events
        self.leases = WorkerLeases(self.logic, self.limits, settings.worker_lease_ms)
        self.work_topics = WorkTopics(
            lambda pool: ensure_work_topic(settings, pool, cap=settings.max_work_pools).name
        )
        self._rebuilding: set[int] = set()  # partitions rebuilt in place, not yet running
        self._stale: set[int] = set()  # partitions whose in-memory queues a failed tick left
        self._revoking: set[int] = set()  # partitions being revoked: nothing more is sent
        self.applier = ActionApplier(settings, self.clock, self.logic, self.limits, self.leases,
                                     self.executor, self.kafka, self.work_topics, self.tenants,
                                     self.dispatch_lateness)  # fmt: skip
        self._apply = self.applier.apply  # bound once: called for every input record

    @property
    def name(self) -> str:
        return "dispatcher"

    @property
    def input_topics(self) -> Sequence[str]:
        return (self.runs_topic, self.commands_topic, self.worker_events_topic,
                *self.tier_delay_us)  # fmt: skip

    @property
    def changelog_topic(self) -> str:
        return self.settings.topics.dispatcher_state

    @property
    def owned_topics(self) -> Sequence[str]:
        return (self.settings.topics.attempts, self.commands_topic, *self.tier_delay_us)

    def process(self, ctx: TaskContext, message: Any) -> None:
        key: bytes | None = message.key()
        topic = message.topic()
        now = ctx.now_us()
        out = ContextOutput(ctx)
        if topic == self.commands_topic:
            self._check_partition(ctx, job_key_from_record_key(key))
            self._apply(ctx, self.logic.on_command(ctx.store, out, ctx.partition, key,
                                                   message.value(), now))  # fmt: skip
            return
        run_id = (key or b"").decode("utf-8", "replace")
        self._check_partition(ctx, run_id.partition("@")[0])
        if topic == self.runs_topic:
            self._apply(ctx, self.logic.on_run(ctx.store, out, ctx.partition, message.value(),
                                               now))  # fmt: skip
            return
        if topic == self.worker_events_topic:
            event = decode_worker_event(key, message.value())
            self.leases.on_event(ctx.store, out, ctx.partition, event, now)
            return
        delay_us = self.tier_delay_us[topic]
        _, produced_ms = message.timestamp()
        # a record stamped ahead of this clock (a skewed producer) is held at most one delay
        # from when it was first seen, so it cannot hold the retries behind it for longer
        where = (topic, ctx.partition, message.offset())
        first_seen = self._held_since.setdefault(where, now)
        release_us = min(produced_ms * 1000, first_seen) + delay_us
        if release_us > now:
            ctx.hold(release_us)
        else:
            del self._held_since[where]
            self.logic.on_retry(ctx.store, ctx.partition, message.value())

    def punctuate(self, ctx: TaskContext, now_us: int) -> None:
        for completion in self.executor.drain():
            outcome, host = completion.outcome, completion.host
            self.limits.release(completion.tenant, host)
            if outcome is not None:
                if host is not None and outcome.duration_us > 0:  # sent (an expired one: 0)
                    self.limits.timed(host, outcome.duration_us / 1e6)
                self._completed[completion.partition].append(completion)
        partition = ctx.partition
        if partition in self._stale:  # a failed tick popped entries its rollback kept
            self._stale.discard(partition)
            self.logic.reindex(ctx.store, partition)
        applied = self._completed.pop(partition, [])
        unsent = len(self.applier.unsent[partition])
        offered = set(self.leases.slots(partition))
        selection = self.logic.selection
        selection.actions = []
        self.applier.applying = 0
        try:
            self._tick(ctx, applied, now_us)
        except Exception:
            self._undo_tick(partition, applied, unsent, offered)
            raise
        self._applied[partition].extend(applied)

    def _undo_tick(self, partition: int, applied: list[Completion], unsent: int,
                   offered: set[str]) -> None:  # fmt: skip
        """The processor undoes a failed tick's store changes and records; this undoes what
        they held in memory. Its starts are not sent and give their slots back (those
        ``apply`` did not reach, those waiting to be sent, the worker offers), its outcomes
        apply again next tick, and the queues, lease timer and retention scan start over
        from the store."""
        self.applier.undo(partition, unsent)
        for run_id in set(self.leases.slots(partition)) - offered:
            self.leases.drop_slot(partition, run_id)
        self.leases.restart(partition)
        self.logic.retention.restart(partition)
        self._completed[partition][:0] = applied
        self._stale.add(partition)

    def _tick(self, ctx: TaskContext, applied: list[Completion], now_us: int) -> None:
        out = ContextOutput(ctx)
        self.applier.record(ctx, applied, now_us)
        expired = self.leases.expire(ctx.store, out, ctx.partition, now_us,
                                     functools.partial(self.applier.contained, ctx,
                                                       what="ending its worker lease"))  # fmt: skip
        for lease in expired:
            self.applier.tell_worker(ctx, lease, "the lease ran out: the run is no longer yours")
        self._apply(ctx, self.logic.on_tick(ctx.store, out, ctx.partition, now_us))
        selection = self.logic.selection
        if selection.cut_short:
            ctx.request_tick()
        elif selection.wake_us is not None:
            ctx.request_tick(selection.wake_us)

    def restore_record(self, store: StateStore, key: bytes, value: bytes | None) -> None:
        """Changelog → store, rebuilding the queue and active-run keys the log does not hold."""
        self.logic.restore_record(store, key, value)

    def on_running(self, ctx: TaskContext) -> None:
        """Restored from committed state. After a move (or a start) the attempts still running
        here belong to state that was dropped; after a rebuild in place (an aborted
        transaction) they are the committed attempts themselves, so they go on, adopted."""
        partition = ctx.partition
        rebuilt = partition in self._rebuilding
        self._rebuilding.discard(partition)
        self._revoking.discard(partition)  # a revocation of an earlier life of it is over
        self._stale.discard(partition)  # its queues are rebuilt from the store here
        if not rebuilt:
            self.executor.cancel_partition(partition)
            self._completed.pop(partition, None)
        self.leases.stopped(partition)
        now = ctx.now_us()
        finished = {(c.run_id, c.attempt) for c in self._completed.get(partition, [])}

        def adopt(run: RunRecord) -> bool:  # a worker, or this process, may still be on it
            if rebuilt and (
                self.executor.running(partition, run.run_id, run.attempt)
                or (run.run_id, run.attempt) in finished
            ):
                return True
            return self.leases.adopt(ctx.store, partition, run, now)

        self.logic.on_running(ctx.store, ContextOutput(ctx), ctx.partition, now, adopt=adopt)

    def after_commit(self, validated: float) -> None:
        """The starts are committed: send them (the outcomes applied are committed too),
        except those of a partition being revoked (``on_stopped`` drops them). Their time to
        live counts from ``validated``: a process stopped between its commit and here sends
        nothing its successor may have taken over."""
        self._applied.clear()
        self.applier.send(validated, self._revoking)

    def on_revoking(self, partition: int) -> None:
        """Send nothing more of ``partition``: its next owner re-dispatches what was started
        here and not sent."""
        self._revoking.add(partition)
        self.executor.hold(partition)

    def on_rebuild(self, partition: int) -> None:
        """Rebuilt in place: starts never committed are dropped (never sent); the attempts
        in flight go on and their outcomes apply to the rebuilt state (``on_running``)."""
        self.applier.drop(partition)
        for where in [w for w in self._held_since if w[1] == partition]:
            del self._held_since[where]
        # outcomes applied in the aborted transaction apply again to the rebuilt state
        self._completed[partition][:0] = self._applied.pop(partition, [])
        self._rebuilding.add(partition)

    def on_stopped(self, partition: int) -> None:
        """The partition moved away or is being rebuilt: its attempts must not go on here (the
        next owner re-dispatches them), so a zombie sends nothing after it lost the task."""
        self._rebuilding.discard(partition)
        self._revoking.discard(partition)
        self.applier.drop(partition)  # never sent
        for where in [w for w in self._held_since if w[1] == partition]:
            del self._held_since[where]
        cancelled = self.executor.cancel_partition(partition)
        self._completed.pop(partition, None)
        self._applied.pop(partition, None)
        self.leases.stopped(partition)
        if cancelled:
            log.info("partition %d stopped: aborted %d attempts in flight", partition, cancelled)

    def close(self) -> None:
        """Close the targets and stop the delivery loop."""
        self.applier.close()
        self.executor.close()
        self.tenants.close()
        self.kafka.close()
        self.work_topics.close()

    def _ready(self, target: Any, tenant: str) -> bool:
        """May a start of ``tenant`` to ``target`` go now: the grants are read (one not granted
        goes at once, to be refused: its pool or topic is not asked about), a Kafka target's
        metadata, a worker pool's topic is in (asked for, off the loop, when not)."""
        if not self.tenants.ready:
            return False
        grants = self.tenants.grants.get(tenant)
        if grants is not None and grants.refusal(tenant, target) is not None:
            return True
        if isinstance(target, WorkerConfig):
            return self.work_topics.ready(target.pool)
        return self.kafka.ready(target)

    def _check_partition(self, ctx: TaskContext, job_key: str) -> None:
        check_home_partition(job_key, ctx.partition, self.settings.partitions)


def _deliveries(settings: Settings) -> Deliveries:
    """The delivery loop ``settings.dispatch_delivery`` asks for."""
    if settings.dispatch_delivery == "process":
        return DeliveryProcess(allow_private=settings.allow_private_targets,
                               gc_young=settings.gc_young_threshold)  # fmt: skip
    return Executor()
