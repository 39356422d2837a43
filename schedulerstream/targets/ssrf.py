"""The SSRF guard: connect only to public addresses, checked on the addresses actually dialled.

Two hooks into aiohttp's connector, so nothing reaches a private address whatever the URL says:
``GuardedResolver`` drops non-public results of a name lookup (refusing when none is left), and
``guarded_socket_factory`` checks each address right before its socket is made; that is the
check for IP-literal URLs, for which aiohttp never calls the resolver.
"""

from __future__ import annotations

import ipaddress
import socket

from aiohappyeyeballs import AddrInfoType
from aiohttp.abc import AbstractResolver, ResolveResult

from schedulerstream.errors import SchedulerStreamError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_V4_BLOCKED = tuple(
    ipaddress.IPv4Network(net)
    for net in (
        "0.0.0.0/8",  # "this network"
        "10.0.0.0/8",  # RFC 1918
        "100.64.0.0/10",  # carrier-grade NAT
        "127.0.0.0/8",  # loopback
        "169.254.0.0/16",  # link-local, cloud metadata (169.254.169.254)
        "172.16.0.0/12",  # RFC 1918
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",  # TEST-NET-1
        "192.88.99.0/24",  # 6to4 relay anycast
        "192.168.0.0/16",  # RFC 1918
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # TEST-NET-2
        "203.0.113.0/24",  # TEST-NET-3
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, broadcast
    )
)
_V6_BLOCKED = tuple(
    ipaddress.IPv6Network(net)
    for net in (
        "::/96",  # unspecified, loopback, deprecated IPv4-compatible
        "64:ff9b:1::/48",  # local-use NAT64
        "100::/64",  # discard-only
        "2001::/23",  # IETF protocol assignments (Teredo, ORCHID, ...)
        "2001:db8::/32",  # documentation
        "2002::/16",  # 6to4 (embeds an IPv4 address)
        "3fff::/20",  # documentation
        "5f00::/16",  # SRv6 SIDs
        "fc00::/7",  # unique local
        "fe80::/10",  # link-local
        "fec0::/10",  # site-local (deprecated)
        "ff00::/8",  # multicast
    )
)
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


class BlockedAddressError(SchedulerStreamError, OSError):
    """A connection to a non-public address was refused by the SSRF guard. An OSError too:
    aiohttp's connector turns an OSError from the resolver or the socket factory into a
    ``ClientConnectorError`` whose ``os_error`` is this (targets/http.py reads it there)."""


def blocked_reason(address: IPAddress | str) -> str | None:
    """Why ``address`` is not a public unicast address, or None when it is."""
    ip = ipaddress.ip_address(address.split("%", 1)[0] if isinstance(address, str) else address)
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or (
            ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF) if ip in _NAT64 else None
        )
        if embedded is not None:
            inner = blocked_reason(embedded)
            return None if inner is None else f"{ip} embeds {embedded}: {inner}"
        nets: tuple[ipaddress.IPv4Network, ...] | tuple[ipaddress.IPv6Network, ...] = _V6_BLOCKED
    else:
        nets = _V4_BLOCKED
    for net in nets:
        if ip in net:
            return f"{ip} is in the non-public range {net}"
    for flag in ("loopback", "private", "link_local", "multicast", "reserved", "unspecified"):
        if getattr(ip, f"is_{flag}"):
            return f"{ip} is a {flag.replace('_', '-')} address"
    if not ip.is_global:
        return f"{ip} is not globally reachable"
    return None


def check_address(address: str) -> None:
    """Raise BlockedAddressError unless ``address`` is public."""
    try:
        reason = blocked_reason(address)
    except ValueError:
        reason = f"{address!r} is not an IP address"
    if reason is not None:
        raise BlockedAddressError(f"refused by the SSRF guard: {reason}")


def _open_socket(addr_info: AddrInfoType) -> socket.socket:
    family, type_, proto, _, _ = addr_info
    return socket.socket(family=family, type=type_, proto=proto)


def guarded_socket_factory(addr_info: AddrInfoType) -> socket.socket:
    """aiohttp ``socket_factory``: refuse a non-public address before any socket exists."""
    check_address(addr_info[4][0])
    return _open_socket(addr_info)


class GuardedResolver(AbstractResolver):
    """Resolves with ``inner`` and keeps only public addresses; refuses when none is left."""

    def __init__(self, inner: AbstractResolver) -> None:
        self._inner = inner

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self._inner.resolve(host, port, family)
        if not found:
            return found
        public = [r for r in found if blocked_reason(r["host"]) is None]
        if not public:
            reasons = "; ".join(sorted({str(blocked_reason(r["host"])) for r in found}))
            raise BlockedAddressError(
                f"refused by the SSRF guard: {host} resolves only to non-public addresses "
                f"({reasons})"
            )
        return public

    async def close(self) -> None:
        await self._inner.close()
