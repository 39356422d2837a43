"""WorkTopics: a worker pool's topic is made sure of off the dispatcher's loop; a slow or
failing cluster answer holds only that pool's starts."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from schedulerstream.clock import ManualClock
from schedulerstream.contracts.work_pools import CAP_VARIABLE, cap_refusal
from schedulerstream.dispatcher.context import ContextOutput
from schedulerstream.dispatcher.topology import DispatcherTopology
from schedulerstream.dispatcher.work_topics import RETRY_AFTER_S, THREADS, WorkTopics
from schedulerstream.errors import SchedulerStreamError, TooManyWorkPools
from schedulerstream.runtime.context import TaskContext
from schedulerstream.runtime.store import RocksStore
from schedulerstream.settings import Settings
from schedulerstream.tenants.policy import TenantPolicy
from tests.support.waits import wait_until

from .harness import CODEC, T0, run_id, run_triggered
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


def capped(pools: set[str], cap: int, asked: list[str] | None = None) -> Callable[[str], str]:
    """An ensure as a capped ``ensure_work_topic`` answers, on a cluster holding ``pools``."""

    def ensure(pool: str) -> str:
        if asked is not None:
            asked.append(pool)
        why = cap_refusal(pool, pools, cap)
        if why is not None:
            raise TooManyWorkPools(why, frozenset(pools), cap)
        pools.add(pool)
        return f"work.{pool}"

    return ensure


def test_a_new_pool_past_the_cap_is_refused_naming_it_and_asked_again_later() -> None:
    now = [100.0]
    asked: list[str] = []
    topics = WorkTopics(capped({"old"}, 2, asked), clock=lambda: now[0])
    try:
        assert not topics.ready("first")
        wait_until(lambda: topics.ready("first"), 10, "the first new pool's topic")
        assert topics.topic("first") == "work.first"  # below the cap: made
        assert not topics.ready("second")
        wait_until(lambda: topics.ready("second"), 10, "the refusal")
        with pytest.raises(TooManyWorkPools, match=f"'second'.*{CAP_VARIABLE}=2"):
            topics.topic("second")
        # the refusal answers another new pool at once, asking the cluster nothing, as a
        # failure to retry (its topic may have been made since: a worker past the cap)
        assert topics.ready("third") and asked == ["first", "second"]
        with pytest.raises(SchedulerStreamError, match="worker pool 'third' has no work topic"):
            topics.topic("third")
        try:
            topics.topic("third")
        except TooManyWorkPools:
            pytest.fail("a borrowed answer refused the pool for good")
        except SchedulerStreamError:
            pass
        assert not topics.ready("old")  # a pool the cluster holds is asked about as ever
        wait_until(lambda: topics.ready("old"), 10, "the existing pool's topic")
        assert topics.topic("old") == "work.old"
        now[0] += RETRY_AFTER_S + 1  # for a while, then asked again
        assert not topics.ready("third")
        wait_until(lambda: topics.ready("third"), 10, "the third pool's second answer")
        assert asked.count("third") == 1
    finally:
        topics.close()


def test_pools_waiting_for_a_thread_are_answered_by_the_caps_refusal() -> None:
    release = threading.Event()
    asked: list[str] = []
    refuse = capped({"a", "b"}, 2)

    def ensure(pool: str) -> str:
        asked.append(pool)
        release.wait(30)
        return refuse(pool)

    topics = WorkTopics(ensure)
    pools = [f"new{n}" for n in range(THREADS + 20)]
    try:
        assert not any(topics.ready(pool) for pool in pools)
        wait_until(lambda: len(asked) == THREADS, 10, "every thread at work")
        release.set()
        wait_until(lambda: all(topics.ready(pool) for pool in pools), 10, "every answer")
        assert len(asked) == THREADS  # the rest never reached the cluster
        for pool in pools:  # refused by their own answer; the rest told to retry
            with pytest.raises(SchedulerStreamError, match=f"'{pool}'") as raised:
                topics.topic(pool)
            assert isinstance(raised.value, TooManyWorkPools) == (pool in asked), pool
    finally:
        topics.close()


def test_a_run_to_a_new_pool_past_the_cap_fails_refused_and_other_pools_go_on(
    tmp_path: Path,
) -> None:
    topology = DispatcherTopology(Settings(data_dir=tmp_path), executor=Injected(),
                                  tenants=TenantPolicy())  # fmt: skip
    work_topics = WorkTopics(capped({"shared"}, 1))
    topology.work_topics = topology.applier.work_topics = work_topics
    store = RocksStore.open(tmp_path / "store")
    ctx = TaskContext(0, store, ManualClock(T0), None, "test")
    try:
        now = T0 + 1_000
        out = ContextOutput(ctx)
        for tenant, pool in (("greedy", "mine"), ("healthy", "shared")):
            run = run_triggered(tenant=tenant, target={"type": "worker", "pool": pool})
            topology.logic.on_run(store, out, 0, run, now)
        topology.punctuate(ctx, now)
        wait_until(lambda: work_topics.ready("mine") and work_topics.ready("shared"), 10,
                   "both pools' answers")  # fmt: skip
        topology.punctuate(ctx, now + 1_000)
        refused = topology.logic.load(store, run_id(tenant="greedy"))
        assert refused is not None and refused.status.value == "done"
        assert refused.outcome is not None and refused.outcome.value == "failed"
        assert refused.last_error is not None
        assert refused.last_error.startswith("worker pool 'mine' has no work topic")
        assert f"{CAP_VARIABLE}=1" in refused.last_error
        events = [CODEC.decode(o.value)[1] for o in ctx.outputs
                  if o.topic == topology.settings.topics.attempts and o.value]  # fmt: skip
        greedy = [e["kind"] for e in events if e["tenant"] == "greedy"]
        assert greedy[-1] == "failed" and "retry_scheduled" not in greedy  # not retried
        healthy = topology.logic.load(store, run_id(tenant="healthy"))
        assert healthy is not None and healthy.status.value == "in_flight"
        assert [o.topic for o in ctx.outputs if o.topic.startswith("work.")] == ["work.shared"]
    finally:
        topology.close()
        store.close()
