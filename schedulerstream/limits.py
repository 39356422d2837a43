"""Record-size limits: what one job may hold so that every record derived from it fits.

A job's definition is copied into the records the pipeline writes for each of its runs: the
``RunTriggered`` on cron.runs (the payload and the dispatch spec), the dispatcher's run
record on its changelog (the payload as an escaped JSON string, the target and retry as
JSON), the envelope a target receives and the attempt events. A record the broker refuses
would fail the transaction it is in, so a job whose derived records could exceed
``max_record_bytes`` is refused where it enters (API 422, CLI exit 2, cron.rejected).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from schedulerstream.errors import ValidationError

DEFAULT_MAX_PAYLOAD_BYTES = 256 * 1024
# librdkafka's message.max.bytes default; the declared topics allow 1 MiB (topics.toml)
DEFAULT_MAX_RECORD_BYTES = 1_000_000
FIXED_OVERHEAD = 4096  # ids, timestamps, reasons, headers and framing of one derived record


@dataclass(frozen=True, slots=True)
class RecordLimits:
    """``max_payload_bytes``: the payload's JSON text; ``max_record_bytes``: any record."""

    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES

    def derived_bytes(self, definition_bytes: int, payload_bytes: int) -> int:
        """An upper bound of the largest record the pipeline writes for one run of a job
        whose encoded definition and payload JSON have these sizes."""
        rest = max(0, definition_bytes - payload_bytes)  # target, schedule, retry, ids
        # the dispatcher's run record, the largest (a RunTriggered holds the payload and the
        # spec once): a JSON string of ASCII JSON text is at most twice as long; the rest as
        # JSON, 2x Avro
        return 2 * payload_bytes + 2 * rest + FIXED_OVERHEAD

    def check_job(self, job_key: str, definition: bytes, record: Mapping[str, Any]) -> None:
        """``check`` for an encoded definition and its Avro record. A paused reason does not
        count, so the system can always pause a job that fits (quarantine, HTTP 410): a
        paused version fires no scheduled run, and the version that resumes it has none. A
        manual or backfill run of it that then outgrows a record is ``missed``, alone."""
        payload, reason = record.get("payload_json"), record.get("paused_reason")
        reason_bytes = 0 if reason is None else len(reason.encode())
        payload_bytes = 0 if payload is None else len(payload)
        self.check(job_key, len(definition) - reason_bytes, payload_bytes)

    def check(self, job_key: str, definition_bytes: int, payload_bytes: int) -> None:
        """Raise ``ValidationError`` naming the field and the limit when a job is too large."""
        if payload_bytes > self.max_payload_bytes:
            raise ValidationError(
                "payload",
                f"{job_key}: the payload is {payload_bytes:,} bytes of JSON; the limit is "
                f"{self.max_payload_bytes:,} (SCHEDULERSTREAM_MAX_PAYLOAD_BYTES)",
            )
        derived = self.derived_bytes(definition_bytes, payload_bytes)
        if derived > self.max_record_bytes:
            raise ValidationError(
                "definition",
                f"{job_key}: the definition is {definition_bytes:,} bytes, so a run of it "
                f"would need records of up to {derived:,} bytes; the limit is "
                f"{self.max_record_bytes:,} (SCHEDULERSTREAM_MAX_RECORD_BYTES): shorten the "
                f"payload, headers or target",
            )
