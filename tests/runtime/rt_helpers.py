"""Kafka helpers for the runtime tests: topics, producing inputs, reading outputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from schedulerstream.kafka import clients
from schedulerstream.runtime import Processor
from schedulerstream.settings import Settings

APP_MODULE = "tests.runtime.runtime_counter_app"
REPO = Path(__file__).resolve().parents[2]


def create_topics(settings: Settings) -> None:
    """in, in-b, out, rejected (delete) and counter-changelog (compact), P partitions."""
    admin = AdminClient(clients.base_config(settings))
    p = settings.partitions
    topics = [NewTopic(settings.topic(n), p, 1) for n in ("in", "in-b", "out", "rejected")]
    changelog = {"cleanup.policy": "compact", "delete.retention.ms": "86400000"}  # 1 d
    topics.append(NewTopic(settings.topic("counter-changelog"), p, 1, config=changelog))
    for future in admin.create_topics(topics).values():
        future.result()


def produce(settings: Settings, topic: str, records: Iterable[tuple[bytes, bytes]]) -> int:
    producer = Producer(clients.producer_config(settings))
    count = 0
    for key, value in records:
        producer.produce(settings.topic(topic), key=key, value=value)
        count += 1
        if count % 10_000 == 0:
            producer.flush()
    assert producer.flush(30) == 0
    return count


EOF_GRACE_S = 2.0


def read_all(settings: Settings, topic: str, committed: bool = True) -> list[Any]:
    """Every record of ``topic`` visible to a read_committed (or uncommitted) reader."""
    name = settings.topic(topic)
    consumer = Consumer(clients.restore_consumer_config(settings, "rt-reader", committed=committed))
    tps = [TopicPartition(name, p, 0) for p in range(settings.partitions)]
    # the high watermark, not the stable offset: just after a commit the stable offset can
    # still be 0, and a partition whose records that transaction wrote would be skipped
    watcher = Consumer(clients.restore_consumer_config(settings, "rt-reader", committed=False))
    ends = {}
    for tp in tps:
        _, high = clients.watermarks(watcher, tp)
        ends[tp.partition] = high
    watcher.close()
    consumer.assign([tp for tp in tps if ends[tp.partition] > 0])
    out: list[Any] = []
    pending = {p for p, e in ends.items() if e > 0}
    # Read up to each high watermark. Just after a commit its markers may not be written yet,
    # so a read_committed reader meets the end (EOF at the stable offset) early: only an end
    # that stays put for EOF_GRACE_S (an open transaction) ends the read of a partition there.
    eof_since: dict[int, float] = {}
    deadline = time.monotonic() + 30
    while pending and time.monotonic() < deadline:
        for msg in consumer.consume(1000, 0.2):
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    eof_since.setdefault(msg.partition(), time.monotonic())
                continue
            eof_since.pop(msg.partition(), None)
            out.append(msg)
        for p in list(pending):
            stuck = time.monotonic() - eof_since.get(p, float("inf")) >= EOF_GRACE_S
            if stuck or consumer.position([TopicPartition(name, p)])[0].offset >= ends[p]:
                pending.discard(p)
    consumer.close()
    return out


def counts(settings: Settings) -> list[tuple[bytes, int]]:
    """(key, count) of every committed counter output, in order of appearance."""
    return [(m.key(), int(m.value())) for m in read_all(settings, "out") if m.value() != b"later"]


def assert_exactly_once(settings: Settings, expected: dict[bytes, int]) -> None:
    """Each key's outputs are exactly 1..n, once each, for a read_committed reader."""
    seen: dict[bytes, list[int]] = {}
    for key, count in counts(settings):
        seen.setdefault(key, []).append(count)
    for key, n in expected.items():
        assert sorted(seen.get(key, [])) == list(range(1, n + 1)), (key, seen.get(key))
    assert set(seen) == set(expected)


def changelog_counts(settings: Settings) -> dict[bytes, int]:
    state: dict[bytes, int] = {}
    for m in read_all(settings, "counter-changelog"):
        if m.key().startswith(b"count/"):
            key = m.key()[len(b"count/") :]
            if m.value() is None:
                state.pop(key, None)
            else:
                state[key] = int(m.value())
    return state


def committed_offsets(settings: Settings, group: str, topic: str) -> dict[int, int]:
    consumer = Consumer(clients.restore_consumer_config(settings, group))
    tps = [TopicPartition(settings.topic(topic), p) for p in range(settings.partitions)]
    result = {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=10)}
    consumer.close()
    return result


def end_offsets(settings: Settings, topic: str) -> dict[int, int]:
    consumer = Consumer(clients.restore_consumer_config(settings, "rt-ends"))
    result = {}
    for p in range(settings.partitions):
        tp = TopicPartition(settings.topic(topic), p)
        result[p] = clients.watermarks(consumer, tp)[1]
    consumer.close()
    return result


def keyed(n_keys: int, per_key: int, value: bytes = b"x") -> list[tuple[bytes, bytes]]:
    return [(f"k{k:03d}".encode(), value) for _ in range(per_key) for k in range(n_keys)]


def drive(processors: list[Processor], until: Callable[[], bool], timeout: float = 30.0) -> None:
    """Step the processors (in this thread) until ``until()`` holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for processor in processors:
            processor.step()
        if until():
            return
    raise AssertionError("condition not reached in time")


def wait_for(until: Callable[[], bool], timeout: float = 30.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if until():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what or until}")


class App:
    """The counter app in a subprocess."""

    def __init__(self, settings: Settings, tmp: Path, instance: str, delay_ms: int = 0) -> None:
        self.status = tmp / f"{instance}.status"
        self.log = tmp / f"{instance}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULERSTREAM_")}
        env.update(
            {
                "SCHEDULERSTREAM_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
                "SCHEDULERSTREAM_TOPIC_PREFIX": settings.topic_prefix,
                "SCHEDULERSTREAM_DATA_DIR": str(tmp / f"{instance}-state"),
                "SCHEDULERSTREAM_INSTANCE_ID": instance,
                "SCHEDULERSTREAM_PARTITIONS": str(settings.partitions),
                "SCHEDULERSTREAM_GROUP_PROTOCOL": settings.group_protocol,
                "SCHEDULERSTREAM_SESSION_TIMEOUT_MS": str(settings.session_timeout_ms),
                "RT_DELAY_MS": str(delay_ms),
                "RT_STATUS_FILE": str(self.status),
            }
        )
        self.status.unlink(missing_ok=True)
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", APP_MODULE], env=env, cwd=REPO, stdout=log, stderr=log
            )

    def running(self) -> list[int]:
        try:
            return list(json.loads(self.status.read_text())["running"])
        except (OSError, ValueError):
            return []

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
