"""Store key layout of a scheduler task.

- ``job/{job key}`` → SchedulerJob (changelogged), rewritten at every emission; its
  ``definition`` holds a reference to ``def/{job key}`` (``definition_ref``), or, written by
  an earlier version, the definition itself
- ``def/{job key}`` → the job's JobDefinition (changelogged), written when a mutation sets it
- ``due/{not_before: 8-byte big-endian µs}{hash: 4 bytes}{job key}`` → b"" (derived timer index;
  the hash interleaves tenants within one instant so chunked scans stay fair)
- ``bf/{job key}`` → b"" (derived: jobs with an active backfill)
- ``bf0`` → b"" (derived: a live key right after the ``bf/`` range, so a scan of that range
  stops there rather than seeking through the ``due/`` keys a burst deleted, until compaction)
"""

from __future__ import annotations

import struct
import zlib

JOB_PREFIX = b"job/"
JOB_END = b"job0"  # the first key after every job/ key
DEF_PREFIX = b"def/"
DUE_PREFIX = b"due/"
BACKFILL_PREFIX = b"bf/"
BACKFILL_END = b"bf0"  # the first key after every bf/ key
_BE64 = struct.Struct(">Q")
_BE32 = struct.Struct(">I")
_OFFSET = 1 << 63  # makes signed instants sort as unsigned bytes


def job_store_key(job_key: str) -> bytes:
    return JOB_PREFIX + job_key.encode()


def def_store_key(job_key: str) -> bytes:
    return DEF_PREFIX + job_key.encode()


def job_key_of(store_key: bytes) -> str:
    return store_key[len(JOB_PREFIX) :].decode()


def interleave_hash(job_key: str) -> int:
    return zlib.crc32(job_key.encode())


def due_key(not_before_us: int, job_key: str) -> bytes:
    return (
        DUE_PREFIX
        + _BE64.pack(not_before_us + _OFFSET)
        + _BE32.pack(interleave_hash(job_key))
        + job_key.encode()
    )


def moved_due_key(key: bytes, not_before_us: int) -> bytes:
    """``key``'s job at another instant (its hash and job key reused)."""
    start = len(DUE_PREFIX)
    return DUE_PREFIX + _BE64.pack(not_before_us + _OFFSET) + key[start + 8 :]


def due_upper_bound(until_us: int) -> bytes:
    """The first key after every due entry with not_before ≤ ``until_us``."""
    return DUE_PREFIX + _BE64.pack(until_us + 1 + _OFFSET)


def parse_due_key(key: bytes) -> tuple[int, str]:
    start = len(DUE_PREFIX)
    (raw,) = _BE64.unpack_from(key, start)
    return raw - _OFFSET, key[start + 12 :].decode()


def backfill_key(job_key: str) -> bytes:
    return BACKFILL_PREFIX + job_key.encode()
