"""Process-wide dispatch limits: total concurrency, per-tenant concurrency and rate, and
concurrency per target host (one slow or overloaded receiver cannot take every slot).

Attempts sent by the executor (those with a target host) may be admitted several times over
each limit: the extra ones are committed starts that wait in the executor for a live slot
(``Executor``'s gate holds the limits themselves), so a slot that frees starts the next
attempt without waiting for a commit. How many times over depends on the host: a start may
wait at most ``wait_budget_s``, and a host whose attempts take ``t`` s on average frees each
slot every ``t`` s, so it gets ``1 + wait_budget_s // t`` (at most ``depth``; 1 until its
first attempt is timed). A slow host thus gets no start that would outlive its time to live
waiting (an expired start fails an attempt it never sent). The host's depth scales its own
limit and its tenant's; the process-wide limit is scaled the same way by the mean time of
every attempt (weighted by completions, ``C / mean`` is the rate at which the process's ``C``
slots free), and is the same for every start. Starts that may not wait (to a host of depth
1: untimed or slow) and worker offers (never waiting: they run on workers) are besides at
most ``C`` of their own ("shallow"), so a tenant whose host is untimed or slow is admitted
beside a fast host's prefetch, not only once it has drained below ``C``, and a burst to new
hosts is not admitted past the slots that can take it. A Kafka record ends in the
transaction that starts it: it takes a rate token (``admit``) and holds no slot.

In memory only: what is in flight is known from the deliveries running in this process.
Per-tenant overrides come from a live mapping (``TenantPolicy.limits``, fed by cron.tenants)
that is looked up on every ``acquire``, so a change applies without a restart.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from schedulerstream.tenants.record import TenantLimits


@dataclass(slots=True)
class TokenBucket:
    """``rate`` tokens a second, holding at most ``burst``."""

    rate: float
    burst: float
    tokens: float
    at_us: int

    def refill(self, now_us: int) -> None:
        elapsed = max(0, now_us - self.at_us) / 1e6
        self.tokens = min(self.burst, self.tokens + elapsed * self.rate)
        self.at_us = now_us

    def take(self, now_us: int) -> bool:
        self.refill(now_us)
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False

    def retune(self, rate: float, now_us: int) -> None:
        """Switch to ``rate``: tokens earned so far count at the old rate, and what is kept
        never exceeds the new burst (a lowered rate gets no burst of stale tokens)."""
        self.refill(now_us)
        self.rate = rate
        self.burst = burst_of(rate)
        self.tokens = min(self.tokens, self.burst)


ATTEMPT_WEIGHT = 0.1  # of the newest attempt in a host's mean attempt time
PROCESS_WEIGHT = 0.01  # of the newest attempt in the mean over every host (many more of them)
MAX_TIMED_HOSTS = 100_000


def burst_of(rate: float) -> float:
    """A bucket holds one second of its rate (at least one token)."""
    return max(1.0, rate)


class Limits:
    """Admission of one more attempt: ``acquire`` before starting, ``release`` when it ends.

    ``tenant_concurrency`` and ``tenant_rate_per_s`` are the defaults; ``overrides`` (held by
    reference, not copied) may give a tenant its own.
    """

    def __init__(self, concurrency: int, tenant_concurrency: int, tenant_rate_per_s: float,
                 host_concurrency: int | None = None,
                 overrides: Mapping[str, TenantLimits] | None = None,
                 depth: int = 1, wait_budget_s: float = 0.5) -> None:  # fmt: skip
        self.concurrency = concurrency
        self.depth = depth
        self.wait_budget_s = wait_budget_s
        self.attempt_s: dict[str, float] = {}  # per host: mean attempt time (moving average)
        self._depth_of: dict[str, int] = {}  # per host whose attempts were timed
        self.process_attempt_s: float | None = None  # over every host: see the module
        self._process_depth = 1
        self.tenant_concurrency = tenant_concurrency
        self.tenant_rate = tenant_rate_per_s
        self.host_concurrency = host_concurrency if host_concurrency is not None else concurrency
        self.overrides: Mapping[str, TenantLimits] = overrides if overrides is not None else {}
        self.in_flight = 0
        self.shallow = 0  # admitted starts that may not wait, and worker offers
        self._shallow_by: Counter[str | None] = Counter()  # by host (None: worker offers)
        self.by_tenant: Counter[str] = Counter()
        self.by_host: Counter[str] = Counter()
        self._buckets: dict[str, TokenBucket] = {}

    def full(self) -> bool:
        """No attempt of any tenant may start now (not even one that waits for a slot)."""
        return self.in_flight >= self.concurrency * self._process_depth

    def tenant_concurrency_of(self, tenant: str) -> int:
        return self.tenant_limits(tenant)[0]

    def tenant_limits(self, tenant: str) -> tuple[int, float]:
        """(concurrency, rate per second) that apply to ``tenant`` now."""
        override = self.overrides.get(tenant)
        if override is None:
            return self.tenant_concurrency, self.tenant_rate
        concurrency = override.concurrency
        rate = override.rate_per_s
        return (
            self.tenant_concurrency if concurrency is None else concurrency,
            self.tenant_rate if rate is None else rate,
        )

    def acquire(self, tenant: str, now_us: int, host: str | None = None) -> bool:
        """Take a slot and a token for ``tenant`` (and a slot of ``host``, when the target has
        one); False, with nothing taken, when a limit says no."""
        concurrency, rate = self.tenant_limits(tenant)
        if self.in_flight >= self.concurrency * self._process_depth:
            return False
        scale = 1 if host is None else self._depth_of.get(host, 1)
        if scale == 1 and self.shallow >= self.concurrency:
            return False
        if self.by_tenant[tenant] >= concurrency * scale:
            return False
        if host is not None and self.by_host[host] >= self.host_concurrency * scale:
            return False
        if not self._token(tenant, rate, now_us):
            return False
        self.in_flight += 1
        self.by_tenant[tenant] += 1
        if host is not None:
            self.by_host[host] += 1
        if scale == 1:
            self.shallow += 1
            self._shallow_by[host] += 1
        return True

    def admit(self, tenant: str, now_us: int) -> bool:
        """Take a token for an attempt of ``tenant`` that ends in the transaction that starts
        it (a Kafka record): the rate applies, but it holds no slot (nothing stays in
        flight), so nothing is released after it."""
        return self._token(tenant, self.tenant_limits(tenant)[1], now_us)

    def _token(self, tenant: str, rate: float, now_us: int) -> bool:
        bucket = self._buckets.get(tenant)
        if bucket is None:
            burst = burst_of(rate)
            bucket = self._buckets[tenant] = TokenBucket(rate, burst, burst, now_us)
        elif bucket.rate != rate:
            bucket.retune(rate, now_us)
        return bucket.take(now_us)

    def depth_of(self, host: str) -> int:
        """How many times over its own and its tenant's limits starts to ``host`` are
        admitted now."""
        return self._depth_of.get(host, 1)

    @property
    def process_depth(self) -> int:
        """How many times over the process-wide limit starts are admitted now."""
        return self._process_depth

    def timed(self, host: str, seconds: float) -> None:
        """An attempt to ``host`` took ``seconds`` (sent, answered or not)."""
        mean = self.attempt_s.get(host)
        if mean is None:
            mean = seconds
            if len(self.attempt_s) >= MAX_TIMED_HOSTS:  # bounded: start over
                self.attempt_s.clear()
                self._depth_of.clear()
        else:
            mean += (seconds - mean) * ATTEMPT_WEIGHT
        self.attempt_s[host] = mean
        self._depth_of[host] = self._depth_for(mean)
        overall = self.process_attempt_s
        overall = seconds if overall is None else overall + (seconds - overall) * PROCESS_WEIGHT
        self.process_attempt_s = overall
        self._process_depth = self._depth_for(overall)

    def _depth_for(self, mean_s: float) -> int:
        """How many starts per slot may wait when a slot frees every ``mean_s`` seconds."""
        waits = int(self.wait_budget_s / mean_s) if mean_s > 0 else self.depth
        return 1 + max(0, min(self.depth - 1, waits))

    def hold(self, tenant: str) -> None:
        """Count an attempt that is already running (adopted after a restart), over the
        limits if need be: it runs whether or not a new one could start now."""
        self.in_flight += 1
        self.by_tenant[tenant] += 1

    def release(self, tenant: str, host: str | None = None) -> None:
        """An attempt of ``tenant`` (to ``host``) ended, or never started after ``acquire``."""
        if self.by_tenant[tenant] > 0:
            self.by_tenant[tenant] -= 1
            self.in_flight -= 1
            if self._shallow_by[host] > 0:  # (a host's depth may have changed since: any)
                self._shallow_by[host] -= 1
                self.shallow -= 1
            if self._shallow_by[host] == 0:
                del self._shallow_by[host]
        if self.by_tenant[tenant] == 0:
            del self.by_tenant[tenant]
        if host is not None:
            if self.by_host[host] > 0:
                self.by_host[host] -= 1
            if self.by_host[host] == 0:
                del self.by_host[host]
