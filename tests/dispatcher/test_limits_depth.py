"""How deep the Limits admit starts to a host: as deep as its attempt time lets a waiting
start go out within the wait budget (its time to live), never deeper than the prefetch."""

from __future__ import annotations

from schedulerstream.dispatcher.limits import MAX_TIMED_HOSTS, Limits


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
