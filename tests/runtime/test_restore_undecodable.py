"""A changelog record its topology cannot read is skipped, logged with its partition and
offset, and counted; the restore (and a standby's) goes on, and the store is left as it was.

Before the fix a Kafka-target job writing its envelope into ``cron.dispatcher-state`` under
``run/x`` made ``RunRecord.from_bytes`` raise a plain StateError that nothing caught: every
dispatcher restoring that partition exited, and a standby meeting it dropped every standby.
No broker: the restore consumer is a fake holding the records.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, ClassVar

import pytest

from schedulerstream.clock import ManualClock
from schedulerstream.codec import MARKER, default_codec
from schedulerstream.dispatch_spec import DispatchSpec
from schedulerstream.dispatcher import records as rk
from schedulerstream.errors import StateError, UndecodableRecord
from schedulerstream.runtime import changelog
from schedulerstream.runtime.changelog import Changelog, Restorer
from schedulerstream.runtime.standby import Standbys
from schedulerstream.runtime.store import RocksStore
from schedulerstream.runtime.task import RestoreStats, Task, TaskState
from schedulerstream.scheduler.jobs import JobRecords
from schedulerstream.scheduler.plan import PlanCache
from schedulerstream.settings import Settings

TOPIC = "cron.dispatcher-state"
ENVELOPE = b'{"run_id":"evil/j@20260101T000000Z","tenant":"evil","payload":{}}'
SPEC = DispatchSpec('{"type":"http","url":"https://x.test/"}', 2.5, "allow", "at_least_once",
                    (3, 1.0, 2.0, 60.0, 1e-05))  # fmt: skip


class Message:
    def __init__(self, partition: int, offset: int, key: bytes, value: bytes | None) -> None:
        self._at, self._record = (partition, offset), (key, value)

    def partition(self) -> int:
        return self._at[0]

    def offset(self) -> int:
        return self._at[1]

    def error(self) -> None:
        return None

    def key(self) -> bytes:
        return self._record[0]

    def value(self) -> bytes | None:
        return self._record[1]


class FakeConsumer:
    """Hands out ``pending`` once; knows no broker."""

    pending: ClassVar[list[Message]] = []

    def __init__(self, config: dict[str, Any]) -> None:
        pass

    def consume(self, count: int, timeout: float) -> list[Message]:
        found, FakeConsumer.pending = FakeConsumer.pending[:count], FakeConsumer.pending[count:]
        return found

    def incremental_assign(self, partitions: Any) -> None:
        pass

    def incremental_unassign(self, partitions: Any) -> None:
        pass

    def close(self) -> None:
        pass


def run(n: int) -> rk.RunRecord:
    return rk.RunRecord(f"acme/j@2026010{n}T000000Z", "acme", "j", n, n, n, "scheduled", "{}", 1,
                        SPEC, seq=n, due_us=n)  # fmt: skip


def restoring(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ends: dict[int, int],
              metrics: dict[str, float]) -> tuple[Restorer, dict[int, Task]]:  # fmt: skip
    """A Restorer of the dispatcher's records whose tasks (partition -> log end) replay from
    offset 0."""
    monkeypatch.setattr(changelog, "Consumer", FakeConsumer)
    restorer = Restorer({}, {}, Changelog(TOPIC, "id", 86_400_000), rk.restore, ManualClock(0),
                        metrics=metrics)  # fmt: skip
    tasks = {}
    for partition, end in ends.items():
        task = Task(partition, (), tmp_path / str(partition))
        task.open_store()
        task.transition(TaskState.RESTORING)
        task.restore = RestoreStats(start_offset=0, end_offset=end)
        task.restore_position = 0
        restorer._tasks[partition] = task
        tasks[partition] = task
    return restorer, tasks


def test_an_envelope_in_the_dispatchers_changelog_is_skipped_and_the_restore_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    metrics: dict[str, float] = {}
    restorer, tasks = restoring(tmp_path, monkeypatch, {0: 5, 1: 1}, metrics)
    FakeConsumer.pending = [
        Message(0, 0, rk.run_key(run(1).run_id), run(1).to_bytes()),
        Message(0, 1, b"run/x", ENVELOPE),
        Message(0, 2, rk.SEQ_KEY, b"not a number"),
        Message(1, 0, rk.run_key(run(3).run_id), run(3).to_bytes()),
        Message(0, 3, rk.run_key(run(2).run_id), run(2).to_bytes()),
        Message(0, 4, rk.SEQ_KEY, b"7"),
    ]
    with caplog.at_level(logging.ERROR):
        caught = restorer.poll(0.0)  # raised StateError before
    assert sorted(t.partition for t in caught) == [0, 1]
    assert metrics["changelog_records_skipped"] == 2
    logged = [r.getMessage() for r in caplog.records]
    assert any(f"{TOPIC} partition 0 offset 1" in m and "b'run/x'" in m for m in logged), logged
    assert any(f"{TOPIC} partition 0 offset 2" in m for m in logged), logged
    store = tasks[0].require_store()
    assert store.get(b"run/x") is None  # the store is as if the record never was
    assert store.get(rk.SEQ_KEY) == b"7"
    for n in (1, 2):
        assert rk.load(store, run(n).run_id) == run(n)
        assert store.get(rk.queue_key("acme", n, n)) == run(n).run_id.encode()
    assert rk.load(tasks[1].require_store(), run(3).run_id) == run(3)
    assert tasks[0].restore_position == 5  # skipped records count as read
    for task in tasks.values():
        task.close()


def test_a_standby_meeting_an_undecodable_record_keeps_every_standby(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    metrics: dict[str, float] = {}
    restorer, tasks = restoring(tmp_path, monkeypatch, {0: 2, 1: 1}, metrics)
    standbys = Standbys(Settings(data_dir=tmp_path), "dispatcher", restorer, ManualClock(0))
    standbys.tasks.update(tasks)
    FakeConsumer.pending = [
        Message(0, 0, b"run/x", ENVELOPE),
        Message(1, 0, rk.run_key(run(3).run_id), run(3).to_bytes()),
        Message(0, 1, rk.run_key(run(1).run_id), run(1).to_bytes()),
    ]
    standbys.poll()  # dropped every standby before
    assert sorted(standbys.tasks) == [0, 1]
    assert metrics["changelog_records_skipped"] == 1
    assert rk.load(tasks[0].require_store(), run(1).run_id) == run(1)
    assert rk.load(tasks[1].require_store(), run(3).run_id) == run(3)
    standbys.close()


@pytest.mark.parametrize(
    ("key", "value"),
    [(b"run/x", ENVELOPE), (b"run/y", b"not json"), (b"run/z", b"[3]"), (rk.SEQ_KEY, b"x")],
)
def test_the_dispatchers_restore_record_raises_undecodable_before_writing(
    tmp_path: Path, key: bytes, value: bytes
) -> None:
    store = RocksStore.open(tmp_path / "store")
    with pytest.raises(UndecodableRecord, match=repr(key)):
        rk.restore(store, key, value)
    assert list(store.prefix(b"")) == []
    store.close()


def test_a_queue_counter_that_is_not_an_integer_counts_as_absent(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = RocksStore.open(tmp_path / "store")
    store.put(rk.SEQ_KEY, b'{"run_id":"x"}')  # raised ValueError on every arrival before
    with caplog.at_level(logging.ERROR):
        assert rk.next_seq(store) == 1
    assert "not an integer" in caplog.text
    assert rk.next_seq(store) == 2
    store.close()


def test_the_schedulers_restore_record_raises_undecodable_before_writing(tmp_path: Path) -> None:
    codec = default_codec()
    jobs = JobRecords(codec, PlanCache(codec.decode))
    store = RocksStore.open(tmp_path / "store")
    with pytest.raises(UndecodableRecord, match="job/acme/j"):
        jobs.restore_record(store, b"job/acme/j", ENVELOPE)
    assert list(store.prefix(b"")) == []
    store.close()


def test_a_run_record_of_a_newer_format_stops_the_restore_rather_than_being_lost(
    tmp_path: Path,
) -> None:
    """A rolling upgrade's older member must not skip what the newer one wrote."""
    store = RocksStore.open(tmp_path / "store")
    newer = b'[%d,"acme/j@20260101T000000Z"]' % (rk.FORMAT + 1)
    with pytest.raises(StateError, match="newer than this version reads") as raised:
        rk.restore(store, b"run/acme/j@20260101T000000Z", newer)
    assert not isinstance(raised.value, UndecodableRecord)
    assert list(store.prefix(b"")) == []
    store.close()


def test_a_job_record_of_an_unknown_schema_stops_the_restore_rather_than_being_lost(
    tmp_path: Path,
) -> None:
    codec = default_codec()
    jobs = JobRecords(codec, PlanCache(codec.decode))
    store = RocksStore.open(tmp_path / "store")
    unknown = MARKER + b"\x01" * 8 + b"\x02\x04body"
    with pytest.raises(StateError, match="a schema this version does not know") as raised:
        jobs.restore_record(store, b"job/acme/j", unknown)
    assert not isinstance(raised.value, UndecodableRecord)
    assert list(store.prefix(b"")) == []
    store.close()
