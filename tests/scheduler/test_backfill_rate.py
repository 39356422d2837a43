"""A backfill's runs share a partition at SCHEDULERSTREAM_BACKFILL_RATE, split between tenants.

Before the budget, each backfilling job emitted up to ``backfill_chunk`` runs every tick (20
ticks a second): ten jobs of one tenant emitted 200,000 runs a second into the ``runs``
partitions the healthy tenants' runs share.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from schedulerstream.scheduler.backfills import BackfillBudget
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
    budget.served(3, "b", "b/j2")
    assert budget.job_turns(3, "b", ["b/j1", "b/j2", "b/j3"]) == ["b/j3", "b/j1", "b/j2"]
    assert budget.job_turns(3, "a", ["a/j1", "a/j2"]) == ["a/j1", "a/j2"]
    assert budget.turns(3, ["b", "a", "c"]) == ["c", "a", "b"]
    assert budget.turns(3, ["a", "d"]) == ["d", "a"]  # "b" is gone: the next after it
    assert budget.turns(4, ["b", "a"]) == ["a", "b"]


def _catch_up_job(h: Harness, tenant: str, job: str, behind_s: int, **extra: object) -> None:
    h.put(
        definition(1, tenant=tenant, job_id=job, schedule={"every": 1},
                   misfire_policy="catch_up", catch_up_window=7200, **extra),
        key=f"{tenant}/{job}".encode(),
        ts=h.now - behind_s * 1_000_000,
    )  # fmt: skip


def test_a_tenants_jobs_resumed_far_behind_catch_up_at_the_rate_and_on_time_runs_go_on() -> None:
    """Before, 100 every-second catch_up jobs an hour behind emitted their 360,000 late runs
    as fast as the scheduler could (10,000 a job a tick), ahead of every run due now."""
    h = _harness(rate=200)
    _job(h, "healthy", "tick", created_us=T0)
    for n in range(100):
        _catch_up_job(h, "flood", f"j{n}", behind_s=3600)
    h.out.clear()
    h.tick_until(T0 + 10_000_000)
    triggers = Counter((r["tenant"], r["trigger"]) for r in h.out.runs())
    assert 200 * 10 <= triggers["flood", "catch_up"] <= 200 * 11 + 1
    on_time = list(range(T0 + 1_000_000, T0 + 11_000_001, 1_000_000))
    for tenant, job in [("healthy", "tick"), ("flood", "j0"), ("flood", "j99")]:
        scheduled = sorted(
            r["scheduled_at_us"]
            for r in h.out.runs()
            if r["job_id"] == job and r["tenant"] == tenant and r["trigger"] == "scheduled"
        )
        # the last minute's instants are within the grace: on time, not late
        assert [t for t in scheduled if t > T0] == on_time, (tenant, job)  # nor do its late
        # runs hold a job's own on-time ones


def test_every_late_instant_of_a_catch_up_job_is_emitted_once() -> None:
    h = _harness(rate=100)
    _catch_up_job(h, "acme", "a", behind_s=300)
    _catch_up_job(h, "acme", "b", behind_s=300)
    h.tick_until(T0 + 10_000_000)
    for job in ("a", "b"):
        runs = [r for r in h.out.runs() if r["job_id"] == job]
        assert len(runs) == len({r["run_id"] for r in runs})
        late = sorted(r["scheduled_at_us"] for r in runs if r["trigger"] == "catch_up")
        # late: past the 60 s grace when first ticked, 50 ms after T0 (T0 - 299 s .. T0 - 60 s)
        assert late == list(range(T0 - 299_000_000, T0 - 59_000_000, 1_000_000)), job
        scheduled = {r["scheduled_at_us"] for r in runs if r["trigger"] == "scheduled"}
        assert not scheduled & set(late) and max(scheduled) == T0 + 11_000_000
    assert h.out.attempts("missed") == []


def test_a_job_paused_while_catching_up_reports_the_late_instants_it_did_not_emit() -> None:
    h = _harness(rate=20)
    _catch_up_job(h, "acme", "a", behind_s=3600)
    h.tick_until(T0 + 1_000_000)
    emitted = sum(1 for r in h.out.runs() if r["trigger"] == "catch_up")
    assert 20 <= emitted <= 41  # a second's burst, then 20 a second
    h.out.clear()
    h.put(
        definition(2, job_id="a", schedule={"every": 1}, misfire_policy="catch_up",
                   catch_up_window=7200, paused=True),
        key=b"acme/a",
    )  # fmt: skip
    h.tick_until(T0 + 3_000_000)
    assert [r for r in h.out.runs() if r["trigger"] == "catch_up"] == []
    [missed] = h.out.attempts("missed")
    # T0 - 3599 s .. T0 - 60 s were late when first ticked: those not emitted, counted exactly
    assert missed["count"] == 3540 - emitted
    assert missed["reason"].startswith(f"{3540 - emitted} instant(s)")
    assert missed["reason"].endswith("not run: job paused while catching up")


def test_max_runs_counts_a_catch_ups_late_runs_first() -> None:
    """A job of max_runs emits its late runs at once, ahead of its on-time ones, as before
    the catch-up cursor: its runs are its earliest instants (max_runs bounds them)."""
    h = _harness(rate=1)
    _catch_up_job(h, "acme", "a", behind_s=200, max_runs=80)
    h.tick_until(T0 + 5_000_000)
    runs = h.out.runs()
    assert [r["trigger"] for r in runs] == ["catch_up"] * 80
    # late when first ticked, 50 ms after T0: T0 - 199 s .. T0 - 60 s; the first 80 of them
    assert [r["scheduled_at_us"] for r in runs] == list(
        range(T0 - 199_000_000, T0 - 119_000_000, 1_000_000)
    )
    missed = h.out.attempts("missed")
    assert missed and all(m["reason"].endswith("not run: max_runs reached") for m in missed)
    state = h.logic.jobs.load(h.store, "acme/a")
    assert state is not None and state.next_fire_us is None and not state.backfills  # done


def test_an_update_or_delete_while_catching_up_reports_the_rest_as_the_old_versions() -> None:
    """The late instants belong to the version they were late in: a new version (another
    schedule, another policy) does not emit them, nor are they lost without a word."""
    h = _harness(rate=5)
    _catch_up_job(h, "acme", "a", behind_s=600)
    _catch_up_job(h, "acme", "b", behind_s=600)
    h.tick_until(T0 + 1_000_000)
    emitted = {job: sum(1 for r in h.out.runs() if r["job_id"] == job and
                        r["trigger"] == "catch_up") for job in "ab"}  # fmt: skip
    assert 0 < emitted["a"] + emitted["b"] <= 10
    h.out.clear()
    h.put(definition(2, job_id="a", schedule={"every": 3600}, misfire_policy="skip"),
          key=b"acme/a")  # fmt: skip
    h.put(None, key=b"acme/b")
    h.tick_until(T0 + 3_000_000)
    assert [r for r in h.out.runs() if r["trigger"] == "catch_up"] == []
    missed = {m["job_id"]: m for m in h.out.attempts("missed")}
    # T0 - 599 s .. T0 - 60 s were late: 540 instants, less those emitted
    assert missed["a"]["count"] == 540 - emitted["a"]
    assert missed["a"]["reason"].endswith("not run: job updated while catching up")
    assert missed["b"]["count"] == 540 - emitted["b"]
    assert missed["b"]["reason"].endswith("not run: job deleted while catching up")


def test_within_a_tenant_the_jobs_backfilling_take_turns() -> None:
    """A tenant's share went to its jobs in key order: a day-long backfill of its first job
    held a second job's catch-up until the backfill was done."""
    h = _harness(rate=20)
    _job(h, "acme", "a-report")
    _backfill(h, "acme", "a-report")
    _catch_up_job(h, "acme", "b-heartbeat", behind_s=300)
    h.out.clear()
    h.tick_until(T0 + 10_000_000)
    counts = Counter(r["job_id"] for r in h.out.runs() if r["trigger"] != "scheduled")
    assert counts["b-heartbeat"] >= 90 and counts["a-report"] >= 90, counts


def test_inline_catch_up_emits_the_late_runs_at_once_as_before_the_cursor() -> None:
    """SCHEDULERSTREAM_SCHEDULER_INLINE_CATCH_UP, for the first step of a rolling upgrade from
    schedulers that read a queued catch-up as a Backfill command: no cursor is queued."""
    h = Harness(backfill_rate=1)
    h.logic.timers = replace(h.logic.timers, inline_catch_up=True)
    h.now = T0
    _catch_up_job(h, "acme", "a", behind_s=300)
    h.logic.on_tick(h.store, h.out, 0, h.now)
    triggers = [r["trigger"] for r in h.out.runs()]
    # late: T0 - 299 s .. T0 - 61 s (239), then the last minute and the lookahead on time
    assert triggers[:239] == ["catch_up"] * 239 and set(triggers[239:]) == {"scheduled"}
    state = h.logic.jobs.load(h.store, "acme/a")
    assert state is not None and state.backfills == []
