"""Operator writes to ``cron.tenants``: create (a new key, shown once), update limits, revoke."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from schedulerstream.errors import SchedulerStreamError
from schedulerstream.ids import check_id
from schedulerstream.kafka.clients import producer_config
from schedulerstream.settings import Settings
from schedulerstream.tenants.follower import read_all
from schedulerstream.tenants.keys import new_key
from schedulerstream.tenants.record import TenantRecord


class TenantExists(SchedulerStreamError):
    """``tenants create`` of a tenant that already has a record."""


class UnknownTenant(SchedulerStreamError):
    """An update or revoke of a tenant without a record."""


def _now_us() -> int:
    return time.time_ns() // 1000


class TenantAdmin:
    """Reads the (small, single-partition) topic, then writes one record and waits for its ack."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.topic = settings.topics.tenants

    def records(self) -> dict[str, TenantRecord]:
        """The latest record of every tenant."""
        return read_all(self.settings)

    def get(self, tenant: str) -> TenantRecord:
        record = self.records().get(check_id("tenant", tenant))
        if record is None:
            raise UnknownTenant(f"no tenant {tenant!r} (create it with `tenants create`)")
        return record

    def create(self, tenant: str, **limits: Any) -> tuple[TenantRecord, str]:
        """A new tenant and its API key (returned once, never stored)."""
        if check_id("tenant", tenant) in self.records():
            raise TenantExists(f"tenant {tenant!r} already exists (use `tenants revoke-key`)")
        api_key, key_hash = new_key(tenant)
        now = _now_us()
        record = TenantRecord(
            tenant=tenant, key_hash=key_hash, created_at_us=now, updated_at_us=now, **limits
        )
        self._write(record)
        return record, api_key

    def update(self, tenant: str, **changes: Any) -> TenantRecord:
        """Set weight / concurrency / rate_per_s (only those given)."""
        current = self.get(tenant)
        merged = {**current.model_dump(), **changes, "updated_at_us": _now_us()}
        record = TenantRecord.model_validate(merged)
        self._write(record)
        return record

    def revoke_key(self, tenant: str, issue_new: bool = True) -> tuple[TenantRecord, str | None]:
        """Invalidate the current key; with ``issue_new`` return a replacement."""
        current = self.get(tenant)
        api_key, key_hash = new_key(tenant) if issue_new else (None, None)
        record = current.model_copy(update={"key_hash": key_hash, "updated_at_us": _now_us()})
        self._write(record)
        return record, api_key

    def _write(self, record: TenantRecord, timeout: float = 30.0) -> None:
        errors: list[str] = []

        def report(err: KafkaError | None, _msg: Message) -> None:
            if err is not None:
                errors.append(str(err))

        producer = Producer(producer_config(self.settings, **{"linger.ms": 0}))
        producer.produce(
            self.topic, key=record.tenant.encode(), value=record.encode(), on_delivery=report
        )
        if producer.flush(timeout) or errors:
            detail = errors[0] if errors else "no acknowledgement"
            raise SchedulerStreamError(f"writing tenant {record.tenant!r}: {detail}")
