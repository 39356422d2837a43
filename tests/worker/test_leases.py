"""Worker leases on the dispatcher logic, driven by hand (in-memory store, manual clock)."""

from __future__ import annotations

from typing import Any

from schedulerstream.contracts.worker import WorkerEvent
from schedulerstream.dispatcher.context import Topics
from schedulerstream.dispatcher.leases import WorkerLeases
from schedulerstream.dispatcher.limits import Limits
from schedulerstream.dispatcher.logic import DispatchLogic, Start
from tests.dispatcher.harness import CODEC, SECOND, TIERS, Harness, run_id, run_triggered

WORKER = {"type": "worker", "pool": "p"}
LEASE_MS = 3000


class Pool:
    """A Harness whose starts are offered to a worker pool under leases."""

    def __init__(self, **job: Any) -> None:
        self.h = Harness()
        self.leases = WorkerLeases(self.h.logic, self.h.limits, LEASE_MS)
        self.job = {"target": WORKER, "timeout": 60, **job}

    def trigger(self, n: int = 0) -> str:
        self.h.run(run_triggered(n, **self.job))
        self.offer_started()
        return run_id(n)

    def offer_started(self, seconds: float = 0) -> list[Start]:
        starts = self.h.advance(seconds)
        for start in starts:
            run = self.h.logic.load(self.h.store, start.delivery.run_id)
            assert run is not None and start.host is None
            self.leases.offer(self.h.store, 0, run, "p", self.h.now)
        return starts

    def event(self, kind: str, rid: str, attempt: int, worker: str = "w1", **extra: Any) -> bool:
        event = WorkerEvent(kind, rid, attempt, worker, self.h.now, **extra)
        return self.leases.on_event(self.h.store, self.h, 0, event, self.h.now)

    def adopt_fn(self) -> Any:
        return lambda run: self.leases.adopt(self.h.store, 0, run, self.h.now)

    def expire(self, seconds: float) -> list[str]:
        self.h.clock.advance(seconds)
        return [x.run_id for x in self.leases.expire(self.h.store, self.h, 0, self.h.now)]


def test_claim_heartbeats_and_success_end_the_lease_and_free_the_slot() -> None:
    pool = Pool()
    rid = pool.trigger()
    assert pool.h.limits.by_tenant["acme"] == 1 and pool.leases.holding(0) == 1
    assert pool.event("claimed", rid, 1)
    for _ in range(5):  # heartbeats keep it alive well past one lease
        assert pool.expire(2) == []
        assert pool.event("heartbeat", rid, 1)
    assert pool.event("succeeded", rid, 1, duration_us=7 * SECOND)
    assert pool.h.events(rid) == [("accepted", 0), ("started", 1), ("succeeded", 1)]
    assert pool.h.kinds("succeeded")[0]["duration_us"] == 7 * SECOND
    assert pool.leases.get(pool.h.store, rid) is None and pool.leases.holding(0) == 0
    assert pool.h.limits.in_flight == 0
    assert not any(k.startswith(b"lease/") for k in pool.h.store.data)


def test_an_expired_lease_is_offered_again_and_the_old_attempt_is_fenced() -> None:
    pool = Pool(retry={"max_attempts": 3, "initial_backoff": 1, "max_backoff": 1})
    rid = pool.trigger()
    pool.event("claimed", rid, 1)
    assert pool.expire(LEASE_MS / 1000) == [rid]
    [expired] = pool.h.kinds("lease_expired")
    assert expired["reason"].startswith("lease expired: no heartbeat from worker w1 since ")
    assert pool.h.limits.in_flight == 0
    [again] = pool.offer_started(1.5)
    assert again.delivery.attempt == 2
    assert not pool.event("heartbeat", rid, 1)  # the old attempt: ignored, counted
    assert not pool.event("succeeded", rid, 1)
    assert pool.leases.counters["fenced"] == 2
    assert pool.event("claimed", rid, 2, worker="w2")
    assert not pool.event("heartbeat", rid, 2, worker="w1")  # not the claimer
    assert pool.leases.counters["foreign"] == 1
    assert pool.event("succeeded", rid, 2, worker="w2")
    assert pool.h.events(rid)[-4:] == [
        ("lease_expired", 1), ("retry_scheduled", 1), ("started", 2), ("succeeded", 2),
    ]  # fmt: skip


def test_an_unclaimed_offer_expires_after_one_lease() -> None:
    pool = Pool(retry={"max_attempts": 1})
    rid = pool.trigger()
    assert pool.expire(LEASE_MS / 1000 - 0.001) == []
    assert pool.expire(0.001) == [rid]
    assert (
        "no worker of pool 'p' claimed the offer within 3 s"
        in pool.h.kinds("dead_lettered")[0]["reason"]
    )


def test_at_most_once_ends_as_unknown_on_expiry() -> None:
    pool = Pool(delivery="at_most_once")
    rid = pool.trigger()
    pool.event("claimed", rid, 1)
    pool.expire(LEASE_MS / 1000)
    assert pool.h.events(rid)[-1] == ("lease_expired", 1)
    assert pool.offer_started(60) == []  # never re-dispatched


def test_the_job_timeout_bounds_a_heartbeating_worker() -> None:
    pool = Pool(timeout=5, retry={"max_attempts": 1})
    rid = pool.trigger()
    pool.event("claimed", rid, 1)
    for _ in range(2):
        pool.expire(2)
        pool.event("heartbeat", rid, 1)
    assert pool.expire(0.5) == []
    assert pool.expire(0.5) == [rid]  # at the deadline, though the last beat was 1 s ago
    [timed_out] = pool.h.kinds("timed_out")
    assert timed_out["reason"].startswith("timed out after 5 s: worker w1 last heartbeat at ")


def test_a_worker_failure_is_retried_unless_it_says_not_to() -> None:
    pool = Pool(retry={"max_attempts": 3, "initial_backoff": 1, "max_backoff": 1})
    rid = pool.trigger()
    pool.event("failed", rid, 1, reason="disk full", retryable=True)
    assert pool.h.kinds("failed")[0]["reason"] == "worker w1: disk full"
    pool.offer_started(1.5)
    pool.event("failed", rid, 2, reason="bad input", retryable=False)
    assert pool.h.events(rid)[-1] == ("failed", 2)
    assert pool.h.limits.in_flight == 0


def test_a_restart_keeps_runs_a_worker_holds_and_expires_the_silent_ones_a_lease_later() -> None:
    pool = Pool(retry={"max_attempts": 3, "initial_backoff": 1, "max_backoff": 1})
    held, lost = pool.trigger(0), pool.trigger(1)
    pool.event("claimed", held, 1)
    pool.event("claimed", lost, 1)
    pool.h.clock.advance(2)
    pool.event("heartbeat", held, 1)
    h = pool.h  # a new process: new logic and limits over the committed store
    h.limits = Limits(100, 100, 10_000.0, 10_000)
    h.logic = DispatchLogic(CODEC, Topics("attempts", "commands", TIERS), h.limits, "t")
    pool.leases = WorkerLeases(pool.h.logic, pool.h.limits, LEASE_MS)
    pool.h.logic.on_running(pool.h.store, pool.h, 0, pool.h.now, adopt=pool.adopt_fn())
    assert pool.h.limits.by_tenant["acme"] == 2  # both slots held again
    assert not pool.h.kinds("failed")  # nothing was re-dispatched as "outcome unknown"
    assert pool.expire(LEASE_MS / 1000 - 0.1) == []  # one lease of grace: the heartbeats
    assert pool.event("heartbeat", held, 1)  # sent while no dispatcher read them come now
    assert pool.expire(0.1) == [lost]
    assert "no heartbeat from worker w1 since" in pool.h.kinds("lease_expired")[0]["reason"]
    assert pool.event("succeeded", held, 1)
    assert pool.h.events(held)[-1] == ("succeeded", 1)
    assert pool.h.limits.in_flight == 0
