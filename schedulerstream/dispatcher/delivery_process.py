"""The delivery loop in a process of its own (``DISPATCH_DELIVERY=process``).

The processor thread and the ``Executor``'s event loop share one GIL when they share a process:
every send and receive of the loop waits for the processor to let go of it, and the two never
run at once (``bench/bench_executor.py`` measures it). ``DeliveryProcess`` has the
``Executor``'s interface and runs one in a child process, so the loop sends its HTTP and SQS
attempts on a core of its own.

The child is started with a socket pair and speaks length-prefixed pickled frames: the parent
sends lists of commands (its gate, submissions, cancels, holds, close), the child sends lists of
completions. The guarantees stay the ``Executor``'s: a start still waits at most the gate's time
to live from its commit (the commit's instant travels with it), a held partition's waiting
starts are not sent, and a child whose parent is gone (its socket reads end of file) cancels
everything and exits, so nothing is sent for a dead processor. A child that exits raises
``DependencyDown`` in the parent (the processor stops; its successor re-dispatches).
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import logging
import pickle
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from schedulerstream.dispatcher.deliveries import Completion, Gate
from schedulerstream.dispatcher.executor import GRACE_S, Executor
from schedulerstream.dispatcher.waiting import AttemptKey
from schedulerstream.errors import DependencyDown
from schedulerstream.gc_policy import tune_gc
from schedulerstream.targets.base import Delivery, Sender
from schedulerstream.targets.http import HttpSender

log = logging.getLogger(__name__)
_LENGTH = struct.Struct("!I")
SEND_TIMEOUT_S = 10.0
_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


def frame(value: Any) -> bytes:
    body = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(body)) + body


def unframe(buffer: bytearray) -> list[Any]:
    """The whole frames at the head of ``buffer``, taken out of it."""
    found = []
    while len(buffer) >= 4:
        (size,) = _LENGTH.unpack_from(buffer)
        if len(buffer) < 4 + size:
            break
        found.append(pickle.loads(buffer[4 : 4 + size]))
        del buffer[: 4 + size]
    return found


class DeliveryProcess:
    """The ``Executor`` interface; the attempts run in a child process (see the module)."""

    def __init__(self, *, allow_private: bool, grace_s: float = GRACE_S, gc_young: int = 0) -> None:
        self._grace_s = grace_s
        ours, theirs = socket.socketpair()
        # A stop signal sent to the whole group (the supervisor's, a terminal's ^C) must not end
        # the child while it still imports: it starts with them blocked (the mask survives exec)
        # and unblocks them once it ignores them.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", __name__, str(theirs.fileno())], pass_fds=(theirs.fileno(),)
            )
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        theirs.close()
        ours.setblocking(False)
        self._sock = ours
        self._received = bytearray()
        self._pending: list[tuple[Any, ...]] = [("options", allow_private, grace_s, gc_young)]
        self._live: set[AttemptKey] = set()
        self._gate: Gate | None = None
        self._closed = False

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def in_flight(self) -> int:
        return len(self._live)

    def set_gate(self, gate: Gate, ttl_s: float) -> None:
        self._gate = gate
        self._pending.append(("gate", gate.concurrency, gate.host_concurrency, ttl_s))

    def submit(
        self,
        partition: int,
        tenant: str,
        delivery: Delivery,
        target: Sender[Any],
        config: Any,
        host: str | None = None,
        delay_s: float = 0.0,
        committed_at: float | None = None,
    ) -> None:
        """As ``Executor.submit``; sent with the next ``flush`` (or any other call)."""
        self._live.add((partition, delivery.run_id, delivery.attempt))
        kind = "http" if isinstance(target, HttpSender) else "sqs"
        concurrency = self._gate.tenant_concurrency_of(tenant) if self._gate else None
        self._pending.append(("submit", partition, tenant, concurrency, delivery, kind, config,
                              host, delay_s, time.monotonic(), committed_at))  # fmt: skip

    def flush(self) -> None:
        """Send the commands queued so far."""
        if not self._pending:
            return
        commands, self._pending = self._pending, []
        data = memoryview(frame(commands))
        deadline = time.monotonic() + SEND_TIMEOUT_S
        while data:
            try:
                data = data[self._sock.send(data) :]
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise DependencyDown("the delivery process takes no commands") from None
                select.select([], [self._sock], [], left)
            except OSError as exc:
                raise self._exited(exc) from None

    def cancel(self, partition: int, run_id: str, attempt: int) -> bool:
        key = (partition, run_id, attempt)
        if key not in self._live:
            return False
        self._pending.append(("cancel", key))
        self.flush()
        return True

    def running(self, partition: int, run_id: str, attempt: int) -> bool:
        return (partition, run_id, attempt) in self._live

    def hold(self, partition: int) -> None:
        self._pending.append(("hold", partition))
        self.flush()

    def cancel_partition(self, partition: int) -> int:
        count = sum(1 for key in self._live if key[0] == partition)
        self._pending.append(("cancel_partition", partition))
        self.flush()
        return count

    def drain(self) -> list[Completion]:
        """Every completion the child reported since the last call."""
        self.flush()
        while True:
            try:
                chunk = self._sock.recv(1 << 18)
            except BlockingIOError:
                break
            except OSError as exc:
                raise self._exited(exc) from None
            if not chunk:
                raise self._exited(None)
            self._received += chunk
        found = [Completion(*row) for batch in unframe(self._received) for row in batch]
        for completion in found:
            self._live.discard((completion.partition, completion.run_id, completion.attempt))
        return found

    def call(self, factory: Callable[[], Awaitable[Any]], timeout: float = 10.0) -> Any:
        """Run a coroutine of this process's objects (closing its unused targets) here."""

        async def run() -> Any:
            return await asyncio.wait_for(factory(), timeout)

        return asyncio.run(run())

    def close(self) -> None:
        """Cancel what runs and stop the child."""
        if self._closed:
            return
        self._closed = True
        self._pending.append(("close",))
        with contextlib.suppress(DependencyDown, OSError):
            self.flush()
        try:
            self._process.wait(self._grace_s + 5)
        except subprocess.TimeoutExpired:
            log.warning("the delivery process did not stop: killed")
            self._process.kill()
            self._process.wait(5)
        self._sock.close()

    def _exited(self, exc: OSError | None) -> DependencyDown:
        try:  # a dying child's socket closes just before it can be reaped
            code: int | None = self._process.wait(1.0)
        except subprocess.TimeoutExpired:
            code = None
        why = f"exit code {code}" if code is not None else f"{exc or 'its socket closed'}"
        return DependencyDown(f"the delivery process {self._process.pid} is gone ({why})")


class _Gate:
    """The parent's limits as the child's executor needs them."""

    def __init__(self, concurrency: int, host_concurrency: int) -> None:
        self.concurrency = concurrency
        self.host_concurrency = host_concurrency
        self.tenants: dict[str, int] = {}

    def tenant_concurrency_of(self, tenant: str) -> int:
        return self.tenants.get(tenant, self.concurrency)


class _Child:
    """The child's side: commands in, completions out, all on the executor's loop."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.executor = Executor(thread=False, on_complete=self._completed)
        self.loop = self.executor.loop
        self.gate = _Gate(1, 1)
        self.senders: dict[str, Sender[Any]] = {}
        self.allow_private = False
        self.grace_s = GRACE_S
        self._out: list[tuple[Any, ...]] = []
        self._writer: asyncio.StreamWriter | None = None

    async def serve(self) -> None:
        reader, self._writer = await asyncio.open_unix_connection(sock=self.sock)
        try:
            while True:
                (size,) = _LENGTH.unpack(await reader.readexactly(4))
                for command in pickle.loads(await reader.readexactly(size)):
                    if command[0] == "close":
                        return
                    self._apply(command)
        except asyncio.IncompleteReadError:
            log.warning("the dispatcher is gone: cancelling every attempt")
        finally:
            await self._settle()
            self.loop.stop()

    def _apply(self, command: tuple[Any, ...]) -> None:
        kind = command[0]
        if kind == "submit":
            (_, partition, tenant, concurrency, delivery, target, config, host, delay_s, sent_at,
             committed_at) = command  # fmt: skip
            if concurrency is not None:
                self.gate.tenants[tenant] = concurrency
            delay = delay_s - (time.monotonic() - sent_at) if delay_s > 0 else 0.0
            self.executor.submit(partition, tenant, delivery, self._sender(target), config, host,
                                 max(0.0, delay), committed_at)  # fmt: skip
        elif kind == "cancel":
            self.executor.cancel(*command[1])
        elif kind == "cancel_partition":
            self.executor.cancel_partition(command[1])
        elif kind == "hold":
            self.executor.hold(command[1])
        elif kind == "gate":
            self.gate = _Gate(command[1], command[2])
            self.executor.set_gate(self.gate, command[3])
        elif kind == "options":
            self.allow_private, self.grace_s = command[1], command[2]
            tune_gc(command[3])
        else:
            raise ValueError(f"unknown command {kind!r}")

    def _sender(self, kind: str) -> Sender[Any]:
        sender = self.senders.get(kind)
        if sender is None:
            if kind == "http":
                sender = HttpSender(allow_private=self.allow_private)
            else:
                from schedulerstream.targets.sqs import SqsSender  # aiobotocore only where used

                sender = SqsSender()
            self.senders[kind] = sender
        return sender

    def _completed(self, completion: Completion) -> None:
        self._out.append(tuple(completion))
        if len(self._out) == 1:
            self.loop.call_soon(self._send)

    def _send(self) -> None:
        if self._writer is not None and self._out and not self._writer.is_closing():
            self._writer.write(frame(self._out))
        self._out = []

    async def _settle(self) -> None:
        """Cancel every attempt (none is sent any more) and close the targets."""
        self.executor.stop_starting()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=self.grace_s + 1)
        for sender in self.senders.values():
            with contextlib.suppress(Exception):
                await sender.close()
        self._send()
        if self._writer is not None:
            with contextlib.suppress(Exception):
                await self._writer.drain()


def main() -> None:
    """The child: ``python -m schedulerstream.dispatcher.delivery_process <socket fd>``."""
    logging.basicConfig(level=logging.WARNING, format="delivery %(levelname)s %(message)s")
    # the parent decides when this stops (close, or its socket's end of file)
    for stop in _STOP_SIGNALS:
        signal.signal(stop, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)  # one that came meanwhile is dropped
    faulthandler.register(signal.SIGUSR2, all_threads=True)  # stacks, as the processor's
    child = _Child(socket.socket(fileno=int(sys.argv[1])))
    child.loop.create_task(child.serve())
    child.executor.run()


if __name__ == "__main__":
    main()
