"""A job's definition lives under its own key: written on mutations, not at each emission."""

from __future__ import annotations

import pytest

from schedulerstream.errors import StateTooLarge
from schedulerstream.scheduler.keys import BACKFILL_END, def_store_key, job_store_key
from schedulerstream.scheduler.logic import SchedulerLogic
from schedulerstream.scheduler.plan import PlanCache
from schedulerstream.scheduler.records import FastRecords
from schedulerstream.scheduler.state import definition_ref, is_ref

from .harness import CODEC, TOPICS, Harness, SortedStore, command, definition, us

PAYLOAD = {"blob": "x" * 4000}


def started(**kwargs: bool) -> Harness:
    h = Harness(**kwargs)
    h.now = us("2025-01-06T10:00:00Z")
    return h


def fresh_logic(h: Harness, inline_definitions: bool = False) -> None:
    """Another process's logic (an empty plan cache) over the same store."""
    h.logic = SchedulerLogic(CODEC, TOPICS, h.logic.timers, "test",
                             inline_definitions=inline_definitions)  # fmt: skip


def logged(store: SortedStore, key: bytes) -> list[bytes | None]:
    return [value for k, value in store.logged if k == key]


def test_an_emission_rewrites_the_timer_state_and_not_the_definition() -> None:
    h = started()
    job = definition(1, payload=PAYLOAD)
    h.put(job)
    h.tick_until(us("2025-01-06T10:03:00Z"))
    assert len(h.out.runs()) == 3
    assert logged(h.store, def_store_key("acme/j1")) == [job]  # once, at the put
    states = logged(h.store, job_store_key("acme/j1"))
    assert len(states) == 4  # the put and each emission
    assert all(s is not None and len(s) < 150 for s in states)  # no 4 KB payload in them
    state = h.logic.jobs.load(h.store, "acme/j1")
    assert state is not None and state.definition == definition_ref(job)
    assert h.out.runs()[-1]["payload_json"] == '{"blob":"' + "x" * 4000 + '"}'


def test_a_job_record_that_holds_its_definition_still_emits_and_moves_it() -> None:
    """A record written before the definition had its own key: read as it is, and its next
    save writes the definition under its key once."""
    h = started()
    job = definition(1, payload=PAYLOAD)
    h.put(job)
    state = h.logic.jobs.load(h.store, "acme/j1")
    assert state is not None
    state.definition = job
    records = FastRecords.for_codec(CODEC)
    assert records is not None
    h.store.put(job_store_key("acme/j1"), records.job(state), logged=False)
    h.store.delete(def_store_key("acme/j1"), logged=False)
    h.store.logged.clear()
    fresh_logic(h)
    h.tick_until(us("2025-01-06T10:02:00Z"))
    assert h.run_ids() == ["acme/j1@20250106T100100Z", "acme/j1@20250106T100200Z"]
    assert logged(h.store, def_store_key("acme/j1")) == [job]  # moved at the first save
    state = h.logic.jobs.load(h.store, "acme/j1")
    assert state is not None and is_ref(state.definition)


def test_a_job_whose_stored_definition_is_lost_or_wrong_fails_alone() -> None:
    h = started()
    h.put(definition(1, payload=PAYLOAD))
    h.put(definition(1, tenant="beta", job_id="j2"), key=b"beta/j2")
    h.put(definition(1, tenant="gamma", job_id="j3"), key=b"gamma/j3")
    h.store.delete(def_store_key("acme/j1"), logged=False)
    other = definition(1, tenant="gamma", job_id="j3", schedule={"every": 7})
    h.store.put(def_store_key("gamma/j3"), other, logged=False)
    fresh_logic(h)
    h.tick_until(us("2025-01-06T10:03:00Z"))
    assert h.run_ids() == [f"beta/j2@20250106T10{m:02d}00Z" for m in (1, 2, 3)]
    assert h.logic.counters.failed_ticks == 2  # each once: then left out until a new version
    stopped = {e["run_id"]: e["reason"] for e in h.out.attempts("missed")}
    assert sorted(stopped) == ["acme/j1@stopped", "gamma/j3@stopped"]
    assert "its definition is missing from the state" in stopped["acme/j1@stopped"]
    assert "not the one its state refers to" in stopped["gamma/j3@stopped"]
    h.put(definition(2, payload=PAYLOAD))  # a user's fix of one of them
    h.tick_until(us("2025-01-06T10:04:00Z"))
    later = h.run_ids()[3:]
    assert "beta/j2@20250106T100400Z" in later
    assert "acme/j1@20250106T100400Z" in later  # (its missed ones as its misfire policy says)
    assert not [r for r in later if r.startswith("gamma/")]


def test_the_changelog_restores_the_definitions_and_a_delete_removes_both_keys() -> None:
    h = started()
    h.put(definition(1, payload=PAYLOAD))
    h.put(definition(1, tenant="beta", job_id="j2"), key=b"beta/j2")
    h.tick_until(us("2025-01-06T10:01:00Z"))
    h.put(definition(2, tenant="beta", job_id="j2", schedule={"every": 120}), key=b"beta/j2")
    h.put(None, key=b"acme/j1")
    assert logged(h.store, def_store_key("acme/j1"))[-1] is None
    assert logged(h.store, job_store_key("acme/j1"))[-1] is None
    restored = SortedStore()
    fresh_logic(h)
    for key, value in h.store.logged:
        h.logic.jobs.restore_record(restored, key, value)
    ticked = {k: v for k, v in h.store.data.items() if k != BACKFILL_END}  # a tick's marker
    assert restored.data == ticked  # the definitions and the due index too
    assert def_store_key("acme/j1") not in restored.data
    h.store, h.out.records[:] = restored, []
    h.tick_until(us("2025-01-06T10:04:00Z"))
    assert h.run_ids() == ["beta/j2@20250106T100200Z", "beta/j2@20250106T100400Z"]


def test_inline_definitions_write_the_earlier_layout_and_read_both() -> None:
    """The first step of a rolling upgrade: what schedulers before the def/ key can read."""
    h = started()
    job = definition(1, payload=PAYLOAD)
    h.put(job)  # a reference, written by an upgraded scheduler
    fresh_logic(h, inline_definitions=True)
    h.put(definition(1, tenant="beta", job_id="j2"), key=b"beta/j2")
    h.tick_until(us("2025-01-06T10:02:00Z"))
    assert sorted(h.run_ids()) == [f"{j}@20250106T10{m:02d}00Z" for j in ("acme/j1", "beta/j2")
                                   for m in (1, 2)]  # fmt: skip
    assert def_store_key("beta/j2") not in h.store.data
    for key, raw in ((b"acme/j1", job), (b"beta/j2", definition(1, tenant="beta", job_id="j2"))):
        state = h.logic.jobs.load(h.store, key.decode())
        assert state is not None and state.definition == raw  # back inside the job record


def test_the_plan_cache_serves_a_reference_only_for_its_own_definition() -> None:
    plans = PlanCache(lambda data: CODEC.decode_as("JobDefinition", data))
    first, other = definition(1), definition(1, schedule={"every": 7})
    plan = plans.get("acme/j1", 1, first)
    assert plans.cached("acme/j1", 1, definition_ref(first)) is plan
    assert plans.cached("acme/j1", 1, definition_ref(other)) is None
    assert plans.cached("acme/j1", 2, definition_ref(first)) is None


class Bounded(SortedStore):
    """A store that refuses logged job records over ``limit`` bytes, as RocksStore does."""

    limit = 10**9

    def put(self, key: bytes, value: bytes, *, logged: bool = True) -> None:
        if logged and key.startswith(b"job/") and len(value) > self.limit:
            raise StateTooLarge(f"{key!r} too large")
        super().put(key, value, logged=logged)


def test_a_version_whose_job_record_is_refused_leaves_both_records_as_they_were() -> None:
    h = started()
    h.store = Bounded()
    first = definition(1, schedule={"every": 60})
    h.put(first)
    hour = us("2025-01-06T09:00:00Z")
    for n in range(20):  # backfills in progress, each kept in the job's state
        h.command(command("Backfill", {"request_id": f"b-{n:02d}-{'x' * 40}", "start_us": hour,
                                       "end_us": h.now, "rerun": True}))  # fmt: skip
    h.store.limit = len(h.store.data[job_store_key("acme/j1")]) - 1
    with pytest.raises(StateTooLarge):
        h.put(definition(2, schedule={"every": 120}))
    assert h.store.data[def_store_key("acme/j1")] == first
    state = h.logic.jobs.load(h.store, "acme/j1")
    assert state is not None and state.version == 1 and state.definition == definition_ref(first)
