"""The projector on the real broker: rows, cron.run-state, replays, retention, poison, outages."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from schedulerstream.codec import default_codec
from schedulerstream.kafka.broker import LocalBroker
from schedulerstream.partitioner import partition_for_job_key
from schedulerstream.projector.topology import ProjectorTopology, ReadModelDown
from schedulerstream.readmodel import (
    Changes,
    ReadModelDataError,
    ReadModelUnavailable,
    SqlReadModel,
    open_read_model,
)
from schedulerstream.runtime import Processor
from schedulerstream.settings import Settings
from tests.interop.jvm import java_executable
from tests.projector.conftest import DatabaseUrl
from tests.projector.kafka_helpers import create_changelog, drain, projector, run_state
from tests.projector.records import MINUTE, T0, Feed, attempt, revoked, run_id, triggered
from tests.runtime.rt_helpers import committed_offsets, read_all

pytestmark = pytest.mark.kafka
SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
CONVERTER = Path(__file__).with_name("ReadRunState.java")

JOBS = [("acme", "backup"), ("acme", "report"), ("beta", "sync")]


def _feed_history(feed: Feed) -> dict[str, str]:
    """Schedules and run histories of three jobs; returns the expected status per run."""
    expected: dict[str, str] = {}
    feed.schedule("acme", "backup", 3)
    feed.schedule_json("acme", "report", payload={"x": 1})
    feed.schedule("beta", "sync", 1, paused=True)
    feed.schedule("acme", "old", 1)
    feed.delete("acme", "old")
    for i in range(4):
        instant = T0 + i * MINUTE
        ok, retried = run_id("acme/backup", instant), run_id("acme/report", instant)
        feed.event(attempt(ok, "started", 1, instant + 10))  # before its trigger
        feed.event(triggered(ok, instant))
        feed.event(attempt(ok, "succeeded", 1, instant + 20, status_code=200))
        feed.event(attempt(ok, "started", 1, instant + 15))  # a late duplicate
        expected[ok] = "succeeded"
        feed.event(triggered(retried, instant))
        feed.event(attempt(retried, "failed", 1, instant + 10, reason="HTTP 503"))
        feed.event(attempt(retried, "retry_scheduled", 1, instant + 11))
        feed.event(attempt(retried, "failed", 2, instant + 20, reason="HTTP 500"))
        feed.event(attempt(retried, "dead_lettered", 2, instant + 21, reason="HTTP 500"))
        expected[retried] = "dead_lettered"
    paused = run_id("beta/sync", T0)
    feed.event(triggered(paused, T0, emitted=T0 - 5))
    feed.event(revoked(paused, T0, T0 - 2))
    feed.event(attempt(paused, "revoked", 0, T0 - 2, reason="job paused", scheduled=T0))
    expected[paused] = "cancelled"
    missed = run_id("beta/sync", T0 - 10 * MINUTE)
    feed.event(attempt(missed, "missed", 0, T0, reason="2 instant(s) not run", count=2))
    expected[missed] = "skipped"
    return expected


def _feed_poison(feed: Feed, settings: Settings) -> int:
    """Malformed records on every input; returns how many."""
    home = partition_for_job_key("acme/backup", settings.partitions)
    wrong = (home + 1) % settings.partitions
    good = default_codec().encode(*triggered(run_id("acme/backup", T0), T0))
    feed.raw("schedules", b"acme/backup", b"\xc3\x01not-avro-at-all", home)
    feed.raw("schedules", b"no-slash", b"{}", 0)
    feed.raw("schedules", b"acme/backup", b'{"tenant": "acme"}', home)  # invalid definition
    feed.raw("runs", b"acme/backup@x", b"garbage", home)
    feed.raw("runs", run_id("acme/backup", T0).encode(), good, wrong)  # wrong partition
    feed.raw("runs", run_id("acme/backup", T0).encode(), None, home)  # tombstone
    feed.raw("runs", b"another-key", good, home)  # key is not the run id
    name, record = attempt(run_id("acme/backup", T0), "started", 1, T0)
    record["kind"] = "exploded"
    feed.raw("attempts", record["run_id"].encode(), default_codec().encode(name, record), home)
    return 8


def test_projects_rows_and_run_state_and_rejects_poison(topo: Settings, backend: str) -> None:
    feed = Feed(topo)
    expected = _feed_history(feed)
    poison = _feed_poison(feed, topo)
    feed.flush()
    with open_read_model(topo) as model:
        processor = projector(topo, model)
        drain(processor, topo)
        processor.close()
        for run, status in expected.items():
            tenant = run.split("/")[0]
            detail = model.get_run(tenant, run)
            assert detail is not None and detail.run.status == status, (run, detail)
        ok = model.get_run("acme", run_id("acme/backup", T0))
        assert ok is not None and ok.run.attempts == 1 and ok.run.started_at_us == T0 + 10
        assert [a.kind for a in ok.attempts] == ["started", "started", "succeeded"]
        dead = model.get_run("acme", run_id("acme/report", T0))
        assert dead is not None and (dead.run.attempts, dead.run.last_error) == (2, "HTTP 500")
        backup = model.get_job("acme", "backup")
        assert backup is not None and backup.version == 3
        assert (backup.last_run_id, backup.last_run_status) == (
            run_id("acme/backup", T0 + 3 * MINUTE),
            "succeeded",
        )
        assert backup.next_fire_at_us[0] == T0 + 5 * MINUTE  # */5 after the last fired instant
        report = model.get_job("acme", "report")
        assert report is not None and report.definition["payload"] == {"x": 1}
        sync = model.get_job("beta", "sync")
        assert sync is not None and sync.paused and sync.next_fire_at_us == []
        assert [j.job_id for j in model.list_jobs("acme").items] == ["report", "backup"]
        old = model.get_job("acme", "old")
        assert old is not None and old.deleted and old.next_fire_at_us == []
        assert len(model.list_runs("acme", "backup").items) == 4
        latest, _ = run_state(topo)
        assert {k: v["status"] for k, v in latest.items()} == expected
        for key, payload in latest.items():
            row = model.get_run(payload["tenant"], key)
            assert row is not None and payload == _asdict(row.run)
    rejected = read_all(topo, "rejected")
    reasons = [dict(m.headers())["rejected.reason"].decode() for m in rejected]
    assert len(rejected) == poison, reasons
    assert any("partition" in r for r in reasons) and any("exploded" in r for r in reasons)


def _asdict(row: Any) -> dict[str, Any]:
    return {f: getattr(row, f) for f in row.__dataclass_fields__}


def test_a_replay_converges_to_the_same_tables(
    topo: Settings, backend: str, database_url: DatabaseUrl
) -> None:
    feed = Feed(topo)
    _feed_history(feed)
    feed.flush()
    with open_read_model(topo) as model:
        first = projector(topo, model)
        drain(first, topo)
        first.close()
        before = model.snapshot()
        assert before["runs"] and before["attempts"] and before["jobs"]
        # a second group with fresh state replays every input into the same database ...
        again = projector(
            topo, model, name="projector-replay",
            changelog_topic=create_changelog(topo, "projector-replay-state"),
        )  # fmt: skip
        drain(again, topo)
        again.close()
        assert model.snapshot() == before
    # ... and into a new database
    fresh = topo.model_copy(
        update={"database_url": database_url(backend), "data_dir": topo.data_dir / "fresh"}
    )
    with open_read_model(fresh) as model:
        third = projector(
            fresh, model, name="projector-fresh",
            changelog_topic=create_changelog(topo, "projector-fresh-state"),
        )  # fmt: skip
        drain(third, fresh)
        third.close()
        assert model.snapshot() == before


@SQLITE_ONLY
def test_a_new_read_model_is_filled_from_the_state_store(topo: Settings, backend: str) -> None:
    feed = Feed(topo)
    _feed_history(feed)
    feed.flush()
    with open_read_model(topo) as model:
        processor = projector(topo, model)
        drain(processor, topo)
        processor.close()
        before = model.snapshot()
    # same group and state store, but an empty database (a new file, another machine's file)
    elsewhere = topo.model_copy(update={"data_dir": topo.data_dir / "elsewhere"})
    with open_read_model(elsewhere) as empty:
        processor = projector(topo, empty)
        drain(processor, topo)
        processor.close()
        copied = empty.snapshot()
    assert copied["jobs"] == before["jobs"] and copied["runs"] == before["runs"]
    assert copied["attempts"] == []  # attempt history is not kept in the state store


@SQLITE_ONLY
def test_old_runs_are_deleted_and_tombstoned(topo: Settings, backend: str) -> None:
    feed = Feed(topo)
    feed.schedule("acme", "backup", 1)
    ids = [run_id("acme/backup", T0 + i * MINUTE) for i in range(8)]
    for i, rid in enumerate(ids):
        feed.event(triggered(rid, T0 + i * MINUTE))
        feed.event(attempt(rid, "succeeded", 1, T0 + i * MINUTE + 9))
    feed.event(attempt(ids[0], "started", 1, T0 + 20 * MINUTE))  # late, for a pruned run
    feed.flush()
    with open_read_model(topo) as model:
        processor = projector(topo, model, keep_per_job=3)
        drain(processor, topo)
        processor.close()
        runs = model.list_runs("acme", "backup").items
        assert [r.run_id for r in runs] == list(reversed(ids[5:]))
        assert {a[0] for a in model.snapshot()["attempts"]} == set(ids[5:])
        job = model.get_job("acme", "backup")
        assert job is not None and job.last_run_id == ids[-1]
    latest, tombstones = run_state(topo)
    assert sorted(latest) == ids[5:]
    assert tombstones >= 5


@SQLITE_ONLY
def test_an_unavailable_read_model_stops_the_projector_without_skipping(
    topo: Settings, backend: str
) -> None:
    feed = Feed(topo)
    rid = run_id("acme/backup", T0)
    feed.event(triggered(rid, T0))
    feed.flush()
    with open_read_model(topo) as model:
        down = Outage(model)
        processor = Processor(topo, ProjectorTopology(topo, down, retry_s=0.3))
        processor.start()
        with pytest.raises(ReadModelDown):
            drain(processor, topo, timeout=60)
        processor.close()
        partition = partition_for_job_key("acme/backup", topo.partitions)
        assert committed_offsets(topo, topo.topic("projector"), "runs")[partition] in (-1001, 0)
        assert model.get_run("acme", rid) is None
        processor = projector(topo, model)  # the database is back
        drain(processor, topo)
        processor.close()
        detail = model.get_run("acme", rid)
        assert detail is not None and detail.run.status == "pending"
    latest, _ = run_state(topo)
    assert latest[rid]["status"] == "pending"


@SQLITE_ONLY
def test_a_refused_value_rejects_its_records_and_the_rest_of_the_batch_is_written(
    topo: Settings, backend: str
) -> None:
    feed = Feed(topo)
    bad, good = run_id("acme/backup", T0), run_id("acme/backup", T0 + MINUTE)
    for rid, instant in ((bad, T0), (good, T0 + MINUTE)):
        feed.event(triggered(rid, instant))
        feed.event(attempt(rid, "started", 1, instant + 5))
    feed.flush()
    with open_read_model(topo) as model:
        processor = Processor(topo, ProjectorTopology(topo, Refusing(model, bad)))
        processor.start()
        drain(processor, topo)
        processor.close()
        assert model.get_run("acme", bad) is None
        detail = model.get_run("acme", good)
        assert detail is not None and [a.kind for a in detail.attempts] == ["started"]
    rejected = read_all(topo, "rejected")
    assert sorted(m.key() for m in rejected) == [bad.encode(), bad.encode()]
    assert all(b"refused" in dict(m.headers())["rejected.reason"] for m in rejected)


class Refusing:
    """A read model that refuses every write holding one run (as a value PostgreSQL rejects)."""

    def __init__(self, model: SqlReadModel, run: str) -> None:
        self.model = model
        self.run = run

    def apply(self, changes: Changes) -> None:
        if self.run in changes.runs or any(a.run_id == self.run for a in changes.attempts):
            raise ReadModelDataError(f"read model refused a write: {self.run} (test)")
        self.model.apply(changes)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)


class Outage:
    """A read model whose writes fail as if the database were down."""

    def __init__(self, model: SqlReadModel) -> None:
        self.model = model

    def apply(self, changes: Changes) -> None:
        raise ReadModelUnavailable("connection refused (test)")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)


@SQLITE_ONLY
def test_a_stock_connect_json_converter_reads_run_state(
    topo: Settings, backend: str, tmp_path: Path
) -> None:
    feed = Feed(topo)
    pending, failed = run_id("acme/backup", T0), run_id("beta/sync", T0)
    feed.event(triggered(pending, T0))
    feed.event(attempt(failed, "failed", 1, T0 + 5, reason='say "no" \\ é\n', status_code=500))
    feed.flush()
    with open_read_model(topo) as model:
        processor = projector(topo, model)
        drain(processor, topo)
        processor.close()
    messages = read_all(topo, "run-state")
    assert sorted(m.key() for m in messages) == sorted([pending.encode(), failed.encode()])
    for m in messages:
        job_key = m.key().decode().partition("@")[0]
        assert m.partition() == partition_for_job_key(job_key, topo.partitions)
    jars = LocalBroker(topo).jars_dir()
    result = subprocess.run(
        [java_executable(), "-cp", f"{jars}/*", str(CONVERTER)],
        input="".join(m.value().hex() + "\n" for m in messages),
        capture_output=True, text=True, encoding="utf-8", timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    structs = [json.loads(line) for line in result.stdout.splitlines()]
    assert [s["schema"] for s in structs] == ["io.schedulerstream.RunState"] * 2
    for struct, message in zip(structs, messages, strict=True):
        assert struct["fields"] == json.loads(message.value())["payload"]
    by_id = {s["fields"]["run_id"]: s["fields"] for s in structs}
    assert by_id[failed]["last_error"] == 'say "no" \\ é\n'
    assert by_id[failed]["status"] == "failed" and by_id[pending]["started_at_us"] is None
