"""Avro single-object encoding (marker C3 01, CRC-64-AVRO fingerprint, body) for every event.

Schemas live in ``schemas/`` (one named type per file). Every released version of a top-level
schema is kept, fully expanded, in ``schemas/history/<Name>/<fingerprint>.avsc`` so records
written by an older writer are still read (resolved to the current reader schema).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from fastavro import parse_schema, schemaless_reader, schemaless_writer
from fastavro.schema import fingerprint, load_schema, to_parsing_canonical_form

from schedulerstream import resources
from schedulerstream.errors import CodecError

SCHEMA_DIR = resources.schema_dir()
HISTORY_DIR = SCHEMA_DIR / "history"
NAMESPACE = "io.schedulerstream"
MARKER = b"\xc3\x01"
EVENT_TYPES = (
    "JobDefinition",
    "Command",
    "RunTriggered",
    "RunRevoked",
    "AttemptEvent",
    "RunState",
    "Rejected",
    "SchedulerJob",
)


@dataclass(frozen=True)
class EventSchema:
    """One top-level schema: its short name, parsed form and 8-byte fingerprint."""

    name: str
    parsed: Any
    fingerprint: bytes


def schema_fingerprint(parsed: Any) -> bytes:
    """The little-endian CRC-64-AVRO fingerprint of a parsed schema, as written on the wire."""
    # fastavro returns the hex of the little-endian bytes, which is the wire order.
    return bytes.fromhex(fingerprint(to_parsing_canonical_form(parsed), "CRC-64-AVRO"))


def _event(name: str, parsed: Any) -> EventSchema:
    return EventSchema(name, parsed, schema_fingerprint(parsed))


class Codec:
    """Encodes current-schema events and decodes events of any known writer schema."""

    def __init__(self, schema_dir: Path = SCHEMA_DIR) -> None:
        self.current: dict[str, EventSchema] = {}
        self.by_fingerprint: dict[bytes, EventSchema] = {}
        for name in EVENT_TYPES:
            parsed = load_schema(str(schema_dir / f"{NAMESPACE}.{name}.avsc"))
            event = _event(name, parsed)
            self.current[name] = event
            self.by_fingerprint[event.fingerprint] = event
        history = schema_dir / "history"
        for name in EVENT_TYPES:
            for path in sorted((history / name).glob("*.avsc")):
                old = _event(name, parse_schema(json.loads(path.read_text())))
                self.by_fingerprint.setdefault(old.fingerprint, old)

    def encode(self, name: str, record: dict[str, Any]) -> bytes:
        """Single-object encoding of ``record`` with the current schema ``name``."""
        schema = self.current[name]
        buffer = io.BytesIO()
        buffer.write(MARKER)
        buffer.write(schema.fingerprint)
        try:
            schemaless_writer(buffer, schema.parsed, record)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise CodecError(f"{name}: record does not match the schema: {exc}") from exc
        return buffer.getvalue()

    def decode(self, data: bytes | None) -> tuple[str, dict[str, Any]]:
        """Return (schema name, record) of single-object encoded ``data``."""
        if data is None:
            raise CodecError("no value (tombstone) where an event was expected")
        if len(data) < 10 or data[:2] != MARKER:
            raise CodecError("not Avro single-object encoding (missing C3 01 marker)")
        writer = self.by_fingerprint.get(bytes(data[2:10]))
        if writer is None:
            raise CodecError(f"unknown schema fingerprint {bytes(data[2:10]).hex()}")
        reader = self.current[writer.name]
        # Same schema: read without resolution (several times faster).
        resolve = None if reader is writer else reader.parsed
        try:
            record = schemaless_reader(
                io.BytesIO(data[10:]), writer.parsed, resolve, return_record_name=True
            )
        except Exception as exc:  # fastavro raises assorted errors on corrupt bodies
            raise CodecError(f"{writer.name}: corrupt Avro body: {exc}") from exc
        if not isinstance(record, dict):
            raise CodecError(f"{writer.name}: body is not a record")
        return writer.name, record

    def decode_as(self, name: str, data: bytes | None) -> dict[str, Any]:
        """Decode and insist on the schema ``name``."""
        got, record = self.decode(data)
        if got != name:
            raise CodecError(f"expected a {name} event, got {got}")
        return record

    def expanded_schema(self, name: str) -> Any:
        """The fully expanded current schema (as stored in history)."""
        return self.current[name].parsed


@cache
def default_codec() -> Codec:
    return Codec()


def freeze_history(schema_dir: Path = SCHEMA_DIR) -> list[Path]:
    """Record the canonical form of every current schema under ``history/`` (new files only)."""
    written = []
    for name, event in Codec(schema_dir).current.items():
        path = schema_dir / "history" / name / f"{event.fingerprint.hex()}.avsc"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(to_parsing_canonical_form(event.parsed) + "\n")
            written.append(path)
    return written


# -- Avro binary by hand, for the hot records (each writer checks itself against ``encode``) --
def _varint(n: int) -> bytes:
    z = ((n << 1) ^ (n >> 63)) & 0xFFFF_FFFF_FFFF_FFFF
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


_SMALL = [_varint(n) for n in range(8192)]  # counts, lengths, small numbers
_INSTANTS_LIMIT = 4096
_instants: dict[int, bytes] = {}


def long_bytes(n: int) -> bytes:
    """An Avro long (or int): zigzag, then a little-endian base-128 varint."""
    if 0 <= n < 8192:
        return _SMALL[n]
    return _varint(n)


def instant_bytes(n: int) -> bytes:
    """``long_bytes`` of an instant (remembered: the runs of a burst share their instants)."""
    found = _instants.get(n)
    if found is None:
        if len(_instants) >= _INSTANTS_LIMIT:
            _instants.clear()
        found = _instants[n] = long_bytes(n)
    return found


def string_bytes(text: str) -> bytes:
    """An Avro string: its UTF-8 length, then the bytes."""
    data = text.encode()
    return long_bytes(len(data)) + data


def read_long(data: bytes, i: int) -> tuple[int, int]:
    """The Avro long (or int) at ``data[i]`` and the index past it: ``long_bytes`` read back.
    Raises IndexError past the end, ValueError on more than ten bytes."""
    b = data[i]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), i + 1
    z, shift, end = b & 0x7F, 7, i + 10
    i += 1
    while i < end:
        b = data[i]
        i += 1
        z |= (b & 0x7F) << shift
        if b < 0x80:
            return (z >> 1) ^ -(z & 1), i
        shift += 7
    raise ValueError("an Avro long of more than ten bytes")
