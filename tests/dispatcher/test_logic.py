"""The dispatcher state machine, driven by a ManualClock (no broker, no HTTP)."""

from __future__ import annotations

import json

import pytest

from schedulerstream.dispatcher import records as rk
from schedulerstream.dispatcher.states import IN_FLIGHT
from schedulerstream.errors import StateError, ValidationError
from schedulerstream.targets.base import Outcome

from .harness import (
    FAIL,
    OK,
    SECOND,
    T0,
    Harness,
    MemoryStore,
    cancel,
    definition,
    revoked,
    run_id,
    run_triggered,
)

RETRY = {"retry": {"max_attempts": 3, "initial_backoff": 1, "multiplier": 2, "max_backoff": 60}}


def test_a_due_run_is_accepted_started_and_succeeds() -> None:
    h = Harness()
    h.run(run_triggered())
    [start] = h.tick()
    assert start.delivery.run_id == run_id()
    assert start.delivery.attempt == 1
    assert start.delivery.payload == {"n": 0}
    assert start.delivery.deadline == 30.0
    assert h.finish(run_id())
    assert h.events() == [("accepted", 0), ("started", 1), ("succeeded", 1)]
    assert h.limits.in_flight == 0
    assert not list(h.store.prefix(b"active/"))


def test_a_run_waits_for_not_before() -> None:
    h = Harness()
    h.run(run_triggered(not_before=T0 + 2 * SECOND))
    assert h.tick() == []
    assert h.advance(1.5) == []
    assert [s.delivery.run_id for s in h.advance(0.5)] == [run_id()]


def test_a_duplicate_of_the_same_version_is_ignored_even_after_it_ran() -> None:
    h = Harness()
    h.run(run_triggered())
    h.tick()
    h.run(run_triggered())
    h.finish(run_id())
    h.run(run_triggered())
    assert h.tick() == []
    assert h.logic.counters.duplicates == 2
    assert [k for k, _ in h.events()].count("accepted") == 1


def test_an_ended_run_keeps_neither_payload_nor_spec_and_still_drops_its_replay() -> None:
    """A finished run is kept for days only to drop replays: its payload (up to 256 KiB) went
    into the store and the changelog with it for that long."""
    h = Harness()
    h.run(run_triggered())
    h.run(run_triggered(1, not_before=T0 + SECOND))
    h.run(revoked(run_id(1), 2))  # revoked before it started
    h.tick()
    h.finish(run_id())
    for rid in (run_id(), run_id(1)):
        raw = h.store.get(rk.run_key(rid))
        assert raw is not None and b'{"n":' not in raw
        ended = rk.RunRecord.from_bytes(raw)
        assert ended.payload_json is None and ended.spec is None and ended.finished_us == T0
    h.run(run_triggered())
    assert h.tick() == [] and h.logic.counters.duplicates == 1


def test_revoked_runs_are_dropped_and_a_later_version_re_arms_them() -> None:
    h = Harness()
    h.run(run_triggered(not_before=T0 + SECOND))
    h.run(revoked(run_id(), version=2))
    assert h.events()[-1] == ("revoked", 0)
    assert h.advance(2) == []
    h.run(run_triggered(version=1, not_before=T0 + 3 * SECOND))  # older version: still revoked
    assert h.advance(2) == []
    h.run(run_triggered(version=2, not_before=T0 + 5 * SECOND))
    assert [s.delivery.run_id for s in h.advance(1)] == [run_id()]


def test_a_revocation_of_the_same_version_or_a_started_run_does_nothing() -> None:
    h = Harness()
    h.run(run_triggered(version=3))
    h.run(revoked(run_id(), version=3))
    assert len(h.tick()) == 1
    h.run(revoked(run_id(), version=9))
    assert h.finish(run_id())


def test_deficit_round_robin_interleaves_tenants_whatever_the_arrival_order() -> None:
    h = Harness(concurrency=12)
    for i in range(20):
        h.run(run_triggered(i, tenant="big"))
    for i in range(3):
        h.run(run_triggered(i, tenant="small"))
    tenants = [s.tenant for s in h.tick()]
    assert tenants[:6] == ["big", "small"] * 3
    assert len(tenants) == 12


def test_weights_give_a_tenant_more_turns() -> None:
    h = Harness(concurrency=9, weights={"heavy": 2})
    for i in range(10):
        h.run(run_triggered(i, tenant="heavy"))
        h.run(run_triggered(i, tenant="light"))
    tenants = [s.tenant for s in h.tick()]
    assert tenants.count("heavy") == 6 and tenants.count("light") == 3


def test_process_and_tenant_concurrency_limits() -> None:
    h = Harness(concurrency=3, tenant_concurrency=2)
    for i in range(5):
        h.run(run_triggered(i, tenant="a"))
    h.run(run_triggered(0, tenant="b"))
    assert sorted(s.tenant for s in h.tick()) == ["a", "a", "b"]
    assert h.tick() == []
    h.finish(run_id(0, tenant="a"))
    assert [s.tenant for s in h.tick()] == ["a"]


def test_host_concurrency_caps_attempts_per_target_host_across_tenants() -> None:
    h = Harness(host_concurrency=2)
    slow = {"target": {"type": "http", "url": "https://slow.example.com:8443/hook"}}
    for i in range(3):
        h.run(run_triggered(i, tenant="a", job_id="s", **slow))
        h.run(run_triggered(i, tenant="b", job_id="s", **slow))
    h.run(run_triggered(0, tenant="c"))  # another host (example.com) is not held up
    started = h.tick()
    hosts = [s.host for s in started]
    assert hosts.count("slow.example.com:8443") == 2 and hosts.count("example.com") == 1
    assert h.tick() == []
    h.finish(started[0].delivery.run_id)
    [again] = h.tick()
    assert again.host == "slow.example.com:8443"
    assert h.limits.by_host["slow.example.com:8443"] == 2


def test_kafka_targets_hold_no_host_slot() -> None:
    h = Harness(host_concurrency=1)
    for i in range(3):
        h.run(run_triggered(i, target={"type": "kafka", "topic": "out"}))
    assert [s.host for s in h.tick()] == [None, None, None]


KAFKA = {"target": {"type": "kafka", "topic": "out"}}


def test_kafka_records_take_no_slot_so_a_tenant_s_concurrency_does_not_cap_a_tick() -> None:
    h = Harness(tenant_concurrency=2, record_budget=5)
    for i in range(8):
        h.run(run_triggered(i, tenant="a", **KAFKA))
    for i in range(3):
        h.run(run_triggered(i, tenant="b"))  # HTTP: two slots at most
    started = h.tick()
    assert [s.tenant for s in started].count("a") == 5  # the tick's record budget
    assert [s.tenant for s in started].count("b") == 2
    assert (h.limits.in_flight, h.limits.by_tenant["a"]) == (2, 0)
    for start in [s for s in started if s.tenant == "a"][:3]:
        h.finish(start.delivery.run_id)  # a finished record releases nothing
    assert h.limits.in_flight == 2
    assert [s.tenant for s in h.tick()] == ["a", "a", "a"]


def test_kafka_records_start_while_other_tenants_fill_every_slot() -> None:
    h = Harness(concurrency=2, tenant_concurrency=2)
    for i in range(3):
        h.run(run_triggered(i, tenant="busy"))
    assert len(h.tick()) == 2 and h.limits.full()
    for i in range(3):
        h.run(run_triggered(i, tenant="k", **KAFKA))
    assert [s.tenant for s in h.tick()] == ["k", "k", "k"]


def test_kafka_records_still_take_their_tenant_s_rate_tokens() -> None:
    h = Harness(rate=2.0)
    for i in range(5):
        h.run(run_triggered(i, **KAFKA))
    assert len(h.tick()) == 2
    assert len(h.advance(1.0)) == 2


def test_a_kafka_record_due_between_ticks_asks_for_a_tick_at_its_due_time() -> None:
    h = Harness(arm_us=300_000)
    h.run(run_triggered(0, not_before=T0 + 120_000, **KAFKA))
    h.run(run_triggered(tenant="other", not_before=T0 + 80_000, **KAFKA))
    h.run(run_triggered(tenant="hooks", not_before=T0 + 50_000))  # armable: starts now
    assert [s.tenant for s in h.tick()] == ["hooks"]
    assert h.logic.selection.wake_us == T0 + 80_000  # the earliest record's due time
    assert h.advance(0.079) == []
    assert [s.tenant for s in h.advance(0.001)] == ["other"]
    assert h.logic.selection.wake_us == T0 + 120_000
    assert [s.tenant for s in h.advance(0.040)] == ["acme"]
    assert h.logic.selection.wake_us is None  # nothing left that waits for its time


def test_only_a_record_within_the_arm_window_asks_for_a_tick_at_its_due_time() -> None:
    h = Harness(arm_us=300_000)
    h.run(run_triggered(tenant="later", not_before=T0 + 400_000, **KAFKA))
    assert h.tick() == []
    assert h.logic.selection.wake_us is None  # the grid's ticks come before it is due
    h.run(run_triggered(tenant="hooks", not_before=T0 + 100_000))
    h.run(run_triggered(1, tenant="hooks", not_before=T0 + 100_000))  # its overlap: not armed
    assert [s.tenant for s in h.tick()] == ["hooks"]
    assert h.logic.selection.wake_us is None


def test_tenant_rate_is_a_token_bucket() -> None:
    h = Harness(rate=2.0)
    for i in range(6):
        h.run(run_triggered(i))
    assert len(h.tick()) == 2
    assert len(h.advance(0.5)) == 1
    assert len(h.advance(1.0)) == 2


def test_forbid_skips_a_run_while_another_is_active() -> None:
    h = Harness()
    h.run(run_triggered(0, overlap_policy="forbid"))
    h.tick()
    h.run(run_triggered(1, overlap_policy="forbid"))
    assert h.tick() == []
    skipped = h.kinds("skipped")
    assert skipped[0]["run_id"] == run_id(1)
    assert run_id(0) in skipped[0]["reason"]
    h.finish(run_id(0))
    h.run(run_triggered(2, overlap_policy="forbid"))
    assert len(h.tick()) == 1


def test_replace_cancels_the_active_run_and_ignores_its_late_outcome() -> None:
    h = Harness()
    h.run(run_triggered(0, overlap_policy="replace"))
    h.tick()
    h.run(run_triggered(1, overlap_policy="replace"))
    [start] = h.tick()
    assert start.delivery.run_id == run_id(1)
    assert [(c.run_id, c.attempt) for c in h.cancelled] == [(run_id(0), 1)]
    assert h.kinds("cancelled")[0]["reason"] == f"replaced by {run_id(1)}"
    assert not h.logic.on_outcome(h.store, h, 0, run_id(0), 1, OK, h.now)


def test_buffer_one_keeps_one_waiting_and_skips_the_rest() -> None:
    h = Harness()
    for i in range(3):
        h.run(run_triggered(i, overlap_policy="buffer_one"))
    assert [s.delivery.run_id for s in h.tick()] == [run_id(0)]
    assert [r["run_id"] for r in h.kinds("skipped")] == [run_id(2)]
    h.finish(run_id(0))
    assert [s.delivery.run_id for s in h.tick()] == [run_id(1)]


def test_a_buffered_run_starts_after_a_restart_when_the_active_one_ends() -> None:
    h = Harness()
    for i in range(2):
        h.run(run_triggered(i, overlap_policy="buffer_one"))
    assert [s.delivery.run_id for s in h.tick()] == [run_id(0)]
    h.restart()  # run 0's attempt is re-queued; run 1 still waits behind it
    assert [(s.delivery.run_id, s.delivery.attempt) for s in h.tick()] == [(run_id(0), 2)]
    h.finish(run_id(0))
    assert [s.delivery.run_id for s in h.tick()] == [run_id(1)]


def test_failures_retry_with_deterministic_full_jitter_then_dead_letter() -> None:
    h = Harness()
    h.run(run_triggered(**RETRY))
    h.tick()
    waits = []
    for attempt in (1, 2):
        h.finish(run_id(), FAIL)
        [scheduled] = h.kinds("retry_scheduled")[attempt - 1 :]
        wait = scheduled["retry_at_us"] - h.now
        assert 0 <= wait < 2 ** (attempt - 1) * SECOND
        waits.append(wait)
        [start] = h.advance(wait / 1e6)
        assert start.delivery.attempt == attempt + 1
    h.finish(run_id(), FAIL)
    assert h.events()[-2:] == [("failed", 3), ("dead_lettered", 3)]
    assert "last error: HTTP 503: try again" in h.kinds("dead_lettered")[0]["reason"]
    again = Harness()
    again.run(run_triggered(**RETRY))
    again.tick()
    again.finish(run_id(), FAIL)
    assert again.kinds("retry_scheduled")[0]["retry_at_us"] - again.now == waits[0]


def test_retry_after_is_honoured_and_long_waits_go_to_the_largest_tier_below() -> None:
    h = Harness()
    h.run(run_triggered(**RETRY))
    h.tick()
    h.finish(run_id(), Outcome("failed", "HTTP 429", True, 10, 429, retry_after_s=45))
    [parked] = h.on_topic("retry.30s")
    assert parked["retry_at_us"] == h.now + 45 * SECOND
    assert h.advance(50) == []  # only the delay topic brings it back
    record = h.records[-1]
    h.logic.on_retry(h.store, 0, h.logic.events.value(
        h.logic.load(h.store, run_id()), "retry_scheduled", T0,  # type: ignore[arg-type]
        retry_at_us=record[2]["retry_at_us"],
    ))  # fmt: skip
    [start] = h.tick()
    assert start.delivery.attempt == 2


def test_max_age_dead_letters_instead_of_retrying() -> None:
    h = Harness()
    h.run(run_triggered(retry={"max_attempts": 9, "max_age": 10}))
    h.tick()
    h.finish(run_id(), Outcome("failed", "HTTP 503", True, 10, 503, retry_after_s=60))
    assert h.events()[-1] == ("dead_lettered", 1)
    assert "max_age" in h.kinds("dead_lettered")[0]["reason"]


def test_timeouts_are_recorded_and_retried() -> None:
    h = Harness()
    h.run(run_triggered(**RETRY))
    h.tick()
    h.finish(run_id(), Outcome("timed_out", "no answer within 30 s", True, 30 * SECOND))
    assert [k for k, _ in h.events()][-2:] == ["timed_out", "retry_scheduled"]


def test_gone_stops_the_run_and_skips_later_runs_of_that_job_version() -> None:
    h = Harness()
    h.run(run_triggered(0))
    h.tick()
    h.finish(run_id(0), Outcome("gone", "HTTP 410: removed", False, 10, 410))
    assert h.events()[-1] == ("failed", 1)
    assert h.kinds("failed")[0]["reason"] == "target gone: HTTP 410: removed"
    assert h.on_topic("retry.5s") == [] and h.kinds("retry_scheduled") == []
    h.run(run_triggered(1))
    assert h.tick() == []
    assert h.kinds("skipped")[0]["run_id"] == run_id(1)
    h.run(run_triggered(2, version=2))
    assert len(h.tick()) == 1


def test_cancel_aborts_in_flight_and_a_late_outcome_is_ignored() -> None:
    h = Harness()
    h.run(run_triggered())
    h.tick()
    h.command(cancel(run_id()))
    assert [(c.run_id, c.attempt) for c in h.cancelled] == [(run_id(), 1)]
    assert h.events()[-1] == ("cancelled", 1)
    assert not h.logic.on_outcome(h.store, h, 0, run_id(), 1, OK, h.now)
    assert h.logic.counters.late_outcomes == 1


def test_cancel_drops_a_pending_retry() -> None:
    h = Harness()
    h.run(run_triggered(**RETRY))
    h.tick()
    h.finish(run_id(), FAIL)
    h.command(cancel(run_id()))
    assert h.cancelled == []
    assert h.advance(10) == []
    assert h.events()[-1] == ("cancelled", 1)


def test_an_outcome_of_a_superseded_attempt_is_ignored() -> None:
    h = Harness()
    h.run(run_triggered(**RETRY))
    h.tick()
    h.finish(run_id(), FAIL)
    h.advance(5)
    assert not h.logic.on_outcome(h.store, h, 0, run_id(), 1, OK, h.now)
    assert h.logic.load(h.store, run_id()).status == IN_FLIGHT  # type: ignore[union-attr]


def test_restart_re_dispatches_in_flight_runs_with_the_next_attempt() -> None:
    h = Harness()
    for i in range(3):
        h.run(run_triggered(i))
    h.tick()
    h.finish(run_id(0))
    h.restart()
    again = h.tick()
    assert sorted((s.delivery.run_id, s.delivery.attempt) for s in again) == [
        (run_id(1), 2),
        (run_id(2), 2),
    ]
    assert "outcome unknown" in h.kinds("failed")[0]["reason"]


def test_restart_fails_at_most_once_runs_as_outcome_unknown() -> None:
    h = Harness()
    h.run(run_triggered(delivery="at_most_once"))
    h.tick()
    h.restart()
    assert h.tick() == []
    assert h.events()[-1] == ("failed", 1)
    assert "at_most_once" in h.kinds("failed")[0]["reason"]


def test_restart_rebuilds_the_tenant_queues() -> None:
    h = Harness(concurrency=2)
    for tenant in ("a", "b", "c"):
        for i in range(2):
            h.run(run_triggered(i, tenant=tenant))
    h.restart()
    h.limits.concurrency = 100
    assert sorted(s.tenant for s in h.tick()) == ["a", "a", "b", "b", "c", "c"]


def test_a_definition_of_another_job_is_refused() -> None:
    h = Harness()
    bad = run_triggered(job_id="j1", carried=False)
    from .harness import CODEC

    record = CODEC.decode(bad)[1]
    record["job_definition"] = definition(job_id="other")
    with pytest.raises(ValueError, match="carries the definition"):
        h.run(CODEC.encode("RunTriggered", record))


def test_finished_runs_are_forgotten_after_the_dedupe_retention() -> None:
    h = Harness(retention_us=3600 * SECOND)
    h.run(run_triggered(0))
    h.tick()
    h.finish(run_id(0))
    h.run(revoked(run_id(1), version=5))
    h.advance(1800)
    assert h.logic.load(h.store, run_id(0)) is not None
    h.advance(1801)
    assert h.logic.load(h.store, run_id(0)) is None
    assert h.logic.load(h.store, run_id(1)) is None
    assert not list(h.store.prefix(b"done/"))


def test_a_replay_of_the_pruned_changelog_leaves_no_finished_run_behind() -> None:
    """The prune's run tombstones take the derived done keys with them on restore; a done key
    that format 2 logged is pruned with a tombstone, and its run record read back."""
    h = Harness(retention_us=3600 * SECOND)
    h.run(run_triggered(0))
    h.tick()
    h.finish(run_id(0))
    h.run(revoked(run_id(1), version=5))
    legacy = run_id(2)
    fields = json.loads(h.store.get(rk.run_key(run_id(0))) or b"")
    assert fields[0] == 3 and fields[18] == T0
    fields = [2, legacy, *fields[2:18]]  # format 2: no finished_us, its done key logged
    h.store.put(rk.run_key(legacy), json.dumps(fields).encode())
    h.store.put(rk.done_key(T0, legacy), b"")
    assert rk.load(h.store, legacy).finished_us == 0  # type: ignore[union-attr]
    h.advance(3601)
    assert not list(h.store.prefix(b"done/")) and not list(h.store.prefix(b"run/"))
    assert (rk.done_key(T0, legacy), None) in h.store.logged
    for key, value in h.store.logged:
        assert not key.startswith(b"done/") or value is None or key.endswith(legacy.encode())
    fresh = MemoryStore()
    for key, value in h.store.logged:
        h.logic.restore_record(fresh, key, value)
    assert not list(fresh.prefix(b"done/")) and not list(fresh.prefix(b"run/"))


def test_a_run_re_armed_after_its_revocation_is_kept_until_its_own_end_ages_out() -> None:
    h = Harness(retention_us=3600 * SECOND)
    h.run(revoked(run_id(), version=2))  # revoked (done key at T0) before it was triggered
    h.advance(1800)
    h.run(run_triggered(version=2))
    assert [s.delivery.run_id for s in h.tick()] == [run_id()]
    assert h.finish(run_id())  # its second done key, at T0 + 1800 s
    h.advance(1801)  # the first done key ages out: the run stays, its own end does not
    assert [k for k, _ in h.store.prefix(b"done/")] == [rk.done_key(T0 + 1800 * SECOND, run_id())]
    assert rk.load(h.store, run_id()) is not None
    h.advance(1800)
    assert rk.load(h.store, run_id()) is None and not list(h.store.prefix(b"done/"))


def test_an_at_most_once_run_that_timed_out_is_not_retried() -> None:
    h = Harness()
    h.run(run_triggered(delivery="at_most_once", **RETRY))
    h.tick()
    h.finish(run_id(), Outcome("timed_out", "no answer within 30 s", True, 30 * SECOND))
    assert h.events()[-1] == ("timed_out", 1)
    assert h.kinds("retry_scheduled") == [] and h.advance(60) == []


def test_an_at_most_once_run_whose_failure_is_known_is_retried() -> None:
    h = Harness()
    h.run(run_triggered(delivery="at_most_once", **RETRY))
    h.tick()
    h.finish(run_id(), FAIL)
    assert [k for k, _ in h.events()][-1] == "retry_scheduled"


def test_a_run_record_of_an_unknown_format_is_a_state_error_naming_it() -> None:
    """A record not written by this format (an object, or another format number) is refused
    with the record's start, never read as something else."""
    h = Harness()
    rid = run_id()
    h.store.put(rk.run_key(rid), json.dumps({"run_id": rid}).encode())
    with pytest.raises(StateError, match="unknown format"):
        rk.load(h.store, rid)
    h.store.put(rk.run_key(rid), json.dumps([1, rid] + [None] * 16).encode())
    with pytest.raises(StateError, match=rid):
        rk.load(h.store, rid)


def test_the_in_memory_queue_survives_restart_and_skips_stale_entries() -> None:
    """Queues are served from memory and rebuilt from the store; a run cancelled while
    queued leaves a stale memory entry that is dropped, never started."""
    h = Harness()
    values = [run_triggered(n) for n in range(3)]
    for value in values:
        h.run(value)
    h.command(cancel(run_id(1)))
    started = [s.delivery.run_id for s in h.advance(5)]
    assert started == [run_id(0), run_id(2)]
    assert h.finish(run_id(0)) and h.finish(run_id(2))
    for n in (3, 4):
        h.run(run_triggered(n))
    h.restart()
    assert sorted(s.delivery.run_id for s in h.advance(5)) == [run_id(3), run_id(4)]


def test_a_cold_restore_from_the_changelog_rebuilds_queues_and_active_runs() -> None:
    """Queue, active and done keys are not changelogged: replaying only the logged records
    (as a new owner of the partition does) rebuilds them, compacted or not."""
    h = Harness()
    for n in range(4):
        h.run(run_triggered(n, job_id=f"j{n}"))
    h.advance(5)  # four in flight
    assert h.finish(run_id(0, job_id="j0"))
    assert h.finish(run_id(1, job_id="j1"), FAIL)  # retry queued (attempt 2), still active
    h.run(run_triggered(9, job_id="j9", not_before=T0 + 600 * SECOND))  # queued, not due
    compacted: dict[bytes, bytes | None] = {}
    for key, value in h.store.logged:
        compacted[key] = value
    for changelog in (h.store.logged, list(compacted.items())):
        fresh = MemoryStore()
        for key, value in changelog:
            h.logic.restore_record(fresh, key, value)
        assert not any(k.startswith((b"q/", b"active/", b"done/")) for k, _ in changelog)
        assert {k for k, _ in fresh.range(b"active/", b"active0")} == {
            k for k, _ in h.store.range(b"active/", b"active0")
        }
        assert [k for k, _ in fresh.prefix(b"done/")] == [k for k, _ in h.store.prefix(b"done/")]
        assert len(list(fresh.prefix(b"done/"))) == 1
        assert {k for k, _ in fresh.range(b"q/", b"q0")} == {
            k for k, _ in h.store.range(b"q/", b"q0")
        }


def test_a_run_carrying_a_bad_spec_is_refused_naming_it_and_another_tenant_runs() -> None:
    from .harness import CODEC

    h = Harness()
    record = CODEC.decode(run_triggered(tenant="evil"))[1]
    record["dispatch_spec_json"] = record["dispatch_spec_json"].replace('"allow"', '"often"')
    with pytest.raises(ValidationError, match="overlap_policy"):
        h.run(CODEC.encode("RunTriggered", record))
    h.run(run_triggered(tenant="acme"))
    assert [s.tenant for s in h.tick()] == ["acme"]
    assert h.logic.load(h.store, run_id(tenant="evil")) is None


def test_a_run_with_neither_spec_nor_definition_is_refused_naming_it_and_another_runs() -> None:
    from .harness import CODEC

    h = Harness()
    record = CODEC.decode(run_triggered(tenant="evil"))[1]
    assert record["job_definition"] == b""  # as the scheduler writes it
    record["dispatch_spec_json"] = None
    with pytest.raises(ValueError, match="neither a dispatch spec nor the job's definition"):
        h.run(CODEC.encode("RunTriggered", record))
    h.run(run_triggered(tenant="acme"))
    assert [s.tenant for s in h.tick()] == ["acme"]
    assert h.logic.load(h.store, run_id(tenant="evil")) is None


def test_the_carried_spec_is_what_a_run_is_dispatched_with() -> None:
    from .harness import CODEC

    h = Harness()
    record = CODEC.decode(run_triggered(timeout=7))[1]
    record["dispatch_spec_json"] = record["dispatch_spec_json"].replace(",7.0,", ",9.0,")
    h.run(CODEC.encode("RunTriggered", record))
    old = CODEC.decode(run_triggered(1, timeout=7, carried=False))[1]
    assert old["dispatch_spec_json"] is None  # an older scheduler's run: its definition is read
    h.run(CODEC.encode("RunTriggered", old))
    assert [s.delivery.deadline for s in h.tick()] == [9.0, 7.0]


def test_a_run_whose_payload_is_not_json_fails_alone_and_the_tick_starts_the_others() -> None:
    """Before, the payload was parsed after the run had taken its slot and left the queue: the
    error undid the tick's store changes but not the slots nor the in-memory queue, so the
    runs started before it in that tick were lost until a restart and their slots held."""
    from .harness import CODEC

    h = Harness(concurrency=10)
    for i in range(3):
        h.run(run_triggered(i, tenant="acme"))
    record = CODEC.decode(run_triggered(tenant="evil"))[1]
    record["payload_json"] = "{oops"
    h.run(CODEC.encode("RunTriggered", record))
    h.run(run_triggered(tenant="zeta"))

    started = h.tick()

    assert sorted(s.tenant for s in started) == ["acme", "acme", "acme", "zeta"]
    assert h.limits.in_flight == 4  # the bad run holds no slot
    bad = h.logic.load(h.store, run_id(tenant="evil"))
    assert bad is not None and bad.status.value == "done" and bad.outcome.value == "failed"
    assert "payload" in (bad.last_error or "") and "evil" not in h.limits.by_tenant
    assert h.tick() == []  # it is not tried again


def test_a_run_of_an_allow_job_starts_without_reading_its_jobs_active_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``allow`` does not weigh the job's active runs: reading each one's record for every
    start made a backfilling job of 50 runs in flight cost ~50 record reads a start, and one
    tenant's backfill took the dispatcher's whole core from every tenant (bench_backfill.py:
    the dispatcher at 0.89 cores, the healthy tenants' runs 17 s late)."""
    import schedulerstream.dispatcher.logic as logic_module

    h = Harness()
    for i in range(50):
        h.run(run_triggered(i))
    assert len(h.tick()) == 50
    reads: list[str] = []
    real = logic_module.rk.load

    def counted(store: object, rid: str) -> object:
        reads.append(rid)
        return real(store, rid)

    monkeypatch.setattr(logic_module.rk, "load", counted)
    for i in range(50, 60):
        h.run(run_triggered(i))
    assert len(h.tick()) == 10
    assert not any(rid in reads for rid in (run_id(i) for i in range(50)))  # none in flight
