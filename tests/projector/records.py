"""Event records for projector tests (as the codec decodes them) and a producer that places
them the way the scheduler and dispatcher do (explicit partition from the job key)."""

from __future__ import annotations

import json
from typing import Any

from confluent_kafka import Producer

from schedulerstream.codec import default_codec
from schedulerstream.ids import job_key_of_run, scheduled_run_id
from schedulerstream.kafka import clients
from schedulerstream.model import JobDefinition
from schedulerstream.partitioner import partition_for_job_key
from schedulerstream.settings import Settings

T0 = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z
MINUTE = 60_000_000
SCHEDULE_STAMP_MS = (T0 - 60 * MINUTE) // 1000


def run_id(job_key: str, instant_us: int) -> str:
    return scheduled_run_id(job_key, instant_us)


def _who(rid: str) -> dict[str, str]:
    tenant, job_id = job_key_of_run(rid).split("/", 1)
    return {"run_id": rid, "tenant": tenant, "job_id": job_id}


def triggered(
    rid: str, scheduled: int, emitted: int | None = None, trigger: str = "scheduled",
    version: int = 1,
) -> tuple[str, dict[str, Any]]:  # fmt: skip
    job = JobDefinition.model_validate(
        {**job_json(*job_key_of_run(rid).split("/", 1)), "version": version}
    )
    return "RunTriggered", {
        **_who(rid),
        "scheduled_at_us": scheduled,
        "not_before_us": scheduled,
        "emitted_at_us": scheduled - 1_000_000 if emitted is None else emitted,
        "trigger": trigger,
        "payload_json": None,
        "job_version": version,
        "job_definition": default_codec().encode("JobDefinition", job.to_avro()),
    }


def revoked(
    rid: str, scheduled: int, at: int, reason: str = "job paused", version: int = 2
) -> tuple[str, dict[str, Any]]:
    return "RunRevoked", {
        **_who(rid),
        "scheduled_at_us": scheduled,
        "revoked_at_us": at,
        "reason": reason,
        "job_version": version,
    }


def attempt(
    rid: str, kind: str, number: int, at: int, reason: str | None = None,
    status_code: int | None = None, scheduled: int | None = None, count: int = 1,
    retry_at: int | None = None,
) -> tuple[str, dict[str, Any]]:  # fmt: skip
    return "AttemptEvent", {
        **_who(rid),
        "attempt": number,
        "kind": kind,
        "at_us": at,
        "scheduled_at_us": scheduled,
        "reason": reason,
        "status_code": status_code,
        "retry_at_us": retry_at,
        "duration_us": None if kind not in ("succeeded", "failed") else 1234,
        "count": count,
        "instance": "test",
    }


def job_json(tenant: str, job_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "tenant": tenant,
        "job_id": job_id,
        "schedule": {"cron": "*/5 * * * *"},
        "target": {"type": "kafka", "topic": "out"},
        **fields,
    }


def job_avro(tenant: str, job_id: str, version: int, **fields: Any) -> bytes:
    job = JobDefinition.model_validate({**job_json(tenant, job_id, **fields), "version": version})
    return default_codec().encode("JobDefinition", job.to_avro())


class Feed:
    """Produces schedules, runs and attempts to ``settings``'s topics, placed by job key."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.producer = Producer(clients.producer_config(settings))

    def _send(
        self, logical: str, key: bytes, value: bytes | None, job_key: str, stamp_ms: int = 0
    ) -> None:
        partition = partition_for_job_key(job_key, self.settings.partitions)
        self.raw(logical, key, value, partition, stamp_ms)

    def raw(
        self, logical: str, key: bytes | None, value: bytes | None, partition: int,
        timestamp_ms: int = 0,
    ) -> None:  # fmt: skip
        self.producer.produce(
            self.settings.topic(logical), value, key, partition, timestamp=timestamp_ms
        )

    def schedule(self, tenant: str, job_id: str, version: int, **fields: Any) -> None:
        """A definition written an hour before T0 (the record timestamp)."""
        key = f"{tenant}/{job_id}"
        value = job_avro(tenant, job_id, version, **fields)
        self._send("schedules", key.encode(), value, key, SCHEDULE_STAMP_MS)

    def schedule_json(self, tenant: str, job_id: str, **fields: Any) -> None:
        key = f"{tenant}/{job_id}"
        value = json.dumps(job_json(tenant, job_id, **fields)).encode()
        self._send("schedules", key.encode(), value, key, SCHEDULE_STAMP_MS)

    def delete(self, tenant: str, job_id: str) -> None:
        key = f"{tenant}/{job_id}"
        self._send("schedules", key.encode(), None, key, SCHEDULE_STAMP_MS + 1)

    def event(self, event: tuple[str, dict[str, Any]]) -> None:
        name, record = event
        logical = "attempts" if name == "AttemptEvent" else "runs"
        value = default_codec().encode(name, record)
        rid = record["run_id"]
        self._send(logical, rid.encode(), value, job_key_of_run(rid))

    def flush(self) -> None:
        assert self.producer.flush(30) == 0
