"""Per-tenant fair share without a broker: DRR weights (live, floats), Limits overrides and the
TenantPolicy that turns tenant records into both."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable

import pytest

from schedulerstream.dispatcher.fairness import DeficitRing
from schedulerstream.dispatcher.limits import Limits
from schedulerstream.tenants.policy import LiveMapping, TenantPolicy
from schedulerstream.tenants.record import TenantLimits, TenantRecord
from tests.dispatcher.harness import T0, Harness, run_triggered

SECOND = 1_000_000  # µs


def contended(ring: DeficitRing, starts: int) -> Counter[str]:
    """Starts per tenant when every tenant always has work and ``starts`` slots exist."""
    count: Counter[str] = Counter()

    def serve(tenant: str) -> str:
        if sum(count.values()) >= starts:
            return "blocked"
        count[tenant] += 1
        return "started"

    while sum(count.values()) < starts:
        assert ring.round(serve)
    return count


def ring_of(weights: dict[str, float] | LiveMapping[float], *tenants: str) -> DeficitRing:
    ring = DeficitRing(weights)
    for tenant in tenants:
        ring.add(tenant)
    return ring


def test_weight_3_gets_three_times_the_starts_of_weight_1() -> None:
    ring = ring_of({"heavy": 3.0, "light": 1.0}, "light", "heavy")
    assert contended(ring, 400) == {"heavy": 300, "light": 100}


@pytest.mark.parametrize(
    ("weights", "expected"),
    [
        ({"a": 1.5, "b": 1.0}, {"a": 300, "b": 200}),
        ({"a": 0.25, "b": 0.5}, {"a": 100, "b": 200}),
        ({"a": 2.5, "b": 0.5}, {"a": 250, "b": 50}),
    ],
)
def test_fractional_weights_keep_their_ratio(
    weights: dict[str, float], expected: dict[str, int]
) -> None:
    ring = ring_of(weights, *weights)
    assert contended(ring, sum(expected.values())) == expected


def test_a_light_tenant_alone_starts_a_run_every_round() -> None:
    ring = ring_of({"a": 0.01}, "a")
    starts: Counter[str] = Counter()

    def serve(tenant: str) -> str:
        starts[tenant] += 1
        return "started"

    for _ in range(3):
        assert ring.round(serve)
    assert starts == {"a": 3}


def test_weights_are_read_live_from_one_shared_mapping() -> None:
    weights: LiveMapping[float] = LiveMapping()
    rings = [ring_of(weights, "a", "b") for _ in range(2)]
    for ring in rings:
        assert contended(ring, 100) == {"a": 50, "b": 50}
    weights.replace({"a": 4.0})  # b: no record, the default weight 1
    for ring in rings:
        assert contended(ring, 100) == {"a": 80, "b": 20}
    weights.replace({})
    for ring in rings:
        assert contended(ring, 100) == {"a": 50, "b": 50}


@pytest.mark.parametrize("bad", [0.0, -2.0, math.nan, math.inf])
def test_an_unusable_weight_counts_as_the_default(bad: float) -> None:
    ring = ring_of({"a": bad, "b": 2.0}, "a", "b")
    assert ring.weight("a") == 1.0
    assert contended(ring, 300) == {"a": 100, "b": 200}


def test_whole_starts_a_blocked_tenant_missed_are_not_saved_up() -> None:
    ring = ring_of({"a": 2.0, "b": 1.0}, "a", "b")
    blocked = True
    starts: Counter[str] = Counter()

    def serve(tenant: str) -> str:
        if tenant == "a" and blocked:
            return "blocked"
        starts[tenant] += 1
        return "started"

    for _ in range(5):
        ring.round(serve)
    blocked = False
    starts.clear()
    ring.round(serve)
    assert starts == {"a": 2, "b": 1}


def test_an_empty_tenant_leaves_the_ring() -> None:
    ring = ring_of({"a": 1.5}, "a", "b")
    assert not ring.round(lambda tenant: "empty")
    assert not ring and ring.tenants() == []


def test_dispatch_logic_shares_starts_by_weight_under_contention() -> None:
    h = Harness(concurrency=8, weights={"heavy": 3.0})
    for n in range(20):
        h.run(run_triggered(n, tenant="light", at=T0 - 100 * SECOND))
        h.run(run_triggered(n, tenant="heavy", at=T0 - 100 * SECOND))
    started = Counter(start.tenant for start in h.tick())
    assert started == {"heavy": 6, "light": 2}


def test_dispatch_logic_follows_weight_changes_without_a_restart() -> None:
    weights: LiveMapping[float] = LiveMapping()
    h = Harness(concurrency=8, weights=weights)
    for n in range(20):
        h.run(run_triggered(n, tenant="light", at=T0 - 100 * SECOND))
        h.run(run_triggered(n, tenant="heavy", at=T0 - 100 * SECOND))
    assert Counter(start.tenant for start in h.tick()) == {"heavy": 4, "light": 4}
    for rid in list(h.in_flight):
        h.finish(rid)
    weights.replace({"heavy": 3.0})
    assert Counter(start.tenant for start in h.tick()) == {"heavy": 6, "light": 2}


# -- Limits -----------------------------------------------------------------------------


def fill(limits: Limits, tenant: str, now_us: int, most: int = 1000) -> int:
    """How many more attempts of ``tenant`` are admitted at ``now_us`` (up to ``most``)."""
    taken = 0
    while taken < most and limits.acquire(tenant, now_us):
        taken += 1
    return taken


def test_limits_without_overrides_keep_their_positional_constructor() -> None:
    limits = Limits(10, 2, 1000.0, 5)
    assert fill(limits, "a", 0) == 2
    assert limits.tenant_limits("a") == (2, 1000.0)


def test_a_tenant_override_replaces_the_default_concurrency_and_rate() -> None:
    overrides = {"one": TenantLimits(concurrency=1), "slow": TenantLimits(rate_per_s=2.0)}
    limits = Limits(100, 3, 1000.0, overrides=overrides)
    assert fill(limits, "one", 0) == 1
    assert fill(limits, "other", 0) == 3
    assert fill(limits, "slow", 0) == 2  # its burst: one second at 2/s
    assert limits.tenant_limits("slow") == (3, 2.0)


def release_all(limits: Limits, tenant: str) -> None:
    while limits.by_tenant.get(tenant):
        limits.release(tenant)


def test_a_lowered_rate_gets_no_burst_of_stale_tokens() -> None:
    overrides: LiveMapping[TenantLimits] = LiveMapping()
    limits = Limits(10_000, 10_000, 1000.0, overrides=overrides)
    assert fill(limits, "a", 0, most=10) == 10  # the bucket holds 990 tokens now
    release_all(limits, "a")
    overrides.replace({"a": TenantLimits(rate_per_s=2.0)})
    assert fill(limits, "a", 0) == 2  # at most the new burst (2), not the 990 left
    release_all(limits, "a")
    assert fill(limits, "a", SECOND // 2) == 1  # then 2 a second
    release_all(limits, "a")
    assert fill(limits, "a", SECOND) == 1


def test_a_raised_rate_refills_faster_from_what_is_left() -> None:
    overrides = LiveMapping({"a": TenantLimits(rate_per_s=1.0)})
    limits = Limits(10_000, 10_000, 1000.0, overrides=overrides)
    assert fill(limits, "a", 0) == 1
    release_all(limits, "a")
    overrides.replace({"a": TenantLimits(rate_per_s=100.0)})
    assert fill(limits, "a", 0) == 0  # no tokens appear from nowhere
    assert fill(limits, "a", SECOND // 10) == 10  # 0.1 s at the new rate


def test_a_removed_override_returns_to_the_defaults() -> None:
    overrides = LiveMapping({"a": TenantLimits(concurrency=1, rate_per_s=1.0)})
    limits = Limits(100, 4, 10.0, overrides=overrides)
    assert fill(limits, "a", 0) == 1
    release_all(limits, "a")
    overrides.replace({})
    assert limits.tenant_limits("a") == (4, 10.0)
    assert fill(limits, "a", SECOND) == 1  # one token earned at 1/s before the change...
    assert fill(limits, "a", SECOND + SECOND // 10) == 1  # ...then 10/s, up to 4 in flight


def test_a_lowered_concurrency_waits_for_attempts_in_flight() -> None:
    overrides: LiveMapping[TenantLimits] = LiveMapping()
    limits = Limits(100, 5, 1000.0, overrides=overrides)
    assert fill(limits, "a", 0) == 5
    overrides.replace({"a": TenantLimits(concurrency=2)})
    for in_flight in (4, 3, 2):
        limits.release("a")
        assert not limits.acquire("a", 0), in_flight
    limits.release("a")
    assert limits.acquire("a", 0) and not limits.acquire("a", 0)


# -- TenantPolicy -----------------------------------------------------------------------


def record(tenant: str, **fields: float | int | None) -> TenantRecord:
    return TenantRecord.model_validate(
        {"tenant": tenant, "key_hash": None, "created_at_us": 1, "updated_at_us": 1, **fields}
    )


def test_policy_maps_records_to_weights_and_overrides() -> None:
    policy = TenantPolicy({"a": record("a", weight=2.5, concurrency=1), "b": record("b")})
    assert dict(policy.weights) == {"a": 2.5, "b": 1.0}
    assert dict(policy.limits) == {"a": TenantLimits(1, None)}  # b overrides nothing
    assert policy.ready and policy.error is None


def test_policy_updates_are_seen_by_rings_and_limits_holding_its_mappings() -> None:
    policy = TenantPolicy()
    limits = Limits(100, 3, 1000.0, overrides=policy.limits)
    ring = ring_of(policy.weights, "a", "b")
    policy.update({"a": record("a", weight=3.0, concurrency=1, rate_per_s=5.0)})
    assert contended(ring, 40) == {"a": 30, "b": 10}
    assert limits.tenant_limits("a") == (1, 5.0)
    policy.update({})  # a tombstone: the defaults again
    assert contended(ring, 40) == {"a": 20, "b": 20}
    assert limits.tenant_limits("a") == (3, 1000.0)


def test_live_mapping_is_a_read_only_mapping() -> None:
    live: LiveMapping[float] = LiveMapping({"a": 1.0})
    read: Callable[[str], float | None] = live.get
    assert read("a") == 1.0 and read("b") is None and live.get("b", 7.0) == 7.0
    assert "a" in live and list(live) == ["a"] and len(live) == 1
    with pytest.raises(KeyError):
        live["b"]


def test_hold_counts_an_adopted_attempt_even_over_the_limits() -> None:
    """A run a worker still holds after a restart counts against its tenant, even if the
    limits are already full, so no new attempt starts until one ends."""
    limits = Limits(2, 1, 1000.0)
    assert limits.acquire("a", T0)
    limits.hold("a")
    assert (limits.in_flight, limits.by_tenant["a"]) == (2, 2)
    assert not limits.acquire("b", T0)  # the process limit is full
    limits.release("a")
    limits.release("a")
    assert limits.in_flight == 0 and limits.acquire("a", T0)


def test_a_tenant_turned_away_is_visited_first_in_the_next_round() -> None:
    ring = DeficitRing()
    for tenant in ("first", "second", "third"):
        ring.add(tenant)
    started: list[str] = []
    places = [0]

    def serve(tenant: str) -> str:
        if places[0] == 0:
            return "blocked"  # a limit every tenant shares
        places[0] -= 1
        started.append(tenant)
        return "started"

    for _ in range(6):
        places[0] = 1  # one place frees between rounds
        ring.round(serve)
    # before, the ring's first tenant took every place that freed
    assert started == ["first", "second", "third", "first", "second", "third"]


@pytest.mark.parametrize(
    ("weights", "order", "expected"),
    [
        ({"heavy": 3.0, "light": 1.0}, ("light", "heavy"), {"heavy": 300, "light": 100}),
        ({"heavy": 3.0, "light": 1.0}, ("heavy", "light"), {"heavy": 300, "light": 100}),
        ({"heavy": 1.5, "light": 1.0}, ("light", "heavy"), {"heavy": 240, "light": 160}),
        ({"heavy": 1.5, "light": 1.0}, ("heavy", "light"), {"heavy": 240, "light": 160}),
        ({"heavy": 2.5, "light": 1.0}, ("heavy", "light"), {"heavy": 286, "light": 114}),
    ],
)
def test_places_a_shared_limit_frees_one_a_round_follow_the_weights(
    weights: dict[str, float], order: tuple[str, str], expected: dict[str, int]
) -> None:
    ring = ring_of(weights, *order)
    started: Counter[str] = Counter()
    places = [0]

    def serve(tenant: str) -> str:
        if places[0] == 0:
            return "blocked"  # a limit both tenants share
        places[0] -= 1
        started[tenant] += 1
        return "started"

    for _ in range(400):
        places[0] = 1  # one place frees between rounds
        ring.round(serve)
    # before, a tenant stopped part-way through its quantum lost the rest: 1:1
    assert abs(started["heavy"] - expected["heavy"]) <= 1, started
    assert sum(started.values()) == 400


def test_dispatch_logic_follows_the_weights_when_one_place_frees_at_a_time() -> None:
    h = Harness(concurrency=1, weights={"heavy": 3.0})
    for n in range(60):
        h.run(run_triggered(n, tenant="light", at=T0 - 100 * SECOND))
        h.run(run_triggered(n, tenant="heavy", at=T0 - 100 * SECOND))
    started: Counter[str] = Counter()
    for _ in range(40):
        starts = h.tick()
        assert len(starts) == 1
        started[starts[0].tenant] += 1
        h.finish(starts[0].delivery.run_id)
    assert started == {"heavy": 30, "light": 10}


def test_a_lowered_weight_caps_what_a_limit_left_of_the_old_quantum() -> None:
    weights: LiveMapping[float] = LiveMapping()
    weights.replace({"heavy": 1000.0})
    ring = ring_of(weights, "heavy", "light")
    budget = [0]
    started: Counter[str] = Counter()

    def serve(tenant: str) -> str:
        if budget[0] == 0:
            return "blocked"  # the tick's start budget
        budget[0] -= 1
        started[tenant] += 1
        return "started"

    budget[0] = 100
    ring.round(serve)  # heavy: 100 of its 1,000, cut short
    assert started == {"heavy": 100}
    weights.replace({})  # back to 1: the 900 left are not owed any more
    started.clear()
    for _ in range(10):
        budget[0] = 10
        while budget[0] and ring.round(serve):
            pass
    assert started == {"heavy": 50, "light": 50}
