"""State stores: the StateStore contract and RocksStore, a rocksdict store with a write overlay.

Writes go to an in-memory overlay (the current transaction); reads and range scans see the
overlay merged over the database (read-your-writes). ``flush`` writes the overlay and the
changelog offset in one atomic WriteBatch; ``discard`` drops it (transaction aborted).
"""

from __future__ import annotations

import bisect
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from rocksdict import BlockBasedOptions, Options, Rdict, WriteBatch

from schedulerstream.errors import StateError, StateTooLarge

META_PREFIX = b"meta/changelog-"
OFFSET_KEY = b"meta/changelog-offset"
SOURCE_KEY = b"meta/changelog-source"
WRITTEN_KEY = b"meta/changelog-written"  # when the store was last current (µs)
NO_OFFSET = -1
_OFFSET = struct.Struct(">q")


# A store's memtable, and so its write-ahead log, is flushed to compressed SST files at this
# size. RocksDB's default (64 MiB) kept every write of a partition uncompressed in the log and
# in memory, per store (active and standby): several times the live state on disk.
WRITE_BUFFER_BYTES = 8 << 20

# Bits per key of each SST file's Bloom filter. Most reads of a key that is not there (a new
# run id, a job with no "gone" marker) then skip the file's data blocks: without filters such
# a read decompressed a block of every L0 file and level.
BLOOM_BITS_PER_KEY = 10


def _options() -> Options:
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.set_write_buffer_size(WRITE_BUFFER_BYTES)
    table = BlockBasedOptions()
    table.set_bloom_filter(BLOOM_BITS_PER_KEY, False)  # full filters, not block-based
    options.set_block_based_table_factory(table)
    return options


class StateStore(Protocol):
    """What topology code sees: byte keys and values, read-your-writes, ordered scans.

    ``logged=False`` writes are kept locally but never changelogged: use them for derived data
    (such as a timer index) that ``Topology.restore_record`` rebuilds from logged records.
    Keys starting with ``meta/changelog-`` are reserved for the runtime.
    """

    def get(self, key: bytes) -> bytes | None: ...

    def put(self, key: bytes, value: bytes, *, logged: bool = True) -> None: ...

    def delete(self, key: bytes, *, logged: bool = True) -> None: ...

    def range(self, start: bytes, end: bytes | None) -> Iterator[tuple[bytes, bytes]]: ...

    def prefix(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]: ...

    def mark(self) -> int: ...

    def rollback_to(self, mark: int) -> None: ...


def prefix_end(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key starting with ``prefix`` (None: no bound)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


class StoreCorrupted(StateError):
    """A read of the database failed (e.g. a block checksum mismatch): its files are damaged.

    The processor answers by wiping the store and restoring it from the changelog."""

    def __init__(self, path: Path, error: object) -> None:
        super().__init__(f"state store {path} is corrupt: {error}")
        self.path = path


class StoreUnavailable(StateError):
    """The database could not be opened or read for want of a resource (too many open
    files, no space, no memory, a read-only file system): its files are not known to be
    damaged, so nothing is wiped. The processor retries the task later from what the store holds."""

    def __init__(self, path: Path, error: object) -> None:
        super().__init__(f"state store {path} is unavailable: {error}")
        self.path = path


class StoreWriteFailed(StateError):
    """A write of the database failed (e.g. the disk is full): nothing of that batch was
    written. The processor retries the task's restore later; the changelog holds the data."""

    def __init__(self, path: Path, error: object) -> None:
        super().__init__(f"state store {path}: write failed: {error}")
        self.path = path


def _is_lock_error(exc: Exception) -> bool:
    """RocksDB could not lock the store's LOCK file ("While lock file: .../LOCK: Resource
    temporarily unavailable" from another process, "lock hold by current process ...:
    .../LOCK: ..." from this one). Not any message with "lock" in it: "block checksum
    mismatch" is a damaged table file; nor a LOCK file it could not open ("while open a
    file for lock: .../LOCK: Too many open files")."""
    text = str(exc)
    return "/LOCK:" in text and "open a file for lock" not in text


# strerror texts (RocksDB's "IO error: ...: <text>") that blame the machine, not the files:
# wiping the store would not help. Not EACCES: a file this process may not read in a
# directory it may write is healed by a wipe.
RESOURCE_ERRORS = (
    "Too many open files",  # EMFILE, and ENFILE's "... in system"
    "No space left on device",
    "Disk quota exceeded",
    "Cannot allocate memory",
    "Read-only file system",
)


def _is_resource_error(exc: object) -> bool:
    text = str(exc)
    return any(error in text for error in RESOURCE_ERRORS)


def read_failure(path: Path, exc: object) -> StoreUnavailable | StoreCorrupted:
    """What a failed open or read of the store at ``path`` means: the machine lacks a
    resource (StoreUnavailable), or the files are damaged (StoreCorrupted)."""
    if _is_resource_error(exc):
        return StoreUnavailable(path, exc)
    return StoreCorrupted(path, exc)


class RocksStore:
    """A StateStore over one rocksdict database directory, with a transaction overlay."""

    def __init__(self, db: Rdict, path: Path) -> None:
        self._db = db
        self.path = path
        # key -> (value or None for a delete, logged)
        self._overlay: dict[bytes, tuple[bytes | None, bool]] = {}
        self._sorted: list[bytes] = []
        self._sorted_stale = False
        self._undo_buffer: list[tuple[bytes, tuple[bytes | None, bool] | None]] = []
        self._undo: list[tuple[bytes, tuple[bytes | None, bool] | None]] | None = None
        self.max_logged_bytes: int | None = None  # a logged record over it: StateTooLarge

    # -- lifecycle ------------------------------------------------------------------------
    @classmethod
    def open(cls, path: Path) -> RocksStore:
        """Open (creating) the store at ``path``; a store that fails to open is wiped.

        A lock held by another live process (or a handle of this one still open) is not a
        corrupt store: that raises StateError. Nor is a store the machine lacks a resource
        to open (too many open files, say): that raises StoreUnavailable.
        """
        try:
            return cls(cls._open_db(path), path)
        except Exception as exc:
            if _is_lock_error(exc):
                raise StateError(f"state store {path} is locked: {exc}") from exc
            if _is_resource_error(exc):
                raise StoreUnavailable(path, exc) from exc
            shutil.rmtree(path, ignore_errors=True)
            try:
                return cls(cls._open_db(path), path)
            except Exception as again:
                raise StateError(f"state store {path} cannot be opened: {again}") from again

    @staticmethod
    def _open_db(path: Path) -> Rdict:
        path.mkdir(parents=True, exist_ok=True)
        # The default column family's options are given too: otherwise rocksdict reopens an
        # existing store with the ones in its OPTIONS file (the write buffer it was created
        # with, and no Bloom filters, which that file does not keep).
        return Rdict(str(path), _options(), column_families={"default": _options()})

    def close(self) -> None:
        """Drop the overlay and close the database (releasing its lock)."""
        self.discard()
        self._db.close()

    def wipe(self) -> RocksStore:
        """Delete the whole directory and return a fresh empty store at the same path."""
        self.close()
        shutil.rmtree(self.path, ignore_errors=True)
        return RocksStore.open(self.path)

    # -- reads ----------------------------------------------------------------------------
    def get(self, key: bytes) -> bytes | None:
        entry = self._overlay.get(key)
        if entry is not None:
            return entry[0]
        return self._read(key)

    def _read(self, key: bytes) -> bytes | None:
        try:
            value: bytes | None = self._db.get(key)
        except Exception as exc:
            raise read_failure(self.path, exc) from exc
        return value

    def range(self, start: bytes, end: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        """Pairs with ``start <= key < end`` in key order (``end=None``: to the last key).

        The overlay part is a snapshot taken at the call, so writes made while iterating do
        not show up in this scan (they do in the next one).
        """
        pending = self._overlay_slice(start, end)
        return self._merge(pending, start, end)

    def prefix(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Pairs whose key starts with ``prefix``, in key order."""
        return self.range(prefix, prefix_end(prefix))

    def _overlay_slice(self, start: bytes, end: bytes | None) -> list[tuple[bytes, bytes | None]]:
        if not self._overlay:
            return []
        if self._sorted_stale:
            self._sorted = sorted(self._overlay)
            self._sorted_stale = False
        lo = bisect.bisect_left(self._sorted, start)
        hi = len(self._sorted) if end is None else bisect.bisect_left(self._sorted, end)
        return [(k, self._overlay[k][0]) for k in self._sorted[lo:hi]]

    def _merge(
        self, pending: list[tuple[bytes, bytes | None]], start: bytes, end: bytes | None
    ) -> Iterator[tuple[bytes, bytes]]:
        it = self._db.iter()
        try:
            it.seek(start)
            i = 0
            while True:
                db_key: bytes | None = None
                if it.valid():
                    db_key = it.key()
                    if end is not None and db_key >= end:
                        db_key = None
                if i < len(pending) and (db_key is None or pending[i][0] <= db_key):
                    key, value = pending[i]
                    i += 1
                    if db_key == key:
                        it.next()
                    if value is not None:
                        yield key, value
                elif db_key is not None:
                    yield db_key, it.value()
                    it.next()
                else:
                    break
            self._check(it)  # an iterator stops early, silently, at a damaged block
        finally:
            del it

    def _check(self, it: object) -> None:
        try:
            it.status()  # type: ignore[attr-defined]
            return
        except Exception as exc:
            error = str(exc)
        # raised without the iterator's frames in its traceback: a live iterator would keep
        # the database open (and locked) while the processor wipes it
        del it
        raise read_failure(self.path, error)

    # -- writes ---------------------------------------------------------------------------
    def put(self, key: bytes, value: bytes, *, logged: bool = True) -> None:
        limit = self.max_logged_bytes
        if logged and limit is not None and len(key) + len(value) > limit:
            raise StateTooLarge(
                f"the state record {key[:200]!r} would be {len(key) + len(value):,} bytes; "
                f"the limit is {limit:,} (SCHEDULERSTREAM_MAX_RECORD_BYTES)"
            )
        self._write(key, value, logged)

    def delete(self, key: bytes, *, logged: bool = True) -> None:
        self._write(key, None, logged)

    def _write(self, key: bytes, value: bytes | None, logged: bool) -> None:
        if key.startswith(META_PREFIX):
            raise ValueError(f"keys starting with {META_PREFIX!r} are reserved for the runtime")
        previous = self._overlay.get(key)
        if self._undo is not None:
            self._undo.append((key, previous))
        if previous is None:
            self._sorted_stale = True
        else:
            logged = logged or previous[1]
        self._overlay[key] = (value, logged)

    # -- transaction overlay --------------------------------------------------------------
    def pending(self) -> dict[bytes, tuple[bytes | None, bool]]:
        """The overlay: key -> (value or None, logged). Read-only by convention."""
        return self._overlay

    def logged_changes(self) -> Iterator[tuple[bytes, bytes | None]]:
        """The overlay entries that go to the changelog."""
        return ((k, v) for k, (v, logged) in self._overlay.items() if logged)

    def has_pending(self) -> bool:
        return bool(self._overlay)

    def savepoint(self) -> None:
        """Start recording overlay changes so ``rollback`` can undo them (one record's work)."""
        if self._undo is None:
            self._undo = self._undo_buffer
        self._undo.clear()

    def rollback(self) -> None:
        """Undo the overlay changes since ``savepoint``."""
        undo, self._undo = self._undo or [], None
        for key, previous in reversed(undo):
            if previous is None:
                del self._overlay[key]
                self._sorted_stale = True
            else:
                self._overlay[key] = previous
        undo.clear()

    def mark(self) -> int:
        """A point within the savepoint that ``rollback_to`` returns to (one item's work in a
        callback that does several)."""
        return len(self._undo) if self._undo is not None else 0

    def rollback_to(self, mark: int) -> None:
        """Undo the overlay changes made since ``mark`` (the savepoint stays open)."""
        undo = self._undo or []
        while len(undo) > mark:
            key, previous = undo.pop()
            if previous is None:
                del self._overlay[key]
                self._sorted_stale = True
            else:
                self._overlay[key] = previous

    def release(self) -> None:
        """Keep the changes since ``savepoint``."""
        if self._undo is not None:
            self._undo.clear()
            self._undo = None

    def discard(self) -> None:
        """Drop the overlay (the transaction was aborted)."""
        self._overlay.clear()
        self._sorted = []
        self._sorted_stale = False
        self._undo = None

    def flush(self, changelog_offset: int, written_us: int | None = None) -> None:
        """Write the overlay and ``changelog_offset`` (and ``written_us``: the store is current
        at that instant) in one WriteBatch, then drop the overlay."""
        batch = WriteBatch(raw_mode=True)
        for key, (value, _logged) in self._overlay.items():
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, value)
        batch.put(OFFSET_KEY, _OFFSET.pack(changelog_offset))
        if written_us is not None:
            batch.put(WRITTEN_KEY, _OFFSET.pack(written_us))
        self._db.write(batch)
        self.discard()

    def compact(self) -> None:
        """Compact the whole database (what is left of deleted and overwritten keys goes)."""
        self._db.compact_range(None, None)

    # -- runtime metadata -----------------------------------------------------------------
    def changelog_offset(self) -> int | None:
        """The last changelog offset written into the store; NO_OFFSET if none; None if the
        stored value is missing or corrupt."""
        try:
            raw = self._read(OFFSET_KEY)
        except StoreCorrupted:
            return None  # unreadable: restored cold
        if raw is None or len(raw) != _OFFSET.size:
            return None
        offset: int = _OFFSET.unpack(raw)[0]
        return offset if offset >= NO_OFFSET else None

    def written_us(self) -> int | None:
        """When the store was last known to be current (µs, see ``Restorer``); None when it
        was never recorded (a store of an older version); 0, as old as can be, when the
        record is unreadable."""
        try:
            raw = self._read(WRITTEN_KEY)
        except StoreCorrupted:
            return 0
        if raw is None:
            return None
        if len(raw) != _OFFSET.size:
            return 0
        written: int = _OFFSET.unpack(raw)[0]
        return written

    def source(self) -> bytes | None:
        """Which changelog (topic, partition, topic id) this store caches."""
        try:
            return self._read(SOURCE_KEY)
        except StoreCorrupted:
            return None  # unreadable: does not match, restored cold

    def set_source(self, source: bytes, written_us: int) -> None:
        """Record the changelog this store caches (with a NO_OFFSET position), from
        ``written_us`` on."""
        batch = WriteBatch(raw_mode=True)
        batch.put(SOURCE_KEY, source)
        batch.put(OFFSET_KEY, _OFFSET.pack(NO_OFFSET))
        batch.put(WRITTEN_KEY, _OFFSET.pack(written_us))
        try:
            self._db.write(batch)
        except Exception as exc:
            raise StoreWriteFailed(self.path, exc) from exc

    def is_empty(self) -> bool:
        """True when the database holds no key at all (the overlay is not looked at)."""
        it = self._db.iter()
        try:
            it.seek_to_first()
            if it.valid():
                return False
            try:
                it.status()
            except Exception as exc:
                if _is_resource_error(exc):
                    raise StoreUnavailable(self.path, exc) from None
                return False  # damaged: not known to be empty (so it is wiped)
            return True
        finally:
            del it
