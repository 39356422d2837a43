"""Reading ``cron.tenants``: the whole topic once (``read_all``), or following it on a background
thread (``TenantFollower``: read_committed, assign only, no group) for the API and dispatchers."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition
from pydantic import ValidationError as PydanticValidationError

from schedulerstream.errors import SchedulerStreamError
from schedulerstream.kafka.clients import restore_consumer_config
from schedulerstream.settings import Settings
from schedulerstream.tenants.record import TenantRecord

log = logging.getLogger(__name__)

Snapshot = dict[str, TenantRecord]


def tenants_consumer(settings: Settings) -> Consumer:
    """A group-less read_committed consumer on partition 0 of cron.tenants, from offset 0."""
    config = restore_consumer_config(settings, f"schedulerstream-tenants-{uuid.uuid4().hex[:8]}")
    config["fetch.wait.max.ms"] = 50
    consumer = Consumer(config)
    consumer.assign([TopicPartition(settings.topics.tenants, 0, OFFSET_BEGINNING)])
    return consumer


def apply_message(records: Snapshot, message: Message) -> None:
    """Fold one record (or tombstone) into ``records``; malformed values remove the tenant."""
    tenant = (message.key() or b"").decode(errors="replace")
    value = message.value()
    try:
        record = None if value is None else TenantRecord.decode(value)
    except PydanticValidationError:
        log.warning("ignoring malformed tenant record at offset %s", message.offset())
        record = None
    if record is None or record.tenant != tenant:
        records.pop(tenant, None)
    else:
        records[tenant] = record


def read_all(settings: Settings, timeout: float = 30.0) -> Snapshot:
    """Every tenant's latest record, reading up to the end of the topic."""
    records: Snapshot = {}
    consumer = tenants_consumer(settings)
    try:
        while True:
            message = consumer.poll(timeout)
            if message is None:
                raise SchedulerStreamError(f"no answer reading {settings.topics.tenants}")
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return records
                raise SchedulerStreamError(f"reading {settings.topics.tenants}: {error}")
            apply_message(records, message)
    finally:
        consumer.close()


class TenantFollower:
    """Follows cron.tenants on a daemon thread. Once it has read to the end, and then after every
    batch of changes, it calls ``on_change`` with a fresh snapshot {tenant: record} (a new dict
    the callee may keep). On an error it keeps the last snapshot and re-reads from the start
    after ``retry_s``; no partial re-read is ever handed out."""

    def __init__(self, settings: Settings, on_change: Callable[[Snapshot], None],
                 name: str = "tenant-follower", retry_s: float = 1.0) -> None:  # fmt: skip
        self.settings = settings
        self.name = name
        self.error: str | None = None
        self._on_change = on_change
        self._retry_s = retry_s
        self._stop = threading.Event()
        self._caught_up = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def ready(self) -> bool:
        """A first full snapshot was handed out."""
        return self._caught_up.is_set()

    def wait_ready(self, timeout: float) -> bool:
        return self._caught_up.wait(timeout)

    def start(self) -> TenantFollower:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._follow()
            except Exception as exc:  # keep the last snapshot; retry from the start
                self.error = str(exc) or type(exc).__name__
                log.warning("%s: %s; retrying", self.name, self.error)
                self._stop.wait(self._retry_s)

    def _follow(self) -> None:
        consumer = tenants_consumer(self.settings)
        staged: Snapshot = {}
        at_end = changed = False
        published = False  # by this consumer: every (re-)read hands out one full snapshot
        try:
            while not self._stop.is_set():
                for message in consumer.consume(500, 0.1):
                    error = message.error()
                    if error is not None and error.code() == KafkaError._PARTITION_EOF:
                        at_end = True
                    elif error is not None:
                        raise SchedulerStreamError(f"reading tenants: {error}")
                    else:
                        apply_message(staged, message)
                        changed = True
                if at_end and (changed or not published):
                    self._on_change(dict(staged))
                    self.error = None
                    self._caught_up.set()
                    changed, published = False, True
        finally:
            consumer.close()
