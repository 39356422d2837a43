"""Avro single-object codec: round trips, wire format, errors, schema history compatibility."""

from __future__ import annotations

import io
import json
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_reader, schemaless_writer
from fastavro.schema import to_parsing_canonical_form

from schedulerstream.codec import EVENT_TYPES, HISTORY_DIR, SCHEMA_DIR, Codec, schema_fingerprint
from schedulerstream.errors import CodecError

from .samples import sample_records

CODEC = Codec()


@pytest.mark.parametrize("name", EVENT_TYPES)
def test_every_event_round_trips(name: str) -> None:
    for record in sample_records(name):
        data = CODEC.encode(name, record)
        got_name, decoded = CODEC.decode(data)
        assert got_name == name
        assert decoded == record


def test_wire_format_is_single_object_encoding() -> None:
    record = sample_records("RunRevoked")[0]
    data = CODEC.encode("RunRevoked", record)
    assert data[:2] == b"\xc3\x01"
    parsed = CODEC.current["RunRevoked"].parsed
    # The fingerprint is CRC-64-AVRO (Rabin) of the canonical form, little-endian.
    assert data[2:10] == schema_fingerprint(parsed)
    assert data[2:10] == struct.pack("<Q", _rabin(to_parsing_canonical_form(parsed).encode()))
    body = schemaless_reader(io.BytesIO(data[10:]), parsed, None)
    assert body == record


def _rabin(data: bytes) -> int:
    """The Avro spec's reference CRC-64-AVRO, written out independently of fastavro."""
    empty = 0xC15D213AA4D7A795
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (empty & -(fp & 1))
        table.append(fp)
    fp = empty
    for byte in data:
        fp = (fp >> 8) ^ table[(fp ^ byte) & 0xFF]
    return fp


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (None, "tombstone"),
        (b"", "marker"),
        (b'{"tenant": "a"}', "marker"),
        (b"\xc3\x01" + b"\x00" * 8 + b"\x02", "unknown schema fingerprint"),
    ],
)
def test_bad_bytes_raise_codec_error(data: bytes | None, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        CODEC.decode(data)


def test_corrupt_body_raises_codec_error() -> None:
    data = CODEC.encode("RunRevoked", sample_records("RunRevoked")[0])
    with pytest.raises(CodecError, match="corrupt"):
        CODEC.decode(data[:14])


def test_decode_as_insists_on_the_type() -> None:
    data = CODEC.encode("RunRevoked", sample_records("RunRevoked")[0])
    with pytest.raises(CodecError, match="expected a RunTriggered"):
        CODEC.decode_as("RunTriggered", data)


def test_encode_rejects_records_that_do_not_match() -> None:
    with pytest.raises(CodecError, match="RunRevoked"):
        CODEC.encode("RunRevoked", {"run_id": 1})


@pytest.mark.parametrize("name", EVENT_TYPES)
def test_current_schema_is_frozen_in_history(name: str) -> None:
    fp = CODEC.current[name].fingerprint.hex()
    assert (HISTORY_DIR / name / f"{fp}.avsc").exists(), (
        f"schema {name} changed: run `schedulerstream schemas freeze` and commit history/"
    )


@pytest.mark.parametrize("name", EVENT_TYPES)
def test_every_historical_writer_is_readable_by_the_current_reader(name: str) -> None:
    for path in sorted((HISTORY_DIR / name).glob("*.avsc")):
        writer = parse_schema(json.loads(path.read_text()))
        for record in _records_for_writer(name, writer):
            buffer = io.BytesIO()
            schemaless_writer(buffer, writer, record)
            data = b"\xc3\x01" + schema_fingerprint(writer) + buffer.getvalue()
            got_name, decoded = CODEC.decode(data)
            assert got_name == name, path
            assert set(record) <= set(decoded)


def _records_for_writer(name: str, writer: Any) -> list[dict[str, Any]]:
    """Samples projected onto an old writer's fields (old writers have fewer fields)."""
    fields = {f["name"] for f in writer["fields"]}
    return [{k: v for k, v in r.items() if k in fields} for r in sample_records(name)]


def _committed_versions(path: Path) -> list[str]:
    try:
        revs = subprocess.run(
            ["git", "log", "--format=%H", "--", str(path)],
            capture_output=True,
            text=True,
            check=True,
            cwd=SCHEMA_DIR,
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return []
    texts = []
    for rev in revs:
        rel = path.relative_to(SCHEMA_DIR.parent)
        shown = subprocess.run(
            ["git", "show", f"{rev}:{rel}"], capture_output=True, text=True, cwd=SCHEMA_DIR
        )
        if shown.returncode == 0:
            texts.append(shown.stdout)
    return texts


@pytest.mark.parametrize("name", EVENT_TYPES)
def test_every_committed_version_is_kept_in_history(name: str, tmp_path: Path) -> None:
    """Each schema set committed before stays decodable: its fingerprint is in history/."""
    path = SCHEMA_DIR / f"io.schedulerstream.{name}.avsc"
    for text in _committed_versions(path):
        old_dir = tmp_path / "old"
        old_dir.mkdir(exist_ok=True)
        for file in SCHEMA_DIR.glob("*.avsc"):
            (old_dir / file.name).write_text(file.read_text())
        (old_dir / path.name).write_text(text)
        try:
            old = Codec(old_dir).current[name]
        except Exception:  # an old version whose dependencies changed with it
            continue
        assert old.fingerprint in CODEC.by_fingerprint
