"""The processor's one transactional producer, and how its errors are classified."""

from __future__ import annotations

import contextlib
import enum
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from schedulerstream.errors import SchedulerStreamError
from schedulerstream.runtime.context import OutRecord
from schedulerstream.runtime.watchdog import Watchdog

log = logging.getLogger(__name__)

DeliveryCallback = Callable[[Any, Any], None]
FLUSH_SLICE_S = 0.1

# Errors after which this producer (or its group membership) can no longer be trusted.
FATAL_CODES = frozenset(
    {
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
        KafkaError.INVALID_PRODUCER_ID_MAPPING,
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        KafkaError.UNKNOWN_PRODUCER_ID,
    }
)
# The consumer's group generation/epoch is stale: the offsets were refused, abort.
GROUP_CODES = frozenset(
    {
        KafkaError.UNKNOWN_MEMBER_ID,
        KafkaError.STALE_MEMBER_EPOCH,
        KafkaError.FENCED_MEMBER_EPOCH,
        KafkaError.ILLEGAL_GENERATION,
        KafkaError.REBALANCE_IN_PROGRESS,
        KafkaError.FENCED_INSTANCE_ID,
    }
)


class Failure(enum.Enum):
    """What a failed transaction needs: an abort, or a new producer."""

    ABORTABLE = "abortable"
    FATAL = "fatal"


class _Failing(SchedulerStreamError):
    """(``produce_alone``) the transaction is known to fail: stop waiting."""


class TransactionFailed(SchedulerStreamError):
    """A step of the commit protocol failed; ``failure`` says how to recover."""

    def __init__(self, failure: Failure, reason: str, group_fenced: bool = False) -> None:
        super().__init__(reason)
        self.failure = failure
        self.reason = reason
        self.group_fenced = group_fenced


def fence(config: dict[str, Any], timeout_s: float) -> None:
    """Fence the transactional id in ``config`` (a departed member's): ``init_transactions``
    bumps its epoch, so its open transaction is aborted now and a zombie holding it can
    no longer commit. Raises KafkaException when the coordinator does not answer."""
    producer = Producer(config)
    try:
        producer.init_transactions(timeout_s)
    finally:
        with contextlib.suppress(KafkaException):
            producer.flush(0)


def kafka_error(exc: BaseException) -> KafkaError | None:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def classify(exc: BaseException) -> TransactionFailed:
    """Map a client exception to the recovery it needs (unknown errors are fatal)."""
    if isinstance(exc, TransactionFailed):
        return exc
    err = kafka_error(exc)
    if err is None:
        return TransactionFailed(Failure.FATAL, f"{type(exc).__name__}: {exc}")
    reason = f"{err.name()}: {err.str()}"
    group_fenced = err.code() in GROUP_CODES
    if err.fatal() or err.code() in FATAL_CODES:
        return TransactionFailed(Failure.FATAL, reason, group_fenced)
    return TransactionFailed(Failure.ABORTABLE, reason, group_fenced)


class TransactionalProducer:
    """A transactional producer with a lazily begun transaction.

    ``begun`` is True once a record was produced (or offsets are about to be sent) in the
    current transaction; nothing reaches the broker for a transaction never begun.
    """

    def __init__(
        self, config: dict[str, Any], timeout_s: float = 30.0, watchdog: Watchdog | None = None
    ) -> None:
        self._config = config
        self.timeout_s = timeout_s
        # a blocking call still running this long after its own timeout is stuck
        self.hung_after_s = 2 * timeout_s + 30
        self._watchdog = watchdog or Watchdog()
        self._producer: Producer | None = None
        self.begun = False
        self.produced = 0

    @property
    def producer(self) -> Producer:
        if self._producer is None:
            raise KafkaException(KafkaError(KafkaError._STATE, "producer not started"))
        return self._producer

    def start(self) -> None:
        """Create the producer and fence older instances of its transactional id."""
        self._producer = Producer(self._config)
        with self._watchdog.guard("init_transactions", self.hung_after_s):
            self._producer.init_transactions(self.timeout_s)
        self.begun = False

    def close(self) -> None:
        """Abort a begun transaction (best effort) and drop the producer."""
        if self._producer is None:
            return
        if self.begun:
            try:
                self._producer.abort_transaction(min(self.timeout_s, 10.0))
            except KafkaException as exc:
                log.warning("abort on close failed: %s", exc)
        with contextlib.suppress(KafkaException):  # a fenced producer raises its error here
            self._producer.flush(0)
        self._producer = None
        self.begun = False

    def recreate(self) -> None:
        """Replace a producer in a fatal state with a fresh one (init_transactions again)."""
        if self._producer is not None:
            # a producer in a fatal state (fenced) raises that error from these too: it is being
            # dropped, so its error must not stop the new one from being created
            with contextlib.suppress(KafkaException):
                self._producer.purge()
            with contextlib.suppress(KafkaException):
                self._producer.flush(0)
            self._producer = None
        self.begun = False
        self.start()

    def begin(self) -> None:
        if not self.begun:
            self.producer.begin_transaction()
            self.begun = True

    def produce(self, output: OutRecord, on_delivery: DeliveryCallback | None = None) -> None:
        """Produce one record in the transaction, waiting for queue space if it is full."""
        if not self.begun:
            self.begin()
        topic, key, value, partition, headers = output[:5]
        produce = self.producer.produce
        while True:
            try:
                produce(
                    topic,
                    value,
                    key,
                    -1 if partition is None else partition,
                    on_delivery=on_delivery,
                    headers=headers,
                )
                break
            except BufferError:
                self.producer.poll(0.05)
        self.produced += 1

    def produce_many(
        self,
        topic: str,
        partition: int,
        records: Sequence[tuple[bytes, bytes | None]],
        on_last: DeliveryCallback | None = None,
    ) -> None:
        """Produce ``(key, value)`` records to one partition in the transaction, in order, in
        one call (``bench/bench_capture.py``: 1.6-2.0 µs a record one by one, 0.6-0.8 in a
        batch). When the queue fills midway, librdkafka refuses every record from there on:
        those are produced again once it drains. The last one reports its delivery to
        ``on_last``. Another refusal raises ``KafkaException`` like ``produce``."""
        if not records:
            return
        if not self.begun:
            self.begin()
        messages: list[dict[str, Any]] = [{"key": k, "value": v} for k, v in records]
        if on_last is not None:
            messages[-1]["callback"] = on_last
        while True:
            self.producer.produce_batch(topic, messages, partition=partition)
            failed = [m for m in messages if "_error" in m]
            self.produced += len(messages) - len(failed)
            if not failed:
                return
            for message in failed:
                error = message.pop("_error")
                if error.code() != KafkaError._QUEUE_FULL:
                    raise KafkaException(error)
            messages = failed
            self.producer.poll(0.05)

    def produce_alone(
        self,
        output: OutRecord,
        on_delivery: DeliveryCallback | None = None,
        failing: Callable[[], bool] | None = None,
    ) -> None:
        """``produce`` in a batch of its own: what was produced before is sent and answered
        first, and nothing produced after joins it (the broker judges its size alone). The
        waits end as soon as ``failing`` says the transaction cannot commit: it aborts at
        its commit, and its replay sends the record alone again."""

        def check() -> None:
            if failing is not None and failing():
                raise _Failing

        with contextlib.suppress(_Failing):
            self._wait(check)
        self.produce(output, on_delivery)
        with contextlib.suppress(_Failing):
            self._wait(check)

    def poll(self) -> None:
        if self._producer is not None:
            self._producer.poll(0)

    def flush(self, check: Callable[[], None] | None = None) -> None:
        """Wait for every record of the transaction to be acknowledged; ``check`` is called
        between short waits and may end the wait by raising (a transaction known to fail)."""
        remaining = self._wait(check)
        if remaining:
            raise TransactionFailed(Failure.ABORTABLE, f"{remaining} records unacknowledged")

    def _wait(self, check: Callable[[], None] | None = None) -> int:
        """``flush``'s wait; the records still unacknowledged when it gave up."""
        deadline = time.monotonic() + self.timeout_s
        with self._watchdog.guard("flush", self.hung_after_s):
            while True:
                left = deadline - time.monotonic()
                remaining: int = self.producer.flush(max(0.0, min(FLUSH_SLICE_S, left)))
                if not remaining or left <= 0:
                    return remaining
                if check is not None:
                    check()

    def send_offsets(self, offsets: Sequence[TopicPartition], group_metadata: Any) -> None:
        """Add the consumed offsets to the transaction, fenced by the group metadata (step 2)."""
        self.begin()
        with self._watchdog.guard("send_offsets_to_transaction", self.hung_after_s):
            self.producer.send_offsets_to_transaction(list(offsets), group_metadata, self.timeout_s)

    def commit(self, attempts: int = 3) -> None:
        """Commit the transaction (step 3); a retriable timeout is retried, and an outcome
        still unknown after ``attempts`` is fatal (recovery rereads the changelog)."""
        for attempt in range(1, attempts + 1):
            try:
                with self._watchdog.guard("commit_transaction", self.hung_after_s):
                    self.producer.commit_transaction(self.timeout_s)
                self.begun = False
                return
            except KafkaException as exc:
                err = kafka_error(exc)
                if err is None or err.fatal() or err.txn_requires_abort() or not err.retriable():
                    raise
                log.warning("commit attempt %d: %s", attempt, err)
                time.sleep(0.1 * attempt)
        raise TransactionFailed(Failure.FATAL, "commit outcome unknown")

    def abort(self, timeout_s: float | None = None) -> None:
        """Abort the begun transaction (if any) within ``timeout_s`` (default: the producer's
        timeout); a KafkaException when it cannot (``recreate`` then fences it)."""
        if self.begun:
            with self._watchdog.guard("abort_transaction", self.hung_after_s):
                self.producer.abort_transaction(self.timeout_s if timeout_s is None else timeout_s)
            self.begun = False
