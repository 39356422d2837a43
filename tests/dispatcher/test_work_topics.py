"""WorkTopics: a worker pool's topic is made sure of off the dispatcher's loop; a slow or
failing cluster answer holds only that pool's starts."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from schedulerstream.clock import ManualClock
from schedulerstream.dispatcher.context import ContextOutput
from schedulerstream.dispatcher.topology import DispatcherTopology
from schedulerstream.dispatcher.work_topics import RETRY_AFTER_S, THREADS, WorkTopics
from schedulerstream.errors import SchedulerStreamError
from schedulerstream.runtime.context import TaskContext
from schedulerstream.runtime.store import RocksStore
from schedulerstream.settings import Settings
from schedulerstream.tenants.policy import TenantPolicy
from tests.support.waits import wait_until

from .harness import T0, run_id, run_triggered
from .test_tick_failure import Injected


def test_the_loop_asks_and_never_waits_for_the_cluster() -> None:
    release = threading.Event()
    asked: list[str] = []

    def ensure(pool: str) -> str:
        asked.append(pool)
        if pool == "slow":
            release.wait(30)
        if pool == "refused":
            raise SchedulerStreamError("TOPIC_AUTHORIZATION_FAILED")
        return f"work.{pool}"

    now = [100.0]
    topics = WorkTopics(ensure, clock=lambda: now[0])
    try:
        started = time.monotonic()
        assert not topics.ready("slow")
        assert not topics.ready("fast")
        assert time.monotonic() - started < 0.5
        # another thread answers for it while the slow pool's answer is still out
        wait_until(lambda: topics.ready("fast"), 10, "the fast pool's answer")
        assert topics.topic("fast") == "work.fast" and not topics.ready("slow")
        release.set()
        wait_until(lambda: topics.ready("slow"), 10, "the slow pool's answer")
        wait_until(lambda: topics.ready("refused"), 10, "the refusal")
        try:
            topics.topic("refused")
            raise AssertionError("a refused pool has no topic")
        except SchedulerStreamError as exc:
            assert "TOPIC_AUTHORIZATION_FAILED" in str(exc)
        assert topics.ready("refused") and asked.count("refused") == 1  # the answer is kept
        now[0] += RETRY_AFTER_S + 1  # for a while, then asked again
        assert not topics.ready("refused")
        wait_until(lambda: asked.count("refused") == 2, 10, "the second ask")
    finally:
        topics.close()


def test_a_pool_whose_topic_is_slow_holds_back_only_its_own_runs(tmp_path: Path) -> None:
    release = threading.Event()
    executor = Injected()
    topology = DispatcherTopology(Settings(data_dir=tmp_path), executor=executor,
                                  tenants=TenantPolicy())  # fmt: skip
    work_topics = WorkTopics(lambda pool: release.wait(30) and f"work.{pool}")
    topology.work_topics = topology.applier.work_topics = work_topics  # readiness and offers
    store = RocksStore.open(tmp_path / "store")
    ctx = TaskContext(0, store, ManualClock(T0), None, "test")
    try:
        now = T0 + 1_000
        out = ContextOutput(ctx)
        worker = run_triggered(tenant="pool", target={"type": "worker", "pool": "etl"})
        topology.logic.on_run(store, out, 0, worker, now)
        topology.logic.on_run(store, out, 0, run_triggered(tenant="web"), now)
        started = time.monotonic()
        topology.punctuate(ctx, now)
        assert time.monotonic() - started < 1.0  # the loop did not wait for the cluster
        status = {t: topology.logic.load(store, run_id(tenant=t)).status.value
                  for t in ("pool", "web")}  # fmt: skip
        assert status == {"pool": "queued", "web": "in_flight"}
        release.set()
        wait_until(lambda: topology.work_topics.ready("etl"), 10, "the pool's topic")
        topology.punctuate(ctx, now + 1_000)
        assert topology.logic.load(store, run_id(tenant="pool")).status.value == "in_flight"
        offers = [o for o in ctx.outputs if o.topic == "work.etl"]
        assert len(offers) == 1, [o.topic for o in ctx.outputs]
    finally:
        topology.close()
        store.close()


def test_at_most_threads_pools_are_asked_about_at_once_and_every_one_is_answered() -> None:
    release = threading.Event()
    at_once: list[int] = []
    running = [0]
    lock = threading.Lock()

    def ensure(pool: str) -> str:
        with lock:
            running[0] += 1
            at_once.append(running[0])
        release.wait(30)
        with lock:
            running[0] -= 1
        return f"work.{pool}"

    topics = WorkTopics(ensure)
    pools = [f"p{n}" for n in range(THREADS + 3)]
    try:
        assert not any(topics.ready(pool) for pool in pools)
        wait_until(lambda: running[0] == THREADS, 10, "every thread at work")
        release.set()
        wait_until(lambda: all(topics.ready(pool) for pool in pools), 10, "every answer")
        assert max(at_once) == THREADS and [topics.topic(p) for p in pools] == [
            f"work.{p}" for p in pools
        ]
    finally:
        topics.close()
