"""RecordWriter: what the scheduler writes besides its state (run records, revocations and
attempt events), encoded and produced into the current transaction."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

from schedulerstream.codec import Codec
from schedulerstream.scheduler.plan import JobPlan
from schedulerstream.scheduler.records import FastRecords
from schedulerstream.scheduler.state import PendingRun
from schedulerstream.scheduler.timers import Emission, Missed


class Output(Protocol):
    """Produces into the current transaction; ``failed`` tells of a job whose record the
    broker refused in an aborted transaction (this is its replay)."""

    def produce(
        self, topic: str, key: bytes, value: bytes | None, partition: int,
        origin: str | None = None,
    ) -> None: ...  # fmt: skip

    def failed(self, origin: str) -> str | None: ...


@dataclass(frozen=True, slots=True)
class Topics:
    runs: str
    attempts: str
    rejected: str
    schedules: str  # the scheduler writes a PauseJob's paused version here


class RecordWriter:
    """Encodes runs (``records``, hand-written, when the codec's schemas allow), revocations
    and attempt events."""

    def __init__(self, codec: Codec, topics: Topics, instance: str,
                 records: FastRecords | None) -> None:  # fmt: skip
        self.codec = codec
        self.topics = topics
        self.instance = instance
        self.records = records

    def run_record(self, plan: JobPlan, e: Emission, now_us: int) -> bytes:
        if self.records is not None and e.payload_json == plan.payload_json:
            return self.records.run(
                e.run_id, plan.run_parts, e.scheduled_at_us, e.not_before_us, now_us, e.trigger,
            )  # fmt: skip
        return self.codec.encode(
            "RunTriggered",
            {
                "run_id": e.run_id,
                "tenant": plan.tenant,
                "job_id": plan.job_id,
                "scheduled_at_us": e.scheduled_at_us,
                "not_before_us": e.not_before_us,
                "emitted_at_us": now_us,
                "trigger": e.trigger,
                "payload_json": e.payload_json,
                "job_version": plan.version,
                "job_definition": b"",  # the spec below is what the dispatcher reads
                "dispatch_spec_json": plan.dispatch_spec_json,
            },
        )

    def revoked(
        self, out: Output, partition: int, job_key: str, runs: list[PendingRun], now_us: int,
        version: int, reason: str,
    ) -> None:  # fmt: skip
        """A RunRevoked and a ``revoked`` event for each of ``runs``."""
        tenant, job_id = job_key.split("/", 1)
        for run in runs:
            value = self.codec.encode(
                "RunRevoked",
                {
                    "run_id": run.run_id, "tenant": tenant, "job_id": job_id,
                    "scheduled_at_us": run.scheduled_at_us, "revoked_at_us": now_us,
                    "reason": reason, "job_version": version,
                },
            )  # fmt: skip
            out.produce(self.topics.runs, run.run_id.encode(), value, partition)
            self.attempt(out, partition, run.run_id, tenant, job_id, "revoked", now_us,
                         run.scheduled_at_us, reason, 1)  # fmt: skip

    def missed(self, out: Output, partition: int, plan: JobPlan, m: Missed, now_us: int) -> None:
        bound = "at least " if m.approximate else ""
        span = f"from {_iso(m.first_us)} to {_iso(m.last_us)}"
        reason = f"{bound}{m.count} instant(s) {span} not run: {m.reason}"
        self.attempt(out, partition, plan.run_id(m.last_us), plan.tenant, plan.job_id, "missed",
                     now_us, m.last_us, reason, m.count)  # fmt: skip

    def attempt(
        self, out: Output, partition: int, run_id: str, tenant: str, job_id: str, kind: str,
        now_us: int, scheduled_at_us: int | None, reason: str | None, count: int,
    ) -> None:  # fmt: skip
        value = self.codec.encode(
            "AttemptEvent",
            {
                "run_id": run_id, "tenant": tenant, "job_id": job_id, "attempt": 0, "kind": kind,
                "at_us": now_us, "scheduled_at_us": scheduled_at_us, "reason": reason,
                "status_code": None, "retry_at_us": None, "duration_us": None, "count": count,
                "instance": self.instance,
            },
        )  # fmt: skip
        out.produce(self.topics.attempts, run_id.encode(), value, partition)


def _iso(instant_us: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(instant_us // 1_000_000))
