"""CancelWatch: reads cancel records behind the offers this worker runs.

The group consumer pauses its partitions while the worker is at capacity, so it would not see
a cancel record behind the offer it is running. This group-less consumer follows just the
partitions with a running handler, from the record after that handler's offer.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from schedulerstream.contracts.worker import WorkCancel, decode_work
from schedulerstream.ingest import RejectedRecord

log = logging.getLogger(__name__)


class CancelWatch:
    """``watch(partition, offset)`` per running handler, ``unwatch`` when it ends."""

    def __init__(self, config: dict[str, Any], topic: str) -> None:
        self.topic = topic
        self._consumer = Consumer(config)
        self._refs: Counter[int] = Counter()

    def watch(self, partition: int, offset: int) -> None:
        """Follow ``partition`` from ``offset`` (the record after the claimed offer)."""
        self._refs[partition] += 1
        if self._refs[partition] == 1:
            self._consumer.incremental_assign([TopicPartition(self.topic, partition, offset)])

    def unwatch(self, partition: int) -> None:
        if self._refs[partition] <= 0:
            return
        self._refs[partition] -= 1
        if self._refs[partition] == 0:
            del self._refs[partition]
            self._consumer.incremental_unassign([TopicPartition(self.topic, partition)])

    def poll(self) -> list[WorkCancel]:
        """Cancel records read since the last call (offers are skipped)."""
        if not self._refs:
            return []
        cancels: list[WorkCancel] = []
        for message in self._consumer.consume(500, timeout=0):
            if message.error() is not None:
                log.warning("cancel watch: %s", message.error())
                continue
            try:
                record = decode_work(message.key(), message.value())
            except RejectedRecord:
                continue  # the group consumer logs bad records
            if isinstance(record, WorkCancel):
                cancels.append(record)
        return cancels

    def close(self) -> None:
        self._consumer.close()
