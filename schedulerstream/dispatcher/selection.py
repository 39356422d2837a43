"""Fair selection: which due runs of a partition start on this tick.

Tenants take turns in weighted deficit round-robin (``DeficitRing``); a turn serves the
tenant's earliest due run, if the overlap policy admits it (first attempts) and the Limits
have a slot for its tenant and target host. At most ``start_budget`` runs start per tick.

An attempt that ends in the transaction that starts it (a Kafka record: ``in_transaction``)
takes only its tenant's rate token, no slot, so the concurrency limits do not cap it at a
tenant's few dozen per tick; ``record_budget`` does (per tick), which bounds what one tick adds
to the transaction and so how long the other tenants' starts wait for its commit. A tick
that runs out of a budget with due runs left says so (``cut_short``): the next one comes at
once instead of a tick later.

A run due within ``arm_us`` of now may start early, when ``armable`` says it can wait for its
due time outside the transaction (a request the delivery loop sends then): its start is then
committed before it is due, so the due instant costs no tick and no commit round trip. A
record cannot: the earliest one waiting for its due time is ``wake_us``, and the dispatcher
asks for a tick then rather than at the next point of the tick grid. A record's start waits
until ``ready`` says its target can take it (the dispatcher: its topic's metadata is in);
being asked within the arm window, it knows by the due time.
"""

from __future__ import annotations

from collections.abc import Callable

from schedulerstream.dispatch_spec import DispatchSpec, TargetConfig
from schedulerstream.dispatcher import records as rk
from schedulerstream.dispatcher.actions import (
    Action,
    Start,
    in_transaction,
    target_host,
    waits_for_ready,
)
from schedulerstream.dispatcher.context import PartitionContext
from schedulerstream.dispatcher.limits import Limits
from schedulerstream.dispatcher.records import RunRecord
from schedulerstream.dispatcher.states import QUEUED
from schedulerstream.runtime.store import StateStore

# (context, run, its queue key, now, actions) → may its first attempt start
Admit = Callable[[PartitionContext, RunRecord, bytes, int, list[Action]], bool]
# (context, run, now, host, due) → the run's next attempt, started (sent at ``due`` if later);
# None: it ended at once (it cannot be sent), its slot is free again
Begin = Callable[[PartitionContext, RunRecord, int, str | None, int], Start | None]
# (context, run) → may the run's next attempt be started before it is due
Armable = Callable[[PartitionContext, RunRecord], bool]
# (store, run id) → the run as it stands (a record's started in memory this tick: in flight)
Load = Callable[[StateStore, str], RunRecord | None]
# (target of a Kafka record or worker offer, its tenant) → may it start now (False: its start
# waits, say for the metadata of its topic, asked for by this call)
Ready = Callable[[TargetConfig, str], bool]


class FairSelection:
    """Serves the tenant queues of ``PartitionContext.index`` in ``PartitionContext.ring``
    order."""

    def __init__(self, limits: Limits, start_budget: int, spec: Callable[[RunRecord], DispatchSpec],
                 admit: Admit, begin: Begin, armable: Armable | None = None,
                 arm_us: int = 0, record_budget: int = 100,
                 ready: Ready | None = None, load: Load = rk.load) -> None:  # fmt: skip
        self.limits = limits
        self._ready = ready
        self.arm_us = arm_us if armable is not None else 0
        self._armable = armable
        self.start_budget = start_budget
        self.record_budget = record_budget
        self.cut_short = False  # the last select left due runs behind for want of budget
        self.wake_us: int | None = None  # the last select's earliest start waiting for its time
        self.actions: list[Action] = []  # the last select's, also when it raised part-way
        self._spec = spec
        self._admit = admit
        self._begin = begin
        self._load = load

    def select(self, pc: PartitionContext, now_us: int) -> list[Action]:
        """Start what is due, fairly, within the budget and the limits."""
        ring = pc.ring
        actions: list[Action] = []
        self.actions = actions
        budget = [self.start_budget, self.record_budget]  # starts, in-transaction starts
        self.cut_short = False
        self.wake_us = None

        def serve(tenant: str) -> str:
            if budget[0] <= 0:
                self.cut_short = True
                return "blocked"
            return self._serve(pc, tenant, now_us, actions, budget)

        while ring and budget[0] > 0:
            if not ring.round(serve):
                break
        return actions

    def _serve(self, pc: PartitionContext, tenant: str, now_us: int, actions: list[Action],
               budget: list[int]) -> str:  # fmt: skip
        """One turn of ``tenant``: a state for ``DeficitRing.round``."""
        if budget[1] <= 0 and self.limits.full():
            return "blocked"  # neither kind of start can begin
        index = pc.index
        head = index.head(tenant)
        if head is None:
            return "empty"
        due_us, seq, run_id = head
        if due_us > now_us + self.arm_us:
            return "blocked"  # the tenant's earliest run is not due yet
        qkey = rk.queue_key(tenant, due_us, seq)
        run = self._load(pc.store, run_id)
        if run is None or run.status != QUEUED or run.seq != seq:
            index.pop(tenant)  # cancelled, revoked or re-queued since
            pc.store.delete(qkey, logged=False)
            return "skipped"
        target = self._spec(run).target
        record = in_transaction(target)
        if not record and self.limits.full():
            return "blocked"  # before the overlap policy is asked, as when full stopped a tick
        if self._ready is not None and waits_for_ready(target) and not self._ready(target, tenant):
            return "blocked"  # a record: asked within the arm window, so known by its due time
        if due_us > now_us and (self._armable is None or not self._armable(pc, run)):
            if record and (self.wake_us is None or due_us < self.wake_us):
                self.wake_us = due_us
            return "blocked"  # due soon, but it starts only when due
        if record and budget[1] <= 0:
            self.cut_short = True
            return "blocked"
        if run.attempt == 0 and not self._admit(pc, run, qkey, now_us, actions):
            index.pop(tenant)
            return "skipped"
        if record:
            if not self.limits.admit(tenant, now_us):
                return "blocked"
            budget[1] -= 1
            host = None
        else:
            host = target_host(target)
            if not self.limits.acquire(tenant, now_us, host):
                return "blocked"
        pc.store.delete(qkey, logged=False)
        index.pop(tenant)
        start = self._begin(pc, run, now_us, host, due_us)
        if start is None:
            if not record:
                self.limits.release(tenant, host)
            return "skipped"
        actions.append(start)
        budget[0] -= 1
        return "started"
