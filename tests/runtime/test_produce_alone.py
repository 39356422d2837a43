"""``TransactionalProducer.produce_alone`` against the real broker: a record produced alone is
judged by the broker on its own size, not on its batch's."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewTopic

from schedulerstream.kafka import clients
from schedulerstream.runtime.context import OutRecord
from schedulerstream.runtime.transaction import TransactionalProducer
from schedulerstream.settings import Settings
from tests.runtime.rt_helpers import read_all

LIMIT = 2_000  # the topic's max.message.bytes: a batch larger than this is refused


@pytest.mark.kafka
def test_a_record_produced_alone_is_judged_by_its_own_size(kafka_settings: Settings) -> None:
    s = kafka_settings
    topic = s.topic("narrow")
    admin = AdminClient(clients.base_config(s))
    narrow = NewTopic(topic, s.partitions, 1, config={"max.message.bytes": str(LIMIT)})
    admin.create_topics([narrow])[topic].result()
    # a long linger: records produced one after the other share a batch
    config = clients.transactional_producer_config(
        s, f"{s.topic_prefix}alone", **{"linger.ms": 200}
    )
    txn = TransactionalProducer(config, timeout_s=10.0)
    txn.start()
    errors: list[Any] = []

    def seen(err: Any, msg: Any) -> None:
        errors.append(err)

    def record(key: bytes, size: int) -> OutRecord:
        return OutRecord(topic, key, os.urandom(size), 0)  # incompressible

    try:
        # the premise: together, two records that fit alone are refused for their batch's size
        txn.produce(record(b"small-0", 900), seen)
        txn.produce(record(b"big-0", 1_500), seen)
        txn.flush()
        assert [e is not None and e.code() for e in errors] == [KafkaError.MSG_SIZE_TOO_LARGE] * 2
        txn.abort(1.0)  # it cannot commit, and the refused records spent their sequence
        txn.recreate()  # numbers: a new producer, as the committer makes
        errors.clear()
        txn.produce(record(b"small-1", 900), seen)
        txn.produce_alone(record(b"big-1", 1_500), seen)
        txn.produce(record(b"small-2", 900), seen)
        txn.flush()
        assert errors == [None, None, None]
        txn.commit()
    finally:
        txn.close()
    assert sorted(m.key() for m in read_all(s, "narrow")) == [b"big-1", b"small-1", b"small-2"]


class HeldBack:
    """A producer whose flush never empties its queue (records held back, as librdkafka does
    after a refusal in the transaction)."""

    def __init__(self) -> None:
        self.produced: list[bytes | None] = []

    def begin_transaction(self) -> None:
        pass

    def produce(self, topic: str, value: bytes | None, key: bytes | None, *rest: Any,
                **options: Any) -> None:  # fmt: skip
        self.produced.append(key)

    def flush(self, timeout: float) -> int:
        return 1  # one record still unacknowledged, whatever the wait


def test_a_transaction_known_to_fail_does_not_hold_the_record_waiting() -> None:
    txn = TransactionalProducer({}, timeout_s=5.0)
    held = HeldBack()
    txn._producer = held  # type: ignore[assignment]
    started = time.monotonic()
    txn.produce_alone(OutRecord("t", b"big", b"v", 0), None, failing=lambda: True)
    assert time.monotonic() - started < 1.0  # not the 2 x 5 s a healthy one may wait
    assert held.produced == [b"big"]  # produced all the same: the commit aborts it
