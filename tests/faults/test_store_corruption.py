"""A damaged RocksDB table file is an error, never a silently short scan (no broker).

Before the fix a range scan stopped at the first block with a bad checksum as if the store
ended there (rocksdict's iterator just became invalid), so the scheduler's ``due/`` scan
skipped every job behind the damage: those jobs silently stopped firing.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from schedulerstream.runtime.store import RocksStore, StoreCorrupted

pytestmark = pytest.mark.faults


def damaged_store(path: Path) -> RocksStore:
    store = RocksStore.open(path)
    for i in range(2000):
        store.put(f"due/{i:05d}".encode(), b"v" * 200)
    store.flush(41)
    store._db.flush()  # memtable → table file, so the damage hits a block on disk
    store.close()
    [table] = list(path.glob("*.sst"))
    size = table.stat().st_size
    with table.open("r+b") as out:
        out.seek(size // 3)
        out.write(random.Random(6).randbytes(size // 3))
    return RocksStore.open(path)  # opening reads no data block: it succeeds


def test_a_scan_over_a_damaged_block_raises_instead_of_ending_early(tmp_path: Path) -> None:
    store = damaged_store(tmp_path / "s")
    seen = 0
    with pytest.raises(StoreCorrupted, match="corrupt"):
        for _ in store.prefix(b"due/"):
            seen += 1
    assert 0 < seen < 2000  # it did stop in the middle: that used to look like the end
    with pytest.raises(StoreCorrupted):
        store.get(b"due/01000")
    assert not store.is_empty()
    store.close()


def test_a_wiped_damaged_store_is_empty_and_usable(tmp_path: Path) -> None:
    store = damaged_store(tmp_path / "s").wipe()
    assert store.is_empty() and store.changelog_offset() is None
    store.put(b"due/1", b"x")
    store.flush(0)
    assert list(store.prefix(b"due/")) == [(b"due/1", b"x")]
    store.close()
