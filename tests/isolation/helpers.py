"""What the isolation cases read back: deliveries per run, attempt events, lateness."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from schedulerstream.codec import default_codec
from schedulerstream.ids import scheduled_run_id
from schedulerstream.kafka.clients import base_config
from schedulerstream.kafka.reader import read_topic
from schedulerstream.model import JobDefinition
from schedulerstream.settings import Settings
from tests.faults.conftest import SpawnFault
from tests.faults.helpers import FaultProcess
from tests.support.waits import wait_until

CODEC = default_codec()
SECOND = 1_000_000


def create_topic(settings: Settings, name: str, partitions: int = 2, **config: str) -> None:
    admin = AdminClient(base_config(settings))
    topic = NewTopic(name, num_partitions=partitions, replication_factor=1, config=config)
    admin.create_topics([topic], operation_timeout=30)[name].result(30)


def delete_topic(settings: Settings, name: str) -> None:
    admin = AdminClient(base_config(settings))
    admin.delete_topics([name], operation_timeout=30)[name].result(30)


def set_topic_config(settings: Settings, name: str, **config: str) -> None:
    admin = AdminClient(base_config(settings))
    resource = ConfigResource(ConfigResource.Type.TOPIC, name, set_config=config)
    for future in admin.alter_configs([resource]).values():
        future.result(30)


def set_max_message_bytes(settings: Settings, name: str, size: int) -> None:
    """Change this one config of topic ``name`` (``set_topic_config`` resets the others)."""
    admin = AdminClient(base_config(settings))
    entry = ConfigEntry("max.message.bytes", str(size),
                        incremental_operation=AlterConfigOpType.SET)  # fmt: skip
    resource = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def running_pair(topo: Settings, procs: SpawnFault) -> tuple[FaultProcess, FaultProcess]:
    """A dispatcher and a scheduler, each with every task running."""
    disp = procs("dispatcher", "d")
    sched = procs("scheduler", "s")
    disp.wait_running(topo.partitions)
    sched.wait_running(topo.partitions)
    return disp, sched


def attempt_events(settings: Settings) -> dict[str, list[dict[str, Any]]]:
    """AttemptEvents by job key, in topic order."""
    by_job: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for message in read_topic(settings, settings.topic("attempts"), True, 1.5):
        _, event = CODEC.decode(message.value())
        by_job[f"{event['tenant']}/{event['job_id']}"].append(event)
    return by_job


def kafka_deliveries(settings: Settings, topic: str) -> list[dict[str, Any]]:
    """Envelopes on a Kafka target topic, each with ``arrived_us`` (the record timestamp)."""
    found = []
    for message in read_topic(settings, topic, True, 1.5):
        envelope = json.loads(message.value())
        envelope["arrived_us"] = message.timestamp()[1] * 1000
        found.append(envelope)
    return found


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else 0.0


def instant_of(run_id: str) -> int:
    stamp = run_id.rsplit("@", 1)[1][:16]
    return int(datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).timestamp()) * SECOND


def every_second_run_ids(jobs: list[JobDefinition], since: int, until: int) -> set[str]:
    """The run ids of every 1 s instant of ``jobs`` in ``[since, until]``."""
    return {scheduled_run_id(j.key, t) for j in jobs for t in range(since, until + 1, SECOND)}


def kafka_lateness(
    settings: Settings, topic: str, expected: set[str], since: int, until: int
) -> tuple[dict[str, list[int]], list[float]]:
    """Once every run of ``expected`` is on ``topic``: the arrivals of the runs due in
    ``[since, until]`` by run id, and each one's first arrival − its instant (ms)."""

    def delivered() -> dict[str, list[int]] | None:
        arrivals: dict[str, list[int]] = {}
        for envelope in kafka_deliveries(settings, topic):
            if since <= instant_of(envelope["run_id"]) <= until:
                arrivals.setdefault(envelope["run_id"], []).append(envelope["arrived_us"])
        return arrivals if expected <= set(arrivals) else None

    arrivals: dict[str, list[int]] = wait_until(
        delivered, 60, "every healthy run delivered", every=1.0
    )
    return arrivals, [(min(a) - instant_of(r)) / 1000 for r, a in arrivals.items()]
