"""A store that fails while its changelog is replayed fails alone: the other tasks restoring
in the same chunk keep every record of theirs (real broker, real RocksDB stores).

Before the fix the error left the chunk half applied: the records of other partitions
behind the failing one were consumed and never applied, and their tasks still caught up.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer

from schedulerstream.clock import SystemClock
from schedulerstream.kafka import clients
from schedulerstream.runtime.changelog import Restorer, describe
from schedulerstream.runtime.store import StateStore, StoreCorrupted, StoreUnavailable
from schedulerstream.runtime.task import Task, TaskState
from schedulerstream.settings import Settings
from tests.support.waits import wait_until

pytestmark = pytest.mark.kafka
RECORDS = 200  # a partition; both partitions fit one chunk


def restorer(
    settings: Settings, fail_at: dict[int, bytes], seen: list[bytes],
    error: type[StoreCorrupted | StoreUnavailable] = StoreCorrupted,
) -> Restorer:  # fmt: skip
    """A restorer whose stores fail on the keys of ``fail_at`` (as a damaged block would, or
    a read refused for want of file descriptors)."""

    def restore_record(store: StateStore, key: bytes, value: bytes | None) -> None:
        partition = int(key.split(b"/")[0])
        if fail_at.get(partition) == key:
            why = "block checksum mismatch" if error is StoreCorrupted else "Too many open files"
            raise error(Path(f"store-{partition}"), why)
        seen.append(key)
        if value is not None:
            store.put(key, value)

    name = settings.topic("counter-changelog")
    return Restorer(
        clients.restore_consumer_config(settings, "restore-corrupt"),
        clients.restore_consumer_config(settings, "restore-corrupt", committed=False),
        describe(clients.base_config(settings), name),
        restore_record,
        SystemClock(),
        chunk=10 * RECORDS,
    )


def fill(settings: Settings) -> None:
    """RECORDS keys ``{p}/{i}`` into each of partitions 0 and 1 of the changelog."""
    producer = Producer(clients.producer_config(settings))
    for p in (0, 1):
        for i in range(RECORDS):
            key = f"{p}/{i:04}".encode()
            producer.produce(settings.topic("counter-changelog"), key=key, value=b"v",
                             partition=p)  # fmt: skip
    assert producer.flush(30) == 0


def started(settings: Settings, restore: Restorer, tmp_path: Path) -> dict[int, Task]:
    tasks = {p: Task(p, (settings.topic("in"),), tmp_path / str(p)) for p in (0, 1)}
    for task in tasks.values():
        restore.start(task)
    return tasks


@pytest.mark.parametrize(
    ("failing", "error"), [(0, StoreCorrupted), (1, StoreCorrupted), (0, StoreUnavailable)]
)
def test_a_failing_store_keeps_the_others_records(
    counter_settings: Settings, tmp_path: Path, failing: int,
    error: type[StoreCorrupted | StoreUnavailable],
) -> None:  # fmt: skip
    fill(counter_settings)
    seen: list[bytes] = []
    restore = restorer(counter_settings, {failing: f"{failing}/0050".encode()}, seen, error)
    tasks = started(counter_settings, restore, tmp_path)
    healthy = tasks[1 - failing]
    failed: list[StoreCorrupted | StoreUnavailable] = []

    def step() -> bool:
        try:
            caught = restore.poll(0.5)
        except error as exc:
            failed.append(exc)
            restore.stop(tasks[failing])
            return False
        return healthy in caught

    wait_until(step, 60, "the healthy task caught up")
    assert [str(e.path) for e in failed] == [f"store-{failing}"]
    mine = [k for k in seen if k.startswith(f"{1 - failing}/".encode())]
    assert mine == [f"{1 - failing}/{i:04}".encode() for i in range(RECORDS)]
    assert len(list(healthy.require_store().prefix(f"{1 - failing}/".encode()))) == RECORDS
    restore.close()
    for task in tasks.values():
        task.close()


def test_two_failing_stores_each_fail_and_skip_nothing(
    counter_settings: Settings, tmp_path: Path
) -> None:
    fill(counter_settings)
    seen: list[bytes] = []
    restore = restorer(counter_settings, {0: b"0/0050", 1: b"1/0120"}, seen)
    tasks = started(counter_settings, restore, tmp_path)
    failed: list[str] = []

    def step() -> bool:
        try:
            restore.poll(0.5)
        except StoreCorrupted as exc:
            failed.append(str(exc.path))
            restore.stop(tasks[int(str(exc.path)[-1])])
        return len(failed) == 2

    wait_until(step, 60, "both stores failed")
    assert sorted(failed) == ["store-0", "store-1"]
    for p, last in ((0, 50), (1, 120)):  # each got its records up to the failing one
        mine = {k for k in seen if k.startswith(f"{p}/".encode())}  # a rewind replays them
        assert mine == {f"{p}/{i:04}".encode() for i in range(last)}
    restore.close()
    for task in tasks.values():
        task.close()


def test_a_store_unreadable_as_its_restore_starts_leaves_the_task_as_it_was(
    counter_settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its task stays in its state (here CREATED) and unregistered, so the processor can
    park it and retry; it once moved to RESTORING first, and then could not be parked."""
    fill(counter_settings)
    restore = restorer(counter_settings, {}, [])
    task = Task(0, (counter_settings.topic("in"),), tmp_path / "0")
    store = task.open_store()

    def unavailable(key: bytes) -> bytes | None:
        raise StoreUnavailable(store.path, "IO error: 000042.sst: Too many open files")

    monkeypatch.setattr(store, "_read", unavailable)
    with pytest.raises(StoreUnavailable):
        restore.start(task)
    assert task.state is TaskState.CREATED and not restore.restoring()
    monkeypatch.undo()  # the resource is back
    restore.start(task)
    assert task.state is TaskState.RESTORING and restore.restoring()
    restore.close()
    task.close()
