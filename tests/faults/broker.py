"""A broker of the fault matrix's own (never the session broker at 39092), with a second
listener reached only through a TCP proxy the test controls.

The broker has two client listeners: ``PLAINTEXT`` on ``port`` (advertised as itself: the
test's readers and the processors that stay connected) and ``PROXIED`` on ``port + 2``,
advertised as the proxy's port. A client bootstrapping at the proxy gets the proxy back in
every metadata answer (a broker answers with the advertised address of the listener the
request came in on), so librdkafka reconnects through the proxy after any disconnect: the
proxy is that client's whole network path to the broker. The controller listens on
``port + 1`` (as in LocalBroker).
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from pathlib import Path

from schedulerstream.kafka.broker import LocalBroker
from schedulerstream.settings import Settings, load_settings


def port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(start: int, count: int) -> int:
    """The first port from ``start`` (stepping by ``count``) with ``count`` free ports."""
    for port in range(start, start + 400, count):
        if all(port_free(p) for p in range(port, port + count)):
            return port
    raise AssertionError(f"no {count} free ports in [{start}, {start + 400})")


class ProxiedBroker(LocalBroker):
    """LocalBroker plus the ``PROXIED`` listener (see the module docstring)."""

    def __init__(self, settings: Settings, proxy_port: int) -> None:
        super().__init__(settings)
        self.proxied_port = self.port + 2
        self.proxy_port = proxy_port

    def _write_config(self) -> None:
        super()._write_config()
        lines = self.paths.config.read_text().splitlines()
        extra = {
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,PROXIED:PLAINTEXT,CONTROLLER:PLAINTEXT"
            ),
            "listeners": (
                f"PLAINTEXT://{self.host}:{self.port},PROXIED://{self.host}:{self.proxied_port},"
                f"CONTROLLER://{self.host}:{self.port + 1}"
            ),
            "advertised.listeners": (
                f"PLAINTEXT://{self.host}:{self.port},PROXIED://{self.host}:{self.proxy_port}"
            ),
        }
        kept = [line for line in lines if line.partition("=")[0] not in extra]
        kept += [f"{k}={v}" for k, v in extra.items()]
        self.paths.config.write_text("\n".join(kept) + "\n")


def start_proxied_broker(root: Path, first_port: int = 39400) -> tuple[ProxiedBroker, Settings]:
    """A broker on 4 free consecutive ports from ``first_port``: client, controller,
    proxied listener, proxy."""
    port = free_ports(first_port, 4)
    settings = load_settings(bootstrap_servers=f"127.0.0.1:{port}", data_dir=root)
    broker = ProxiedBroker(settings, proxy_port=port + 3)
    broker.up(timeout=180)
    return broker, settings


class TcpProxy:
    """Forwards 127.0.0.1:``listen_port`` to 127.0.0.1:``upstream_port`` (threads).

    ``block()`` is a network partition: every byte stays where it is (no FIN, no RST: TCP
    would keep retransmitting), new connections are not accepted; ``unblock()`` heals it and
    whatever was held flows on. ``cut()`` closes every connection instead (a reset)."""

    def __init__(self, listen_port: int, upstream_port: int) -> None:
        self.listen_port = listen_port
        self.upstream_port = upstream_port
        self._open = threading.Event()
        self._open.set()
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self.connections = 0
        self._server = socket.create_server(("127.0.0.1", listen_port), backlog=128)
        self._thread = threading.Thread(target=self._accept, name="tcp-proxy", daemon=True)

    def start(self) -> TcpProxy:
        self._thread.start()
        return self

    def block(self) -> None:
        self._open.clear()

    def unblock(self) -> None:
        self._open.set()

    def cut(self) -> None:
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        self._closing.set()
        self._open.set()
        self._server.close()
        self.cut()
        self._thread.join(5)

    def _accept(self) -> None:
        while not self._closing.is_set():
            self._open.wait()
            ready, _, _ = select.select([self._server], [], [], 0.2)
            if not ready or not self._open.is_set():
                continue
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port), 5)
            except OSError:
                client.close()  # the broker is down: the client sees the connection refused
                continue
            with self._lock:
                self._sockets += [client, upstream]
                self.connections += 1
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while not self._closing.is_set():
                if not self._open.is_set():
                    time.sleep(0.05)  # partitioned: leave the bytes in the kernel buffers
                    continue
                ready, _, _ = select.select([source], [], [], 0.2)
                if not ready:
                    continue
                data = source.recv(65536)
                if not data:
                    break
                while not self._open.is_set() and not self._closing.is_set():
                    time.sleep(0.05)  # read just before the partition: hold it
                sink.sendall(data)
        except (OSError, ValueError):  # ValueError: select on a socket cut() just closed
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
