"""What the dispatcher's HTTP and SQS attempts run on (``Deliveries``: the ``Executor`` or the
``DeliveryProcess``), the limits it holds to (``Gate``) and how each attempt ends
(``Completion``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple, Protocol

from schedulerstream.targets.base import Delivery, Outcome, Sender


class Gate(Protocol):
    """The concurrency limits the executor holds to (``dispatcher.limits.Limits``)."""

    @property
    def concurrency(self) -> int: ...

    @property
    def host_concurrency(self) -> int: ...

    def tenant_concurrency_of(self, tenant: str) -> int: ...


class Deliveries(Protocol):
    """Where the dispatcher's HTTP and SQS attempts run: ``Executor`` (a thread of this
    process) or ``DeliveryProcess`` (a child process); one processor thread calls it."""

    @property
    def in_flight(self) -> int: ...

    def set_gate(self, gate: Gate, ttl_s: float) -> None: ...

    def submit(self, partition: int, tenant: str, delivery: Delivery, target: Sender[Any],
               config: Any, host: str | None = None, delay_s: float = 0.0,
               committed_at: float | None = None) -> None: ...  # fmt: skip

    def flush(self) -> None: ...

    def cancel(self, partition: int, run_id: str, attempt: int) -> bool: ...

    def running(self, partition: int, run_id: str, attempt: int) -> bool: ...

    def hold(self, partition: int) -> None: ...

    def cancel_partition(self, partition: int) -> int: ...

    def drain(self) -> list[Completion]: ...

    def call(self, factory: Callable[[], Awaitable[Any]], timeout: float = 10.0) -> Any: ...

    def close(self) -> None: ...


class Completion(NamedTuple):
    """How one submitted attempt ended; ``outcome`` is None when it was cancelled (a tuple:
    one is made per attempt, and the delivery process sends its fields)."""

    partition: int
    tenant: str
    run_id: str
    attempt: int
    outcome: Outcome | None
    host: str | None = None
