"""An API instance's live copy of ``cron.tenants`` (a ``TenantFollower``), for API keys."""

from __future__ import annotations

import hmac
import threading

from schedulerstream.settings import Settings
from schedulerstream.tenants.follower import (
    Snapshot,
    TenantFollower,
    apply_message,
    read_all,
    tenants_consumer,
)
from schedulerstream.tenants.keys import parse_key, secret_hash
from schedulerstream.tenants.record import TenantGrants, TenantRecord

__all__ = ["TenantView", "apply_message", "read_all", "tenants_consumer"]


class TenantView:
    """Authenticates API keys against the materialized records; ``ready`` once caught up."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._records: dict[str, TenantRecord] = {}
        self._lock = threading.Lock()
        self._follower = TenantFollower(settings, self._publish, name="tenant-view")

    @property
    def ready(self) -> bool:
        return self._follower.ready

    @property
    def error(self) -> str | None:
        return self._follower.error

    def count(self) -> int:
        with self._lock:
            return len(self._records)

    def names(self) -> list[str]:
        """The tenants materialized, sorted."""
        with self._lock:
            return sorted(self._records)

    def grants(self, tenant: str) -> TenantGrants | None:
        """The pools and topics ``tenant`` may reach (None: any)."""
        with self._lock:
            record = self._records.get(tenant)
        return None if record is None else TenantGrants.of(record)

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
        self._follower.start()
        return self

    def stop(self) -> None:
        self._follower.stop()

    def _publish(self, records: Snapshot) -> None:
        with self._lock:
            self._records = records
