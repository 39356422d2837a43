"""One run's step that raises in a dispatcher tick (recording an outcome, a start, a Kafka
record's outcome) is undone and kept to that run; a tick that fails as a whole (its
selection) gives back what the processor's undo cannot reach."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from schedulerstream.clock import ManualClock
from schedulerstream.dispatcher import records as rk
from schedulerstream.dispatcher.context import ContextOutput
from schedulerstream.dispatcher.deliveries import Completion
from schedulerstream.dispatcher.executor import Executor
from schedulerstream.dispatcher.states import IN_FLIGHT, QUEUED
from schedulerstream.dispatcher.topology import DispatcherTopology
from schedulerstream.runtime.context import TaskContext
from schedulerstream.runtime.store import RocksStore
from schedulerstream.settings import Settings
from schedulerstream.targets.base import Outcome
from schedulerstream.tenants.policy import TenantPolicy

from .harness import T0, run_id, run_triggered


class Injected(Executor):
    """An executor whose completions are the ones the test hands it."""

    def __init__(self) -> None:
        super().__init__(grace_s=0.1)
        self.pending: list[Completion] = []

    def drain(self) -> list[Completion]:
        found, self.pending = self.pending, []
        return found

    def flush(self) -> None:  # nothing is sent: the starts stay the test's
        return None


def _tick(topology: DispatcherTopology, ctx: TaskContext, now_us: int) -> bool:
    """One punctuation as ``Invoker.invoke`` runs it; False when it raised (undone)."""
    ctx.store.savepoint()
    try:
        topology.punctuate(ctx, now_us)
    except Exception:
        ctx.store.rollback()
        ctx.outputs.clear()
        return False
    ctx.store.release()
    return True


KAFKA = {"target": {"type": "kafka", "topic": "t.out"}}


def _evil_and_acme(topology: DispatcherTopology, ctx: TaskContext, now: int,
                   **acme: Any) -> None:  # fmt: skip
    """A due Kafka record of tenant evil and a due run of acme (its target: ``acme``, else a
    webhook); every topic counts as known."""
    out = ContextOutput(ctx)
    topology.logic.on_run(ctx.store, out, 0, run_triggered(tenant="evil", **KAFKA), now)
    topology.logic.on_run(ctx.store, out, 0, run_triggered(tenant="acme", **acme), now)
    topology.kafka.ready = lambda target: True  # type: ignore[method-assign]


@pytest.fixture
def setup(tmp_path: Path) -> Any:
    executor = Injected()
    topology = DispatcherTopology(Settings(data_dir=tmp_path), executor=executor,
                                  tenants=TenantPolicy())  # fmt: skip
    store = RocksStore.open(tmp_path / "store")
    ctx = TaskContext(0, store, ManualClock(T0), None, "test")
    yield topology, executor, ctx
    topology.close()
    store.close()


def test_an_outcome_that_cannot_be_recorded_fails_its_run_and_spares_the_others(setup) -> None:
    topology, executor, ctx = setup
    now = T0 + 1_000
    tenants = ("evil", "acme", "zeta")
    for tenant in tenants:
        topology.logic.on_run(ctx.store, ContextOutput(ctx), 0, run_triggered(tenant=tenant), now)
    assert _tick(topology, ctx, now)
    assert all(topology.logic.load(ctx.store, run_id(tenant=t)).status == IN_FLIGHT
               for t in tenants)  # fmt: skip
    topology.after_commit(now / 1e6)  # the starts go to the (injected) executor
    real = topology.logic.on_outcome
    poisoned = run_id(tenant="evil")

    def on_outcome(store: Any, out: Any, partition: int, rid: str, *rest: Any) -> bool:
        if rid == poisoned and rest[1].kind == "succeeded":
            raise RuntimeError("boom")
        return real(store, out, partition, rid, *rest)

    topology.logic.on_outcome = on_outcome  # type: ignore[method-assign]
    ok = Outcome("succeeded", "HTTP 200", False, 1_000, 200)
    executor.pending = [Completion(0, t, run_id(tenant=t), 1, ok, "example.com:443")
                        for t in tenants]  # fmt: skip

    assert _tick(topology, ctx, now + 1_000)  # the failure stays the run's: no tick fails

    runs = {t: topology.logic.load(ctx.store, run_id(tenant=t)) for t in tenants}
    assert runs["acme"].outcome.value == "succeeded"
    assert runs["zeta"].outcome.value == "succeeded"
    assert runs["evil"].outcome.value == "failed"
    assert "could not be recorded (RuntimeError: boom)" in runs["evil"].last_error
    assert topology.limits.in_flight == 0


def test_a_failed_tick_sends_none_of_its_starts_and_requeues_their_runs(setup) -> None:
    topology, _, ctx = setup
    now = T0 + 1_000
    for tenant in ("acme", "zeta"):
        topology.logic.on_run(ctx.store, ContextOutput(ctx), 0, run_triggered(tenant=tenant), now)
    real = topology.logic.on_tick

    def on_tick(*args: Any) -> Any:
        actions = real(*args)
        raise RuntimeError(f"after {len(actions)} starts")

    topology.logic.on_tick = on_tick  # type: ignore[method-assign]
    assert not _tick(topology, ctx, now)
    assert topology.limits.in_flight == 0  # the starts' slots are free again
    topology.logic.on_tick = real  # type: ignore[method-assign]

    assert _tick(topology, ctx, now + 1_000)  # the runs, still queued, start now
    assert {t: topology.logic.load(ctx.store, run_id(tenant=t)).status
            for t in ("acme", "zeta")} == {"acme": IN_FLIGHT, "zeta": IN_FLIGHT}  # fmt: skip
    assert topology.limits.in_flight == 2


def test_a_kafka_record_whose_outcome_cannot_be_recorded_spares_the_other_runs(setup) -> None:
    topology, _, ctx = setup
    now = T0 + 1_000
    _evil_and_acme(topology, ctx, now)
    topology.kafka.produce = (  # type: ignore[method-assign]
        lambda ctx, start, config: Outcome("succeeded", "written", False, 1)
    )
    real = topology.logic.on_record_outcome

    def on_record_outcome(store: Any, out: Any, partition: int, start: Any, *rest: Any) -> None:
        if start.tenant == "evil":
            raise RuntimeError("boom")
        real(store, out, partition, start, *rest)

    topology.logic.on_record_outcome = on_record_outcome  # type: ignore[method-assign]
    for step in range(3):
        assert _tick(topology, ctx, now + step * 1_000)  # before: every tick failed
    assert topology.logic.load(ctx.store, run_id(tenant="acme")).status == IN_FLIGHT
    assert topology.limits.in_flight == 1  # acme's request; the record holds no slot
    evil = topology.logic.load(ctx.store, run_id(tenant="evil"))
    # its start (never saved in flight: a record's is saved as it ends) is saved, then failed
    assert evil.status != IN_FLIGHT and evil.attempt == 1
    assert "the attempt could not start (RuntimeError: boom)" in evil.last_error
    assert ctx.store.get(rk.active_key(evil.job_key, evil.run_id)) is not None  # until it ends


def test_a_failed_tick_gives_back_only_the_slots_its_own_starts_took(setup) -> None:
    topology, _, ctx = setup
    now = T0 + 1_000
    out = ContextOutput(ctx)
    topology.logic.on_run(ctx.store, out, 0, run_triggered(tenant="acme"), now)
    assert _tick(topology, ctx, now)
    topology.after_commit(now / 1e6)
    assert topology.limits.in_flight == 1  # acme's request, still running
    topology.logic.on_run(ctx.store, out, 0, run_triggered(1, tenant="zeta"), now)
    real = topology.logic.on_tick

    def on_tick(*args: Any) -> Any:
        real(*args)
        raise RuntimeError("a bug in the selection")

    topology.logic.on_tick = on_tick  # type: ignore[method-assign]
    assert not _tick(topology, ctx, now + 1_000)
    assert topology.limits.in_flight == 1  # zeta's slot back, acme's still held
    assert dict(topology.limits.by_tenant) == {"acme": 1}


def test_a_start_that_raises_fails_its_attempt_and_the_run_is_retried(setup) -> None:
    topology, _, ctx = setup
    now = T0 + 1_000
    _evil_and_acme(topology, ctx, now, **KAFKA)

    def produce(ctx: Any, start: Any, config: Any) -> Outcome:
        if start.tenant == "evil":
            raise RuntimeError("boom")
        return Outcome("succeeded", "written", False, 1)

    topology.kafka.produce = produce  # type: ignore[method-assign]
    assert _tick(topology, ctx, now)
    acme = topology.logic.load(ctx.store, run_id(tenant="acme"))
    evil = topology.logic.load(ctx.store, run_id(tenant="evil"))
    assert acme.outcome.value == "succeeded"
    # before: left in flight, with nothing sent, until the partition next started
    assert evil.status != IN_FLIGHT and evil.attempt == 1
    assert "the attempt could not start (RuntimeError: boom)" in evil.last_error
    assert topology.limits.in_flight == 0


def test_a_tick_asks_the_runtime_for_a_tick_when_its_earliest_waiting_record_falls_due(
    tmp_path: Path,
) -> None:
    asked: list[int | None] = []
    topology = DispatcherTopology(Settings(data_dir=tmp_path), executor=Injected(),
                                  tenants=TenantPolicy())  # fmt: skip
    topology.logic.selection._ready = None  # no broker here: every topic counts as known
    store = RocksStore.open(tmp_path / "store")
    ctx = TaskContext(0, store, ManualClock(T0), None, "test", request_tick=asked.append)
    try:
        kafka = {"target": {"type": "kafka", "topic": "out"}}
        for tenant, due in (("a", T0 + 120_000), ("b", T0 + 80_000)):
            value = run_triggered(tenant=tenant, not_before=due, **kafka)
            topology.logic.on_run(ctx.store, ContextOutput(ctx), 0, value, T0)
        assert _tick(topology, ctx, T0)
        assert asked == [T0 + 80_000]
    finally:
        topology.close()
        store.close()


def test_a_run_whose_outcome_and_failure_cannot_be_recorded_no_longer_blocks_its_job(
    setup,
) -> None:
    topology, executor, ctx = setup
    now = T0 + 1_000
    out = ContextOutput(ctx)
    forbid = {"overlap_policy": "forbid"}
    topology.logic.on_run(ctx.store, out, 0, run_triggered(0, **forbid), now)
    topology.logic.on_run(ctx.store, out, 0, run_triggered(0, tenant="zeta"), now)
    assert _tick(topology, ctx, now)
    topology.after_commit(now / 1e6)
    poisoned = run_id(0)
    real = topology.logic.on_outcome

    def on_outcome(store: Any, out: Any, partition: int, rid: str, *rest: Any) -> bool:
        if rid == poisoned:
            raise RuntimeError("boom")  # its outcome, and its failure in its place
        return real(store, out, partition, rid, *rest)

    topology.logic.on_outcome = on_outcome  # type: ignore[method-assign]
    ok = Outcome("succeeded", "HTTP 200", False, 1_000, 200)
    executor.pending = [Completion(0, "acme", poisoned, 1, ok, "example.com:443"),
                        Completion(0, "zeta", run_id(0, tenant="zeta"), 1, ok,
                                   "example.com:443")]  # fmt: skip
    assert _tick(topology, ctx, now + 1_000)
    assert topology.logic.load(ctx.store, run_id(0, tenant="zeta")).outcome.value == "succeeded"
    assert topology.logic.load(ctx.store, poisoned).status == IN_FLIGHT  # until a restart
    topology.logic.reindex(ctx.store, 0)  # as after a failed tick: it stays unblocked
    # the job's next run starts: before, "overlap_policy forbid" skipped every one of them
    topology.logic.on_run(ctx.store, out, 0, run_triggered(1, not_before=now, **forbid), now)
    assert _tick(topology, ctx, now + 2_000)
    assert topology.logic.load(ctx.store, run_id(1)).status == IN_FLIGHT
    assert topology.limits.in_flight == 1


def test_a_record_start_that_cannot_even_be_saved_is_queued_again(setup) -> None:
    topology, _, ctx = setup
    now = T0 + 1_000
    _evil_and_acme(topology, ctx, now, **KAFKA)
    real_produce, real_save = topology.kafka.produce, topology.logic.save_start
    topology.kafka.topics.problem = lambda topic: None  # type: ignore[method-assign]

    def produce(ctx: Any, start: Any, config: Any) -> Outcome:
        if start.tenant == "evil":
            raise RuntimeError("boom")
        return real_produce(ctx, start, config)

    def save_start(store: Any, partition: int, start: Any) -> None:
        if start.tenant == "evil":
            raise RuntimeError("cannot save either")
        real_save(store, partition, start)

    topology.kafka.produce = produce  # type: ignore[method-assign]
    topology.logic.save_start = save_start  # type: ignore[method-assign]
    assert _tick(topology, ctx, now)
    assert topology.logic.load(ctx.store, run_id(tenant="acme")).outcome.value == "succeeded"
    evil = topology.logic.load(ctx.store, run_id(tenant="evil"))
    assert evil.status == QUEUED and evil.attempt == 0
    assert ctx.store.get(rk.queue_key("evil", evil.due_us, evil.seq)) is not None
    topology.kafka.produce = real_produce  # type: ignore[method-assign]
    topology.logic.reindex(ctx.store, 0)  # as after a failed tick, or the partition's next start
    assert _tick(topology, ctx, now + 1_000)
    assert topology.logic.load(ctx.store, run_id(tenant="evil")).outcome.value == "succeeded"


def test_a_record_whose_outcome_raises_after_ending_it_stays_active_through_its_retry(
    setup,
) -> None:
    topology, _, ctx = setup
    now = T0 + 1_000
    forbid = {**KAFKA, "overlap_policy": "forbid"}
    topology.logic.on_run(ctx.store, ContextOutput(ctx), 0, run_triggered(0, **forbid), now)
    topology.kafka.ready = lambda target: True  # type: ignore[method-assign]
    topology.kafka.topics.problem = lambda topic: None  # type: ignore[method-assign]
    real = topology.logic.on_record_outcome

    def on_record_outcome(*args: Any) -> None:
        real(*args)  # ended in memory (the job's active set too), then the step raises
        raise RuntimeError("boom")

    topology.logic.on_record_outcome = on_record_outcome  # type: ignore[method-assign]
    assert _tick(topology, ctx, now)
    first = topology.logic.load(ctx.store, run_id(0))
    assert first.status != IN_FLIGHT and first.attempt == 1  # failed, to be retried
    assert "the attempt could not start (RuntimeError: boom)" in first.last_error
    later = run_triggered(1, not_before=now, **forbid)
    topology.logic.on_run(ctx.store, ContextOutput(ctx), 0, later, now)
    assert _tick(topology, ctx, now + 1_000)
    second = topology.logic.load(ctx.store, run_id(1))
    assert second.outcome.value == "skipped" and "still active" in second.last_error
