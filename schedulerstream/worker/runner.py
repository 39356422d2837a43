"""WorkerRunner: one member of a pool's consumer group running offers on a WorkerApp.

Per offer read from ``{prefix}work.{pool}`` (read_committed): skip it when its claim window
or deadline passed, it was cancelled, or it is already running here; fail it unrun when it is
of a tenant the worker does not serve (``tenants``) or has no handler; else report ``claimed``
on ``{prefix}worker-events``, commit the offer's offset and start the handler. While it runs,
heartbeat every lease/3; at the end report ``succeeded`` or ``failed`` (a cancelled attempt
reports nothing: the dispatcher already ended it). At ``concurrency`` running handlers the
group's partitions are paused, and ``CancelWatch`` reads the cancel records behind them.

Offsets are committed once an offer is claimed: the dispatcher's lease, not the consumer
offset, brings back the work of a worker that dies (its lease expires, the run is offered
again with the next attempt number).
"""

from __future__ import annotations

import logging
import time
from collections import Counter, OrderedDict
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, Message, Producer, TopicPartition

from schedulerstream.clock import Clock, SystemClock
from schedulerstream.contracts.worker import WorkCancel, WorkerEvent, WorkOffer, decode_work
from schedulerstream.errors import ConfigError, FencedError, SchedulerStreamError
from schedulerstream.ingest import RejectedRecord
from schedulerstream.kafka.clients import base_config, consumer_config, producer_config
from schedulerstream.kafka.topics import ensure_work_topic
from schedulerstream.partitioner import partition_for_job_key
from schedulerstream.settings import Settings
from schedulerstream.worker.app import Job, JobFailed, WorkerApp
from schedulerstream.worker.cancels import CancelWatch
from schedulerstream.worker.execution import Execution

log = logging.getLogger(__name__)
REMEMBERED_CANCELS = 10_000


@dataclass(slots=True)
class Running:
    """A handler at work on one offer."""

    offer: WorkOffer
    job: Job
    future: Future[Any]
    partition: int
    started_us: int
    next_beat: float  # monotonic seconds


class WorkerRunner:
    """Consume one pool's offers and run them; ``run()`` until ``stop()`` (signal-safe)."""

    def __init__(self, settings: Settings, app: WorkerApp, pool: str, *, concurrency: int = 1,
                 worker_id: str | None = None, clock: Clock | None = None,
                 drain_s: float = 30.0, tenants: frozenset[str] | None = None) -> None:  # fmt: skip
        if concurrency < 1:
            raise ConfigError("concurrency must be at least 1")
        self.settings = settings
        self.app = app
        self.pool = pool
        self.concurrency = concurrency
        self.worker_id = worker_id or settings.instance_id
        self.clock: Clock = clock or SystemClock()
        self.drain_s = drain_s
        self.tenants = tenants  # whose work it takes (None: anyone's)
        self.topic = settings.topics.work(pool)
        self.events_topic = settings.topics.worker_events
        self.group_id = self.topic
        self.counters: Counter[str] = Counter()
        self._execution = Execution()
        self._running: dict[tuple[str, int], Running] = {}  # by (run id, attempt)
        self._cancelled: OrderedDict[tuple[str, int], str] = OrderedDict()
        self._rewound: dict[int, int] = {}  # partition → offset of an offer put back
        self._paused = False
        self._stopping = False
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self._cancels: CancelWatch | None = None

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> None:
        """Create the work topic if needed, the producer and both consumers."""
        # past SCHEDULERSTREAM_MAX_WORK_POOLS too: the cap keeps tenants' job definitions from
        # making pools; starting a pool's worker is an operator's deliberate act
        ensure_work_topic(self.settings, self.pool)
        self._producer = Producer(producer_config(self.settings))
        self._consumer = Consumer(consumer_config(self.settings, self.group_id))
        self._consumer.subscribe([self.topic], on_assign=self._on_assign,
                                 on_revoke=self._on_revoke)  # fmt: skip
        watch = base_config(self.settings)
        watch.update({"group.id": f"{self.group_id}-cancels", "isolation.level": "read_committed",
                      "enable.auto.commit": False, "enable.partition.eof": False})  # fmt: skip
        self._cancels = CancelWatch(watch, self.topic)
        log.info("worker=%s pool=%s topic=%s concurrency=%d ready", self.worker_id, self.pool,
                 self.topic, self.concurrency)  # fmt: skip

    def run(self) -> None:
        """Work until ``stop()``; then wait up to ``drain_s`` for running handlers."""
        if self._consumer is None:
            self.start()
        try:
            while not self._stopping:
                self.step()
            deadline = time.monotonic() + self.drain_s
            while self._running and time.monotonic() < deadline:
                self.step()
            for running in self._running.values():  # not reported: the lease brings them back
                self._execution.cancel(running.job, running.future)
        finally:
            self.close()

    def stop(self) -> None:
        """Stop taking offers (from a signal handler too)."""
        self._stopping = True

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        if self._cancels is not None:
            self._cancels.close()
            self._cancels = None
        if self._producer is not None:
            self._producer.flush(10)
            self._producer = None
        self._execution.close()
        log.info("worker=%s pool=%s stopped %s", self.worker_id, self.pool, dict(self.counters))

    @property
    def running(self) -> list[str]:
        """Run ids with a handler at work here."""
        return [run_id for run_id, _ in self._running]

    # -- the loop -----------------------------------------------------------------------
    def step(self, timeout: float = 0.1) -> None:
        """Poll one record, then cancels, finished handlers and heartbeats."""
        consumer, producer, cancels = self._clients()
        self._throttle(consumer)
        message = consumer.poll(timeout)
        if message is not None:
            self._handle(consumer, message)
        for cancel in cancels.poll():
            self._cancel(cancel)
        self._reap()
        self._heartbeat()
        producer.poll(0)

    def _throttle(self, consumer: Consumer) -> None:
        full = self._stopping or len(self._running) >= self.concurrency
        if full:
            consumer.pause(consumer.assignment())
            self._paused = True
        elif self._paused:
            consumer.resume(consumer.assignment())
            self._paused = False

    def _handle(self, consumer: Consumer, message: Message) -> None:
        error = message.error()
        if error is not None:
            if error.fatal():
                raise FencedError(f"worker consumer failed: {error}")
            log.warning("worker consumer: %s", error)
            return
        partition, offset = message.partition(), message.offset()
        if partition is None or offset is None:
            return
        rewound = self._rewound.get(partition)
        if rewound is not None:
            if offset != rewound:
                return  # fetched behind an offer that was put back: it comes again
            del self._rewound[partition]
        try:
            record = decode_work(message.key(), message.value())
        except RejectedRecord as exc:
            self.counters["bad_records"] += 1
            log.warning("skipped %s[%d]@%d: %s", self.topic, partition, offset, exc)
            self._commit(consumer, partition, offset)
            return
        if isinstance(record, WorkCancel):
            self._cancel(record)
        elif self.tenants is not None and record.tenant not in self.tenants:
            self._refuse(record)  # at once: it never needs one of the handlers' slots
        elif self._stopping or len(self._running) >= self.concurrency:
            tp = TopicPartition(self.topic, partition, offset)
            consumer.pause([tp])
            consumer.seek(tp)  # not ours yet: read it again when a slot frees
            self._rewound[partition] = offset
            return
        else:
            self._offer(record, partition, offset)
        self._commit(consumer, partition, offset)

    def _offer(self, offer: WorkOffer, partition: int, offset: int) -> None:
        now = self.clock.now_us()
        if (offer.run_id, offer.attempt) in self._cancelled:
            self.counters["skipped_cancelled"] += 1
            return
        if (offer.run_id, offer.attempt) in self._running:
            self.counters["skipped_running"] += 1  # read again after a rebalance
            return
        if now > offer.claim_until_us:
            self.counters["skipped_expired"] += 1
            late = (now - offer.claim_until_us) / 1e6
            log.warning("skipped run=%s attempt=%d: its claim window closed %.1f s ago (the "
                        "offer waited too long, or this host's clock is ahead of the "
                        "dispatcher's)", offer.run_id, offer.attempt, late)  # fmt: skip
            return
        handler = self.app.resolve(offer.tenant, offer.job_id)
        if handler is None:
            self.counters["no_handler"] += 1
            reason = f"no handler for job {offer.job_key} in worker {self.worker_id}"
            self._emit(offer, "failed", reason=reason, retryable=False)
            return
        self._emit(offer, "claimed")
        job = Job.from_offer(offer)
        future = self._execution.start(handler, job)
        next_beat = time.monotonic() + offer.lease_ms / 3000
        running = Running(offer, job, future, partition, now, next_beat)
        self._running[offer.run_id, offer.attempt] = running
        assert self._cancels is not None
        self._cancels.watch(partition, offset + 1)
        self.counters["claimed"] += 1
        log.info("claimed run=%s attempt=%d", offer.run_id, offer.attempt)

    def _refuse(self, offer: WorkOffer) -> None:
        """An offer of a tenant this worker does not serve fails, unrun and not retried."""
        self.counters["other_tenant"] += 1
        served = ", ".join(sorted(self.tenants or ()))
        reason = (f"worker {self.worker_id} of pool {self.pool} takes the work of {served} "
                  f"only, not of {offer.tenant}")  # fmt: skip
        self._emit(offer, "failed", reason=reason, retryable=False)

    def _cancel(self, cancel: WorkCancel) -> None:
        key = (cancel.run_id, cancel.attempt)
        if key in self._cancelled:
            return
        self._cancelled[key] = cancel.reason
        if len(self._cancelled) > REMEMBERED_CANCELS:
            self._cancelled.popitem(last=False)
        running = self._running.get(key)
        if running is not None and not running.job.is_cancelled():  # (the deadline may be first)
            self.counters["cancelled"] += 1
            log.info("cancelled run=%s attempt=%d: %s", cancel.run_id, cancel.attempt,
                     cancel.reason)  # fmt: skip
            self._execution.cancel(running.job, running.future)

    def _reap(self) -> None:
        now = self.clock.now_us()
        for key, running in list(self._running.items()):
            job, future = running.job, running.future
            if not future.done():
                if now >= running.offer.deadline_at_us and not job.is_cancelled():
                    self.counters["deadline"] += 1
                    log.info("run=%s attempt=%d passed its deadline: cancelling", job.run_id,
                             job.attempt)  # fmt: skip
                    self._execution.cancel(job, future)
                continue
            del self._running[key]
            assert self._cancels is not None
            self._cancels.unwatch(running.partition)
            if job.is_cancelled() or future.cancelled():
                continue  # the dispatcher ended the attempt already
            duration = max(0, now - running.started_us)
            error = future.exception()
            if error is None:
                result = future.result()
                reason = result[:2000] if isinstance(result, str) and result else None
                self.counters["succeeded"] += 1
                self._emit(running.offer, "succeeded", reason=reason, duration_us=duration)
                continue
            self.counters["failed"] += 1
            if isinstance(error, JobFailed):
                reason, retryable = error.reason, error.retryable
            else:
                reason, retryable = f"{type(error).__name__}: {error}", True
            self._emit(running.offer, "failed", reason=reason, retryable=retryable,
                       duration_us=duration)  # fmt: skip

    def _heartbeat(self) -> None:
        now = time.monotonic()
        for running in self._running.values():
            if now >= running.next_beat and not running.job.is_cancelled():
                running.next_beat = now + running.offer.lease_ms / 3000
                self._emit(running.offer, "heartbeat")

    # -- helpers ------------------------------------------------------------------------
    def _emit(self, offer: WorkOffer, kind: str, **fields: Any) -> None:
        """A worker event, keyed and partitioned to reach the dispatcher owning the run."""
        _, producer, _ = self._clients()
        event = WorkerEvent(kind, offer.run_id, offer.attempt, self.worker_id,
                            self.clock.now_us(), **fields)  # fmt: skip
        partition = partition_for_job_key(offer.job_key, self.settings.partitions)
        producer.produce(self.events_topic, key=offer.run_id.encode(), value=event.to_bytes(),
                         partition=partition)  # fmt: skip
        if kind == "claimed":
            producer.flush(10)  # on the way before the offer's offset is committed

    def _commit(self, consumer: Consumer, partition: int, offset: int) -> None:
        tp = TopicPartition(self.topic, partition, offset + 1)
        consumer.commit(offsets=[tp], asynchronous=True)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if partitions:
            log.info("worker=%s assigned %s", self.worker_id,
                     ",".join(str(tp.partition) for tp in partitions))  # fmt: skip

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self._rewound.pop(tp.partition, None)

    def _clients(self) -> tuple[Consumer, Producer, CancelWatch]:
        if self._consumer is None or self._producer is None or self._cancels is None:
            raise SchedulerStreamError("WorkerRunner.start() first")
        return self._consumer, self._producer, self._cancels
