"""An API instance's live copy of ``cron.tenants``: a background thread reads the topic from the
beginning (read_committed, assign only, no group) and keeps following it."""

from __future__ import annotations

import hmac
import logging
import threading
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition
from pydantic import ValidationError as PydanticValidationError

from schedulerstream.errors import SchedulerStreamError
from schedulerstream.kafka.clients import restore_consumer_config
from schedulerstream.settings import Settings
from schedulerstream.tenants.keys import parse_key, secret_hash
from schedulerstream.tenants.record import TenantRecord

log = logging.getLogger(__name__)


def tenants_consumer(settings: Settings) -> Consumer:
    """A group-less read_committed consumer on partition 0 of cron.tenants, from offset 0."""
    config = restore_consumer_config(settings, f"schedulerstream-tenants-{uuid.uuid4().hex[:8]}")
    config["fetch.wait.max.ms"] = 50
    consumer = Consumer(config)
    consumer.assign([TopicPartition(settings.topic("tenants"), 0, OFFSET_BEGINNING)])
    return consumer


def apply_message(records: dict[str, TenantRecord], message: Message) -> None:
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


def read_all(settings: Settings, timeout: float = 30.0) -> dict[str, TenantRecord]:
    """Every tenant's latest record, reading up to the end of the topic."""
    records: dict[str, TenantRecord] = {}
    consumer = tenants_consumer(settings)
    try:
        while True:
            message = consumer.poll(timeout)
            if message is None:
                raise SchedulerStreamError(f"no answer reading {settings.topic('tenants')}")
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return records
                raise SchedulerStreamError(f"reading {settings.topic('tenants')}: {error}")
            apply_message(records, message)
    finally:
        consumer.close()


class TenantView:
    """Authenticates API keys against the materialized records; ``ready`` once caught up."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._records: dict[str, TenantRecord] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._caught_up = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: str | None = None

    @property
    def ready(self) -> bool:
        return self._caught_up.is_set()

    def count(self) -> int:
        with self._lock:
            return len(self._records)

    def authenticate(self, api_key: str) -> str | None:
        """The tenant whose current key is ``api_key``, else None."""
        parsed = parse_key(api_key)
        if parsed is None:
            return None
        tenant, secret = parsed
        with self._lock:
            record = self._records.get(tenant)
        if record is None or record.key_hash is None:
            return None
        return tenant if hmac.compare_digest(record.key_hash, secret_hash(secret)) else None

    def start(self) -> TenantView:
        self._thread = threading.Thread(target=self._run, name="tenant-view", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._follow()
            except Exception as exc:  # keep serving the last known records; retry
                self.error = str(exc)
                log.warning("tenant view: %s; retrying", exc)
                self._stop.wait(1.0)

    def _follow(self) -> None:
        consumer = tenants_consumer(self.settings)
        staged: dict[str, TenantRecord] = {}
        try:
            while not self._stop.is_set():
                message = consumer.poll(0.1)
                if message is None:
                    continue
                error = message.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    self._publish(staged)
                    continue
                if error is not None:
                    raise SchedulerStreamError(f"reading tenants: {error}")
                apply_message(staged, message)
                if self.ready:
                    self._publish(staged)
        finally:
            consumer.close()

    def _publish(self, staged: dict[str, TenantRecord]) -> None:
        with self._lock:
            self._records = dict(staged)
        self.error = None
        self._caught_up.set()
