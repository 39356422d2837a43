"""Free loopback ports for servers the tests start themselves."""

from __future__ import annotations

import socket


def free_port_pair() -> int:
    """A port p with p + 1 free too (a local broker's controller listener is p + 1)."""
    for _ in range(50):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no two consecutive free ports")
