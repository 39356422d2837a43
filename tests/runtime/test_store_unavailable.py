"""A store the machine lacks a resource to read (too many open files, say) is kept, not
wiped: its task waits and restores warm from what it holds, the record that met the error is
processed then (never rejected), and the other tasks run meanwhile (real broker).

Before the fix any failed read counted as damage: the store was wiped and restored cold,
and under a file-descriptor limit a cold restore makes more files to open.
"""

from __future__ import annotations

from typing import Any

import pytest

from schedulerstream.runtime import Processor, TaskContext, TaskState
from schedulerstream.runtime import tasks as task_manager
from schedulerstream.runtime.store import StoreUnavailable
from schedulerstream.settings import Settings
from tests.runtime.rt_helpers import assert_exactly_once, counts, drive, keyed, produce, read_all
from tests.runtime.runtime_counter_app import CounterTopology

pytestmark = pytest.mark.kafka
KEYS = 16


class UnavailableOnce(CounterTopology):
    """The first record valued ``unavailable`` meets a store read that fails for want of
    file descriptors; after that it counts like any other record."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.failed_on: int | None = None

    def process(self, ctx: TaskContext, message: Any) -> None:
        if message.value() == b"unavailable" and self.failed_on is None:
            ctx.store.put(b"count/" + message.key(), b"999")  # dropped with the callback
            self.failed_on = ctx.partition
            raise StoreUnavailable(
                ctx.store.path,  # type: ignore[attr-defined]
                "IO error: While open a file for random read: 000042.sst: Too many open files",
            )
        super().process(ctx, message)


def test_a_read_failing_for_want_of_a_resource_keeps_the_store_and_the_record(
    counter_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = counter_settings
    monkeypatch.setattr(task_manager, "STORE_RETRY_S", 15.0)  # room for the others to finish first
    produce(s, "in", keyed(KEYS, 2))
    topology = UnavailableOnce(s)
    proc = Processor(s, topology)
    proc.start()
    try:
        processed = 2 * KEYS
        drive([proc], lambda: proc.metrics["records_processed"] == processed and proc.commit())
        produce(s, "in", [(b"k000", b"unavailable")])
        drive([proc], lambda: proc.metrics["stores_unavailable"] == 1, timeout=60)
        failing = topology.failed_on
        assert failing is not None
        task = proc.tasks[failing]
        assert task.state is not TaskState.RUNNING
        # the other tasks go on while the failing one waits out its retry
        produce(s, "in", keyed(KEYS, 1))
        home = {m.key(): m.partition() for m in read_all(s, "in")}
        others = {k: p for k, p in home.items() if p != failing}
        assert others, "every key landed on the failing partition"

        def others_done() -> bool:
            return all(_count(proc, p, k) == 3 for k, p in others.items())

        drive([proc], others_done, timeout=60)
        assert task.state is not TaskState.RUNNING, "the failing task did not wait"
        drive([proc], lambda: task.state is TaskState.RUNNING, timeout=60)
        assert not task.restore.cold  # restored from what its store held: not wiped
        expected = {k: 3 for k, _ in keyed(KEYS, 1)}
        expected[b"k000"] = 4  # the record that met the error counts once, after the retry
        drive([proc], lambda: not proc.commit() and _counted(s) == sum(expected.values()),
              timeout=60)  # fmt: skip
        assert_exactly_once(s, expected)
        assert read_all(s, "rejected") == []
        assert proc.metrics["corrupt_stores"] == 0
        assert proc.metrics["stores_unavailable"] == 1
    finally:
        proc.close()


def _count(proc: Processor, partition: int, key: bytes) -> int:
    """``key``'s count in its task's store (the open transaction's writes included)."""
    store = proc.tasks[partition].store
    value = None if store is None else store.get(b"count/" + key)
    return int(value or b"0")


def _counted(settings: Settings) -> int:
    return len(counts(settings))
