"""The SSRF guard refuses non-public addresses before any connection is made.

Only loopback is ever dialled for real: tests of other ranges replace the guard's socket opener
with one that fails the test, so a broken guard cannot send a packet anywhere.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import pytest

from harness.procs import ReceiverProcess
from schedulerstream.targets import HttpSender, Outcome, ssrf
from schedulerstream.targets.ssrf import BlockedAddressError, GuardedResolver, blocked_reason
from tests.targets.helpers import FakeResolver, delivery, http_config

BLOCKED = [
    "0.0.0.0",
    "0.1.2.3",
    "10.0.0.1",
    "10.255.255.255",
    "100.64.0.1",
    "100.127.255.254",
    "127.0.0.1",
    "127.8.9.10",
    "169.254.169.254",
    "169.254.0.1",
    "172.16.0.1",
    "172.31.255.255",
    "192.0.0.8",
    "192.0.2.1",
    "192.168.1.1",
    "198.18.0.1",
    "198.51.100.7",
    "203.0.113.9",
    "224.0.0.1",
    "239.255.255.250",
    "240.0.0.1",
    "255.255.255.255",
    "::",
    "::1",
    "::127.0.0.1",
    "::ffff:127.0.0.1",
    "::ffff:10.0.0.1",
    "::ffff:169.254.169.254",
    "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
    "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
    "64:ff9b:1::808:808",  # local-use NAT64
    "100::1",
    "2001::1",  # Teredo
    "2001:db8::1",
    "2002:a00:1::1",  # 6to4 of 10.0.0.1
    "fc00::1",
    "fd12:3456::1",
    "fe80::1",
    "fe80::1%lo",
    "fec0::1",
    "ff02::1",
    "ff05::2",
]
PUBLIC = [
    "1.1.1.1",
    "8.8.8.8",
    "93.184.216.34",
    "100.63.255.255",
    "100.128.0.1",
    "172.32.0.1",
    "2606:4700:4700::1111",
    "2a00:1450:4001::200e",
    "::ffff:8.8.8.8",
    "64:ff9b::808:808",  # NAT64 of 8.8.8.8
]


@pytest.mark.parametrize("address", BLOCKED)
def test_non_public_addresses_are_blocked(address: str) -> None:
    assert blocked_reason(address) is not None


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_pass(address: str) -> None:
    assert blocked_reason(address) is None


def test_a_non_address_is_refused() -> None:
    with pytest.raises(BlockedAddressError, match="not an IP address"):
        ssrf.check_address("example.com")


def test_the_reason_names_the_range() -> None:
    assert blocked_reason("169.254.169.254") == (
        "169.254.169.254 is in the non-public range 169.254.0.0/16"
    )
    assert "embeds 10.0.0.1" in str(blocked_reason("::ffff:10.0.0.1"))


@pytest.fixture
def no_dialling(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[object]]:
    """Make any socket the guard lets through fail the test instead of connecting."""
    dialled: list[object] = []

    def forbidden(addr_info: object) -> socket.socket:
        dialled.append(addr_info)
        raise OSError(f"the test forbids connecting to {addr_info}")

    monkeypatch.setattr(ssrf, "_open_socket", forbidden)
    yield dialled


def guarded(url: str, resolver: FakeResolver | None = None) -> Outcome:
    async def go() -> Outcome:
        target = HttpSender(allow_private=False, resolver=resolver)
        try:
            return await target.deliver(delivery(), http_config(url))
        finally:
            await target.close()

    return asyncio.run(go())


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://192.168.1.1:8080/hook",
        "http://172.16.0.1/",
        "http://100.64.0.1/",
        "http://0.0.0.0/",
        "http://224.0.0.1/",
        "http://255.255.255.255/",
        "https://10.0.0.1/",
        "http://[fc00::1]/",
        "http://[fe80::1]/",
        "http://[ff02::1]/",
        "http://[::ffff:10.0.0.1]/",
        "http://[::ffff:169.254.169.254]/",
        "http://[64:ff9b::a00:1]/",
        "http://[::]/",
        "http://2130706433/",  # 127.0.0.1 as one number
        "http://0x7f.0.0.1/",
        "http://0177.0.0.1/",
    ],
)
def test_private_literals_are_refused_before_dialling(url: str, no_dialling: list[object]) -> None:
    outcome = guarded(url)
    assert (outcome.kind, outcome.retryable, outcome.status_code) == ("refused", False, None)
    assert "SSRF guard" in outcome.reason or "invalid URL" in outcome.reason
    assert no_dialling == []


def test_names_resolving_to_private_addresses_are_refused(no_dialling: list[object]) -> None:
    resolver = FakeResolver(
        {
            "metadata.example.test": ["169.254.169.254"],
            "intranet.example.test": ["10.1.2.3", "fd00::5"],
        }
    )
    for host in resolver.table:
        outcome = guarded(f"http://{host}/hook", resolver)
        assert (outcome.kind, outcome.retryable) == ("refused", False)
        assert f"SSRF guard: {host} resolves only to non-public" in outcome.reason
    assert resolver.asked == list(resolver.table)
    assert no_dialling == []


def test_the_resolver_keeps_only_public_addresses() -> None:
    inner = FakeResolver({"mixed.example.test": ["10.0.0.7", "93.184.216.34", "::1"]})

    async def go() -> list[str]:
        found = await GuardedResolver(inner).resolve("mixed.example.test", 443)
        return [r["host"] for r in found]

    assert asyncio.run(go()) == ["93.184.216.34"]


def test_the_resolver_refuses_when_nothing_public_is_left() -> None:
    inner = FakeResolver({"loop.example.test": ["127.0.0.1", "::1"]})
    expected = r"loop\.example\.test resolves only to non-public"
    with pytest.raises(BlockedAddressError, match=expected):
        asyncio.run(GuardedResolver(inner).resolve("loop.example.test", 80))


def test_loopback_receiver_urls_are_refused_without_a_request(receiver: ReceiverProcess) -> None:
    resolver = FakeResolver({"hooks.example.test": ["127.0.0.1"]})
    port = receiver.port
    urls = [
        f"http://127.0.0.1:{port}/ok",
        f"http://localhost:{port}/ok",
        f"http://hooks.example.test:{port}/ok",
        f"http://[::ffff:127.0.0.1]:{port}/ok",
    ]
    for url in urls:
        run = delivery()

        async def go(url: str = url, run_id: str = run.run_id) -> Outcome:
            fake = resolver if "example.test" in url else None
            target = HttpSender(allow_private=False, resolver=fake)
            try:
                return await target.deliver(delivery(run_id=run_id), http_config(url))
            finally:
                await target.close()

        outcome = asyncio.run(go())
        assert (outcome.kind, outcome.retryable) == ("refused", False), (url, outcome)
        assert receiver.requests(run.run_id) == [], url


def _listener(family: socket.AddressFamily, host: str) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.bind((host, 0))
    sock.listen(8)
    sock.setblocking(False)
    return sock


def _ipv6_loopback() -> bool:
    try:
        _listener(socket.AF_INET6, "::1").close()
    except OSError:
        return False
    return True


@pytest.mark.parametrize(
    ("family", "host", "url_host"),
    [
        (socket.AF_INET, "127.0.0.1", "127.0.0.1"),
        (socket.AF_INET, "127.0.0.1", "localhost"),
        pytest.param(
            socket.AF_INET6,
            "::1",
            "[::1]",
            marks=pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback"),
        ),
    ],
)
def test_no_connection_reaches_a_loopback_listener(
    family: socket.AddressFamily, host: str, url_host: str
) -> None:
    with _listener(family, host) as listener:
        port = listener.getsockname()[1]
        outcome = guarded(f"http://{url_host}:{port}/")
        assert (outcome.kind, outcome.retryable) == ("refused", False)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing connected, not even a handshake
        with socket.create_connection((host, port), timeout=5):
            conn, _ = listener.accept()  # the check does see a real connection
            conn.close()


def test_allow_private_reaches_loopback(receiver: ReceiverProcess) -> None:
    resolver = FakeResolver({"hooks.example.test": ["127.0.0.1"]})

    async def go() -> list[Outcome]:
        target = HttpSender(allow_private=True, resolver=resolver)
        try:
            return [
                await target.deliver(delivery(), http_config(receiver.url("/ok"))),
                await target.deliver(
                    delivery(), http_config(f"http://hooks.example.test:{receiver.port}/ok")
                ),
            ]
        finally:
            await target.close()

    assert [o.kind for o in asyncio.run(go())] == ["succeeded", "succeeded"]
