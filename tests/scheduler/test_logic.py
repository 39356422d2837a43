"""Scheduler state machine driven by a hand-moved clock (no sleeping, no broker)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from schedulerstream.dispatch_spec import spec_of_definition, spec_of_json
from schedulerstream.errors import StateTooLarge
from schedulerstream.ingest import RejectedRecord
from schedulerstream.limits import RecordLimits
from schedulerstream.runtime.store import RocksStore
from schedulerstream.scheduler.keys import BACKFILL_END, DUE_PREFIX, due_key, parse_due_key
from schedulerstream.scheduler.timers import MISFIRE_SCAN
from schedulerstream.settings import Settings

from .harness import CODEC, Harness, command, definition, us

T0 = us("2025-01-06T10:00:30Z")


def started(**kwargs: object) -> Harness:
    h = Harness(**kwargs)  # type: ignore[arg-type]
    h.now = T0
    return h


def test_emits_each_minute_once_ahead_of_time_with_not_before() -> None:
    h = started()
    h.put(definition(1))
    h.tick_until(us("2025-01-06T10:03:00Z"))
    runs = h.out.runs()
    assert [r["run_id"] for r in runs] == [
        "acme/j1@20250106T100100Z",
        "acme/j1@20250106T100200Z",
        "acme/j1@20250106T100300Z",
    ]
    for r in runs:
        assert r["not_before_us"] == r["scheduled_at_us"]
        assert 0 < r["scheduled_at_us"] - r["emitted_at_us"] <= 1_000_000  # lookahead
        assert r["trigger"] == "scheduled"
        assert r["job_version"] == 1


def test_the_default_lookahead_emits_whole_second_runs_halfway_between_two_instants() -> None:
    """Cron's runs fall on whole seconds; emitted a whole number of seconds ahead, they would be
    emitted at the very instant the dispatchers send the runs due then."""
    lookahead_ms = Settings.model_fields["lookahead_ms"].default
    h = started(lookahead_s=lookahead_ms / 1000)
    h.put(definition(1, schedule={"cron": "* * * * * *"}))  # every second
    h.tick_until(T0 + 10_000_000)
    # not the runs already inside the lookahead when the job was put
    ticked = [r for r in h.out.runs() if r["scheduled_at_us"] > T0 + lookahead_ms * 1000]
    assert len(ticked) >= 6
    for r in ticked:
        assert r["scheduled_at_us"] % 1_000_000 == 0
        assert r["emitted_at_us"] % 1_000_000 == 500_000, r["run_id"]
        assert r["scheduled_at_us"] - r["emitted_at_us"] == lookahead_ms * 1000


def test_replaying_the_same_version_is_ignored_and_counted() -> None:
    h = started()
    h.put(definition(5))
    h.put(definition(5))
    h.put(definition(4))
    assert h.logic.counters.stale_versions == 2


def test_start_end_and_max_runs_bound_the_instants() -> None:
    h = started()
    h.put(
        definition(
            1,
            schedule={
                "cron": "* * * * *",
                "start_at": "2025-01-06T10:02:00Z",
                "end_at": "2025-01-06T10:06:00Z",
            },
        )
    )
    h.tick_until(us("2025-01-06T10:10:00Z"), step_s=0.5)
    assert h.run_ids() == [f"acme/j1@20250106T10{m:02d}00Z" for m in (2, 3, 4, 5)]
    h2 = started()
    h2.put(definition(1, max_runs=2))
    h2.tick_until(us("2025-01-06T10:10:00Z"), step_s=0.5)
    assert len(h2.run_ids()) == 2
    assert not list(h2.store.range(DUE_PREFIX, DUE_PREFIX + b"\xff"))


def test_jitter_is_deterministic_and_bounded() -> None:
    h = started()
    h.put(definition(1, schedule={"cron": "* * * * *", "jitter": 20}))
    h.tick_until(us("2025-01-06T10:20:00Z"), step_s=0.5)
    runs = h.out.runs()
    offsets = [r["not_before_us"] - r["scheduled_at_us"] for r in runs]
    assert all(0 <= o < 20_000_000 for o in offsets)
    assert len(set(offsets)) > 5
    again = started()
    again.put(definition(1, schedule={"cron": "* * * * *", "jitter": 20}))
    again.tick_until(us("2025-01-06T10:20:00Z"), step_s=0.5)
    assert [r["not_before_us"] for r in again.out.runs()] == [r["not_before_us"] for r in runs]


@pytest.mark.parametrize(
    ("policy", "expected_catch_up", "missed"),
    [
        ("skip", [], 9),
        ("fire_once", ["100900"], 8),
        ("catch_up", [f"10{m:02d}00" for m in range(1, 10)], 0),
    ],
)
def test_misfire_policies_after_downtime(
    policy: str, expected_catch_up: list[str], missed: int
) -> None:
    h = started(grace_s=30)
    h.put(definition(1, misfire_policy=policy))
    h.now = us("2025-01-06T10:09:40Z")  # the processor was down from 10:00:30 to 10:09:40
    h.tick_until(us("2025-01-06T10:10:00Z"))
    catch_up = [r["run_id"].split("T")[1][:6] for r in h.out.runs() if r["trigger"] == "catch_up"]
    assert catch_up == expected_catch_up
    assert [r["run_id"] for r in h.out.runs() if r["trigger"] == "scheduled"] == [
        "acme/j1@20250106T101000Z"
    ]
    assert sum(a["count"] for a in h.out.attempts("missed")) == missed


@pytest.mark.parametrize("policy", ["skip", "fire_once", "catch_up"])
def test_a_jitter_longer_than_the_grace_keeps_a_healthy_jobs_runs_on_time(policy: str) -> None:
    """Its instant is more than the grace behind when its jittered time comes: not late.
    Before, with a 120 s jitter and a 60 s grace, about half its runs were missed (skip) or
    sent at once as catch-ups."""
    h = Harness(grace_s=60)
    h.now = us("2025-01-06T10:00:30Z")
    h.put(definition(1, schedule={"every": 60, "jitter": 120}, misfire_policy=policy))
    h.tick_until(us("2025-01-06T11:00:30Z"), step_s=0.5)
    runs = h.out.runs()
    assert [r["trigger"] for r in runs] == ["scheduled"] * len(runs)
    assert h.out.attempts("missed") == []
    assert len(runs) >= 59
    assert all(r["not_before_us"] - r["scheduled_at_us"] < 120_000_000 for r in runs)


def test_catch_up_window_bounds_even_catch_up() -> None:
    h = started(grace_s=30)
    h.put(definition(1, misfire_policy="catch_up", catch_up_window=300))
    h.now = us("2025-01-06T12:00:10Z")
    h.tick_until(us("2025-01-06T12:00:20Z"))
    catch_up = [r for r in h.out.runs() if r["trigger"] == "catch_up"]
    assert len(catch_up) == 4  # 11:56..11:59 are late but within 300 s; 12:00 is on time
    # the on-time run does not wait for the late ones (emitted at the backfill rate)
    assert [r["trigger"] for r in h.out.runs()] == ["scheduled"] + ["catch_up"] * 4
    missed = h.out.attempts("missed")
    # 115 minutes older than the window: counted one by one up to MISFIRE_SCAN, then a bound
    assert sum(a["count"] for a in missed) == MISFIRE_SCAN == 100
    assert "catch_up_window" in missed[0]["reason"]
    assert missed[0]["reason"].startswith("at least 100 instant(s) from 2025-01-06T10:01:00")
    assert "to 2025-01-06T11:55:00" in missed[0]["reason"]  # the latest, by bisection


def test_pause_revokes_runs_emitted_ahead_and_resume_applies_policy() -> None:
    h = started(grace_s=30)
    h.put(definition(1, misfire_policy="fire_once"))
    h.tick_until(us("2025-01-06T10:00:59.5Z"))  # 10:01 emitted (lookahead), not yet due
    assert h.run_ids() == ["acme/j1@20250106T100100Z"]
    h.put(definition(2, paused=True, misfire_policy="fire_once"))
    revoked = h.out.revoked()
    assert [r["run_id"] for r in revoked] == ["acme/j1@20250106T100100Z"]
    assert revoked[0]["job_version"] == 2
    h.out.clear()
    h.tick_until(us("2025-01-06T10:05:30Z"), step_s=0.5)
    assert h.out.runs() == []
    h.put(definition(3, paused=False, misfire_policy="fire_once"))
    h.tick_until(us("2025-01-06T10:05:31Z"))
    assert [(r["run_id"], r["trigger"]) for r in h.out.runs()] == [
        ("acme/j1@20250106T100500Z", "catch_up")
    ]


def test_update_changes_expression_without_refiring() -> None:
    h = started()
    h.put(definition(1))
    h.tick_until(us("2025-01-06T10:02:10Z"), step_s=0.5)
    h.put(definition(2, schedule={"cron": "*/5 * * * *"}))
    h.tick_until(us("2025-01-06T10:11:00Z"), step_s=0.5)
    assert h.run_ids() == [
        "acme/j1@20250106T100100Z",
        "acme/j1@20250106T100200Z",
        "acme/j1@20250106T100500Z",
        "acme/j1@20250106T101000Z",
    ]


def test_update_inside_lookahead_revokes_and_reemits_with_new_version() -> None:
    h = started()
    h.put(definition(1))
    h.tick_until(us("2025-01-06T10:00:59.5Z"))
    h.put(definition(2, payload={"new": True}))
    h.tick_until(us("2025-01-06T10:01:00Z"))
    runs = h.out.runs()
    assert [(r["run_id"], r["job_version"]) for r in runs] == [
        ("acme/j1@20250106T100100Z", 1),
        ("acme/j1@20250106T100100Z", 2),
    ]
    assert h.out.revoked()[0]["job_version"] == 2


def test_delete_stops_runs_and_revokes_pending() -> None:
    h = started()
    h.put(definition(1))
    h.tick_until(us("2025-01-06T10:00:59.5Z"))
    h.put(None)
    assert h.out.revoked()[0]["run_id"] == "acme/j1@20250106T100100Z"
    h.out.clear()
    h.tick_until(us("2025-01-06T10:05:00Z"), step_s=0.5)
    assert h.out.runs() == []
    assert h.store.data == {BACKFILL_END: b""}  # nothing of the job is left


def test_trigger_now_works_while_paused_and_is_idempotent() -> None:
    h = started()
    h.put(definition(1, paused=True, payload={"p": 1}))
    h.command(command("TriggerNow", {"request_id": "r-1", "payload_json": None}))
    h.command(command("TriggerNow", {"request_id": "r-1", "payload_json": None}))
    h.command(command("TriggerNow", {"request_id": "r-2", "payload_json": '{"o": 2}'}))
    runs = h.out.runs()
    assert [(r["run_id"], r["trigger"], r["payload_json"]) for r in runs] == [
        ("acme/j1@manual-r-1", "manual", '{"p":1}'),
        ("acme/j1@manual-r-2", "manual", '{"o": 2}'),
    ]
    # both encoders (the job's own payload, another one) write the spec and no definition
    assert runs[0]["dispatch_spec_json"] == runs[1]["dispatch_spec_json"] is not None
    assert runs[0]["job_definition"] == runs[1]["job_definition"] == b""
    assert h.logic.counters.duplicate_requests == 1


def test_a_trigger_now_whose_payload_is_not_json_is_rejected_naming_it() -> None:
    """Its run would be refused by every target; rejected here, the job's own runs go on."""
    h = started()
    h.put(definition(1, payload={"p": 1}))
    with pytest.raises(RejectedRecord, match="TriggerNow: payload_json is not JSON"):
        h.command(command("TriggerNow", {"request_id": "r-1", "payload_json": "{oops"}))
    h.command(command("TriggerNow", {"request_id": "r-2", "payload_json": "[1, 2]"}))
    assert [r["run_id"] for r in h.out.runs()] == ["acme/j1@manual-r-2"]


def test_commands_whose_ids_or_window_no_run_id_can_hold_are_rejected_on_arrival() -> None:
    """Accepted, they failed later in every tick of their partition: every job on it stopped."""
    h = started()
    h.put(definition(1, schedule={"every": 60}))
    hour = us("2025-01-06T09:00:00Z")
    cases = [
        (
            "Backfill",
            {"request_id": "bad id", "start_us": hour, "end_us": h.now, "rerun": True},
            "request_id",
        ),
        (
            "Backfill",
            {"request_id": "", "start_us": hour, "end_us": h.now, "rerun": False},
            "request_id",
        ),
        (
            "Backfill",
            {"request_id": "b", "start_us": -(2**62), "end_us": h.now, "rerun": True},
            "window",
        ),
        (
            "Backfill",
            {"request_id": "b", "start_us": h.now, "end_us": hour, "rerun": True},
            "window",
        ),
        ("TriggerNow", {"request_id": "a/b", "payload_json": None}, "request_id"),
    ]
    for kind, fields, needle in cases:
        with pytest.raises(RejectedRecord, match=f"{kind}: .*{needle}"):
            h.command(command(kind, fields))
    h.tick_until(us("2025-01-06T10:02:00Z"))
    assert len(h.run_ids()) >= 2  # the job goes on


def test_backfill_reuses_ids_without_rerun_and_fresh_ids_with_rerun_in_chunks() -> None:
    h = started(backfill_chunk=7)
    h.put(definition(1), ts=us("2025-01-06T09:00:00Z"))  # existed since 09:00
    h.logic.on_tick(h.store, h.out, 0, h.now)  # 09:01..09:59 are late: fire_once fires 09:59
    h.out.clear()
    h.command(
        command(
            "Backfill",
            {
                "request_id": "b1",
                "start_us": us("2025-01-06T09:30:00Z"),
                "end_us": us("2025-01-06T10:00:00Z"),
                "rerun": False,
            },
        )
    )
    h.command(
        command(
            "Backfill",
            {
                "request_id": "b2",
                "start_us": us("2025-01-06T09:50:00Z"),
                "end_us": us("2025-01-06T09:52:00Z"),
                "rerun": True,
            },
        )
    )
    h.logic.on_tick(h.store, h.out, 0, h.now)
    first_chunk = [r for r in h.out.runs() if r["trigger"] == "backfill"]
    assert len(first_chunk) == 7  # chunked: a huge window cannot stall the partition
    h.tick_until(T0 + 2_000_000)
    backfill = [r["run_id"] for r in h.out.runs() if r["trigger"] == "backfill"]
    plain = [r for r in backfill if "~" not in r]
    assert len(plain) == 30 and plain[0] == "acme/j1@20250106T093000Z"
    assert [r for r in backfill if "~" in r] == [
        "acme/j1@20250106T095000Z~b2",
        "acme/j1@20250106T095100Z~b2",
    ]


def test_poison_records_are_rejected_with_a_reason() -> None:
    h = started()
    cases = [
        (b"acme/j1", b"\x00\x01garbage", "neither Avro"),
        (b"acme/j1", b"\xc3\x01" + b"\x00" * 9, "unknown schema"),
        (
            b"acme/j1",
            b'{"tenant": "acme", "job_id": "j1", "schedule": {"cron": "61 * * * *"},'
            b' "target": {"type": "http", "url": "https://x/"}}',
            "minute",
        ),
        (
            b"acme/j1",
            b'{"tenant": "acme", "job_id": "j1", "schedule": {"cron": "* * * * *",'
            b' "timezone": "Mars/Base"}, "target": {"type": "http", "url": "https://x/"}}',
            "Mars/Base",
        ),
        (b"ACME/j1", definition(1), "bad key"),
        (b"acme/other", definition(1), "does not match"),
        (None, definition(1), "no key"),
    ]
    for key, value, needle in cases:
        with pytest.raises(RejectedRecord, match=needle):
            h.logic.on_schedule(h.store, h.out, 0, key, value, h.now, h.now)
    with pytest.raises(RejectedRecord, match="unknown job"):
        h.command(command("TriggerNow", {"request_id": "x", "payload_json": None}))


def test_json_value_without_version_uses_the_record_timestamp() -> None:
    h = started()
    value = (
        b'{"tenant": "acme", "job_id": "j1", "schedule": {"every": 10},'
        b' "target": {"type": "kafka", "topic": "out"}}'
    )
    h.put(value, ts=T0 - 5)
    state = h.logic.jobs.load(h.store, "acme/j1")
    assert state is not None and state.version == T0 - 5


def test_due_index_interleaves_tenants_within_one_instant() -> None:
    instant = us("2025-01-06T11:00:00Z")
    keys = sorted(due_key(instant, f"{t}/job-{i}") for t in ("big", "small") for i in range(200))
    tenants = [parse_due_key(k)[1].split("/")[0] for k in keys[:40]]
    assert "small" in tenants[:20] and "big" in tenants[:20]


def test_dst_spring_forward_fixed_time_fires_after_the_gap() -> None:
    h = Harness()
    h.now = us("2024-03-09T12:00:00Z")
    h.put(definition(1, schedule={"cron": "30 2 * * *", "timezone": "America/New_York"}))
    h.tick_until(us("2024-03-11T12:00:00Z"), step_s=30)
    assert h.run_ids() == ["acme/j1@20240310T070000Z", "acme/j1@20240311T063000Z"]


def test_sparse_jobs_are_emitted_a_burst_lead_early_and_dense_ones_are_not() -> None:
    h = started(burst_lead_s=10)
    h.put(definition(1, job_id="hourly", schedule={"cron": "0 * * * *"}), key=b"acme/hourly")
    h.put(definition(1, job_id="dense", schedule={"every": 1}), key=b"acme/dense")
    h.tick_until(us("2025-01-06T10:59:48.9Z"))
    assert not any(r["job_id"] == "hourly" for r in h.out.runs())
    h.tick_until(us("2025-01-06T10:59:49.05Z"))
    hourly = [r for r in h.out.runs() if r["job_id"] == "hourly"]
    assert [r["run_id"] for r in hourly] == ["acme/hourly@20250106T110000Z"]
    assert hourly[0]["not_before_us"] == us("2025-01-06T11:00:00Z")
    dense = [r for r in h.out.runs() if r["job_id"] == "dense"]
    assert all(r["scheduled_at_us"] - r["emitted_at_us"] <= 1_000_000 for r in dense)
    # a pause inside the lead revokes the early run
    h.put(
        definition(2, job_id="hourly", paused=True, schedule={"cron": "0 * * * *"}),
        key=b"acme/hourly",
    )
    assert [r["run_id"] for r in h.out.revoked()] == ["acme/hourly@20250106T110000Z"]


def test_a_job_with_no_future_instant_is_reported_not_silently_dropped() -> None:
    h = started()
    h.put(definition(1, schedule={"at": "2025-01-06T09:00:00Z"}))
    missed = h.out.attempts("missed")
    assert len(missed) == 1 and "no instant after it was created" in missed[0]["reason"]
    h.tick_until(T0 + 5_000_000)
    assert h.out.runs() == []


def test_dst_fall_back_fixed_time_fires_once_and_hourly_fires_in_both_passes() -> None:
    h = Harness()
    h.now = us("2024-11-02T12:00:00Z")
    ny = "America/New_York"
    h.put(definition(1, job_id="fixed", schedule={"cron": "30 1 * * *", "timezone": ny}),
          key=b"acme/fixed")  # fmt: skip
    h.put(definition(1, job_id="hourly", schedule={"cron": "15 * * * *", "timezone": ny}),
          key=b"acme/hourly")  # fmt: skip
    h.tick_until(us("2024-11-03T08:00:00Z"), step_s=30)
    fixed = [r["run_id"] for r in h.out.runs() if r["job_id"] == "fixed"]
    assert fixed == ["acme/fixed@20241103T053000Z"]  # 01:30 EDT, the first occurrence
    hourly = [r["scheduled_at_us"] for r in h.out.runs() if r["job_id"] == "hourly"]
    # 01:15 EDT (05:15Z) and 01:15 EST (06:15Z) both fire; every real hour fires once.
    assert us("2024-11-03T05:15:00Z") in hourly and us("2024-11-03T06:15:00Z") in hourly
    assert all(b - a == 3_600_000_000 for a, b in itertools.pairwise(hourly))


def test_the_timer_scan_starts_past_the_keys_already_emitted() -> None:
    """Emitted due keys are deleted but linger in RocksDB until compaction: a scan from the
    prefix start would skip them on every tick, so the scan starts at a floor instead."""
    h = Harness()
    starts: list[bytes] = []
    scan = h.store.range

    def recording_range(start: bytes, end: bytes | None):  # type: ignore[no-untyped-def]
        if start.startswith(DUE_PREFIX):
            starts.append(start)
        return scan(start, end)

    h.store.range = recording_range  # type: ignore[method-assign]
    h.now = us("2025-01-06T10:00:30Z")
    h.put(definition(1, schedule={"cron": "* * * * * *"}))  # every second
    h.tick_until(us("2025-01-06T10:00:40Z"), step_s=0.5)
    assert len(h.run_ids()) >= 10
    # the first tick scans the jobs due now, then those past the grace from the prefix start
    assert starts[1] == DUE_PREFIX and starts[0] > DUE_PREFIX
    assert all(s > DUE_PREFIX for s in starts[2:]) and starts[2:] == sorted(starts[2:])
    assert len(starts) == 2 + 19  # one scan a tick after the first: none of the late jobs'


def test_a_job_due_below_the_floor_still_fires() -> None:
    """A job written after the scan moved its floor, due before that floor (inside the
    lookahead), fires; and a job with a reserved instant keeps firing after restore."""
    h = Harness(lookahead_s=5.0)
    h.now = us("2025-01-06T10:00:30Z")
    h.put(definition(1, job_id="slow", schedule={"cron": "0 * * * *"}), key=b"acme/slow")
    h.tick_until(us("2025-01-06T10:00:31Z"))  # the floor is now at 10:00:36
    h.put(definition(1, job_id="fast", schedule={"cron": "* * * * * *"}), key=b"acme/fast")
    h.tick_until(us("2025-01-06T10:00:34Z"))
    fired = [r.split("@")[1] for r in h.run_ids() if r.startswith("acme/fast@")]
    assert fired[:3] == ["20250106T100032Z", "20250106T100033Z", "20250106T100034Z"]
    h.logic.jobs.forget_due_floor(h.store)
    h.tick_until(us("2025-01-06T10:00:36Z"))
    fired = [r.split("@")[1] for r in h.run_ids() if r.startswith("acme/fast@")]
    assert len(fired) == len(set(fired)) and "20250106T100040Z" in fired


def test_each_run_carries_its_versions_dispatch_spec() -> None:
    h = started()
    h.put(definition(1, timeout=5))
    h.tick_until(us("2025-01-06T10:01:00Z"))
    h.put(definition(2, timeout=9, overlap_policy="forbid"))
    h.tick_until(us("2025-01-06T10:02:00Z"))
    runs = h.out.runs()
    assert [r["job_version"] for r in runs] == [1, 2]
    versions = [definition(1, timeout=5), definition(2, timeout=9, overlap_policy="forbid")]
    for r, raw in zip(runs, versions, strict=True):
        snapshot = CODEC.decode_as("JobDefinition", raw)
        assert spec_of_json(r["dispatch_spec_json"]) == spec_of_definition(snapshot)
        assert r["job_definition"] == b""  # the spec is what the dispatcher reads
    assert [spec_of_json(r["dispatch_spec_json"]).timeout for r in runs] == [5.0, 9.0]


def test_a_command_that_would_grow_a_jobs_state_past_the_limit_is_rejected_alone(
    tmp_path: Path,
) -> None:
    """Before, the state record went to the changelog, whose broker refused it: every commit
    of the instance failed, and every tenant's jobs on it stopped."""
    h = started()
    store = RocksStore.open(tmp_path / "store")
    store.max_logged_bytes = 4_000
    h.store = store  # type: ignore[assignment]
    h.put(definition(1, schedule={"every": 60}))
    h.put(definition(1, job_id="j2", schedule={"every": 60}), key=b"acme/j2")
    hour = us("2025-01-06T09:00:00Z")
    rejected = 0
    for n in range(200):  # backfills that stay in progress, each kept in the job's state
        fields = {"request_id": f"b-{n:03d}-{'x' * 60}", "start_us": hour, "end_us": h.now,
                  "rerun": True}  # fmt: skip
        try:
            h.command(command("Backfill", fields))
        except StateTooLarge as exc:
            assert "would be" in str(exc) and "SCHEDULERSTREAM_MAX_RECORD_BYTES" in str(exc)
            rejected += 1
    assert 0 < rejected < 200
    h.out.clear()
    h.tick_until(us("2025-01-06T10:03:00Z"))
    assert {r["run_id"].split("@")[0] for r in h.out.runs()} >= {"acme/j1", "acme/j2"}
    counters = h.logic.counters
    assert (counters.failed_ticks, counters.quarantined) == (0, 0)  # no tick step hit it
    store.close()


def test_a_trigger_now_payload_over_the_payload_limit_is_rejected_on_arrival() -> None:
    """Its run's dispatcher record holds it twice over: past the limit that record was refused
    where it was written and the run vanished without an event."""
    h = started(limits=RecordLimits(max_payload_bytes=100))
    h.put(definition(1, schedule={"every": 60}))
    with pytest.raises(RejectedRecord, match=r"payload_json is 102 characters; the limit is 100"):
        h.command(
            command("TriggerNow", {"request_id": "r-1", "payload_json": '"' + "x" * 100 + '"'})
        )
    h.command(command("TriggerNow", {"request_id": "r-2", "payload_json": '"' + "x" * 98 + '"'}))
    assert [r["run_id"] for r in h.out.runs()] == ["acme/j1@manual-r-2"]
