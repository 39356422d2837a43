"""The scheduler's own encoders write exactly what the codec writes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from schedulerstream.codec import SCHEMA_DIR, Codec, default_codec, long_bytes
from schedulerstream.errors import CodecError
from schedulerstream.scheduler.records import FastRecords, run_parts
from schedulerstream.scheduler.state import BackfillCursor, JobState, PendingRun

STATES = [
    JobState(1, b"", False, 0),
    JobState(1_733_000_000_000_000, b"d" * 139, False, 1_733_000_000_000_000,
             1_733_003_600_000_000, 1_733_003_600_250_000, 1_733_003_590_250_000, 7),
    JobState((1 << 63) - 1, b"\x00" * 70_000, True, -(1 << 63), -1, -64, -65, 8191,
             [PendingRun("t/j@20240101T000000Z", 1 << 50, 1 << 50), PendingRun("é/x@1", -3, 0)],
             [f"req-{i}" for i in range(64)],
             [BackfillCursor("b1", 5, 1 << 45, True, 8192), BackfillCursor("b2", -1, 0, False)]),
]  # fmt: skip


@pytest.mark.parametrize("state", STATES)
def test_a_job_record_is_the_codecs(state: JobState) -> None:
    codec = default_codec()
    fast = FastRecords.for_codec(codec)
    assert fast is not None
    assert fast.job(state) == state.encode(codec)
    assert JobState.decode(codec, fast.job(state)) == state
    assert fast.read_job(state.encode(codec)) == state  # read back by hand too


def test_a_damaged_job_record_is_a_codec_error_naming_it() -> None:
    fast = FastRecords.for_codec(default_codec())
    assert fast is not None
    whole = fast.job(STATES[2])
    for damaged, why in (
        (whole[:-1], "corrupt Avro body"),  # cut short
        (whole[:10] + whole[10:12], "corrupt Avro body"),  # the definition runs past the end
        (whole + b"\x00", "1 bytes after the record"),
        (whole[:10] + b"\xff" * 11, "more than ten bytes"),
        (whole[:10] + b"\x02\x04\xff\xfe", "corrupt Avro body"),  # ends after the definition
    ):
        with pytest.raises(CodecError, match="SchedulerJob") as caught:
            fast.read_job(damaged)
        assert why in str(caught.value)
    with pytest.raises(CodecError, match="unknown schema fingerprint"):
        fast.read_job(b"\xc3\x01" + b"\x00" * 8 + whole[10:])  # not written by a known schema


def test_job_records_sharing_their_timer_fields_read_and_write_as_they_would_alone() -> None:
    """The second read of the same timer bytes is a hit (read_job remembers them), and so
    is the second write of the same timer fields: each state is still the full read's, with
    its own version, definition and lists, and each record the codec's."""
    codec = default_codec()
    fast = FastRecords.for_codec(codec)
    assert fast is not None
    t = 1_733_000_000_000_000
    states = [JobState(t + n, bytes([n]) * (9 + n), False, t, t + 1, t + 2, t + 3, 5)
              for n in range(4)]  # fmt: skip
    states.append(JobState(t, b"d", True, t, None, None, None, 0))
    states.append(JobState(t, b"d", False, t, t + 1, t + 2, t + 3, 5, [PendingRun("a@1", 1, 2)]))
    known = len(fast._timers), len(fast._tails)  # for_codec's own check left some
    for _ in range(2):  # a miss, then a hit (a state with lists is never remembered)
        for state in states:
            assert fast.job(state) == state.encode(codec)
            read = fast.read_job(state.encode(codec))
            assert read == state
            read.pending.append(PendingRun("b@2", 3, 4))  # its lists are its own
    added = len(fast._timers) - known[0], len(fast._tails) - known[1]
    assert added == (2, 2)  # the four's timers, the paused job's
    cut = fast.job(states[0])
    with pytest.raises(CodecError, match="corrupt Avro body"):  # a definition length that
        fast.read_job(cut[:18] + b"\x01" + cut[19:])  # is negative is no hit
    with pytest.raises(CodecError, match="corrupt Avro body"):
        fast.read_job(cut[:18] + b"\x7e" + cut[19:])  # nor one running past the end


@pytest.mark.parametrize("payload", [None, "", '{"k": "é…"}', "x" * 10_000])
@pytest.mark.parametrize("trigger", ["scheduled", "catch_up", "backfill", "manual"])
@pytest.mark.parametrize("spec", ["[]", '["{\\"url\\":\\"https://h.test/é\\"}",30.0]'])
def test_a_run_record_is_the_codecs(payload: str | None, trigger: str, spec: str) -> None:
    """A run carries its dispatch spec and an empty definition (its job's state keeps it)."""
    codec = default_codec()
    fast = FastRecords.for_codec(codec)
    assert fast is not None
    for instant in (0, 63, 64, -1, 1_733_000_000_000_000, (1 << 63) - 2):
        record = {
            "run_id": "tenant-a/job.1@20241130T210000Z", "tenant": "tenant-a",
            "job_id": "job.1", "scheduled_at_us": instant, "not_before_us": instant + 1,
            "emitted_at_us": -instant, "trigger": trigger, "payload_json": payload,
            "job_version": 1_733_000_000_123_456, "job_definition": b"",
            "dispatch_spec_json": spec,
        }  # fmt: skip
        parts = run_parts("tenant-a", "job.1", payload, 1_733_000_000_123_456, spec)
        value = fast.run(record["run_id"], parts, instant, instant + 1, -instant, trigger)
        assert value == codec.encode("RunTriggered", record)


def test_longs_are_zigzag_varints() -> None:
    assert long_bytes(0) == b"\x00"
    assert long_bytes(-1) == b"\x01"
    assert long_bytes(1) == b"\x02"
    assert long_bytes(64) == b"\x80\x01"
    assert long_bytes(-(1 << 63)) == b"\xff" * 9 + b"\x01"


def test_another_job_schema_falls_back_to_the_codec(tmp_path: Path) -> None:
    schemas = tmp_path / "schemas"
    shutil.copytree(SCHEMA_DIR, schemas, ignore=shutil.ignore_patterns("history"))
    path = schemas / "io.schedulerstream.SchedulerJob.avsc"
    schema = json.loads(path.read_text())
    schema["fields"].append({"name": "added", "type": "long", "default": 0})
    path.write_text(json.dumps(schema))
    assert FastRecords.for_codec(Codec(schemas)) is None
    assert FastRecords.for_codec(Codec(SCHEMA_DIR)) is not None


def test_a_job_record_of_an_earlier_schema_is_read_by_the_codec(tmp_path: Path) -> None:
    """A record written before the schema gained a field (its fingerprint is the old one):
    the hand-written reader leaves it to the codec, which resolves it."""
    schemas = tmp_path / "schemas"
    shutil.copytree(SCHEMA_DIR, schemas)
    path = schemas / "io.schedulerstream.SchedulerJob.avsc"
    schema = json.loads(path.read_text())
    schema["fields"].append({"name": "added", "type": "long", "default": 0})
    path.write_text(json.dumps(schema))
    newer = Codec(schemas)  # the old schema is in its history
    fast = FastRecords(newer)
    old = STATES[1].encode(default_codec())
    assert fast.read_job(old) == STATES[1]
