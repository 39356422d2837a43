"""RocksStore without Kafka: overlay reads, merged range scans, flush/discard, savepoints."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest
from rocksdict import Options, Rdict

from schedulerstream.errors import StateError, StateTooLarge
from schedulerstream.runtime.store import (
    NO_OFFSET,
    WRITE_BUFFER_BYTES,
    RocksStore,
    StoreCorrupted,
    StoreUnavailable,
    _is_lock_error,
    prefix_end,
    read_failure,
)


@pytest.fixture
def store(tmp_path: Path) -> RocksStore:
    s = RocksStore.open(tmp_path / "db")
    yield s
    s.close()


def due(micros: int, job: str) -> bytes:
    return b"due/" + micros.to_bytes(8, "big") + b"/" + job.encode()


def test_read_your_writes_and_delete(store: RocksStore) -> None:
    store.put(b"a", b"1")
    store.flush(5)
    assert store.get(b"a") == b"1"
    store.put(b"a", b"2")
    store.put(b"b", b"3")
    assert store.get(b"a") == b"2" and store.get(b"b") == b"3"
    store.delete(b"a")
    assert store.get(b"a") is None
    store.discard()
    assert store.get(b"a") == b"1" and store.get(b"b") is None
    assert store.changelog_offset() == 5


def test_range_merges_overlay_and_db_in_key_order(store: RocksStore) -> None:
    for m in (10, 30, 50):
        store.put(due(m, "db"), b"", logged=False)
    store.put(b"job/x", b"j")
    store.flush(1)
    store.put(due(20, "new"), b"", logged=False)  # inserted in this cycle
    store.put(due(30, "db"), b"v")  # overwritten in the overlay
    store.delete(due(50, "db"))  # deleted in the overlay
    store.put(due(60, "late"), b"", logged=False)
    keys = [k for k, _ in store.range(b"due/", due(55, ""))]
    assert keys == [due(10, "db"), due(20, "new"), due(30, "db")]
    assert dict(store.range(b"due/", due(55, "")))[due(30, "db")] == b"v"
    assert [k for k, _ in store.prefix(b"due/")] == [
        due(10, "db"), due(20, "new"), due(30, "db"), due(60, "late")
    ]  # fmt: skip
    assert [k for k, _ in store.prefix(b"job/")] == [b"job/x"]
    assert [k for k, _ in store.range(b"", None)][-1] == b"meta/changelog-offset"


def test_range_is_a_snapshot_of_the_overlay(store: RocksStore) -> None:
    store.put(due(1, "a"), b"")
    seen = []
    for key, _ in store.prefix(b"due/"):
        seen.append(key)
        store.delete(key)
        store.put(due(2, "b"), b"")  # shows up in the next scan, not this one
    assert seen == [due(1, "a")]
    assert [k for k, _ in store.prefix(b"due/")] == [due(2, "b")]


def test_flush_is_one_batch_with_the_offset(tmp_path: Path) -> None:
    store = RocksStore.open(tmp_path / "db")
    store.put(b"k", b"v")
    store.put(b"idx", b"", logged=False)
    assert list(store.logged_changes()) == [(b"k", b"v")]
    store.flush(42)
    assert not store.has_pending()
    store.close()
    reopened = RocksStore.open(tmp_path / "db")
    assert reopened.get(b"k") == b"v" and reopened.get(b"idx") == b""
    assert reopened.changelog_offset() == 42
    reopened.close()


def test_savepoint_rollback_restores_the_overlay(store: RocksStore) -> None:
    store.put(b"a", b"1")
    store.savepoint()
    store.put(b"a", b"2")
    store.put(b"b", b"x")
    store.delete(b"a")
    store.rollback()
    assert store.get(b"a") == b"1" and store.get(b"b") is None
    assert [k for k, _ in store.prefix(b"")] == [b"a"]


def test_rollback_to_a_mark_undoes_one_items_writes_and_keeps_the_savepoint(
    store: RocksStore,
) -> None:
    store.put(b"a", b"1")
    store.savepoint()
    store.put(b"a", b"2")  # the first item's
    mark = store.mark()
    store.put(b"a", b"3")  # the second item's
    store.put(b"c", b"x")
    store.delete(b"a")
    store.rollback_to(mark)
    assert store.get(b"a") == b"2" and store.get(b"c") is None
    assert [k for k, _ in store.prefix(b"")] == [b"a"]
    store.rollback()  # the savepoint still undoes the first item
    assert store.get(b"a") == b"1"


def test_logged_flag_sticks_for_a_key(store: RocksStore) -> None:
    store.put(b"a", b"1")
    store.put(b"a", b"2", logged=False)
    assert list(store.logged_changes()) == [(b"a", b"2")]


def test_meta_keys_are_reserved(store: RocksStore) -> None:
    with pytest.raises(ValueError):
        store.put(b"meta/changelog-offset", b"x")


def test_offset_missing_or_corrupt(store: RocksStore) -> None:
    assert store.changelog_offset() is None
    store.set_source(b"src", 5)
    assert store.changelog_offset() == NO_OFFSET and store.source() == b"src"


def test_when_the_store_was_current_is_kept_with_its_offset(tmp_path: Path) -> None:
    """A store of an older version never recorded it (None: trusted as before); a flush
    without a time keeps the last one; an unreadable record is as old as can be."""
    store = RocksStore.open(tmp_path / "db")
    store.put(b"k", b"v")
    store.flush(1)
    assert store.written_us() is None
    store.set_source(b"src", 100)
    store.flush(2, 250)
    store.flush(3)  # a replay not yet caught up
    store.close()
    store = RocksStore.open(tmp_path / "db")
    assert store.written_us() == 250 and store.changelog_offset() == 3
    store.close()
    db = Rdict(str(tmp_path / "db"), Options(raw_mode=True))
    db[b"meta/changelog-written"] = b"\x01"
    db.close()
    store = RocksStore.open(tmp_path / "db")
    assert store.written_us() == 0
    store.close()


def test_corrupt_store_is_wiped_on_open(tmp_path: Path) -> None:
    store = RocksStore.open(tmp_path / "db")
    store.put(b"a", b"1")
    store.flush(3)
    store.close()
    (tmp_path / "db" / "CURRENT").write_text("garbage\n")
    reopened = RocksStore.open(tmp_path / "db")
    assert reopened.is_empty()
    reopened.close()


def test_a_store_whose_tables_fail_their_checksums_on_open_is_wiped(tmp_path: Path) -> None:
    """RocksDB's "block checksum mismatch" names no lock: once it was taken for one, and the
    task retried opening the damaged store every 5 s, for ever."""
    rng = random.Random(1)
    store = RocksStore.open(tmp_path / "db")
    for i in range(300):
        store.put(f"job/{i:03}".encode(), rng.randbytes(70))
    store.flush(1)
    store.compact()  # a table file holds them, and another one these:
    for i in range(100):
        store.put(f"x/{i:03}".encode(), b"x" * 70)
    store.flush(2)
    store.close()
    tables = sorted((tmp_path / "db").glob("*.sst"))
    assert tables
    for table in tables:  # as tests/faults/test_state_dir.py scribbles
        size = table.stat().st_size
        with table.open("r+b") as out:
            out.seek(size // 3)
            out.write(rng.randbytes(size // 3))
    with pytest.raises(Exception, match="block checksum mismatch"):
        Rdict(str(tmp_path / "db"), Options(raw_mode=True)).close()
    reopened = RocksStore.open(tmp_path / "db")
    assert reopened.is_empty()
    reopened.close()


def test_a_locked_store_is_not_wiped(tmp_path: Path) -> None:
    store = RocksStore.open(tmp_path / "db")
    store.put(b"a", b"1")
    store.flush(1)
    with pytest.raises(StateError):
        RocksStore.open(tmp_path / "db")
    assert store.get(b"a") == b"1"
    store.close()


OPEN_UNDER_A_LIMIT = """
import os, resource, sys
from pathlib import Path
from schedulerstream.runtime.store import RocksStore, StoreUnavailable
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
used = len(os.listdir("/proc/self/fd"))
refused = 0
for extra in range(8):  # each limit stops RocksDB at another file (CURRENT, a table, ...)
    resource.setrlimit(resource.RLIMIT_NOFILE, (used + extra, hard))
    try:
        RocksStore.open(Path(sys.argv[1])).close()
    except StoreUnavailable as exc:
        assert "Too many open files" in str(exc), exc
        refused += 1
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
print(refused)
"""


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc (Linux)")
def test_a_store_opened_without_enough_file_descriptors_is_kept(tmp_path: Path) -> None:
    """Too many open files is the machine's limit, not damage: the store is not wiped (it
    used to be, for a cold restore that makes more files to open)."""
    store = RocksStore.open(tmp_path / "db")
    for n in range(4):  # several table files
        for i in range(500):
            store.put(f"job/{n}/{i:03}".encode(), b"v" * 100)
        store.flush(n)
        store._db.flush()
    store.close()
    done = subprocess.run(
        [sys.executable, "-c", OPEN_UNDER_A_LIMIT, str(tmp_path / "db")],
        capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) >= 4  # most limits were met, and refused without a wipe
    reopened = RocksStore.open(tmp_path / "db")
    assert reopened.changelog_offset() == 3
    assert len(list(reopened.prefix(b"job/"))) == 2000
    reopened.close()


def test_a_read_failure_is_told_apart_by_its_cause(tmp_path: Path) -> None:
    emfile = "IO error: While open a file for random read: 000012.sst: Too many open files"
    assert isinstance(read_failure(tmp_path, emfile), StoreUnavailable)
    assert isinstance(read_failure(tmp_path, "IO error: No space left on device"),
                      StoreUnavailable)  # fmt: skip
    damaged = "Corruption: block checksum mismatch: stored = 1, computed = 2"
    assert isinstance(read_failure(tmp_path, damaged), StoreCorrupted)
    assert isinstance(read_failure(tmp_path, "IO error: 000012.sst: No such file or directory"),
                      StoreCorrupted)  # fmt: skip
    # a LOCK another process holds is a lock; a LOCK file that cannot be opened is not
    assert _is_lock_error(Exception("IO error: While lock file: /s/LOCK: Resource temporarily "
                                    "unavailable"))  # fmt: skip
    assert not _is_lock_error(Exception("IO error: while open a file for lock: /s/LOCK: Too "
                                        "many open files"))  # fmt: skip
    assert not _is_lock_error(Exception("Corruption: block checksum mismatch"))


def test_close_releases_the_lock_after_an_abandoned_scan(tmp_path: Path) -> None:
    store = RocksStore.open(tmp_path / "db")
    store.put(b"a", b"1")
    store.flush(1)
    scan = store.prefix(b"")
    next(scan)
    del scan
    store.close()
    RocksStore.open(tmp_path / "db").close()


def test_prefix_end() -> None:
    assert prefix_end(b"due/") == b"due0"
    assert prefix_end(b"a\xff") == b"b"
    assert prefix_end(b"\xff\xff") is None


def test_a_store_is_reopened_with_its_options_not_those_it_was_created_with(
    tmp_path: Path,
) -> None:
    path = tmp_path / "db"
    old = Rdict(str(path), Options(raw_mode=True))  # RocksDB's defaults: 64 MiB, no filters
    old[b"run/old"] = b"1"
    old.close()
    for offset in (7, 8):  # the first open, then a warm restart
        store = RocksStore.open(path)
        assert store.get(b"run/old") == b"1" and store.get(b"run/missing") is None
        store.put(b"run/new", b"2")
        store.flush(offset)
        store.close()
        written = max(path.glob("OPTIONS-*")).read_text()  # the options of the last open
        assert f"write_buffer_size={WRITE_BUFFER_BYTES}\n" in written
        assert "filter_policy=bloomfilter" in written
    reopened = RocksStore.open(path)
    assert reopened.get(b"run/new") == b"2" and reopened.changelog_offset() == 8
    reopened.close()


def test_a_logged_record_over_the_limit_is_refused_where_it_is_written(store: RocksStore) -> None:
    store.max_logged_bytes = 100
    store.put(b"k", b"v" * 99)  # key and value: 100 bytes
    with pytest.raises(StateTooLarge, match=r"b'big' would be 103 bytes; the limit is 100"):
        store.put(b"big", b"v" * 100)
    assert store.get(b"big") is None and store.get(b"k") == b"v" * 99
    store.put(b"derived", b"v" * 1000, logged=False)  # never in a changelog: no limit
    store.max_logged_bytes = None
    store.put(b"big", b"v" * 100)
