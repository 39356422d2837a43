"""DNS lookups on a thread pool of their own, a bounded share of it per tenant.

``getaddrinfo`` blocks a thread until the name servers answer or give up (tens of seconds
for a name whose servers are silent), and cancelling the attempt does not free the thread.
On the loop's default pool (a handful of threads) a few such hostnames of one tenant held
every lookup of every other tenant. Here a tenant (``LOOKUP_TENANT``, set by the sender
around each attempt) has at most ``per_tenant`` lookups on the pool at once, counted until
their thread is free again, not until its attempt gave up.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextvars import ContextVar
from typing import Any

from aiohttp.abc import AbstractResolver, ResolveResult

LOOKUP_TENANT: ContextVar[str] = ContextVar("lookup_tenant", default="")
_NUMERIC = socket.NI_NUMERICHOST | socket.NI_NUMERICSERV
_AI_ADDRCONFIG = getattr(socket, "AI_ADDRCONFIG", 0)

Lookup = Callable[..., list[tuple[Any, ...]]]  # socket.getaddrinfo's signature


class _Share:
    """One tenant's lookups on the pool, and the attempts waiting for one to end."""

    __slots__ = ("busy", "waiting")

    def __init__(self) -> None:
        self.busy = 0
        self.waiting: deque[asyncio.Future[None]] = deque()


class TenantResolver(AbstractResolver):
    """aiohttp's threaded resolver, on ``threads`` threads, ``per_tenant`` at most a tenant."""

    def __init__(self, threads: int = 64, per_tenant: int = 4,
                 lookup: Lookup = socket.getaddrinfo) -> None:  # fmt: skip
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="dns")
        self._per_tenant = per_tenant
        self._lookup = lookup
        self._shares: dict[str, _Share] = {}

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        infos = await self._on_pool(
            LOOKUP_TENANT.get(), self._lookup, host, port, family, socket.SOCK_STREAM, 0,
            _AI_ADDRCONFIG,
        )  # fmt: skip
        found: list[ResolveResult] = []
        for family_, _, proto, _, address in infos:
            if family_ == socket.AF_INET6:
                if len(address) < 3:
                    continue  # IPv6 not supported by this Python build
                if address[3]:  # a link-local address keeps its scope in its name
                    name, service = await self._on_pool("", socket.getnameinfo, address, _NUMERIC)
                    resolved, port_ = name, int(service)
                else:
                    resolved, port_ = address[0], address[1]
            else:
                resolved, port_ = address[0], address[1]
            found.append(ResolveResult(hostname=host, host=resolved, port=port_, family=family_,
                                       proto=proto, flags=_NUMERIC))  # fmt: skip
        return found

    async def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def _on_pool(self, tenant: str, call: Callable[..., Any], *args: Any) -> Any:
        loop = asyncio.get_running_loop()
        share = await self._take(tenant, loop)
        try:
            done: Future[Any] = self._pool.submit(call, *args)
        except BaseException:
            self._give_back(tenant, share)
            raise

        def ended(_: Future[Any]) -> None:  # on the pool's thread, or here if never started
            with contextlib.suppress(RuntimeError):  # a closed loop: nothing waits any more
                loop.call_soon_threadsafe(self._give_back, tenant, share)

        done.add_done_callback(ended)
        return await asyncio.wrap_future(done)

    async def _take(self, tenant: str, loop: asyncio.AbstractEventLoop) -> _Share:
        share = self._shares.get(tenant)
        if share is None:
            share = self._shares[tenant] = _Share()
        if share.busy < self._per_tenant:
            share.busy += 1
            return share
        turn: asyncio.Future[None] = loop.create_future()
        share.waiting.append(turn)
        try:
            await turn  # a lookup ended and handed its place over
        except BaseException:
            if turn in share.waiting:
                share.waiting.remove(turn)
            elif turn.done() and not turn.cancelled():
                self._give_back(tenant, share)  # the place it was handed passes on
            raise
        return share

    def _give_back(self, tenant: str, share: _Share) -> None:
        while share.waiting:
            turn = share.waiting.popleft()
            if not turn.done():
                turn.set_result(None)
                return
        share.busy -= 1
        if share.busy == 0 and self._shares.get(tenant) is share:
            del self._shares[tenant]
