"""``TransactionalProducer.produce_many`` (how a commit writes a task's changelog) against the
real broker: every record lands once, tombstones included, the last one reports its offset,
and a queue that fills midway makes it wait instead of losing records."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from schedulerstream.kafka import clients
from schedulerstream.runtime.transaction import TransactionalProducer
from schedulerstream.settings import Settings
from tests.runtime.rt_helpers import read_all


def _topic(s: Settings, name: str) -> str:
    topic = s.topic(name)
    admin = AdminClient(clients.base_config(s))
    admin.create_topics([NewTopic(topic, s.partitions, 1)])[topic].result()
    return topic


def _producer(s: Settings, name: str, **extra: Any) -> TransactionalProducer:
    config = clients.transactional_producer_config(s, f"{s.topic_prefix}{name}", **extra)
    txn = TransactionalProducer(config, timeout_s=10.0)
    txn.start()
    return txn


@pytest.mark.kafka
def test_records_land_once_in_order_with_the_last_offset_reported(
    kafka_settings: Settings,
) -> None:
    s = kafka_settings
    topic = _topic(s, "many")
    reports: list[tuple[Any, int]] = []
    records = [(b"k%03d" % i, None if i % 7 == 3 else b"v%d" % i) for i in range(200)]
    txn = _producer(s, "many")
    try:
        txn.produce_many(topic, 1, records, lambda err, msg: reports.append((err, msg.offset())))
        txn.flush()
        txn.commit()
    finally:
        txn.close()
    got = [(m.key(), m.value()) for m in read_all(s, "many") if m.partition() == 1]
    assert got == records  # tombstones are records with no value
    assert reports == [(None, 199)]
    assert txn.produced == 200


@pytest.mark.kafka
def test_a_queue_that_fills_midway_loses_nothing(kafka_settings: Settings) -> None:
    s = kafka_settings
    topic = _topic(s, "full")
    records = [(b"k%04d" % i, b"v" * 100) for i in range(1_000)]
    # room for 50 records at a time: the batch fills it 20 times over
    txn = _producer(s, "full", **{"queue.buffering.max.messages": 50})
    reports: list[Any] = []
    try:
        txn.produce_many(topic, 0, records, lambda err, msg: reports.append(err))
        txn.flush()
        txn.commit()
    finally:
        txn.close()
    got = [(m.key(), m.value()) for m in read_all(s, "full") if m.partition() == 0]
    assert got == records  # in order: the records refused are the batch's tail
    assert reports == [None]


@pytest.mark.kafka
def test_a_record_the_client_refuses_raises(kafka_settings: Settings) -> None:
    s = kafka_settings
    topic = _topic(s, "refused")
    txn = _producer(s, "refused", **{"message.max.bytes": 10_000})
    try:
        with pytest.raises(KafkaException, match="too large"):
            txn.produce_many(topic, 0, [(b"small", b"v"), (b"big", b"x" * 20_000)])
    finally:
        txn.abort(1.0)
        txn.close()
