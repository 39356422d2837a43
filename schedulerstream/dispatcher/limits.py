"""Process-wide dispatch limits: total concurrency, per-tenant concurrency, per-tenant rate.

In memory only: what is in flight is known from the deliveries running in this process.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass


@dataclass(slots=True)
class TokenBucket:
    """``rate`` tokens a second, holding at most ``burst``."""

    rate: float
    burst: float
    tokens: float
    at_us: int

    def take(self, now_us: int) -> bool:
        elapsed = max(0, now_us - self.at_us) / 1e6
        self.tokens = min(self.burst, self.tokens + elapsed * self.rate)
        self.at_us = now_us
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class Limits:
    """Admission of one more attempt: ``acquire`` before starting, ``release`` when it ends."""

    def __init__(self, concurrency: int, tenant_concurrency: int, tenant_rate_per_s: float) -> None:
        self.concurrency = concurrency
        self.tenant_concurrency = tenant_concurrency
        self.tenant_rate = tenant_rate_per_s
        self.in_flight = 0
        self.by_tenant: Counter[str] = Counter()
        self._buckets: dict[str, TokenBucket] = {}

    def full(self) -> bool:
        """No attempt of any tenant may start now."""
        return self.in_flight >= self.concurrency

    def acquire(self, tenant: str, now_us: int) -> bool:
        """Take a slot and a token for ``tenant``; False (nothing taken) when a limit says no."""
        if self.full() or self.by_tenant[tenant] >= self.tenant_concurrency:
            return False
        bucket = self._buckets.get(tenant)
        if bucket is None:
            burst = max(1.0, self.tenant_rate)
            bucket = self._buckets[tenant] = TokenBucket(self.tenant_rate, burst, burst, now_us)
        if not bucket.take(now_us):
            return False
        self.in_flight += 1
        self.by_tenant[tenant] += 1
        return True

    def release(self, tenant: str) -> None:
        """An attempt of ``tenant`` ended (or never started after ``acquire``)."""
        if self.by_tenant[tenant] > 0:
            self.by_tenant[tenant] -= 1
            self.in_flight -= 1
        if self.by_tenant[tenant] == 0:
            del self.by_tenant[tenant]
