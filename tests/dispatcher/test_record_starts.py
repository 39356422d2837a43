"""A Kafka record's run is started in memory and saved once, as its attempt ends in the same
tick: ended, retried (active until it ends) or replaced before its record was produced."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from schedulerstream.clock import ManualClock
from schedulerstream.dispatcher import records as rk
from schedulerstream.dispatcher.context import ContextOutput
from schedulerstream.dispatcher.deliveries import Completion
from schedulerstream.dispatcher.executor import Executor
from schedulerstream.dispatcher.states import DONE, QUEUED, WAITING
from schedulerstream.dispatcher.topology import DispatcherTopology
from schedulerstream.runtime.context import TaskContext
from schedulerstream.runtime.store import RocksStore
from schedulerstream.settings import Settings
from schedulerstream.targets.base import Outcome
from schedulerstream.tenants.policy import TenantPolicy

from .harness import T0, run_id, run_triggered

KAFKA = {"target": {"type": "kafka", "topic": "t.out"}}


class Idle(Executor):
    """An executor that sends nothing: these runs are records."""

    def __init__(self) -> None:
        super().__init__(grace_s=0.1)

    def drain(self) -> list[Completion]:
        return []

    def flush(self) -> None:
        return None


@pytest.fixture
def setup(tmp_path: Path) -> Any:
    topology = DispatcherTopology(Settings(data_dir=tmp_path), executor=Idle(),
                                  tenants=TenantPolicy())  # fmt: skip
    topology.kafka.ready = lambda target: True  # type: ignore[method-assign]
    store = RocksStore.open(tmp_path / "store")
    ctx = TaskContext(0, store, ManualClock(T0), None, "test")
    yield topology, ctx
    topology.close()
    store.close()


def _tick(topology: DispatcherTopology, ctx: TaskContext, now_us: int) -> list[Any]:
    """One punctuation, kept; what it produced."""
    ctx.store.savepoint()
    topology.punctuate(ctx, now_us)
    ctx.store.release()
    return ctx.take_outputs()


def _records(outputs: list[Any]) -> list[bytes]:
    """The keys of the records produced to the target topic."""
    return [o.key for o in outputs if o.topic == "t.out"]


def test_a_record_run_is_saved_once_as_it_ends_with_both_of_its_events(setup) -> None:
    topology, ctx = setup
    topology.logic.on_run(ctx.store, ContextOutput(ctx), 0, run_triggered(**KAFKA), T0)
    ctx.take_outputs()
    seen: list[Any] = []
    real = topology.kafka.produce

    def produce(c: Any, start: Any, config: Any) -> Outcome:
        seen.append(rk.load(c.store, start.delivery.run_id).status)  # as the record is made
        return real(c, start, config)

    topology.kafka.produce = produce  # type: ignore[method-assign]
    topology.kafka.topics.problem = lambda topic: None  # type: ignore[method-assign]
    outputs = _tick(topology, ctx, T0 + 1_000)
    assert _records(outputs) == [run_id().encode()]
    assert seen == [QUEUED]  # its in-flight state was never written
    run = topology.logic.load(ctx.store, run_id())
    assert run.status == DONE and run.outcome.value == "succeeded" and run.attempt == 1
    assert ctx.store.get(rk.active_key(run.job_key, run.run_id)) is None
    codec = topology.logic.codec
    events = [codec.decode_as("AttemptEvent", o.value) for o in outputs
              if o.topic == topology.settings.topics.attempts]  # fmt: skip
    assert [(e["kind"], e["attempt"]) for e in events] == [("started", 1), ("succeeded", 1)]


def test_a_record_attempt_that_fails_leaves_its_run_active_through_its_retry(setup) -> None:
    topology, ctx = setup
    out = ContextOutput(ctx)
    forbid = {**KAFKA, "overlap_policy": "forbid"}
    topology.logic.on_run(ctx.store, out, 0, run_triggered(0, **forbid), T0)
    topology.kafka.topics.problem = (  # type: ignore[method-assign]
        lambda topic: f"topic {topic!r} does not exist"
    )
    assert _records(_tick(topology, ctx, T0 + 1_000)) == []
    first = topology.logic.load(ctx.store, run_id(0))
    assert first.status in (QUEUED, WAITING) and first.attempt == 1
    assert "does not exist" in first.last_error
    assert ctx.store.get(rk.active_key(first.job_key, first.run_id)) is not None
    # the job's next run, due while the first waits for its retry, is forbidden to overlap
    topology.logic.on_run(ctx.store, out, 0, run_triggered(1, **forbid), T0)
    _tick(topology, ctx, T0 + 2_000)
    second = topology.logic.load(ctx.store, run_id(1))
    assert second.status == DONE and second.outcome.value == "skipped"
    assert "still active" in second.last_error


def test_a_record_run_replaced_in_the_tick_that_started_it_is_not_produced(setup) -> None:
    topology, ctx = setup
    out = ContextOutput(ctx)
    replace = {**KAFKA, "overlap_policy": "replace"}
    for n in (0, 1):  # both due now: the second replaces the first, started just before
        topology.logic.on_run(ctx.store, out, 0, run_triggered(n, not_before=T0, **replace), T0)
    ctx.take_outputs()  # their "accepted" events
    topology.kafka.topics.problem = lambda topic: None  # type: ignore[method-assign]
    outputs = _tick(topology, ctx, T0 + 1_000)
    assert _records(outputs) == [run_id(1).encode()]
    first = topology.logic.load(ctx.store, run_id(0))
    assert first.status == DONE and first.outcome.value == "cancelled"
    assert first.last_error == f"replaced by {run_id(1)}"
    assert first.attempt == 1  # the attempt it started: its events say so too
    codec, attempts = topology.logic.codec, topology.settings.topics.attempts
    events = [codec.decode_as("AttemptEvent", o.value) for o in outputs
              if o.topic == attempts and o.key == run_id(0).encode()]  # fmt: skip
    assert [(e["kind"], e["attempt"]) for e in events] == [("started", 1), ("cancelled", 1)]
    second = topology.logic.load(ctx.store, run_id(1))
    assert second.status == DONE and second.outcome.value == "succeeded"


def test_a_stale_second_queue_entry_of_a_started_record_run_starts_nothing(setup) -> None:
    topology, ctx = setup
    topology.logic.on_run(ctx.store, ContextOutput(ctx), 0, run_triggered(**KAFKA), T0)
    topology.kafka.topics.problem = lambda topic: None  # type: ignore[method-assign]
    run = topology.logic.load(ctx.store, run_id())
    index = topology.logic._kept[0][0]
    index.push(run.tenant, run.due_us, run.seq, run.run_id)  # as an undone enqueue can leave
    outputs = _tick(topology, ctx, T0 + 1_000)
    assert _records(outputs) == [run_id().encode()]
    codec, attempts = topology.logic.codec, topology.settings.topics.attempts
    kinds = [codec.decode_as("AttemptEvent", o.value)["kind"] for o in outputs
             if o.topic == attempts]  # fmt: skip
    assert kinds == ["accepted", "started", "succeeded"]
