"""A tick keeps a live key right after the bf/ range: a scan of that range then stops at it
instead of seeking through the due/ keys a burst deleted (RocksDB tombstones)."""

from __future__ import annotations

from pathlib import Path

from schedulerstream.runtime.store import RocksStore
from schedulerstream.scheduler import keys
from schedulerstream.scheduler.logic import SchedulerLogic
from schedulerstream.scheduler.timers import TimerSettings
from tests.scheduler.harness import CODEC, TOPICS


class Silent:
    def produce(self, *args: object, **kwargs: object) -> None:
        raise AssertionError("nothing is due")

    def failed(self, origin: str) -> str | None:
        return None


def test_a_tick_leaves_a_live_key_after_the_backfill_range(tmp_path: Path) -> None:
    store = RocksStore.open(tmp_path / "store")
    logic = SchedulerLogic(CODEC, TOPICS, TimerSettings(1_000_000, 5_000_000, 100), "i")
    for n in range(1000):  # a burst's due keys, deleted and written out: tombstones
        store.put(keys.due_key(5, f"t/j{n}"), b"", logged=False)
    store.flush(0)
    for n in range(1000):
        store.delete(keys.due_key(5, f"t/j{n}"), logged=False)
    store.flush(1)
    assert logic.on_tick(store, Silent(), 0, 1_000_000) is False
    store.flush(2)
    first = next(iter(store.range(keys.BACKFILL_PREFIX, None)))
    assert first == (keys.BACKFILL_END, b"")
    assert keys.backfill_key("t/j") < keys.BACKFILL_END
    assert list(store.range(keys.BACKFILL_PREFIX, keys.BACKFILL_END)) == []
