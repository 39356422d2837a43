"""The HTTP webhook target: one pooled aiohttp session, Standard Webhooks headers, no redirects,
the SSRF guard at connection time, and a circuit breaker per tenant and host."""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import math
from collections.abc import Mapping
from datetime import UTC
from functools import lru_cache
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver
from multidict import CIMultiDict
from yarl import URL

from schedulerstream import __version__
from schedulerstream.clock import Clock, SystemClock
from schedulerstream.model import HttpTarget as HttpTargetConfig
from schedulerstream.settings import Settings
from schedulerstream.targets.base import Delivery, Outcome, OutcomeKind
from schedulerstream.targets.breaker import CircuitBreaker, Permit
from schedulerstream.targets.envelope import envelope_bytes
from schedulerstream.targets.resolver import LOOKUP_TENANT, TenantResolver
from schedulerstream.targets.signing import secret_key, webhook_headers
from schedulerstream.targets.ssrf import (
    BlockedAddressError,
    GuardedResolver,
    guarded_socket_factory,
)
from schedulerstream.targets.stall import LoopStallMonitor

USER_AGENT = f"schedulerstream/{__version__}"
BODY_CAP = 4096
_MAX_RETRY_AFTER_S = 10**9


def parse_retry_after(value: str | None, now_us: int) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (delta-seconds or HTTP-date), else None."""
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(min(int(value), _MAX_RETRY_AFTER_S))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, min(when.timestamp() - now_us / 1e6, float(_MAX_RETRY_AFTER_S)))


_CLOSED = Permit(probe=False)
_secret_key = lru_cache(maxsize=4096)(secret_key)


@lru_cache(maxsize=4096)
def _parse_url(url: str) -> URL:
    return URL(url)


@lru_cache(maxsize=1024)
def _timeout(deadline: float) -> aiohttp.ClientTimeout:
    """The whole attempt's timeout, not rounded up to a whole second as aiohttp does past 5 s."""
    return aiohttp.ClientTimeout(total=deadline, ceil_threshold=math.inf)


def _text(body: bytes) -> str:
    return " ".join(body.decode("utf-8", "replace").split())


class HttpSender:
    """Delivers runs as webhooks. One instance per dispatcher process, used on one event loop.

    ``limit``/``limit_per_host`` bound the connection pool (0: unbounded); an attempt waiting for
    a connection spends its own deadline. ``breaker_threshold`` consecutive failures (5xx, 408,
    timeouts, connection errors) of one tenant's attempts to one host open that tenant's
    breaker for the host for ``breaker_cool_down`` seconds (another tenant's URLs on the same
    host may be healthy: its runs are not failed for them); None disables breakers.
    ``resolver`` replaces the one the guard wraps (``TenantResolver``: lookups on a pool of
    their own, a bounded share of it per tenant).
    """

    def __init__(
        self,
        *,
        allow_private: bool = False,
        limit: int = 512,
        limit_per_host: int = 0,
        breaker_threshold: int | None = 5,
        breaker_cool_down: float = 30.0,
        clock: Clock | None = None,
        resolver: AbstractResolver | None = None,
        body_cap: int = BODY_CAP,
    ) -> None:
        self.allow_private = allow_private
        self._limit = limit
        self._limit_per_host = limit_per_host
        self._breaker_threshold = breaker_threshold
        self._breaker_cool_down = breaker_cool_down
        self._clock: Clock = clock or SystemClock()
        self._inner_resolver = resolver
        self._resolver: AbstractResolver | None = None
        self._body_cap = body_cap
        self._session: aiohttp.ClientSession | None = None
        self._breakers: dict[tuple[str, str], CircuitBreaker] = {}  # (tenant, host:port)
        self._stalls = LoopStallMonitor()
        self._closed = False

    @classmethod
    def from_settings(cls, settings: Settings, **options: Any) -> HttpSender:
        """An HttpSender honouring ``settings.allow_private_targets``."""
        return cls(allow_private=settings.allow_private_targets, **options)

    def breaker(self, tenant: str, host: str) -> CircuitBreaker | None:
        """``tenant``'s breaker for ``host:port``: one from a failure until the next success."""
        return self._breakers.get((tenant, host))

    async def deliver(self, delivery: Delivery, target_config: HttpTargetConfig) -> Outcome:
        """One attempt: POST (or the job's method) the envelope; classify the answer."""
        started = self._clock.monotonic()
        url = _parse_url(target_config.url)
        host = f"{url.host}:{url.port}"
        where = (delivery.tenant, host)
        breaker = self._breakers.get(where)
        permit = breaker.admit() if breaker is not None else _CLOSED
        if breaker is not None and permit is None:
            return Outcome(
                "failed",
                f"circuit breaker open for {host} after "
                f"{breaker.consecutive_failures} consecutive failures",
                retryable=True,
                duration_us=0,
                retry_after_s=breaker.retry_after(),
            )
        self._stalls.ensure_started()
        loop_started = asyncio.get_running_loop().time()
        outcome: Outcome | None = None
        LOOKUP_TENANT.set(delivery.tenant)  # this attempt's task: its DNS lookup's share
        try:
            outcome = await self._attempt(delivery, target_config, url, started)
            if outcome.kind == "timed_out" and self._stalls.stalled_since(loop_started):
                reason = f"{outcome.reason} (this process was stalled meanwhile)"
                outcome = dataclasses.replace(outcome, reason=reason)
                if breaker is not None and permit is not None:
                    breaker.release(permit)  # not the host's fault: no judgement
                permit = None
            return outcome
        finally:
            if self._breaker_threshold is not None and permit is not None:
                self._judge(where, permit, outcome)

    async def close(self) -> None:
        self._closed = True
        await self._stalls.close()
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._resolver is not None:
            await self._resolver.close()
            self._resolver = None

    async def _attempt(
        self, delivery: Delivery, config: HttpTargetConfig, url: URL, started: float
    ) -> Outcome:
        body = envelope_bytes(delivery)
        timestamp = self._clock.now_us() // 1_000_000
        key = _secret_key(config.secret) if config.secret else None
        ours = webhook_headers(delivery.run_id, timestamp, body, key)
        ours["content-type"] = "application/json"
        ours["user-agent"] = USER_AGENT
        headers: Mapping[str, str] = ours
        if config.headers:  # the job's own headers, ours winning whatever their case
            merged: CIMultiDict[str] = CIMultiDict(config.headers)
            merged.update(ours)
            headers = merged
        session = self._client()

        def done(
            kind: OutcomeKind,
            reason: str,
            retryable: bool,
            status_code: int | None = None,
            retry_after_s: float | None = None,
        ) -> Outcome:
            duration = round((self._clock.monotonic() - started) * 1e6)
            return Outcome(kind, reason, retryable, duration, status_code, retry_after_s)

        try:
            async with session.request(
                config.method,
                url,
                data=body,
                headers=headers,
                allow_redirects=False,
                timeout=_timeout(delivery.deadline),
            ) as response:
                snippet = await self._read_capped(response)
        except TimeoutError:
            return done("timed_out", f"no answer within {delivery.deadline:g} s", True)
        except aiohttp.ClientConnectorError as exc:
            if isinstance(exc.os_error, BlockedAddressError):
                return done("refused", str(exc.os_error), False)
            return done("failed", f"cannot connect to {url.host}:{url.port}: {exc.os_error}", True)
        except aiohttp.InvalidURL as exc:
            return done("refused", f"invalid URL: {exc}", False)
        except (aiohttp.ClientError, OSError) as exc:
            return done("failed", f"{type(exc).__name__}: {exc}", True)
        status = response.status
        reason = f"HTTP {status}"
        text = _text(snippet)
        if text:
            reason += f": {text}"
        if 200 <= status < 300:
            return done("succeeded", reason, False, status)
        if 300 <= status < 400:
            location = response.headers.get("location", "?")
            reason = f"HTTP {status}: redirect to {location} not followed"
            return done("failed", reason, False, status)
        if status == 410:
            return done("gone", reason, False, status)
        retry_after = None
        if status in (429, 503):
            retry_after = parse_retry_after(
                response.headers.get("retry-after"), self._clock.now_us()
            )
        retryable = status >= 500 or status in (408, 429)
        return done("failed", reason, retryable, status, retry_after)

    async def _read_capped(self, response: aiohttp.ClientResponse) -> bytes:
        """Up to ``body_cap`` bytes of the body (a longer body's connection is not reused)."""
        content = response.content
        found = bytearray()
        while len(found) < self._body_cap:
            chunk = await content.read(self._body_cap - len(found))
            if not chunk:
                break
            found += chunk
            if content.at_eof():  # the whole body (a short answer is one chunk)
                break
        return bytes(found)

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            if self._closed:
                raise RuntimeError("HttpSender is closed")
            inner = self._inner_resolver or TenantResolver()
            self._resolver = inner if self.allow_private else GuardedResolver(inner)
            connector = aiohttp.TCPConnector(
                limit=self._limit,
                limit_per_host=self._limit_per_host,
                resolver=self._resolver,
                socket_factory=None if self.allow_private else guarded_socket_factory,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                cookie_jar=aiohttp.DummyCookieJar(),
                trust_env=False,
                timeout=aiohttp.ClientTimeout(total=None),
            )
        return self._session

    def _judge(self, where: tuple[str, str], permit: Permit, outcome: Outcome | None) -> None:
        """Tell the (tenant, host) breaker (made at its first failure) what the attempt says."""
        breaker = self._breakers.get(where)
        status = None if outcome is None else outcome.status_code
        if outcome is None or outcome.kind == "refused" or status == 429:
            if breaker is not None:
                breaker.release(permit)
        elif status is None or status >= 500 or status == 408:
            if breaker is None:
                assert self._breaker_threshold is not None
                breaker = CircuitBreaker(
                    self._breaker_threshold, self._breaker_cool_down, self._clock
                )
                self._breakers[where] = breaker
            breaker.record_failure(permit)
        elif breaker is not None:
            breaker.record_success(permit)
            del self._breakers[where]
