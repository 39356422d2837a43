"""How deep the Limits admit starts to a host: as deep as its attempt time lets a waiting
start go out within the wait budget (its time to live), never deeper than the prefetch."""

from __future__ import annotations

from schedulerstream.dispatcher.limits import MAX_TIMED_HOSTS, Limits

from .harness import SECOND, T0, Harness, run_triggered


def admitted(limits: Limits, host: str) -> int:
    count = 0
    while limits.acquire("acme", 0, host):
        count += 1
    return count


def test_an_untimed_host_is_admitted_within_its_limit_alone() -> None:
    limits = Limits(1000, 1000, 1e9, host_concurrency=10, depth=4, wait_budget_s=0.5)
    assert limits.depth_of("a.test") == 1
    assert admitted(limits, "a.test") == 10


def test_a_fast_host_gets_the_whole_prefetch_and_a_slow_one_none() -> None:
    limits = Limits(1000, 1000, 1e9, host_concurrency=10, depth=4, wait_budget_s=0.5)
    limits.timed("fast.test", 0.05)
    limits.timed("slow.test", 0.8)
    limits.timed("middle.test", 0.2)
    assert [limits.depth_of(h) for h in ("fast.test", "slow.test", "middle.test")] == [4, 1, 3]
    assert admitted(limits, "fast.test") == 40
    assert admitted(limits, "slow.test") == 10
    assert admitted(limits, "middle.test") == 30


def test_a_host_that_slows_down_loses_its_depth_at_once_and_regains_it_slowly() -> None:
    limits = Limits(1000, 1000, 1e9, host_concurrency=10, depth=4, wait_budget_s=0.5)
    for _ in range(20):
        limits.timed("a.test", 0.01)
    assert limits.depth_of("a.test") == 4
    limits.timed("a.test", 5.0)  # one attempt near a timeout
    assert limits.depth_of("a.test") == 1
    fast_again = 0
    while limits.depth_of("a.test") < 4:
        limits.timed("a.test", 0.01)
        fast_again += 1
    assert 10 <= fast_again <= 40


def test_the_tenant_and_process_limits_scale_with_the_host_depth() -> None:
    limits = Limits(1000, 5, 1e9, host_concurrency=100, depth=3, wait_budget_s=0.5)
    limits.timed("a.test", 0.01)
    assert admitted(limits, "a.test") == 15  # the tenant's 5, three times over
    assert limits.acquire("acme", 0) is False  # no host (a worker offer): the limit itself
    limits.release("acme", "a.test")
    assert limits.acquire("acme", 0) is False  # 14 in flight, over its 5


def test_the_timed_hosts_are_bounded() -> None:
    limits = Limits(10, 10, 1e9, depth=2, wait_budget_s=0.5)
    for n in range(MAX_TIMED_HOSTS + 1):
        limits.timed(f"h{n}.test", 0.01)
    assert len(limits.attempt_s) == 1
    assert limits.depth_of("h0.test") == 1 and limits.depth_of(f"h{MAX_TIMED_HOSTS}.test") == 2


def test_an_untimed_host_is_admitted_beside_a_fast_hosts_prefetch() -> None:
    limits = Limits(100, 1000, 1e9, host_concurrency=100, depth=10, wait_budget_s=0.5)
    for _ in range(500):
        limits.timed("fast.test", 0.05)
    assert limits.process_depth == 10
    assert admitted(limits, "fast.test") == 1000  # the whole prefetch: 900 wait for a slot
    assert not limits.acquire("other", 0, "new.test")  # the process is full: nobody starts
    limits.release("acme", "fast.test")
    # the freed place is anyone's: the other tenant's untimed host gets it (until the change,
    # it waited for the fast host's whole prefetch to drain below 100)
    assert limits.acquire("other", 0, "new.test")
    assert not limits.acquire("acme", 0, "fast.test")
    assert limits.by_host["new.test"] == 1 and limits.in_flight == 1000


def test_the_process_depth_follows_the_time_of_every_attempt() -> None:
    limits = Limits(100, 1000, 1e9, host_concurrency=100, depth=10, wait_budget_s=0.5)
    limits.timed("fast.test", 0.05)
    assert limits.process_depth == 10
    for _ in range(300):  # the process's slots are busy with a slow host's 2-s attempts
        limits.timed("slow.test", 2.0)
    assert limits.depth_of("fast.test") == 10 and limits.process_depth == 1
    # a fast host's start would wait behind 2-s attempts: none is admitted beyond the slots
    assert admitted(limits, "fast.test") == 100


def test_a_tenant_that_arrives_after_a_fast_hosts_prefetch_starts_at_the_next_free_place() -> None:
    h = Harness(concurrency=10, tenant_concurrency=1000)
    h.limits.depth, h.limits.wait_budget_s = 10, 0.5
    for _ in range(100):
        h.limits.timed("example.com", 0.05)
    for i in range(300):
        h.run(run_triggered(i, tenant="fast", at=T0 - 300 * SECOND))
    assert len(h.tick()) == 100  # ten times the process's 10 slots
    slow = {"target": {"type": "http", "url": "https://other.example.net/hook"}}
    h.run(run_triggered(0, tenant="late", **slow))
    started: list[str] = []
    for finished in h.started[:2]:  # two places free up: the tenants take turns
        h.finish(finished.delivery.run_id)
        started += [s.tenant for s in h.tick()]
    assert sorted(started) == ["fast", "late"]


def test_a_burst_to_new_hosts_after_fast_traffic_is_admitted_within_the_slots_alone() -> None:
    limits = Limits(200, 1000, 1e9, host_concurrency=200, depth=33, wait_budget_s=0.5)
    for _ in range(500):
        limits.timed("fast.test", 0.01)
    assert limits.process_depth == 33
    admitted_new = sum(limits.acquire(f"t{n % 130}", 0, f"new{n}.test") for n in range(6_600))
    # the process's 200 slots: a deeper admission would leave thousands of starts waiting for
    # slots held by attempts of unknown length, past their time to live (sent never)
    assert admitted_new == 200
    assert not limits.acquire("w", 0)  # nor a worker offer: they never wait either
    assert admitted(limits, "fast.test") == 200 * 33 - 200  # the fast host: the rest
    limits.release("t0", "new0.test")
    assert limits.acquire("w", 0)  # the freed shallow place


def test_worker_offers_stay_within_the_process_limit_whatever_the_prefetch() -> None:
    limits = Limits(10, 1000, 1e9, depth=10, wait_budget_s=0.5)
    for _ in range(500):
        limits.timed("fast.test", 0.01)
    assert sum(limits.acquire("w", 0) for _ in range(50)) == 10
    for _ in range(10):
        limits.release("w", None)
    assert limits.shallow == 0 and limits.in_flight == 0
