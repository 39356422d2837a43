"""A backfill's runs share a partition at SCHEDULERSTREAM_BACKFILL_RATE, split between tenants.

Before the budget, each backfilling job emitted up to ``backfill_chunk`` runs every tick (20
ticks a second): ten jobs of one tenant emitted 200,000 runs a second into the ``runs``
partitions the healthy tenants' runs share.
"""

from __future__ import annotations

from collections import Counter

from schedulerstream.scheduler.backfill_budget import BackfillBudget
from tests.scheduler.harness import Harness, command, definition, us

T0 = us("2025-01-06T10:00:30Z")
DAY_AGO = T0 - 86_400_000_000


def _harness(rate: float) -> Harness:
    h = Harness(backfill_rate=rate)
    h.now = T0
    return h


def _job(h: Harness, tenant: str, job: str, created_us: int = DAY_AGO) -> None:
    h.put(
        definition(1, tenant=tenant, job_id=job, schedule={"every": 1}),
        key=f"{tenant}/{job}".encode(),
        ts=created_us,
    )


def _backfill(h: Harness, tenant: str, job: str, request: str = "b1") -> None:
    fields = {"request_id": request, "start_us": DAY_AGO, "end_us": h.now, "rerun": True}
    h.command(command("Backfill", fields, job=job, tenant=tenant), key=f"{tenant}/{job}".encode())


def _by_tenant(h: Harness, trigger: str) -> Counter[str]:
    return Counter(r["tenant"] for r in h.out.runs() if r["trigger"] == trigger)


def test_a_tenants_huge_backfill_is_emitted_at_the_rate_beside_a_healthy_tenants_runs() -> None:
    h = _harness(rate=200)
    _job(h, "healthy", "tick", created_us=T0)
    for n in range(10):  # 10 jobs x 86,400 runs a day, rerun: ~864,000 runs in all
        _job(h, "flood", f"j{n}", created_us=T0)
        _backfill(h, "flood", f"j{n}")
    h.out.clear()
    h.tick_until(T0 + 10_000_000)
    backfilled = _by_tenant(h, "backfill")
    # one second's burst, then 200 a second: not the 200,000 a second of unbounded chunks
    assert 200 * 10 <= backfilled["flood"] <= 200 * 11 + 1
    healthy = sorted(r["scheduled_at_us"] for r in h.out.runs() if r["tenant"] == "healthy")
    # every instant of the healthy job up to now + lookahead (1 s), each emitted once, in time
    assert healthy == list(range(T0 + 1_000_000, T0 + 11_000_001, 1_000_000))
    assert h.logic.counters.backfill_rate_waits > 0


def test_tenants_backfilling_in_one_partition_share_its_rate_evenly() -> None:
    h = _harness(rate=100)
    for n in range(20):  # one tenant with many jobs, one with one: shares go by tenant
        _job(h, "many", f"j{n}")
        _backfill(h, "many", f"j{n}")
    _job(h, "one", "j0")
    _backfill(h, "one", "j0")
    h.out.clear()
    h.tick_until(T0 + 20_000_000)
    counts = _by_tenant(h, "backfill")
    assert abs(counts["many"] - counts["one"]) <= 10, counts
    assert 100 * 20 <= counts["many"] + counts["one"] <= 100 * 21 + 2


def test_the_tokens_a_small_backfill_leaves_go_to_the_others_in_the_same_tick() -> None:
    h = _harness(rate=1000)
    _job(h, "small", "j0", created_us=T0 - 5_000_000)  # 5 instants in its window
    fields = {"request_id": "s", "start_us": T0 - 5_000_000, "end_us": T0, "rerun": True}
    h.command(command("Backfill", fields, job="j0", tenant="small"), key=b"small/j0")
    _job(h, "big", "j0")
    _backfill(h, "big", "j0")
    h.out.clear()
    while h.logic.on_tick(h.store, h.out, 0, h.now):  # one instant: the first bucket only
        pass
    counts = _by_tenant(h, "backfill")
    assert counts["small"] == 5
    assert counts["big"] == 995  # 1,000 tokens, not 500: its share plus what "small" left


def test_the_budget_refills_at_its_rate_up_to_one_seconds_worth() -> None:
    budget = BackfillBudget(rate_per_s=50)
    assert budget.available(3, 1_000_000) == 50
    budget.spend(3, 50)
    assert budget.available(3, 1_100_000) == 5
    assert budget.available(3, 900_000) == 5  # a clock stepped back adds nothing
    assert budget.available(3, 60_000_000) == 50  # never more than one second's worth
    assert budget.available(4, 0) == 50  # partitions are apart
    budget.spend(3, 50)
    budget.forget(3)
    assert budget.available(3, 60_000_000) == 50  # a new owner starts full
    assert budget.turns(3, ["b", "a", "c"]) == ["a", "b", "c"]
    budget.served(3, "b")
    assert budget.turns(3, ["b", "a", "c"]) == ["c", "a", "b"]
    assert budget.turns(3, ["a", "d"]) == ["d", "a"]  # "b" is gone: the next after it
    assert budget.turns(4, ["b", "a"]) == ["a", "b"]
