"""The dispatcher's live per-tenant settings from cron.tenants: DRR weights, ``Limits``
overrides and target grants, as mappings that rings, limits and the topology hold by
reference."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import TypeVar, overload

from schedulerstream.settings import Settings
from schedulerstream.tenants.follower import Snapshot, TenantFollower
from schedulerstream.tenants.record import TenantGrants, TenantLimits, TenantRecord

log = logging.getLogger(__name__)

V = TypeVar("V")
T = TypeVar("T")


class LiveMapping(Mapping[str, V]):
    """A read-only mapping whose whole contents are swapped at once (``replace``): a reader on
    another thread sees either the old or the new dict, never a mix within one lookup."""

    __slots__ = ("_data",)

    def __init__(self, data: dict[str, V] | None = None) -> None:
        self._data: dict[str, V] = data if data is not None else {}

    def replace(self, data: dict[str, V]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> V:
        return self._data[key]

    @overload
    def get(self, key: str, /) -> V | None: ...
    @overload
    def get(self, key: str, default: V | T, /) -> V | T: ...
    def get(self, key: str, default: object = None, /) -> object:
        return self._data.get(key, default)  # the dict's own get: no KeyError round trip

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"LiveMapping({self._data!r})"


def _describe(record: TenantRecord) -> str:
    concurrency = "default" if record.concurrency is None else record.concurrency
    rate = "default" if record.rate_per_s is None else f"{record.rate_per_s:g}/s"
    pools = "any" if record.pools is None else ",".join(record.pools) or "none"
    topics = "any" if record.topics is None else ",".join(record.topics) or "none"
    return (f"weight {record.weight:g}, concurrency {concurrency}, rate {rate}, "
            f"pools {pools}, topics {topics}")  # fmt: skip


class TenantPolicy:
    """``weights`` (tenant → DRR weight) and ``limits`` (tenant → ``TenantLimits``, only for
    tenants that override a default) follow ``update``; a tenant without a record (never
    created, or tombstoned) gets the process defaults. ``following(settings)`` feeds it from
    cron.tenants on a background thread; ``close`` stops that thread."""

    def __init__(self, records: Mapping[str, TenantRecord] | None = None) -> None:
        self.weights: LiveMapping[float] = LiveMapping()
        self.limits: LiveMapping[TenantLimits] = LiveMapping()
        self.grants: LiveMapping[TenantGrants] = LiveMapping()  # tenants with any
        self._records: Snapshot = {}
        self._follower: TenantFollower | None = None
        if records:
            self.update(records)

    @classmethod
    def following(cls, settings: Settings, wait_s: float = 0.0) -> TenantPolicy:
        """A policy that follows cron.tenants (a change applies about 0.1 s after it commits),
        having waited up to ``wait_s`` for the first full read."""
        policy = cls()
        follower = TenantFollower(settings, policy.update, name="tenant-policy")
        policy._follower = follower.start()
        if wait_s > 0 and not follower.wait_ready(wait_s):
            topic, why = settings.topics.tenants, follower.error or "no answer"
            log.warning("%s not read in %g s (%s): defaults until it is, and Kafka and worker "
                        "starts wait for its grants", topic, wait_s, why)  # fmt: skip
        return policy

    @property
    def ready(self) -> bool:
        """Caught up with cron.tenants (always, without a follower)."""
        return self._follower is None or self._follower.ready

    @property
    def error(self) -> str | None:
        return None if self._follower is None else self._follower.error

    def wait_ready(self, timeout: float) -> bool:
        return self._follower is None or self._follower.wait_ready(timeout)

    def update(self, records: Mapping[str, TenantRecord]) -> None:
        """Replace every tenant's settings with ``records`` (tenants missing: the defaults)."""
        weights = {tenant: record.weight for tenant, record in records.items()}
        limits = {
            tenant: TenantLimits(record.concurrency, record.rate_per_s)
            for tenant, record in records.items()
            if record.concurrency is not None or record.rate_per_s is not None
        }
        grants = {tenant: TenantGrants.of(record) for tenant, record in records.items()}
        self.weights.replace(weights)
        self.limits.replace(limits)
        self.grants.replace({tenant: g for tenant, g in grants.items() if g is not None})
        self._log_changes(records)

    def close(self) -> None:
        if self._follower is not None:
            self._follower.stop()

    def _log_changes(self, records: Mapping[str, TenantRecord]) -> None:
        before, self._records = self._records, dict(records)
        first = self._follower is not None and not self._follower.ready
        if first:
            log.info("tenant policy: %d tenants, %d own limits", len(records), len(self.limits))
            return
        for tenant in sorted(before.keys() - records.keys()):
            log.info("tenant policy: %s removed: process defaults", tenant)
        for tenant, record in records.items():
            old = before.get(tenant)
            if old is None or _describe(old) != _describe(record):
                log.info("tenant policy: %s: %s", tenant, _describe(record))
