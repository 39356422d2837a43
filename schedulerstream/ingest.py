"""Decode and validate records of cron.schedules and cron.commands (Avro or JSON)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError as PydanticValidationError

from schedulerstream.codec import Codec
from schedulerstream.errors import CodecError, SchedulerStreamError, ValidationError
from schedulerstream.errors import RejectedRecord as RejectedRecord  # re-exported for its importers
from schedulerstream.ids import check_request_id, split_job_key
from schedulerstream.limits import RecordLimits
from schedulerstream.model import MAX_PAUSED_REASON, JobDefinition, field_errors


def describe_validation(exc: PydanticValidationError) -> str:
    return "; ".join(f"{field}: {message}" for field, message in field_errors(exc)[:3])


@dataclass(frozen=True, slots=True)
class Upsert:
    job: JobDefinition
    definition: bytes
    record: dict[str, Any]


def decode_schedule(
    codec: Codec,
    key: bytes | None,
    value: bytes,
    timestamp_us: int,
    limits: RecordLimits | None = None,
) -> Upsert:
    """A validated job definition from a cron.schedules value; raises RejectedRecord.

    With ``limits``, a job whose runs would need records over the limits is rejected too."""
    job_key = job_key_from_record_key(key)
    if value[:2] == b"\xc3\x01":
        try:
            record = codec.decode_as("JobDefinition", value)
            job = JobDefinition.from_avro(record)
        except CodecError as exc:
            raise RejectedRecord(str(exc)) from exc
        except PydanticValidationError as exc:
            raise RejectedRecord(f"invalid job definition: {describe_validation(exc)}") from exc
        except ValueError as exc:  # a field no model input can hold (from_avro names it)
            raise RejectedRecord(f"invalid job definition: {exc}") from exc
        definition = value
    else:
        job = _job_from_json(value, timestamp_us)
        record = job.to_avro()
        definition = codec.encode("JobDefinition", record)
    if job.key != job_key:
        raise RejectedRecord(f"record key {job_key!r} does not match the value's {job.key!r}")
    if limits is not None:
        try:
            limits.check_job(job_key, definition, record)
        except ValidationError as exc:
            raise RejectedRecord(f"{exc.field}: {exc.message}") from exc
    return Upsert(job, definition, record)


def _job_from_json(value: bytes, timestamp_us: int) -> JobDefinition:
    try:
        data = json.loads(value)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RejectedRecord(
            f"value is neither Avro single-object encoding nor JSON: {exc}"
        ) from exc
    if not isinstance(data, dict):
        raise RejectedRecord("JSON value must be an object (a job definition)")
    if data.get("version") is None:  # missing or null: the record's timestamp
        data["version"] = timestamp_us
    try:
        return JobDefinition.model_validate(data)
    except PydanticValidationError as exc:
        raise RejectedRecord(f"invalid job definition: {describe_validation(exc)}") from exc


def job_key_from_record_key(key: bytes | None) -> str:
    if not key:
        raise RejectedRecord("record has no key (expected tenant/job_id)")
    try:
        text = key.decode()
        tenant, job_id = split_job_key(text)
    except (UnicodeDecodeError, SchedulerStreamError) as exc:
        raise RejectedRecord(f"bad key: {exc}") from exc
    return f"{tenant}/{job_id}"


def decode_command(
    codec: Codec, key: bytes | None, value: bytes | None,
    max_payload_bytes: int | None = None,
) -> tuple[str, str, dict[str, Any]]:  # fmt: skip
    """(job key, command kind, fields) of a cron.commands record; raises RejectedRecord
    (``max_payload_bytes``: a TriggerNow's payload over it too)."""
    job_key = job_key_from_record_key(key)
    if value is None:
        raise RejectedRecord("a command cannot be a tombstone")
    try:
        record = codec.decode_as("Command", value)
    except CodecError as exc:
        raise RejectedRecord(str(exc)) from exc
    if f"{record['tenant']}/{record['job_id']}" != job_key:
        raise RejectedRecord(f"record key {job_key!r} does not match the command's job")
    name, fields = record["command"]
    kind = name.rsplit(".", 1)[-1]
    if kind == "PauseJob":
        _check_pause(fields)
    elif kind == "TriggerNow":
        _check_request(kind, fields["request_id"])
        _check_payload(fields.get("payload_json"), max_payload_bytes)
    elif kind == "Backfill":
        _check_request(kind, fields["request_id"])
        _check_window(fields["start_us"], fields["end_us"])
    return job_key, kind, fields


# the instants a run id can name: 1970-01-01T00:00:00Z up to 9999-12-31T23:59:59Z
LAST_INSTANT_US = 253_402_300_799_999_999


def _check_request(kind: str, request_id: str) -> None:
    """The request id becomes part of run ids: it must be one (checked at arrival, not when
    a tick reaches it, where it would fail the partition's tick)."""
    try:
        check_request_id(request_id)
    except ValidationError as exc:
        raise RejectedRecord(f"{kind}: {exc.field}: {exc.message}") from exc


def _check_window(start_us: int, end_us: int) -> None:
    if not 0 <= start_us < end_us <= LAST_INSTANT_US:
        raise RejectedRecord(
            f"Backfill: the window [{start_us}, {end_us}) µs must be non-empty and within "
            "1970-01-01T00:00:00Z..9999-12-31T23:59:59Z"
        )


def _check_payload(payload_json: str | None, max_bytes: int | None) -> None:
    """A TriggerNow's own payload is JSON (every target sends it as JSON) within the payload
    limit (its run's records hold it twice over)."""
    if payload_json is None:
        return
    if max_bytes is not None and len(payload_json) > max_bytes:
        raise RejectedRecord(
            f"TriggerNow: payload_json is {len(payload_json):,} characters; the limit is "
            f"{max_bytes:,} (SCHEDULERSTREAM_MAX_PAYLOAD_BYTES)"
        )
    try:
        json.loads(payload_json)
    except (ValueError, RecursionError) as exc:
        raise RejectedRecord(f"TriggerNow: payload_json is not JSON: {exc}") from exc


def _check_pause(fields: dict[str, Any]) -> None:
    """A PauseJob names a real version and a reason the paused definition can keep."""
    if fields["job_version"] < 0:
        raise RejectedRecord(f"PauseJob: job_version {fields['job_version']} is negative")
    reason = fields["reason"]
    if not reason.strip() or len(reason) > MAX_PAUSED_REASON:
        raise RejectedRecord(
            f"PauseJob: reason must be 1 to {MAX_PAUSED_REASON} characters (got {len(reason)})"
        )


def pause_job_command(
    codec: Codec, job_key: str, job_version: int, reason: str, issued_at_us: int,
    run_id: str | None = None, last_attempt_json: str | None = None,
) -> bytes:  # fmt: skip
    """The cron.commands value asking the scheduler to pause ``job_key`` at ``job_version``
    (the reason is cut to what a paused definition keeps); ``run_id`` and its last attempt
    go into the job's "paused" notification."""
    tenant, job_id = split_job_key(job_key)
    if len(reason) > MAX_PAUSED_REASON:
        reason = reason[: MAX_PAUSED_REASON - 1] + "…"
    pause = {"job_version": job_version, "reason": reason, "run_id": run_id,
             "last_attempt_json": last_attempt_json}  # fmt: skip
    return codec.encode(
        "Command",
        {
            "tenant": tenant,
            "job_id": job_id,
            "issued_at_us": issued_at_us,
            "command": ("io.schedulerstream.PauseJob", pause),
        },
    )
