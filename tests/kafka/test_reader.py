"""``read_topic`` against the real broker: it reads every partition to its end before its idle
clock starts, so a short idle time never ends a read that has not fetched yet."""

from __future__ import annotations

import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from schedulerstream.kafka.clients import base_config
from schedulerstream.kafka.reader import read_topic
from schedulerstream.settings import Settings


def _topic(settings: Settings, partitions: int) -> str:
    name = settings.topic("reader-probe")
    admin = AdminClient(base_config(settings))
    [future] = admin.create_topics([NewTopic(name, partitions, 1)]).values()
    future.result(30)
    return name


def test_a_read_with_no_idle_time_still_returns_every_committed_record(
    kafka_settings: Settings,
) -> None:
    """Six partitions, two of them empty; with ``idle_timeout=0`` the old reader returned
    nothing, because its idle clock started before the first fetch."""
    topic = _topic(kafka_settings, 6)
    producer = Producer(base_config(kafka_settings))
    sent = {(p, f"r{p}-{i}") for p in range(4) for i in range(25)}
    for partition, value in sorted(sent):
        producer.produce(topic, value.encode(), partition=partition)
    assert producer.flush(30) == 0

    read = {(m.partition(), m.value().decode()) for m in read_topic(kafka_settings, topic, True, 0)}

    assert read == sent


def test_an_empty_topic_reads_as_empty_without_waiting_for_the_catch_up_limit(
    kafka_settings: Settings,
) -> None:
    topic = _topic(kafka_settings, 3)
    started = time.monotonic()

    assert list(read_topic(kafka_settings, topic, True, 0, catch_up_timeout=120)) == []
    assert time.monotonic() - started < 60


def test_an_aborted_transactions_records_are_read_only_uncommitted(
    kafka_settings: Settings,
) -> None:
    topic = _topic(kafka_settings, 2)
    config = {**base_config(kafka_settings), "transactional.id": f"{topic}-probe"}
    producer = Producer(config)
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"aborted", partition=0)
    producer.flush(30)
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, b"committed", partition=1)
    producer.commit_transaction(30)

    def values(committed: bool) -> list[bytes]:
        messages = read_topic(kafka_settings, topic, True, 0, committed=committed)
        return sorted(m.value() for m in messages)

    assert values(committed=True) == [b"committed"]
    assert values(committed=False) == [b"aborted", b"committed"]
