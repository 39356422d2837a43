"""The Committer: the one transactional producer of a processor and the commit protocol.

``commit`` is the one place a transaction ends well and ``abort`` the one place it ends
badly. Everything a callback produces goes through ``produce``, which charges each record to
its origin (``runtime/charges.py``), so a record the broker refuses fails that origin alone.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from schedulerstream.clock import Clock
from schedulerstream.errors import DependencyDown, FencedError
from schedulerstream.histogram import DURATION_BUCKETS, Histogram
from schedulerstream.runtime.changelog import capture
from schedulerstream.runtime.charges import Charges, TopicLookup
from schedulerstream.runtime.context import OutRecord, TaskContext, refused_output, rejected_output
from schedulerstream.runtime.quarantine import Quarantine
from schedulerstream.runtime.task import Task
from schedulerstream.runtime.topology import Topology
from schedulerstream.runtime.transaction import (
    Failure,
    TransactionalProducer,
    TransactionFailed,
    classify,
    kafka_error,
)

log = logging.getLogger(__name__)

GAP_ABORT_S = 0.5  # an abort after a refusal (see ``abort``)
Recover = Callable[[TransactionFailed], None]  # abort, then rebuild the running tasks
WriteFailed = Callable[[Task], None]  # a task's local write failed: rebuild it


class Committer:
    """Produces every output of one processor and commits it with the input offsets and the
    changelog (steps 0–6 of ``commit``)."""

    def __init__(
        self,
        txn: TransactionalProducer,
        topology: Topology,
        *,
        rejected_topic: str,
        group_id: str,
        max_record_bytes: int,
        metrics: dict[str, float],
        lookup: TopicLookup,
        clock: Clock,
    ) -> None:
        self.txn = txn
        self.clock = clock
        self.topology = topology
        self.rejected_topic = rejected_topic
        self.group_id = group_id
        self.max_record = max_record_bytes
        self.metrics = metrics
        self.commit_seconds = Histogram(DURATION_BUCKETS)  # of the commits that succeeded
        # origins whose records the broker refused: the replay takes them out (DESIGN.md §8)
        self.quarantine = Quarantine()
        self.owned = frozenset((topology.changelog_topic, rejected_topic, *topology.owned_topics))
        self.charges = Charges(self.owned, self.quarantine, lookup)
        self.dirty = False  # the open transaction holds something to commit
        self._last_abort = ""

    # -- producing ----------------------------------------------------------------------
    def produce(
        self, partition: int, outputs: list[OutRecord], origin: str | None = None,
        sized: bool = False,
    ) -> None:  # fmt: skip
        """Produce a callback's outputs; a record refused by the broker is charged to its
        origin (or ``origin``). One too large to send is not sent: its origin is quarantined
        (the topology learns of it at its next callback) and the rejected topic says so
        (``sized``: the caller found none too large)."""
        for output in outputs:
            charged = output.origin or origin
            if charged is not None and self.quarantine.failures(partition, charged) > 1:
                # refused twice: the topology did not take it out, so the runtime does
                reason = self.quarantine.reason(partition, charged) or "refused twice"
                self.quarantine.count("record_dropped", f"{charged}: {reason}")
                self.txn.produce(refused_output(self.rejected_topic, output, reason,
                                                self.group_id),
                                 self.charges.plain_callback())  # fmt: skip
                continue
            if not sized and output.size() > self.max_record:
                reason = self.too_large(output)
                if charged is not None:
                    self.quarantine.add(partition, charged, reason, "record_too_large")
                else:
                    self.quarantine.count("record_too_large", reason)
                self.txn.produce(refused_output(self.rejected_topic, output, reason,
                                                self.group_id),
                                 self.charges.plain_callback())  # fmt: skip
                continue
            if charged is None:
                self.txn.produce(output, self.charges.plain_callback())
                continue
            try:
                callback = self.charges.callback(partition, charged, output.topic)
                if output.alone:
                    self.txn.produce_alone(output, callback, self.charges.failing)
                else:
                    self.txn.produce(output, callback)
            except KafkaException as exc:  # e.g. its topic is known to be gone
                charged_output = output._replace(origin=charged)
                if not self.charges.refused_at_produce(partition, charged_output, exc):
                    raise

    def reject(self, msg: Any, reason: str) -> None:
        """Send an input record to the rejected topic with ``reason``."""
        self.metrics["records_rejected"] += 1
        log.warning("rejected %s[%d]@%d: %s", msg.topic(), msg.partition(), msg.offset(), reason)
        output = rejected_output(self.rejected_topic, msg, reason, self.group_id, self.max_record)
        self.txn.produce(output, self.charges.plain_callback())

    def too_large(self, output: OutRecord) -> str:
        return (
            f"a record of {output.size():,} bytes for {output.topic!r} is over the limit of "
            f"{self.max_record:,} (SCHEDULERSTREAM_MAX_RECORD_BYTES)"
        )

    # -- committing ---------------------------------------------------------------------
    def commit(
        self,
        running: Sequence[Task],
        contexts: Sequence[TaskContext],
        consumer: Consumer,
        recover: Recover,
        write_failed: WriteFailed,
    ) -> bool:
        """Commit the open transaction; True when something was committed.

        (0) ``topology.pre_commit`` with every RUNNING task's context (writes outside Kafka,
            e.g. the projector's SQL batch) and produce what it produced,
        (1) produce each RUNNING task's logged overlay entries to its changelog partition,
        (2) flush the producer: every output and changelog record is acknowledged (a record
            refused meanwhile ends the wait: ``Charges.check``),
        (3) send_offsets_to_transaction with the positions of the owned input partitions
            and FRESH group metadata (a zombie's stale generation/epoch is refused here),
        (4) commit_transaction,
        (5) write each task's overlay and its changelog offset in one local WriteBatch,
        (6) ``topology.after_commit``: side effects that wait for their state to be committed.
        Any failure in (0)-(4) goes to ``recover`` (a BaseException from (0) is re-raised
        after it); nothing local was written. (0) precedes (4): an external write is never
        behind the committed offsets, and a crash in between replays its records.
        """
        if not self.dirty:
            return False
        if not running:
            recover(TransactionFailed(Failure.ABORTABLE, "no running task to commit"))
            return False
        started = time.perf_counter()
        if not self._pre_commit(contexts, recover):  # (0)
            return False
        try:
            for task in running:  # (1)
                self.metrics["changelog_records"] += capture(
                    task, self.txn, self.topology.changelog_topic
                )
            self.charges.start_flush()

            def check() -> None:
                self.charges.check()
                failed = [t.changelog_error for t in running if t.changelog_error]
                if failed:
                    raise TransactionFailed(Failure.ABORTABLE, f"changelog delivery: {failed[0]}")

            self.txn.flush(check)  # (2)
            check()
            offsets = [
                TopicPartition(topic, task.partition, offset)
                for task in running
                for topic, offset in task.input_offsets.items()
            ]
            validated = time.monotonic()  # the group checks this member in (3)
            self.txn.send_offsets(offsets, consumer.consumer_group_metadata())  # (3)
            self.txn.commit()  # (4)
        except (KafkaException, TransactionFailed) as exc:
            recover(classify(exc))
            return False
        for task in running:  # (5)
            if not self._write_local(task):
                write_failed(task)
        self.dirty = False
        self._last_abort = ""
        self.charges.committed()
        self.quarantine.committed()
        self.metrics["commits"] += 1
        self.commit_seconds.observe(time.perf_counter() - started)
        try:  # (6)
            self.topology.after_commit(validated)
        except Exception:
            log.exception("after_commit failed")
        return True

    def _pre_commit(self, contexts: Sequence[TaskContext], recover: Recover) -> bool:
        """Step (0) of ``commit``; False (transaction aborted) when ``pre_commit`` failed."""
        try:
            self.topology.pre_commit(contexts)
            for ctx in contexts:
                self.produce(ctx.partition, ctx.take_outputs())
        except KafkaException as exc:
            recover(classify(exc))
            return False
        except DependencyDown as exc:  # the processor stops: re-raised after the abort
            recover(TransactionFailed(Failure.ABORTABLE, f"pre_commit: {exc}"))
            raise
        except Exception as exc:
            log.warning("pre_commit failed: %s: %s", type(exc).__name__, exc)
            recover(TransactionFailed(Failure.ABORTABLE, f"pre_commit: {exc}"))
            return False
        except BaseException:
            recover(TransactionFailed(Failure.ABORTABLE, "pre_commit interrupted"))
            raise
        return True

    def _write_local(self, task: Task) -> bool:
        """Step (5) for one task; False when the store could not be written (disk full)."""
        store = task.require_store()
        if not store.has_pending() and task.pending_changelog_offset == (
            task.committed_changelog_offset
        ):
            return True
        try:
            store.flush(task.pending_changelog_offset, self.clock.now_us())
        except Exception as exc:  # the disk is full, say: the changelog has it all
            log.error("task %d: local write failed (%s); restoring from the changelog",
                      task.partition, exc)  # fmt: skip
            self.metrics["store_write_failures"] += 1
            return False
        task.committed_changelog_offset = task.pending_changelog_offset
        return True

    # -- aborting -----------------------------------------------------------------------
    def abort(self, failure: TransactionFailed) -> None:
        """Abort the open transaction (or, when fatal, replace the producer), charging what
        its delivery reports name to their origins; the caller rebuilds the tasks."""
        log.warning("transaction failed (%s): %s", failure.failure.value, failure.reason)
        self.metrics["aborts"] += 1
        with contextlib.suppress(KafkaException):
            self.txn.poll()  # serve the delivery reports that say which record failed
        cause = self.charges.aborted() or failure.reason
        self.quarantine.aborted()
        if cause == self._last_abort:  # a replay that cannot get past it: surface it
            log.error("the same failure aborted two transactions in a row: %s", cause)
            self.quarantine.count("repeated_abort", cause)
        self._last_abort = cause
        kind = failure.failure
        # A record the broker refused spent its sequence number: the replay's records for
        # its partition would fail as out of order, so a fresh producer (a new epoch) is
        # made after the abort. Such an abort may wait out message.timeout.ms for records
        # librdkafka holds back, so it gets a short time: a new epoch aborts it anyway.
        if kind is Failure.ABORTABLE:
            try:
                self.txn.abort(GAP_ABORT_S if self.charges.sequence_gap else None)
            except KafkaException as exc:
                log.warning("abort failed: %s", exc)
                kind = Failure.FATAL
        if kind is Failure.ABORTABLE and self.charges.sequence_gap:  # reports served in abort
            log.info("a new producer: the broker refused a record, whose sequence is spent")
            kind = Failure.FATAL
        if kind is Failure.FATAL:
            self.metrics["producer_recreations"] += 1
            try:
                self.txn.recreate()
            except KafkaException as exc:
                err = kafka_error(exc)
                raise FencedError(f"cannot recreate the transactional producer: {err}") from exc
        if kind is Failure.FATAL:  # the old producer's last reports are in: its gap went too
            self.charges.sequence_gap = False
        if failure.group_fenced:
            self.metrics["group_fenced"] += 1
        self.dirty = False
