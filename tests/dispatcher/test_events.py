"""AttemptEvents written by hand are byte for byte what the codec writes, and the writer falls
back to the codec when the schema is not the layout it writes."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from schedulerstream.codec import SCHEMA_DIR, Codec, default_codec
from schedulerstream.dispatcher.events import EventWriter
from schedulerstream.dispatcher.records import RunRecord

CODEC = default_codec()


def a_run(run_id: str, tenant: str, job_id: str, scheduled_at_us: int, attempt: int) -> RunRecord:
    run = RunRecord(run_id, tenant, job_id, scheduled_at_us, 0, 0, "scheduled", None, 1, None)
    run.attempt = attempt
    return run


RUNS = [
    a_run("acme/job-1@1767225600000000", "acme", "job-1", 1_767_225_600_000_000, 1),
    a_run("t\u00e9/\u2603@0", "t\u00e9", "\u2603" * 40, 0, 0),
    a_run("x/" + "j" * 300 + "@-1", "x", "j" * 300, -1, 70_000),
]
DETAILS: list[dict[str, Any]] = [
    {},
    {"reason": "HTTP 200", "status_code": 200, "duration_us": 1234},
    {"reason": "", "status_code": 0, "retry_at_us": -(1 << 62), "duration_us": 0},
    {"reason": "r\u00e9ason " * 100, "retry_at_us": 1 << 62},
]


@pytest.mark.parametrize(("run", "detail"), list(itertools.product(RUNS, DETAILS)))
def test_each_event_is_the_codecs_bytes(run: RunRecord, detail: dict[str, Any]) -> None:
    writer = EventWriter(CODEC, "attempts", "dispatcher-\u00e9-1")
    assert writer.fast
    for kind, at_us in [("accepted", 0), ("started", 1 << 53), ("succeeded", -7)]:
        value = writer.value(run, kind, at_us, **detail)
        assert value == writer.encoded(run, kind, at_us, **detail)
        name, record = CODEC.decode(value)
        assert (name, record["run_id"], record["kind"], record["at_us"]) == (
            "AttemptEvent", run.run_id, kind, at_us,
        )  # fmt: skip


def test_a_schema_with_another_layout_is_written_by_the_codec(tmp_path: Path) -> None:
    schemas = tmp_path / "schemas"
    shutil.copytree(SCHEMA_DIR, schemas)
    path = schemas / "io.schedulerstream.AttemptEvent.avsc"
    schema = json.loads(path.read_text())
    schema["fields"].insert(5, {"name": "extra", "type": "string", "default": "x"})
    path.write_text(json.dumps(schema))
    codec = Codec(schemas)
    writer = EventWriter(codec, "attempts", "d-1")
    assert not writer.fast
    value = writer.value(RUNS[0], "started", 5, reason="go")
    assert codec.decode(value)[1]["extra"] == "x"
    assert codec.decode(value)[1]["reason"] == "go"
