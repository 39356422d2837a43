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
    stopped = [(e["run_id"], e["reason"]) for e in h.out.attempts("missed")]
    assert [run_id for run_id, _ in stopped] == ["acme/j1@stopped", "gamma/j3@stopped"]
    assert "its definition is missing from the state" in stopped[0][1]
    assert "not the one its state refers to" in stopped[1][1]
    h.put(definition(1, payload=PAYLOAD))  # a stale version changes nothing: no new failure
    h.tick_until(us("2025-01-06T10:03:30Z"))
    assert (h.logic.counters.failed_ticks, len(h.out.attempts("missed"))) == (2, 2)
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


def test_a_first_version_whose_job_record_is_refused_leaves_no_definition_behind() -> None:
    h = started()
    h.store = Bounded()
    h.store.limit = 10
    with pytest.raises(StateTooLarge):
        h.put(definition(1, schedule={"every": 60}))
    assert def_store_key("acme/j1") not in h.store.data
    assert job_store_key("acme/j1") not in h.store.data


def test_a_pause_reads_the_definition_its_plan_holds_when_the_store_lost_it() -> None:
    h = started()
    h.put(definition(1, schedule={"every": 60}))
    h.store.delete(def_store_key("acme/j1"), logged=False)
    h.command(command("PauseJob", {"job_version": 1, "reason": "3 failed runs"}))
    [paused] = [r for topic, _, r, name, _ in h.out.records if name == "JobDefinition"]
    assert (paused["version"], paused["paused"], paused["paused_reason"]) == (
        2, True, "3 failed runs",
    )  # fmt: skip


def test_inline_mode_rewrites_every_referring_job_record_chunk_by_chunk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before a downgrade: a paused job or one due in a year is saved by no emission."""
    monkeypatch.setattr("schedulerstream.scheduler.logic.INLINE_CHUNK", 2)
    h = started()
    jobs = {f"j{n}": definition(1, job_id=f"j{n}", schedule={"every": 3600 * 24 * 365},
                                paused=n == 0) for n in range(5)}  # fmt: skip
    for job_id, raw in jobs.items():
        h.put(raw, key=f"acme/{job_id}".encode())
    h.store.delete(def_store_key("acme/j4"), logged=False)  # j4's cannot be read
    fresh_logic(h, inline_definitions=True)

    def refs() -> list[str]:
        states = {j: h.logic.jobs.load(h.store, f"acme/{j}") for j in jobs}
        return [j for j, s in states.items() if s is not None and is_ref(s.definition)]

    h.logic.on_tick(h.store, h.out, 0, h.now)
    assert refs() == ["j2", "j3", "j4"]  # two a tick
    h.logic.on_tick(h.store, h.out, 0, h.now)
    h.logic.on_tick(h.store, h.out, 0, h.now)
    assert refs() == ["j4"]
    for job_id in ("j0", "j1", "j2", "j3"):
        state = h.logic.jobs.load(h.store, f"acme/{job_id}")
        assert state is not None and state.definition == jobs[job_id]
    assert h.out.runs() == []
