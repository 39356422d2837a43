"""Run records as JSON: orjson's bytes read back, and so do the strings orjson refuses."""

from __future__ import annotations

import json

from schedulerstream.dispatch_spec import DispatchSpec
from schedulerstream.dispatcher import records as rk
from schedulerstream.dispatcher.records import RunRecord

SPEC = DispatchSpec('{"type":"http","url":"https://x.test/é"}', 2.5, "allow", "at_least_once",
                    (3, 1.0, 2.0, 60.0, 1e-05))  # fmt: skip


def record(error: str | None = None) -> RunRecord:
    return RunRecord("acme/j@20260101T000000Z", "acme", "j", 1, 2, 3, "scheduled", '{"a":"ü"}',
                     4, SPEC, attempt=2, last_error=error)  # fmt: skip


def test_a_record_round_trips() -> None:
    run = record("HTTP 500: naïve")
    raw = run.to_bytes()
    assert RunRecord.from_bytes(raw) == run  # as it was saved (not parsed again)
    assert RunRecord.from_bytes(raw) == run  # parsed


def test_a_record_reads_back_as_saved_whatever_changed_in_the_object_since() -> None:
    run = record()
    raw = run.to_bytes()
    run.attempt, run.last_error = 9, "changed after the save"
    read = RunRecord.from_bytes(bytes(bytearray(raw)))  # a copy, as the store returns it
    assert read is not run
    assert (read.attempt, read.last_error) == (2, None)
    read.attempt = 5  # the copy is its own
    assert RunRecord.from_bytes(raw).attempt == 2


def test_a_lone_surrogate_is_written_and_read_back() -> None:
    run = record("bad \ud800 text")  # orjson refuses it: the json fallback writes it escaped
    raw = run.to_bytes()
    assert b"\\ud800" in raw
    assert RunRecord.from_bytes(raw) == run


def test_records_written_by_the_json_encoder_are_read() -> None:
    run = record("é")
    fields = json.loads(run.to_bytes())
    written = json.dumps(fields, separators=(",", ":")).encode()  # the bytes before orjson
    assert RunRecord.from_bytes(written) == run
    assert rk.decode_json(json.dumps({"version": 1, "reason": "\ud800"}).encode())["version"] == 1
