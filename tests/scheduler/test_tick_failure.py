"""A scheduler tick that raises is undone by the runtime (its store changes and records): the
due jobs it had read stay due, for the next tick to emit. A job whose own tick raises is
quarantined, and the tick goes on with the others."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from schedulerstream.errors import StateError
from schedulerstream.runtime.store import RocksStore

from .harness import Harness, definition, us


def test_a_tick_that_raises_leaves_every_due_job_to_the_next_tick(tmp_path: Path) -> None:
    h = Harness()
    h.store = RocksStore.open(tmp_path / "store")  # type: ignore[assignment]
    h.now = us("2025-01-06T10:00:30Z")
    for job in ("j1", "j2"):
        h.put(definition(1, job_id=job), key=f"acme/{job}".encode())
    h.tick_until(us("2025-01-06T10:00:58Z"))
    assert h.out.runs() == []
    real = h.logic._emit_due

    def emit_due(*args: Any, **kwargs: Any) -> Any:  # not one job's fault: the tick raises
        raise StateError("the store failed a read")

    h.logic._emit_due = emit_due  # type: ignore[method-assign]
    h.now = us("2025-01-06T10:00:59.5Z")  # 10:01 is within the 1 s lookahead
    h.store.savepoint()  # as Invoker.invoke runs a punctuation
    try:
        h.logic.on_tick(h.store, h.out, 0, h.now)
    except StateError:
        h.store.rollback()
    h.logic._emit_due = real  # type: ignore[method-assign]

    h.tick_until(us("2025-01-06T10:01:00Z"))

    assert sorted(h.run_ids()) == ["acme/j1@20250106T100100Z", "acme/j2@20250106T100100Z"]
    h.store.close()


def test_a_job_whose_tick_raises_is_quarantined_and_the_others_fire_on(tmp_path: Path) -> None:
    h = Harness()
    h.now = us("2025-01-06T10:00:30Z")
    for job in ("j1", "j2"):
        h.put(definition(1, job_id=job), key=f"acme/{job}".encode())
    real = h.logic._emit_due

    def emit_due(store: Any, out: Any, partition: int, job_key: str, *rest: Any) -> Any:
        if job_key == "acme/j1":
            raise ValueError("a bug met in this job's input")
        return real(store, out, partition, job_key, *rest)

    h.logic._emit_due = emit_due  # type: ignore[method-assign]

    h.tick_until(us("2025-01-06T10:03:00Z"))

    assert h.run_ids() == [f"acme/j2@20250106T10{m:02d}00Z" for m in (1, 2, 3)]
    [paused] = [r for topic, _, r, name, _ in h.out.records if name == "JobDefinition"]
    assert (paused["job_id"], paused["paused"], paused["version"]) == ("j1", True, 2)
    assert "the scheduler failed on it (ValueError: a bug met" in paused["paused_reason"]
    assert h.logic.counters.failed_ticks == 1  # paused at once: its tick is not tried again


def test_a_job_of_large_payloads_catching_up_emits_a_bounded_share_each_tick() -> None:
    """An hour of a 1-s job's runs, 100 KB each, would be one 360 MB tick; 16 MiB a tick
    emits them over many ticks, every one of them (a backfill rate past any tick's share,
    so the byte share is what bounds the ticks)."""
    h = Harness(backfill_rate=1e9)
    h.now = us("2025-01-06T10:00:00.5Z")
    payload = {"blob": "x" * 100_000}
    job = definition(1, schedule={"every": 1}, misfire_policy="catch_up",
                     catch_up_window=3600, payload=payload)  # fmt: skip
    h.put(job, ts=us("2025-01-06T09:00:00Z"))
    state = h.logic.jobs.load(h.store, "acme/j1")
    assert state is not None
    plan = h.logic.jobs.plan_of(h.store, "acme/j1", state)
    per_tick = plan.runs_per_tick(10_000)
    assert 130 < per_tick < 200  # 16 MiB of ~100 KB run records (the payload once)

    h.logic.on_tick(h.store, h.out, 0, h.now)
    assert len([r for r in h.out.runs() if r["trigger"] == "catch_up"]) == per_tick
    ticks, seen = 1, 0
    while len(h.out.runs()) > seen:  # the next ticks (each 50 ms later, live) go on
        seen = len(h.out.runs())
        h.logic.on_tick(h.store, h.out, 0, h.now)
        ticks += 1
    ids = h.run_ids()
    assert len(ids) == len(set(ids)) == 3601  # 09:00:00 .. 10:00:00 and 10:00:01 ahead
    assert ticks > 3600 // per_tick


def test_a_tick_past_its_byte_budget_leaves_the_next_jobs_to_the_next_tick(
    monkeypatch: Any,
) -> None:
    monkeypatch.setattr("schedulerstream.scheduler.logic.TICK_BYTES", 1)
    h = Harness()
    h.now = us("2025-01-06T10:00:30Z")
    for job in ("j1", "j2", "j3"):
        h.put(definition(1, job_id=job), key=f"acme/{job}".encode())
    h.now = us("2025-01-06T10:00:59.5Z")

    found = []
    while h.logic.on_tick(h.store, h.out, 0, h.now):
        found.append(len(h.out.runs()))
    found.append(len(h.out.runs()))

    assert found == [1, 2, 3]


def _catching_up(tick_bytes: int, monkeypatch: Any) -> tuple[list[str], int]:
    """Two tenants' every-second jobs, 20 and 10 minutes behind (catch_up, a few dozen runs a
    tick each): the run ids their ticks emit until one emits nothing, and how many ticks."""
    monkeypatch.setattr("schedulerstream.scheduler.logic.TICK_BYTES", tick_bytes)
    monkeypatch.setattr("schedulerstream.scheduler.plan.JOB_TICK_BYTES", 10_000)
    h = Harness(lookahead_s=3.5, backfill_rate=1e9)  # the byte budget alone cuts the ticks
    h.now = us("2025-01-06T10:00:00.2Z")
    for tenant, written in (("good", "09:40:00"), ("bad", "09:50:00")):
        job = definition(1, tenant=tenant, job_id="j", schedule={"every": 1},
                         misfire_policy="catch_up", catch_up_window=3600)  # fmt: skip
        h.put(job, key=f"{tenant}/j".encode(), ts=us(f"2025-01-06T{written}Z"))
    ticks, seen = 0, -1
    while len(h.out.runs()) > seen:  # ticks at one instant until one emits nothing
        seen = len(h.out.runs())
        h.logic.on_tick(h.store, h.out, 0, h.now)
        ticks += 1
        assert ticks < 1_000, "the ticks never ran out of work"
    return h.run_ids(), ticks


def test_a_tick_cut_by_its_byte_budget_scans_the_jobs_it_left_due_again(
    monkeypatch: Any,
) -> None:
    """A job still behind after its share of a tick is scanned again next tick, also when
    the budget cut the tick at a later job: before, the cut raised the scan's floor above
    it, and it emitted nothing more until its partition restarted."""
    whole, _ = _catching_up(64 << 20, monkeypatch)
    cut, ticks = _catching_up(1, monkeypatch)

    assert ticks > 40  # the budgets did cut the ticks
    assert sorted(cut) == sorted(whole)
    assert {r.split("/")[0] for r in whole} == {"good", "bad"}
    assert len(whole) > 1_800  # 20 + 10 minutes of seconds, and the lookahead


def test_a_job_that_cannot_be_quarantined_either_is_left_out_and_the_others_fire_on() -> None:
    h = Harness()
    h.now = us("2025-01-06T10:00:30Z")
    for job in ("j1", "j2"):
        h.put(definition(1, job_id=job), key=f"acme/{job}".encode())
    real_emit, real_plan = h.logic._emit_due, h.logic.plans.get

    def emit_due(store: Any, out: Any, partition: int, job_key: str, *rest: Any) -> Any:
        if job_key == "acme/j1":
            raise ValueError("a bug met in this job's input")
        return real_emit(store, out, partition, job_key, *rest)

    def plan(job_key: str, *rest: Any) -> Any:
        if job_key == "acme/j1":
            raise ValueError("its plan cannot be made")
        return real_plan(job_key, *rest)

    h.logic._emit_due = emit_due  # type: ignore[method-assign]
    h.logic.plans.get = plan  # type: ignore[method-assign]

    h.tick_until(us("2025-01-06T10:03:00Z"))  # before: every tick raised from here

    assert h.run_ids() == [f"acme/j2@20250106T10{m:02d}00Z" for m in (1, 2, 3)]
    assert h.logic.counters.failed_ticks == 1  # then left out, not tried at every tick
    h.logic._emit_due, h.logic.plans.get = real_emit, real_plan  # type: ignore[method-assign]
    h.put(definition(2, job_id="j1"), key=b"acme/j1")  # a new version: a fresh start
    h.tick_until(us("2025-01-06T10:04:00Z"))
    assert "acme/j1@20250106T100400Z" in h.run_ids()


def test_fire_once_fires_once_however_large_the_jobs_records() -> None:
    h = Harness()
    h.now = us("2025-01-06T10:00:00.5Z")
    job = definition(1, schedule={"every": 1}, misfire_policy="fire_once",
                     catch_up_window=3600, payload={"blob": "x" * 100_000})  # fmt: skip
    h.put(job, ts=us("2025-01-06T09:00:00Z"))
    for _ in range(60):  # the ticks of 3 s, live
        h.logic.on_tick(h.store, h.out, 0, h.now)
    assert [r["trigger"] for r in h.out.runs()].count("catch_up") == 1
