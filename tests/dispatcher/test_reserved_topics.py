"""A run whose Kafka target names a topic reserved for the deployment (its changelog here) fails
for good, ``refused`` with the reason, and nothing is produced to that topic; a healthy
tenant's record run in the same tick is produced. The dispatcher checks whoever wrote the job
(the API and ``schedules put`` refuse such jobs; a raw producer to cron.schedules does not)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from schedulerstream.clock import ManualClock
from schedulerstream.dispatcher.context import ContextOutput
from schedulerstream.dispatcher.states import TERMINAL
from schedulerstream.dispatcher.topology import DispatcherTopology
from schedulerstream.runtime.context import TaskContext
from schedulerstream.runtime.store import RocksStore
from schedulerstream.settings import Settings
from schedulerstream.tenants.policy import TenantPolicy

from .harness import T0, run_id, run_triggered
from .test_record_starts import Idle


@pytest.fixture
def setup(tmp_path: Path) -> Any:
    topology = DispatcherTopology(Settings(data_dir=tmp_path), executor=Idle(),
                                  tenants=TenantPolicy())  # fmt: skip
    topology.kafka.topics.known = lambda topic: True  # type: ignore[method-assign]
    topology.kafka.topics.problem = lambda topic: None  # type: ignore[method-assign]
    store = RocksStore.open(tmp_path / "store")
    ctx = TaskContext(0, store, ManualClock(T0), None, "test")
    yield topology, ctx
    topology.close()
    store.close()


def test_a_record_for_the_dispatchers_own_changelog_is_refused_and_the_healthy_one_goes(
    setup: Any,
) -> None:
    topology, ctx = setup
    own = topology.settings.topics.dispatcher_state
    evil = {"target": {"type": "kafka", "topic": own, "key": "run/x"}}
    healthy = {"target": {"type": "kafka", "topic": "t.out"}}
    out = ContextOutput(ctx)
    topology.logic.on_run(ctx.store, out, 0, run_triggered(tenant="evil", **evil), T0)
    topology.logic.on_run(ctx.store, out, 0, run_triggered(tenant="acme", **healthy), T0)
    topology.kafka.topics.known = lambda topic: topic == "t.out"  # type: ignore[method-assign]
    target = topology.logic.load(ctx.store, run_id(tenant="evil")).spec.target
    assert topology.kafka.ready(target)  # refused at once: its metadata is not asked for
    ctx.take_outputs()
    ctx.store.savepoint()
    topology.punctuate(ctx, T0 + 1_000)
    ctx.store.release()
    outputs = ctx.take_outputs()
    assert {o.topic for o in outputs} == {"t.out", topology.settings.topics.attempts}
    assert [o.key for o in outputs if o.topic == "t.out"] == [run_id(tenant="acme").encode()]
    refused = topology.logic.load(ctx.store, run_id(tenant="evil"))
    assert refused.status in TERMINAL and refused.attempt == 1  # not retried
    assert refused.outcome.value == "failed"  # a refused attempt fails its run
    assert refused.last_error == (
        f"topic {own!r} is reserved: it is one of this deployment's topics"
    )
    assert topology.logic.load(ctx.store, run_id(tenant="acme")).outcome.value == "succeeded"
