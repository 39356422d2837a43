"""Real-process helpers for dispatcher tests: the dispatcher process, runs, attempt events."""

from __future__ import annotations

import base64
import json
import time
from collections import defaultdict
from typing import Any

from confluent_kafka import Producer

from schedulerstream.codec import default_codec
from schedulerstream.kafka.clients import producer_config
from schedulerstream.model import JobDefinition
from schedulerstream.partitioner import partition_for_job_key
from schedulerstream.scheduler.plan import dispatch_spec_json
from schedulerstream.settings import Settings
from tests.support.runs import read_events

CODEC = default_codec()
SECOND = 1_000_000


def job(tenant: str, job_id: str, url: str, **extra: Any) -> JobDefinition:
    return JobDefinition.model_validate(
        {
            "tenant": tenant,
            "job_id": job_id,
            "version": 1,
            "schedule": {"every": 60},
            "target": {"type": "http", "url": url, **extra.pop("target", {})},
            **extra,
        }
    )


def run_value(
    definition: JobDefinition, instant_us: int, not_before_us: int | None = None
) -> bytes:
    """The run as the scheduler writes it, with its dispatch spec."""
    snapshot = definition.to_avro()
    return CODEC.encode(
        "RunTriggered",
        {
            "run_id": run_id_of(definition, instant_us),
            "tenant": definition.tenant,
            "job_id": definition.job_id,
            "scheduled_at_us": instant_us,
            "not_before_us": instant_us if not_before_us is None else not_before_us,
            "emitted_at_us": instant_us,
            "trigger": "scheduled",
            "payload_json": json.dumps({"job": definition.job_id}),
            "job_version": definition.version or 0,
            "job_definition": b"",
            "dispatch_spec_json": dispatch_spec_json(snapshot),
        },
    )


def run_id_of(definition: JobDefinition, instant_us: int) -> str:
    return f"{definition.key}@{instant_us}"


class Runs:
    """Produces RunTriggered records and commands as the scheduler and the CLI would."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.producer = Producer(producer_config(settings))

    def trigger(self, definition: JobDefinition, instant_us: int,
                not_before_us: int | None = None) -> str:  # fmt: skip
        rid = run_id_of(definition, instant_us)
        self.producer.produce(
            self.settings.topic("runs"),
            key=rid.encode(),
            value=run_value(definition, instant_us, not_before_us),
            partition=partition_for_job_key(definition.key, self.settings.partitions),
        )
        return rid

    def cancel(self, definition: JobDefinition, rid: str) -> None:
        value = CODEC.encode(
            "Command",
            {
                "tenant": definition.tenant,
                "job_id": definition.job_id,
                "issued_at_us": time.time_ns() // 1000,
                "command": ("io.schedulerstream.CancelRun", {"run_id": rid, "reason": "test"}),
            },
        )
        self.producer.produce(
            self.settings.topic("commands"),
            key=definition.key.encode(),
            value=value,
            partition=partition_for_job_key(definition.key, self.settings.partitions),
        )

    def flush(self) -> None:
        assert self.producer.flush(30) == 0


def attempt_events(
    settings: Settings, idle_timeout: float = 2.0
) -> dict[str, list[dict[str, Any]]]:
    """Committed AttemptEvents by run id, in log order."""
    by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for message in read_events(settings, "attempts", idle_timeout):
        record = CODEC.decode_as("AttemptEvent", message.value())
        by_run[record["run_id"]].append(record)
    return dict(by_run)


def kinds(events: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(e["kind"], e["attempt"]) for e in events]


def wait_for(predicate: Any, timeout: float, what: str, every: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


def body(request: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(base64.b64decode(request["body_b64"]))
    return found
