"""Changelog capture (overlay → changelog records) and restore (changelog → store).

Restore runs in bounded chunks called from the processing loop, so a large restore never
blocks the loop (heartbeats, max.poll.interval.ms, the other tasks' work).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicCollection, TopicPartition

# confluent_kafka.admin documents these names but re-exports them implicitly (mypy strict).
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    ResourceType,
)

from schedulerstream.clock import Clock
from schedulerstream.errors import StateError, UndecodableRecord
from schedulerstream.kafka import clients
from schedulerstream.runtime.store import (
    NO_OFFSET,
    StateStore,
    StoreCorrupted,
    StoreUnavailable,
    StoreWriteFailed,
)
from schedulerstream.runtime.task import RestoreStats, Task, TaskState
from schedulerstream.runtime.transaction import TransactionalProducer

log = logging.getLogger(__name__)

RestoreRecord = Callable[[StateStore, bytes, bytes | None], None]


def capture(task: Task, producer: TransactionalProducer, topic: str) -> int:
    """Produce the task's logged overlay entries to its changelog partition; return how many.

    One record per key (its last value in this transaction); a deleted key is a tombstone.
    Only the last record reports its delivery (its offset is the task's changelog offset):
    one that fails before it fails the transaction's commit. Keys are distinct, so the order
    among them does not matter to a restore.
    """
    records = list(task.require_store().logged_changes())
    producer.produce_many(topic, task.partition, records, task.on_changelog_delivery)
    return len(records)


@dataclass(frozen=True)
class Changelog:
    """What a restore needs to know of a changelog topic besides its records."""

    topic: str
    topic_id: str  # a store of a deleted-and-recreated topic is not trusted
    tombstones_ms: int  # delete.retention.ms: how long the broker keeps a deletion


KAFKA_TOMBSTONES_MS = 86_400_000  # Kafka's default delete.retention.ms


def describe(admin_config: dict[str, Any], topic: str, timeout_s: float = 10.0) -> Changelog:
    """The changelog topic's id and tombstone retention, from the cluster. A retention that
    cannot be read (DescribeConfigs refused, a broker that does not say) is taken as Kafka's
    default, with a warning."""
    admin = AdminClient(admin_config)
    try:
        description = admin.describe_topics(TopicCollection([topic]))[topic].result(timeout_s)
    except Exception as exc:
        raise StateError(f"changelog topic {topic} cannot be described: {exc}") from exc
    resource = ConfigResource(ResourceType.TOPIC, topic)
    try:
        configs = admin.describe_configs([resource], request_timeout=timeout_s)
        tombstones_ms = int(configs[resource].result(timeout_s)["delete.retention.ms"].value)
    except Exception as exc:
        log.warning("cannot read delete.retention.ms of %s (%s; `schedulerstream acls apply` "
                    "grants DescribeConfigs): taking Kafka's default, %d ms",
                    topic, exc, KAFKA_TOMBSTONES_MS)  # fmt: skip
        tombstones_ms = KAFKA_TOMBSTONES_MS
    return Changelog(topic, str(description.topic_id), tombstones_ms)


LOGGED_SKIPS = 5  # unreadable records logged one by one on a partition; then a count


class Restorer:
    """Replays changelog partitions into the stores of RESTORING tasks.

    Warm restore: a store whose metadata matches the changelog replays from its stored
    offset + 1. A store that does not match (other topic or topic id, missing or corrupt
    offset, offset outside the log) is wiped and restored cold from the log start, and so is
    a stale one: last current more than half the changelog's tombstone retention ago, with
    records written to the log since. Compaction may drop a deletion's tombstone after that
    retention, so a replay from an older offset could keep a key deleted since (a deleted
    job would fire). A store is current when its owner commits, and when a replay catches
    up; a cold replay counts from when it began (a value it read was in the log then, so
    that key's later tombstone was not yet cleaned), a warm one keeps the time it had.
    """

    def __init__(
        self,
        committed_config: dict[str, Any],
        uncommitted_config: dict[str, Any],
        changelog: Changelog,
        restore_record: RestoreRecord,
        clock: Clock,
        chunk: int = 10_000,
        timeout_s: float = 10.0,
        metrics: dict[str, float] | None = None,
    ) -> None:
        """``metrics``: the processor's counters (``changelog_records_skipped``)."""
        self.topic = topic = changelog.topic
        self._metrics = metrics if metrics is not None else {}
        self._metrics.setdefault("changelog_records_skipped", 0)
        self._skips: dict[int, int] = {}  # partition → records skipped (see _skipped)
        self._source_prefix = f"{topic}\0{changelog.topic_id}\0".encode()
        self._stale_after_us = changelog.tombstones_ms * 1000 // 2
        self._clock = clock
        self._restore_record = restore_record
        self._chunk = chunk
        self._timeout_s = timeout_s
        self._consumer = Consumer({**committed_config, "fetch.wait.max.ms": 50})
        # Watermark queries use clients that never fetch: a broker answers one request per
        # connection at a time, so a fetch long-poll would delay them (fetch.wait.max.ms).
        self._stable = Consumer(committed_config)
        self._uncommitted = Consumer(uncommitted_config)
        self._tasks: dict[int, Task] = {}
        self._eof: dict[int, int] = {}

    def close(self) -> None:
        self._consumer.close()
        self._stable.close()
        self._uncommitted.close()

    def restoring(self) -> bool:
        return bool(self._tasks)

    def _tp(self, task: Task, offset: int | None = None) -> TopicPartition:
        if offset is None:
            return TopicPartition(self.topic, task.partition)
        return TopicPartition(self.topic, task.partition, offset)

    def start(self, task: Task, state: TaskState = TaskState.RESTORING) -> None:
        """Open the task's store, decide warm or cold, and begin replaying (``state``:
        RESTORING, or STANDBY for a copy that follows the log until it is closed).

        A KafkaException (log end unknown) or a store that cannot be read (StoreUnavailable)
        leaves the task as it was, to be retried."""
        store = task.open_store()
        low, end = self.watermarks(self._tp(task))
        source = self._source_prefix + str(task.partition).encode()
        offset = store.changelog_offset()
        start = NO_OFFSET + 1 if offset is None else offset + 1
        cold = offset is None or offset == NO_OFFSET
        written = store.written_us()
        age_us = 0 if written is None else self._clock.now_us() - written
        # the log's last record is a commit marker: one more offset moved nothing
        stale = age_us > self._stale_after_us and end > start + 1
        mismatch = store.source() != source or offset is None or start > end or start < low
        occupied = (mismatch or stale) and not store.is_empty()
        task.transition(state)  # every read that can raise is done
        if mismatch or stale:
            if occupied:
                log.warning(
                    "task %d: store does not match %s (offset %s, log %d..%d, last written "
                    "%.1f h ago): rebuilding", task.partition, self.topic, offset, low, end,
                    age_us / 3.6e9,
                )  # fmt: skip
                store = store.wipe()
                task.store = store
            store.set_source(source, self._clock.now_us())
            start, cold = low, True
        task.committed_changelog_offset = start - 1
        task.pending_changelog_offset = start - 1
        task.restore = RestoreStats(start_offset=start, end_offset=end, cold=cold)
        task.restore_position = start
        self._tasks[task.partition] = task
        self._eof.pop(task.partition, None)
        self._consumer.incremental_assign([self._tp(task, start)])

    def watermarks(self, tp: TopicPartition, committed: bool = True) -> tuple[int, int]:
        """(log start, end) of any partition; the end is the LSO when ``committed``."""
        client = self._stable if committed else self._uncommitted
        return clients.watermarks(client, tp, self._timeout_s)

    def stop(self, task: Task) -> None:
        """Stop replaying for ``task`` (caught up, revoked or closed)."""
        if self._tasks.pop(task.partition, None) is not None:
            self._consumer.incremental_unassign([self._tp(task)])
            self._eof.pop(task.partition, None)

    def poll(self, timeout_s: float) -> list[Task]:
        """Apply up to one chunk of changelog records; return the tasks now caught up.

        A store that fails to apply a record (StoreCorrupted, StoreUnavailable) gets no more
        of the chunk, the other tasks get all of theirs, and then that error is raised. Every
        store that failed is first rewound: its unflushed records dropped and its replay
        sought back to its last flushed offset, so none of its records is skipped if it stays
        (one whose error is not the raised one fails again on a later poll). A record the
        topology cannot read (``UndecodableRecord``) is skipped, logged and counted: it
        leaves its store as it was, and a restore never stops on it."""
        if not self._tasks:
            return []
        touched: dict[int, Task] = {}
        damaged: dict[int, StoreCorrupted | StoreUnavailable] = {}
        for msg in self._consumer.consume(self._chunk, timeout_s):
            partition, offset, err = msg.partition(), msg.offset(), msg.error()
            if partition is None or offset is None:
                continue
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    self._eof[partition] = offset
                else:
                    log.warning("restore consumer: %s", err)
                continue
            task = self._tasks.get(partition)
            key, value = msg.key(), msg.value()
            if task is None or offset < task.restore_position or not isinstance(key, bytes):
                continue
            if partition in damaged or (value is not None and not isinstance(value, bytes)):
                continue
            try:
                self._restore_record(task.require_store(), key, value)
            except (StoreCorrupted, StoreUnavailable) as exc:
                damaged[partition] = exc
                continue
            except UndecodableRecord as exc:
                self._skipped(partition, offset, exc)
            task.restore_position = offset + 1
            task.restore.records += 1
            task.restore.bytes += len(key) + (len(value) if value else 0)
            touched[task.partition] = task
        for partition in damaged:
            touched.pop(partition, None)
            self._rewind(self._tasks[partition])
        for task in touched.values():
            store = task.require_store()
            current = self._clock.now_us() if self._caught_up(task) else None
            try:
                store.flush(task.restore_position - 1, current)
            except Exception as exc:  # the disk is full, for instance: replay these later
                store.discard()
                raise StoreWriteFailed(store.path, exc) from exc
            task.committed_changelog_offset = task.restore_position - 1
            task.pending_changelog_offset = task.committed_changelog_offset
        if damaged:
            raise next(iter(damaged.values()))
        return [t for t in self._tasks.values() if self._caught_up(t)]

    def _skipped(self, partition: int, offset: int, exc: UndecodableRecord) -> None:
        """Count a skipped record; log the first few of a partition, then every thousandth
        (a changelog flooded with them must not flood the log at every restore)."""
        self._metrics["changelog_records_skipped"] += 1
        count = self._skips[partition] = self._skips.get(partition, 0) + 1
        if count <= LOGGED_SKIPS or count % 1000 == 0:
            log.error("%s partition %d offset %d: changelog record skipped, it cannot be read "
                      "(%d so far on this partition): %s", self.topic, partition, offset, count,
                      exc)  # fmt: skip

    def _rewind(self, task: Task) -> None:
        """Drop ``task``'s unflushed records and replay it again from its last flushed
        offset (a refused seek: its partition is assigned again there)."""
        task.require_store().discard()
        task.restore_position = task.committed_changelog_offset + 1
        self._eof.pop(task.partition, None)
        tp = self._tp(task, task.restore_position)
        try:
            self._consumer.seek(tp)
        except KafkaException:
            self._consumer.incremental_unassign([self._tp(task)])
            self._consumer.incremental_assign([tp])

    def _position(self, task: Task) -> int:
        position = max(task.restore_position, self._eof.get(task.partition, -1))
        if position < task.restore.end_offset:
            consumer_position = self._consumer.position([self._tp(task)])[0].offset
            position = max(position, consumer_position)
        return position

    def _caught_up(self, task: Task) -> bool:
        return self._position(task) >= task.restore.end_offset

    def settled(self, task: Task) -> bool:
        """Re-check the log end now (after the input offsets were fetched): True when the
        task has everything committed and no transaction is open on its changelog."""
        tp = self._tp(task)
        _, stable = self.watermarks(tp)
        _, high = self.watermarks(tp, committed=False)
        if stable > task.restore.end_offset:
            task.restore.end_offset = stable
        if not self._caught_up(task) or high > stable:
            return False
        task.restore.finished = time.monotonic()
        return True
