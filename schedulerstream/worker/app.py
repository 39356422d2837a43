"""WorkerApp: the handlers of a worker process, and what a handler is given (``Job``)."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, overload

from pydantic import JsonValue

from schedulerstream.contracts.worker import WorkOffer
from schedulerstream.errors import ConfigError, SchedulerStreamError
from schedulerstream.model import from_us


class JobFailed(SchedulerStreamError):
    """Raised by a handler to fail the attempt with ``reason``; ``retryable=False`` asks the
    dispatcher not to try again (other exceptions fail the attempt as retryable)."""

    def __init__(self, reason: str, *, retryable: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable


@dataclass(frozen=True)
class Job:
    """One attempt of one run, as a handler sees it.

    ``cancelled`` is set when the dispatcher cancels the attempt (CancelRun, overlap
    ``replace``, lease expiry) or its deadline passes: a sync handler should check it (or
    ``wait`` on it) and return; an async handler is also cancelled (CancelledError).
    """

    run_id: str
    tenant: str
    job_id: str
    scheduled_at: str  # ISO 8601 UTC, as in the webhook envelope
    attempt: int
    trigger: str
    payload: JsonValue
    pool: str
    deadline_at_us: int
    cancelled: threading.Event = field(default_factory=threading.Event, compare=False)

    @property
    def job_key(self) -> str:
        return f"{self.tenant}/{self.job_id}"

    @property
    def deadline_at(self) -> datetime:
        return from_us(self.deadline_at_us)

    def is_cancelled(self) -> bool:
        return self.cancelled.is_set()

    @classmethod
    def from_offer(cls, offer: WorkOffer) -> Job:
        return cls(
            offer.run_id, offer.tenant, offer.job_id, offer.scheduled_at, offer.attempt,
            offer.trigger, offer.payload, offer.pool, offer.deadline_at_us,
        )  # fmt: skip


class Handler(Protocol):
    """Runs one job: returns (anything; an optional short text becomes the reason of
    ``succeeded``) or raises (``JobFailed`` or any exception: ``failed``). May be async."""

    def __call__(self, job: Job, /) -> Any: ...


SyncHandler = Callable[[Job], Any]
AsyncHandler = Callable[[Job], Awaitable[Any]]


class WorkerApp:
    """Handlers by job: ``@app.handler`` for every job without its own,
    ``@app.handler(job="report")`` for a job id (any tenant) or ``job="acme/report"`` for one
    job key. Lookup order: job key, job id, default."""

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}

    @overload
    def handler(self, fn: Handler, *, job: None = None) -> Handler: ...

    @overload
    def handler(
        self, fn: None = None, *, job: str | None = None
    ) -> Callable[[Handler], Handler]: ...

    def handler(self, fn: Handler | None = None, *,
                job: str | None = None) -> Handler | Callable[[Handler], Handler]:  # fmt: skip
        """Register ``fn`` (decorator, with or without arguments)."""

        def register(func: Handler) -> Handler:
            self.add(func, job)
            return func

        return register(fn) if fn is not None else register

    def add(self, func: Handler, job: str | None = None) -> None:
        """Register ``func`` for ``job`` (None: the default handler)."""
        key = job or "*"
        if not callable(func):
            raise ConfigError(f"handler for {key!r} is not callable")
        if key in self._handlers:
            raise ConfigError(f"a handler for {key!r} is already registered")
        self._handlers[key] = func

    def resolve(self, tenant: str, job_id: str) -> Handler | None:
        """The handler of ``tenant/job_id``, or None."""
        for key in (f"{tenant}/{job_id}", job_id, "*"):
            found = self._handlers.get(key)
            if found is not None:
                return found
        return None

    @staticmethod
    def is_async(func: Handler) -> bool:
        call = getattr(func, "__call__", None)  # noqa: B004 (callable objects too)
        return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(call)

    def __len__(self) -> int:
        return len(self._handlers)
