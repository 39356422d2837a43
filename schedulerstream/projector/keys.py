"""Keys of the projector's state store (changelogged to ``projector-state``).

- ``r/{run id}`` → RunState JSON
- ``j/{job key}`` → JobDef JSON (the latest definition)
- ``s/{job key}`` → JobRuns JSON (count, newest run, retention floor)
- ``i/{job key}\\0{scheduled_at, 8 bytes big-endian, offset}{run id}`` → empty: the runs of
  a job in order (not logged: rebuilt from ``r/`` records on restore)
- ``m/readmodel`` → identity of the read model this partition was last copied into
"""

from __future__ import annotations

import struct

RUN_PREFIX = b"r/"
DEF_PREFIX = b"j/"
RUNS_PREFIX = b"s/"
INDEX_PREFIX = b"i/"
SYNCED_KEY = b"m/readmodel"
_INSTANT = struct.Struct(">Q")
_OFFSET = 1 << 63


def run_key(run_id: str) -> bytes:
    return RUN_PREFIX + run_id.encode()


def def_key(job_key: str) -> bytes:
    return DEF_PREFIX + job_key.encode()


def runs_key(job_key: str) -> bytes:
    return RUNS_PREFIX + job_key.encode()


def index_prefix(job_key: str) -> bytes:
    return INDEX_PREFIX + job_key.encode() + b"\0"


def index_key(job_key: str, scheduled_at_us: int, run_id: str) -> bytes:
    return index_prefix(job_key) + _INSTANT.pack(scheduled_at_us + _OFFSET) + run_id.encode()


def parse_index_key(key: bytes, job_key: str) -> tuple[int, str]:
    """(scheduled_at_us, run id) of an index key of ``job_key``."""
    rest = key[len(index_prefix(job_key)) :]
    return _INSTANT.unpack(rest[:8])[0] - _OFFSET, rest[8:].decode()
