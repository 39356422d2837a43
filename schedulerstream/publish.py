"""Write schedule events and commands (for the CLI and the API): idempotent, acks=all, and
waiting for the broker's delivery report so a returned version is durable."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from schedulerstream.avro_writer import compile_writer
from schedulerstream.codec import MARKER, Codec, default_codec
from schedulerstream.errors import SchedulerStreamError
from schedulerstream.ids import job_key_of_run, split_job_key
from schedulerstream.jobfile import PROGRESS_STEP, Progress
from schedulerstream.kafka.clients import producer_config
from schedulerstream.limits import RecordLimits
from schedulerstream.model import JobDefinition
from schedulerstream.settings import Settings


class PublishError(SchedulerStreamError):
    """The broker did not acknowledge a write."""


def now_us() -> int:
    return time.time_ns() // 1000


class Publisher:
    """Produces to cron.schedules and cron.commands and waits for every acknowledgement."""

    def __init__(
        self, settings: Settings, codec: Codec | None = None, *, connect: bool = True
    ) -> None:
        """``connect=False``: the producer (and its threads) is made by ``connect``, or at
        the first write (a bulk load forks its workers first)."""
        self.settings = settings
        self.codec = codec or default_codec()
        self._made: Producer | None = None
        if connect:
            self.connect()

    @property
    def connected(self) -> bool:
        return self._made is not None

    def connect(self) -> None:
        """Make the producer now: it connects in the background."""
        if self._made is None:
            self._made = Producer(producer_config(self.settings, **{"linger.ms": 0}))

    @property
    def _producer(self) -> Producer:
        self.connect()
        assert self._made is not None
        return self._made

    def _send(
        self,
        topic: str,
        records: Sequence[tuple[bytes, bytes | None]],
        timeout: float,
        progress: Progress | None = None,
    ) -> None:
        """Produce every record, then wait for all acknowledgements (``progress`` hears of
        the ``writing`` stage)."""
        errors: list[str] = []
        acknowledged = 0

        def report(err: KafkaError | None, msg: Message) -> None:
            nonlocal acknowledged
            if err is not None:
                errors.append(f"{msg.key()!r}: {err}")
                return
            acknowledged += 1
            if progress is not None and acknowledged % PROGRESS_STEP == 0:
                progress("writing", acknowledged, len(records))

        producer = self._producer
        for key, value in records:
            while True:
                try:
                    producer.produce(topic, key=key, value=value, on_delivery=report)
                    break
                except BufferError:  # the local queue is full: serve acknowledgements
                    producer.poll(0.05)
        remaining = producer.flush(timeout)
        if progress is not None and acknowledged % PROGRESS_STEP:
            progress("writing", acknowledged, len(records))
        if remaining:
            raise PublishError(
                f"{remaining} of {len(records)} writes to {topic} were not acknowledged"
            )
        if errors:
            raise PublishError(f"writes to {topic} failed: {'; '.join(errors[:3])}")

    def topic_names(self, timeout: float = 5.0) -> list[str]:
        """The cluster's topics this client may describe (one metadata request)."""
        try:
            return list(self._producer.list_topics(timeout=timeout).topics)
        except KafkaException as exc:
            raise PublishError(f"the cluster's topics could not be listed: {exc}") from exc

    def put_jobs(
        self,
        jobs: Sequence[JobDefinition],
        timeout: float = 30.0,
        progress: Progress | None = None,
    ) -> list[JobDefinition]:
        """Produce job definitions (a missing version becomes now in µs); return them versioned.

        Every job is encoded and checked against the record limits before any is produced
        (``ValidationError`` names the job, the field and the limit). ``progress`` hears of
        the ``encoding`` and ``writing`` stages."""
        versions = self.put_many(jobs, timeout, progress)
        return [
            job if job.version == version else job.with_version(version)
            for job, version in zip(jobs, versions, strict=True)
        ]

    def put_many(
        self,
        jobs: Sequence[JobDefinition],
        timeout: float = 30.0,
        progress: Progress | None = None,
    ) -> list[int]:
        """``put_jobs`` for a bulk load: the version each job was written with, and no
        versioned copy of each job."""
        versions, records = self.encode_jobs(jobs, progress)
        self.write_jobs(records, timeout, progress)
        return versions

    def write_jobs(
        self,
        records: Sequence[tuple[bytes, bytes | None]],
        timeout: float = 30.0,
        progress: Progress | None = None,
    ) -> None:
        """Produce records made by ``JobEncoder`` and wait for every acknowledgement."""
        self._send(self.settings.topics.schedules, records, timeout, progress)

    def encoder(self, base_version: int | None = None) -> JobEncoder:
        """Encodes jobs for ``write_jobs``: a missing version becomes ``base_version`` (now
        in µs by default) plus the job's index."""
        base = now_us() if base_version is None else base_version
        return JobEncoder(self.codec, self.settings.record_limits(), base)

    def encode_jobs(
        self, jobs: Sequence[JobDefinition], progress: Progress | None = None
    ) -> tuple[list[int], list[tuple[bytes, bytes | None]]]:
        """The version of each job and the (key, value) records ``put_jobs`` produces for
        them, each checked against the record limits."""
        encoder = self.encoder()
        versions: list[int] = []
        records: list[tuple[bytes, bytes | None]] = []
        total = len(jobs)
        for done, job in enumerate(jobs, 1):
            if progress is not None and (done % PROGRESS_STEP == 0 or done == total):
                progress("encoding", done, total)
            version, record = encoder.encode(job)
            versions.append(version)
            records.append(record)
        return versions, records

    def delete_job(self, job_key: str, timeout: float = 30.0) -> None:
        split_job_key(job_key)
        self._send(self.settings.topics.schedules, [(job_key.encode(), None)], timeout)

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
        self._send(self.settings.topics.commands, [(job_key.encode(), value)], timeout)

    def cancel_run(self, run_id: str, reason: str = "cancelled by request") -> None:
        self.command(job_key_of_run(run_id), "CancelRun", {"run_id": run_id, "reason": reason})


class JobEncoder:
    """A job's ``cron.schedules`` record, checked against the record limits
    (``ValidationError`` names the job, the field and the limit).

    Records are written by a writer compiled from the schema (``avro_writer``), checked
    against ``Codec.encode`` on the first job and every ``CHECK_EVERY``-th after; on a
    difference, or a value the writer refuses, the codec writes them."""

    CHECK_EVERY = 1024

    def __init__(self, codec: Codec, limits: RecordLimits, base_version: int) -> None:
        self._codec = codec
        self._limits = limits
        self._next = base_version
        schema = codec.current["JobDefinition"]
        self._header = MARKER + schema.fingerprint
        self._write = compile_writer(schema.parsed)
        self._count = 0

    def encode(self, job: JobDefinition) -> tuple[int, tuple[bytes, bytes | None]]:
        """(the version it is written with, (key, value))."""
        version = job.version
        if version is None:
            version = self._next
        self._next += 1
        key = job.key
        record = job.to_avro(version)
        value = self._value(record)
        self._limits.check_job(key, value, record)
        return version, (key.encode(), value)

    def _value(self, record: dict[str, Any]) -> bytes:
        write = self._write
        if write is not None:
            try:
                value = self._header + write(record)
            except (TypeError, ValueError, KeyError, AttributeError):
                return self._codec.encode("JobDefinition", record)
            self._count += 1
            if self._count % self.CHECK_EVERY != 1:
                return value
            expected = self._codec.encode("JobDefinition", record)
            if value != expected:
                self._write = None  # this schema is not written alike: the codec writes all
            return expected
        return self._codec.encode("JobDefinition", record)
