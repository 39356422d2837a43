"""Decode and validate the projector's run-keyed inputs (cron.runs and cron.attempts).

Anything malformed raises RejectedRecord: the runtime sends the record to cron.rejected with
the reason and goes on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from schedulerstream.codec import Codec
from schedulerstream.errors import CodecError, SchedulerStreamError
from schedulerstream.ids import job_key_of_run
from schedulerstream.ingest import RejectedRecord
from schedulerstream.projector.runstate import KINDS, run_id_suffix_ok
from schedulerstream.runtime.copartition import check_home_partition

RUN_EVENTS = ("RunTriggered", "RunRevoked")
MAX_TEXT = 4096


@dataclass(frozen=True, slots=True)
class RunEvent:
    """One validated event about a run: its schema name and record."""

    name: str  # RunTriggered | RunRevoked | AttemptEvent
    run_id: str
    job_key: str
    tenant: str
    job_id: str
    record: dict[str, Any]


def clean_text(value: str | None) -> str | None:
    """Free text as the read model stores it: no NUL (PostgreSQL refuses it), bounded."""
    if value is None:
        return None
    return value.replace("\x00", "\ufffd")[:MAX_TEXT]


def decode_run_event(
    codec: Codec, key: bytes | None, value: bytes | None, partition: int, partitions: int,
    expected: tuple[str, ...],
) -> RunEvent:  # fmt: skip
    """The event in a run-keyed record; raises RejectedRecord for anything malformed."""
    if value is None:
        raise RejectedRecord("a tombstone where a run event was expected")
    try:
        name, record = codec.decode(value)
    except CodecError as exc:
        raise RejectedRecord(str(exc)) from exc
    if name not in expected:
        raise RejectedRecord(f"expected {' or '.join(expected)}, got {name}")
    run_id = record["run_id"]
    if key is None or key != run_id.encode():
        raise RejectedRecord(f"record key {key!r} is not the run id {run_id!r}")
    try:
        job_key = job_key_of_run(run_id)
    except SchedulerStreamError as exc:
        raise RejectedRecord(f"bad run id: {exc}") from exc
    if not run_id_suffix_ok(run_id.partition("@")[2]):
        raise RejectedRecord(f"bad run id {run_id!r}: not instant, manual-id or instant~id")
    tenant, job_id = job_key.split("/", 1)
    if (record["tenant"], record["job_id"]) != (tenant, job_id):
        raise RejectedRecord(f"tenant/job_id of the value do not match the run id {run_id!r}")
    check_home_partition(job_key, partition, partitions, record=run_id)
    if name == "AttemptEvent":
        _check_attempt(record)
    for text in ("reason", "trigger"):
        if text in record:
            record[text] = clean_text(record[text])
    return RunEvent(name, run_id, job_key, tenant, job_id, record)


def _check_attempt(record: dict[str, Any]) -> None:
    if record["kind"] not in KINDS:
        raise RejectedRecord(f"unknown attempt kind {record['kind']!r}")
    if record["attempt"] < 0:
        raise RejectedRecord(f"attempt must be >= 0, got {record['attempt']}")
