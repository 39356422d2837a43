"""Write schedule events and commands (for the CLI and the API): idempotent, acks=all, and
waiting for the broker's delivery report so a returned version is durable."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from schedulerstream.codec import Codec, default_codec
from schedulerstream.errors import SchedulerStreamError
from schedulerstream.ids import job_key_of_run, split_job_key
from schedulerstream.kafka.clients import producer_config
from schedulerstream.model import JobDefinition
from schedulerstream.settings import Settings


class PublishError(SchedulerStreamError):
    """The broker did not acknowledge a write."""


def now_us() -> int:
    return time.time_ns() // 1000


class Publisher:
    """Produces to cron.schedules and cron.commands and waits for every acknowledgement."""

    def __init__(self, settings: Settings, codec: Codec | None = None) -> None:
        self.settings = settings
        self.codec = codec or default_codec()
        self._producer = Producer(producer_config(settings, **{"linger.ms": 0}))

    def _send(
        self, topic: str, records: Iterable[tuple[str, bytes | None]], timeout: float
    ) -> None:
        errors: list[str] = []

        def report(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                errors.append(f"{msg.key()!r}: {err}")

        count = 0
        for key, value in records:
            self._producer.produce(topic, key=key.encode(), value=value, on_delivery=report)
            self._producer.poll(0)
            count += 1
        remaining = self._producer.flush(timeout)
        if remaining:
            raise PublishError(f"{remaining} of {count} writes to {topic} were not acknowledged")
        if errors:
            raise PublishError(f"writes to {topic} failed: {'; '.join(errors[:3])}")

    def put_jobs(self, jobs: list[JobDefinition], timeout: float = 30.0) -> list[JobDefinition]:
        """Produce job definitions (a missing version becomes now in µs); return them versioned.

        Every job is encoded and checked against the record limits before any is produced
        (``ValidationError`` names the job, the field and the limit)."""
        stamped = []
        base = now_us()
        for offset, job in enumerate(jobs):
            stamped.append(job if job.version is not None else job.with_version(base + offset))
        limits = self.settings.record_limits()
        records = []
        for job in stamped:
            record = job.to_avro()
            value = self.codec.encode("JobDefinition", record)
            payload = record["payload_json"]
            limits.check(job.key, len(value), 0 if payload is None else len(payload))
            records.append((job.key, value))
        self._send(self.settings.topic("schedules"), records, timeout)
        return stamped

    def delete_job(self, job_key: str, timeout: float = 30.0) -> None:
        split_job_key(job_key)
        self._send(self.settings.topic("schedules"), [(job_key, None)], timeout)

    def command(
        self, job_key: str, kind: str, fields: dict[str, Any], timeout: float = 30.0
    ) -> None:
        """Produce a TriggerNow, Backfill or CancelRun command for ``job_key``."""
        tenant, job_id = split_job_key(job_key)
        value = self.codec.encode(
            "Command",
            {
                "tenant": tenant,
                "job_id": job_id,
                "issued_at_us": now_us(),
                "command": (f"io.schedulerstream.{kind}", fields),
            },
        )
        self._send(self.settings.topic("commands"), [(job_key, value)], timeout)

    def cancel_run(self, run_id: str, reason: str = "cancelled by request") -> None:
        self.command(job_key_of_run(run_id), "CancelRun", {"run_id": run_id, "reason": reason})
