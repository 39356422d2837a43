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
from fastavro.validation import validate

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
        f"schema {name} changed: run schedulerstream.codec.freeze_history() and commit history/"
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
    """Samples projected onto an old writer's fields (old writers have fewer fields), those it
    could write (a sample using a newer nested field, like a list of cron expressions, not)."""
    fields = {f["name"] for f in writer["fields"]}
    projected = [{k: v for k, v in r.items() if k in fields} for r in sample_records(name)]
    writable = [r for r in projected if validate(r, writer, raise_errors=False)]
    assert writable, f"no sample of {name} fits an old writer"
    return writable


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], capture_output=True, text=True, cwd=SCHEMA_DIR)
    except OSError:
        return None
    return done.stdout if done.returncode == 0 else None


def _committed_schema_sets(tmp_path: Path) -> list[Path]:
    """``schemas/*.avsc`` as of each commit that changed one of them, each in its own folder
    (a type nested in another, like ScheduleSpec in JobDefinition, changes the outer one too)."""
    revs = (_git("log", "--format=%H", "--", ":(glob)*.avsc") or "").split()
    folders = []
    for rev in revs:
        names = (_git("ls-tree", "--name-only", rev) or "").split()
        folder = tmp_path / rev
        folder.mkdir()
        for name in names:
            if name.endswith(".avsc"):
                text = _git("show", f"{rev}:./{name}")
                if text is not None:
                    (folder / Path(name).name).write_text(text)
        folders.append(folder)
    return folders


def test_every_committed_version_is_kept_in_history(tmp_path: Path) -> None:
    """Each schema set committed before stays decodable: its fingerprints are in history/."""
    checked = 0
    for folder in _committed_schema_sets(tmp_path):
        for name in EVENT_TYPES:
            if not (folder / f"io.schedulerstream.{name}.avsc").exists():
                continue  # a type added later
            try:
                old = Codec(folder).current[name]
            except Exception:  # an older set the codec of its day could not load either
                continue
            assert old.fingerprint in CODEC.by_fingerprint, (folder.name, name)
            checked += 1
    assert checked or not (SCHEMA_DIR.parent / ".git").exists()
