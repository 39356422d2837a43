"""TenantResolver: one tenant's hostnames whose name servers never answer take at most its
share of the lookup threads, so another tenant's lookups go on."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from contextvars import copy_context
from typing import Any

from aiohttp.abc import AbstractResolver, ResolveResult

from harness.procs import ReceiverProcess
from schedulerstream.targets import HttpSender
from schedulerstream.targets.resolver import LOOKUP_TENANT, TenantResolver
from tests.targets.helpers import delivery, http_config


class SilentNames:
    """getaddrinfo that hangs on ``dead-*`` names until released, and answers the rest."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.hanging = 0
        self._lock = threading.Lock()

    def __call__(self, host: str, port: int, *rest: Any) -> list[tuple[Any, ...]]:
        if host.startswith("dead-"):
            with self._lock:
                self.hanging += 1
            self.release.wait(30)
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]


def _as(tenant: str, coro: Any) -> asyncio.Task[Any]:
    context = copy_context()
    context.run(LOOKUP_TENANT.set, tenant)
    return asyncio.get_running_loop().create_task(coro, context=context)


def test_a_tenants_silent_names_hold_its_share_and_another_tenant_resolves_at_once() -> None:
    names = SilentNames()
    resolver = TenantResolver(threads=6, per_tenant=4, lookup=names)  # 6: the default pool here

    async def go() -> tuple[float, int]:
        dead = [_as("evil", resolver.resolve(f"dead-{i}.example", 443)) for i in range(12)]
        while names.hanging < 4:
            await asyncio.sleep(0.01)
        started = time.monotonic()
        [found] = await _as("acme", resolver.resolve("hooks.example", 443))
        took = time.monotonic() - started
        assert found["host"] == "127.0.0.1" and found["port"] == 443
        hanging = names.hanging
        names.release.set()
        results = await asyncio.gather(*dead, return_exceptions=True)
        assert all(isinstance(r, socket.gaierror) for r in results)
        await resolver.close()
        return took, hanging

    took, hanging = asyncio.run(go())
    assert hanging == 4  # the other 8 of its lookups waited for its own threads
    assert took < 2.0


def test_a_place_is_held_until_the_lookup_thread_ends_not_until_the_attempt_gave_up() -> None:
    names = SilentNames()
    resolver = TenantResolver(threads=8, per_tenant=2, lookup=names)

    async def go() -> tuple[int, int, int]:
        first = [_as("evil", resolver.resolve(f"dead-{i}.example", 443)) for i in range(2)]
        while names.hanging < 2:
            await asyncio.sleep(0.01)
        for task in first:  # the attempts time out; their threads still wait on DNS
            task.cancel()
        await asyncio.gather(*first, return_exceptions=True)
        more = [_as("evil", resolver.resolve(f"dead-{i}.example", 443)) for i in range(2, 6)]
        await asyncio.gather(*(asyncio.sleep(0) for _ in range(10)))  # each reached its wait
        share = resolver._shares["evil"]
        held = (share.busy, len(share.waiting), names.hanging)
        names.release.set()
        await asyncio.gather(*more, return_exceptions=True)
        await resolver.close()
        assert "evil" not in resolver._shares  # all given back
        return held

    assert asyncio.run(go()) == (2, 4, 2)


def test_the_sender_resolves_each_attempts_host_as_its_tenant(receiver: ReceiverProcess) -> None:
    seen: list[str] = []

    class Probe(AbstractResolver):
        async def resolve(self, host: str, port: int = 0, family: Any = socket.AF_INET) -> Any:
            seen.append(LOOKUP_TENANT.get())
            return [ResolveResult(hostname=host, host="127.0.0.1", port=port, family=family,
                                  proto=0, flags=0)]  # fmt: skip

        async def close(self) -> None:
            return None

    async def go() -> str:
        sender = HttpSender(allow_private=True, resolver=Probe())
        try:
            url = f"http://hooks.test:{receiver.port}/ok"
            return (await sender.deliver(delivery(), http_config(url))).kind
        finally:
            await sender.close()

    assert asyncio.run(go()) == "succeeded"
    assert seen == ["acme"]
