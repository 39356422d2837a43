"""The processor in this process against the real broker: commit, abort, restore, poison."""

from __future__ import annotations

import itertools
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from rocksdict import Options, Rdict

from schedulerstream.clock import SystemClock
from schedulerstream.kafka import clients
from schedulerstream.runtime import Processor, TaskContext, TaskState
from schedulerstream.runtime.transaction import Failure, TransactionFailed
from schedulerstream.settings import Settings
from tests.runtime.rt_helpers import (
    assert_exactly_once,
    changelog_counts,
    committed_offsets,
    counts,
    drive,
    end_offsets,
    keyed,
    produce,
    read_all,
)
from tests.runtime.runtime_counter_app import CounterTopology

pytestmark = pytest.mark.kafka


def make(settings: Settings, **kw: object) -> tuple[Processor, CounterTopology]:
    topology = CounterTopology(settings)
    processor = Processor(settings, topology, **kw)  # type: ignore[arg-type]
    processor.start()
    return processor, topology


def all_running(p: Processor, n: int = 4) -> bool:
    return len(p.running_partitions()) == n


def test_commit_makes_output_state_and_offsets_atomic(counter_settings: Settings) -> None:
    s = counter_settings
    produce(s, "in", keyed(20, 5))
    produce(s, "in-b", keyed(20, 1))
    proc, _ = make(s)
    try:
        drive([proc], lambda: proc.metrics["records_processed"] == 120 and proc.commit() is False)
        assert_exactly_once(s, {f"k{k:03d}".encode(): 6 for k in range(20)})
        assert changelog_counts(s) == {f"k{k:03d}".encode(): 6 for k in range(20)}
        assert committed_offsets(s, proc.group_id, "in") == end_offsets(s, "in")
        for task in proc.tasks.values():
            store = task.require_store()
            assert store.changelog_offset() == task.committed_changelog_offset >= 0
            for key, value in store.prefix(b"count/"):
                assert store.get(b"idx/" + key[6:]) == value
    finally:
        proc.close()


class SeekRefused:
    """The processor's consumer, except that a seek of ``partition`` is refused with _STATE,
    as librdkafka refuses it when that partition's fetcher never started (seen in CI)."""

    def __init__(self, consumer: Any, partition: int) -> None:
        self._consumer = consumer
        self._partition = partition
        self.refused = 0

    def seek(self, tp: TopicPartition) -> None:
        if tp.partition == self._partition:
            self.refused += 1
            raise KafkaException(KafkaError(KafkaError._STATE, "Failed to seek: Erroneous state"))
        self._consumer.seek(tp)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)


def test_a_task_whose_seek_is_refused_starts_by_assigning_its_inputs_again(
    counter_settings: Settings,
) -> None:
    """The task's inputs are assigned again at their committed offsets: it runs, and every
    record is processed exactly once."""
    s = counter_settings
    produce(s, "in", keyed(20, 5))
    produce(s, "in-b", keyed(20, 1))
    proc, _ = make(s)
    refusing = SeekRefused(proc.task_manager._consumer, 1)
    proc.task_manager._consumer = refusing  # type: ignore[assignment]
    try:
        drive([proc], lambda: proc.metrics["records_processed"] == 120 and proc.commit() is False)
        assert all_running(proc)
        assert refusing.refused >= 1 and proc.metrics["fetchers_restarted"] == 1
        assert_exactly_once(s, {f"k{k:03d}".encode(): 6 for k in range(20)})
        assert committed_offsets(s, proc.group_id, "in") == end_offsets(s, "in")
    finally:
        proc.close()


def test_abort_drops_the_overlay_and_reprocesses(counter_settings: Settings) -> None:
    s = counter_settings
    proc, topology = make(s)
    try:
        drive([proc], lambda: all_running(proc))
        assert topology.stopped == []
        produce(s, "in", keyed(8, 3))
        # process without committing, then fail the transaction
        proc._next_commit = float("inf")
        drive([proc], lambda: proc.metrics["records_processed"] == 24)
        assert any(t.require_store().has_pending() for t in proc.tasks.values())
        proc._recover(TransactionFailed(Failure.ABORTABLE, "test abort"))
        assert sorted(topology.stopped) == [0, 1, 2, 3]  # each rebuilt task was told it stopped
        assert all(not t.require_store().has_pending() for t in proc.tasks.values())
        assert counts(s) == []
        proc._next_commit = 0.0
        drive([proc], lambda: proc.metrics["records_processed"] == 48 and not proc.commit())
        assert_exactly_once(s, {f"k{k:03d}".encode(): 3 for k in range(8)})
        assert proc.metrics["aborts"] == 1
    finally:
        proc.close()
    assert sorted(topology.stopped) == [0, 0, 1, 1, 2, 2, 3, 3]  # and again when closed


def test_fatal_error_recreates_the_producer(counter_settings: Settings) -> None:
    s = counter_settings
    proc, _ = make(s)
    try:
        drive([proc], lambda: all_running(proc))
        produce(s, "in", keyed(8, 2))
        proc._next_commit = float("inf")
        drive([proc], lambda: proc.metrics["records_processed"] == 16)
        proc._recover(TransactionFailed(Failure.FATAL, "test fatal"))
        proc._next_commit = 0.0
        drive([proc], lambda: proc.metrics["records_processed"] == 32 and not proc.commit())
        assert_exactly_once(s, {f"k{k:03d}".encode(): 2 for k in range(8)})
        assert proc.metrics["producer_recreations"] == 1
    finally:
        proc.close()


class FencedOnRunning(CounterTopology):
    """Partition 2 writes a record as it starts to run (as a dispatcher's restored task
    does); the first time, the producer refuses it as fenced (``fence_next``), as a zombie
    that resumed met its old producer in make faults."""

    fence_next = True

    def on_running(self, ctx: TaskContext) -> None:
        super().on_running(ctx)
        if ctx.partition == 2:
            ctx.produce(self.out, b"running", b"1", ctx.partition)


def test_a_fenced_producer_met_as_a_restored_task_starts_makes_a_new_producer(
    counter_settings: Settings,
) -> None:
    """The step recovers (a new producer, the tasks rebuilt from their changelogs) instead of
    ending the process: the task starts again, and its start's record and every input count
    once."""
    s = counter_settings
    produce(s, "in", keyed(20, 3))
    topology = FencedOnRunning(s)
    proc = Processor(s, topology)
    produce_outputs = proc.committer.produce

    def fenced_once(partition: int, outputs: list[Any], *args: Any, **kw: Any) -> None:
        if partition == 2 and topology.fence_next and any(o.key == b"running" for o in outputs):
            topology.fence_next = False
            raise KafkaException(
                KafkaError(KafkaError._FATAL, "Unable to produce message: fenced", fatal=True)
            )
        produce_outputs(partition, outputs, *args, **kw)

    proc.committer.produce = fenced_once  # type: ignore[method-assign]
    proc.start()
    try:
        drive([proc], lambda: all_running(proc) and proc.metrics["records_processed"] >= 60
              and not proc.commit())  # fmt: skip
        assert not topology.fence_next and topology.running.count(2) >= 2
        assert proc.metrics["producer_recreations"] == 1
        expected = {f"k{k:03d}".encode(): 3 for k in range(20)} | {b"running": 1}
        assert_exactly_once(s, expected)
    finally:
        proc.close()


def test_warm_restore_replays_only_the_tail(counter_settings: Settings, tmp_path) -> None:
    s = counter_settings
    produce(s, "in", keyed(16, 2))
    first, _ = make(s)
    drive([first], lambda: first.metrics["records_processed"] == 32 and not first.commit())
    first.close()
    logged = len(read_all(s, "counter-changelog"))  # one record per key and commit
    # another instance (its own state dir) moves the changelog on
    other_settings = s.model_copy(update={"data_dir": tmp_path / "other", "instance_id": "o"})
    other, _ = make(other_settings)
    produce(s, "in", keyed(16, 1))
    drive([other], lambda: other.metrics["records_processed"] == 16 and not other.commit())
    assert other.metrics["restored_records"] == logged  # cold: the whole changelog so far
    other.close()
    tail = len(read_all(s, "counter-changelog")) - logged
    again, _ = make(s)
    try:
        drive([again], lambda: all_running(again))
        restores = [t.restore for t in again.tasks.values()]
        assert not any(r.cold for r in restores)
        assert sum(r.records for r in restores) == tail  # only what the other instance wrote
        assert again.metrics["restore_rate"] > 0
        produce(s, "in", keyed(16, 1))
        drive([again], lambda: again.metrics["records_processed"] == 16 and not again.commit())
        assert_exactly_once(s, {f"k{k:03d}".encode(): 4 for k in range(16)})
    finally:
        again.close()


def test_cold_restore_after_deleting_the_state_dir(counter_settings: Settings) -> None:
    s = counter_settings
    produce(s, "in", keyed(12, 3))
    first, _ = make(s)
    drive([first], lambda: first.metrics["records_processed"] == 36 and not first.commit())
    first.close()
    shutil.rmtree(s.data_dir)
    again, _ = make(s)
    try:
        drive([again], lambda: all_running(again))
        assert all(t.restore.cold for t in again.tasks.values())
        assert again.metrics["restored_records"] == len(read_all(s, "counter-changelog"))
        produce(s, "in", keyed(12, 1))
        drive([again], lambda: again.metrics["records_processed"] == 12 and not again.commit())
        assert_exactly_once(s, {f"k{k:03d}".encode(): 4 for k in range(12)})
        for task in again.tasks.values():  # the derived index was rebuilt by restore_record
            store = task.require_store()
            assert [v for _, v in store.prefix(b"idx/")] == [v for _, v in store.prefix(b"count/")]
    finally:
        again.close()


def test_a_store_that_does_not_match_its_changelog_is_rebuilt(counter_settings: Settings) -> None:
    s = counter_settings
    produce(s, "in", keyed(24, 2))
    first, _ = make(s)
    drive([first], lambda: first.metrics["records_processed"] == 48 and not first.commit())
    first.close()
    root = s.data_dir / "counter"
    options = Options(raw_mode=True)
    db = Rdict(str(root / "0"), options)  # offset beyond the changelog's end
    db[b"meta/changelog-offset"] = struct.pack(">q", 10**9)
    db[b"count/bogus"] = b"99"
    db.close()
    db = Rdict(str(root / "1"), options)  # corrupt offset
    db[b"meta/changelog-offset"] = b"\x01"
    db.close()
    db = Rdict(str(root / "2"), options)  # another changelog's store
    db[b"meta/changelog-source"] = b"someone-else"
    db.close()
    (root / "3" / "CURRENT").write_text("garbage\n")  # cannot be opened
    again, _ = make(s)
    try:
        drive([again], lambda: all_running(again))
        assert all(t.restore.cold for t in again.tasks.values())
        for task in again.tasks.values():
            assert task.require_store().get(b"count/bogus") is None
        produce(s, "in", keyed(24, 1))
        drive([again], lambda: again.metrics["records_processed"] == 24 and not again.commit())
        assert_exactly_once(s, {f"k{k:03d}".encode(): 3 for k in range(24)})
    finally:
        again.close()


class Later(SystemClock):
    """The system clock, ``shift_s`` ahead: a member that comes back that much later."""

    def __init__(self, shift_s: float) -> None:
        self.shift_us = int(shift_s * 1_000_000)

    def now_us(self) -> int:
        return super().now_us() + self.shift_us


def test_a_store_older_than_the_changelog_keeps_tombstones_is_rebuilt(
    counter_settings: Settings, tmp_path: Path
) -> None:
    """Compaction may drop a deletion's tombstone after delete.retention.ms (1 day here), so
    a store left for half of that while another member moved the log on is not replayed
    warm: a key deleted meanwhile would stay (a deleted job would fire). Sooner, or with
    nothing written since, it replays warm."""
    s = counter_settings
    other_settings = s.model_copy(update={"data_dir": tmp_path / "other", "instance_id": "o"})

    def another_member_moves_the_log_on() -> None:
        other, _ = make(other_settings)
        produce(s, "in", keyed(16, 1))
        drive([other], lambda: other.metrics["records_processed"] == 16 and not other.commit())
        other.close()

    produce(s, "in", keyed(16, 2))
    first, _ = make(s)
    drive([first], lambda: first.metrics["records_processed"] == 32 and not first.commit())
    first.close()
    quiet, _ = make(s, clock=Later(30 * 86_400))  # old, but nothing was written since
    try:
        drive([quiet], lambda: all_running(quiet))
        assert not any(t.restore.cold or t.restore.records for t in quiet.tasks.values())
    finally:
        quiet.close()
    another_member_moves_the_log_on()
    soon, _ = make(s, clock=Later(3600))
    try:
        drive([soon], lambda: all_running(soon))
        assert not any(t.restore.cold for t in soon.tasks.values())
    finally:
        soon.close()
    another_member_moves_the_log_on()
    for partition in range(4):  # what a replay cannot delete: its tombstone is gone
        db = Rdict(str(s.data_dir / "counter" / str(partition)), Options(raw_mode=True))
        db[b"count/deleted-long-ago"] = b"7"
        db.close()
    later, _ = make(s, clock=Later(30 * 86_400))
    try:
        drive([later], lambda: all_running(later))
        moved = [t for t in later.tasks.values() if t.restore.cold]
        assert moved  # every partition the other member wrote to
        for task in later.tasks.values():
            if not task.restore.cold:  # a partition whose log did not move is still current
                assert task.restore.records == 0
            assert (task.require_store().get(b"count/deleted-long-ago") is None) == (task in moved)
        produce(s, "in", keyed(16, 1))
        drive([later], lambda: later.metrics["records_processed"] == 16 and not later.commit())
        assert_exactly_once(s, {f"k{k:03d}".encode(): 5 for k in range(16)})
    finally:
        later.close()


def test_poison_goes_to_rejected_and_punctuate_sees_this_cycles_writes(
    counter_settings: Settings,
) -> None:
    s = counter_settings
    records = [(b"a", b"x"), (b"a", b"poison"), (b"a", b"x"), (b"b", b"later"), (b"c", b"reject")]
    produce(s, "in", records)
    proc, topology = make(s)
    try:
        drive(
            [proc],
            lambda: (
                proc.metrics["records_processed"] == 5
                and not proc.commit()
                and len(read_all(s, "out")) == 3
            ),
        )
        rejected = sorted(read_all(s, "rejected"), key=lambda m: m.key())
        assert [(m.key(), m.value()) for m in rejected] == [(b"a", b"poison"), (b"c", b"reject")]
        assert dict(rejected[1].headers())["rejected.reason"] == b"explicitly rejected"
        headers = dict(rejected[0].headers())
        assert headers["rejected.reason"] == b"ValueError: poison record"
        assert headers["rejected.topic"] == s.topic("in").encode()
        assert sorted((m.key(), m.value()) for m in read_all(s, "out")) == [
            (b"a", b"1"), (b"a", b"2"), (b"b", b"later")
        ]  # fmt: skip
        assert proc.metrics["records_rejected"] == 1
        assert topology.punctuations > 0 and sorted(topology.running) == [0, 1, 2, 3]
        assert all(t.state is TaskState.RUNNING for t in proc.tasks.values())
    finally:
        proc.close()


def test_a_big_restore_runs_in_chunks_while_other_tasks_process(
    counter_settings: Settings,
) -> None:
    s = counter_settings
    producer = Producer(clients.producer_config(s, **{"linger.ms": 20}))
    for i in range(30_000):  # a large changelog for partition 0 only
        producer.produce(
            s.topic("counter-changelog"), key=b"count/r%05d" % i, value=b"1", partition=0
        )
        if i % 5000 == 0:
            producer.poll(0)
    producer.flush(30)
    for p in (1, 2, 3):
        producer.produce(s.topic("in"), key=b"x", value=b"x", partition=p)
    producer.flush(30)
    proc, _ = make(s, restore_chunk=1000)
    try:
        running_while_restoring = 0
        steps_restoring = 0

        def restored() -> bool:
            nonlocal running_while_restoring, steps_restoring
            task = proc.tasks.get(0)
            if task is not None and task.state is TaskState.RESTORING:
                steps_restoring += 1
                running_while_restoring = max(
                    running_while_restoring, len(proc.running_partitions())
                )
            return task is not None and task.state is TaskState.RUNNING

        drive([proc], restored, 60)
        assert steps_restoring >= 10  # many bounded chunks, not one blocking call
        assert running_while_restoring == 3  # the other partitions ran meanwhile
        drive([proc], lambda: proc.metrics["records_processed"] == 3)
        task = proc.tasks[0]
        assert task.restore.records == 30_000 and task.restore.rate > 0
        store = task.require_store()
        assert sum(1 for _ in store.prefix(b"idx/")) == 30_000  # derived index rebuilt
    finally:
        proc.close()


def test_a_restore_cut_short_by_a_leave_resumes_where_it_stopped(
    counter_settings: Settings, tmp_path
) -> None:
    """A member leaves while its partition is still restoring (a clean leave revokes it
    mid-restore). Another member restores that partition whole and counts on. When the first
    member gets it back, it replays from the chunk where it stopped, and no count is lost."""
    s = counter_settings
    keys = [b"r%05d" % i for i in range(12_000)]
    producer = Producer(clients.producer_config(s, **{"linger.ms": 20}))
    for i, key in enumerate(keys):  # every key counted once before, all on partition 0
        producer.produce(s.topic("counter-changelog"), key=b"count/" + key, value=b"1", partition=0)
        if i % 5000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0

    def count_once(proc: Processor, chosen: list[bytes]) -> None:
        before = proc.metrics["records_processed"]
        for key in chosen:
            producer.produce(s.topic("in"), key=key, value=b"x", partition=0)
        assert producer.flush(30) == 0
        done = before + len(chosen)
        drive([proc], lambda: proc.metrics["records_processed"] == done and not proc.commit(), 60)

    first, _ = make(s, restore_chunk=500)
    try:

        def partly_restored() -> bool:
            task = first.tasks.get(0)
            return task is not None and task.restore.records >= 2_000

        drive([first], partly_restored, 60)
        task = first.tasks[0]
        assert task.state is TaskState.RESTORING
        applied = task.restore.records
        assert applied < len(keys)
    finally:
        first.close()
    other_settings = s.model_copy(update={"data_dir": tmp_path / "other", "instance_id": "o"})
    other, _ = make(other_settings, restore_chunk=500)
    try:
        drive([other], lambda: all_running(other), 60)
        assert other.tasks[0].restore.cold and other.tasks[0].restore.records == len(keys)
        count_once(other, keys[:50])
    finally:
        other.close()
    again, _ = make(s, restore_chunk=500)
    try:
        drive([again], lambda: all_running(again), 60)
        restore = again.tasks[0].restore
        assert not restore.cold and restore.start_offset == applied  # where it stopped
        logged = [m for m in read_all(s, "counter-changelog") if m.partition() == 0]
        assert restore.records == len(logged) - applied  # the rest, and the other's writes
        count_once(again, keys[:50] + keys[-50:])
    finally:
        again.close()
    seen: dict[bytes, list[int]] = {}
    for key, count in counts(s):
        seen.setdefault(key, []).append(count)
    assert seen == {key: [2, 3] for key in keys[:50]} | {key: [2] for key in keys[-50:]}


def test_each_tick_punctuates_every_task_from_another_one(counter_settings: Settings) -> None:
    proc, topology = make(counter_settings)
    try:
        drive([proc], lambda: all_running(proc))
        topology.punctuated.clear()
        drive([proc], lambda: len(topology.punctuated) >= 4 * 9)
        rounds = [topology.punctuated[i : i + 4] for i in range(0, 4 * 8, 4)]
        firsts = [r[0] for r in rounds]
        for r in rounds:
            assert sorted(r) == [0, 1, 2, 3]  # every task, once a tick
        assert set(firsts) == {0, 1, 2, 3}  # no partition is always served first
        assert all(a != b for a, b in itertools.pairwise(firsts))
    finally:
        proc.close()
