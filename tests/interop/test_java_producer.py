"""A stock Java producer writes schedules the scheduler accepts, in both encodings of the contract.

``ProduceSchedules.java`` runs on the JDK's single-file source launcher with the Kafka jars the
broker runs (kafka-clients, String keys, the default partitioner) and Apache Avro's jars: one job
as a JSON value, one as Avro single-object encoding from ``BinaryMessageEncoder`` with the schema
parsed from ``schemas/*.avsc``. A real scheduler process then has to emit both runs.
"""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from schedulerstream.codec import default_codec
from schedulerstream.model import JobDefinition
from schedulerstream.partitioner import partition_for_job_key
from schedulerstream.settings import Settings
from tests.interop.jvm import JavaProducer, Produced
from tests.support.fixtures import Spawn
from tests.support.runs import read_events, read_runs

pytestmark = pytest.mark.kafka
SECOND = 1_000_000
TENANT = "interop"
OUT_TOPIC = "interop.out"
RecordProperty = Callable[[str, object], None]


def telling_key(job_prefix: str, partitions: int) -> str:
    """A job key whose murmur2 partition is neither 0 nor librdkafka's default (CRC32) choice,
    so landing on the expected partition cannot be luck of a different partitioner."""
    for n in range(1000):
        key = f"{TENANT}/{job_prefix}-{n}"
        expected = partition_for_job_key(key, partitions)
        if expected != 0 and expected != zlib.crc32(key.encode()) % partitions:
            return key
    raise AssertionError("no telling key found")


def run_id(key: str, instant_us: int) -> str:
    """The README's run id, ``tenant/job@20240310T070000Z``, spelled out independently."""
    at = datetime.fromtimestamp(instant_us // SECOND, tz=UTC)
    return f"{key}@{at:%Y%m%dT%H%M%SZ}"


def wait_for_runs(settings: Settings, run_ids: set[str], timeout: float = 40) -> list[Any]:
    deadline = time.monotonic() + timeout
    while True:
        triggered = read_runs(settings, idle_timeout=1.0).triggered
        if run_ids <= {r["run_id"] for r in triggered} or time.monotonic() > deadline:
            return triggered
        time.sleep(0.5)


def test_java_producer_json_and_avro_schedules_are_accepted_and_run(
    topo: Settings, spawn: Spawn, java_producer: JavaProducer, record_property: RecordProperty
) -> None:
    codec = default_codec()
    scheduler = spawn("interop")  # starts while the JVM compiles and connects
    json_key = telling_key("java-json", topo.partitions)
    avro_key = telling_key("java-avro", topo.partitions)
    started = time.monotonic()
    java_producer.ready()
    record_property("java_ready_seconds", round(time.monotonic() - started, 2))

    # Whole seconds shortly ahead: a one-shot instant before the record's own timestamp
    # would never fire (a new job counts as fired through the time it was written).
    json_at = (time.time_ns() // 1000 // SECOND + 3) * SECOND
    avro_at = json_at + SECOND
    json_value = json.dumps(
        {
            "tenant": TENANT,
            "job_id": json_key.split("/")[1],
            "schedule": {"at": datetime.fromtimestamp(json_at // SECOND, tz=UTC).isoformat()},
            "target": {"type": "kafka", "topic": OUT_TOPIC},
        }
    )
    json_record, avro_record = java_producer.send(
        [("json", json_key, json_value), ("avro", avro_key, str(avro_at))]
    )

    # The Java client's default partitioner put each record where our partitioner says.
    for produced in (json_record, avro_record):
        assert produced.partition == partition_for_job_key(produced.key, topo.partitions)
    on_topic = {
        m.key().decode(): Produced(m.key().decode(), m.partition(), m.offset(), m.value())
        for m in read_events(topo, "schedules", idle_timeout=1.0)
    }
    assert on_topic == {json_key: json_record, avro_key: avro_record}
    assert json_record.value == json_value.encode()

    # The Java-written Avro bytes are our single-object encoding, byte for byte.
    avro_bytes = avro_record.value
    assert avro_bytes[:2] == b"\xc3\x01"
    assert avro_bytes[2:10] == codec.current["JobDefinition"].fingerprint
    name, record = codec.decode(avro_bytes)
    assert name == "JobDefinition"
    assert (record["tenant"], record["job_id"]) == tuple(avro_key.split("/"))
    assert record["schedule"]["at_us"] == avro_at
    assert record["target"] == ("io.schedulerstream.KafkaTarget", {"topic": OUT_TOPIC, "key": None})
    assert record["retry"]["max_attempts"] == 5  # schema defaults filled in by the Java builder
    assert codec.encode("JobDefinition", record) == avro_bytes
    job = JobDefinition.from_avro(record)
    assert job.key == avro_key
    assert job.schedule.at == datetime.fromtimestamp(avro_at // SECOND, tz=UTC)

    expected = {run_id(json_key, json_at), run_id(avro_key, avro_at)}
    triggered = wait_for_runs(topo, expected)
    assert sorted(r["run_id"] for r in triggered) == sorted(expected), scheduler.log()[-3000:]
    assert {r["scheduled_at_us"] for r in triggered} == {json_at, avro_at}
    runs_partitions = {
        codec.decode(m.value())[1]["run_id"]: m.partition()
        for m in read_events(topo, "runs", idle_timeout=1.0)
    }
    assert runs_partitions == {
        run_id(json_key, json_at): json_record.partition,
        run_id(avro_key, avro_at): avro_record.partition,
    }
    assert read_events(topo, "rejected", idle_timeout=1.0) == []
    assert scheduler.alive()
