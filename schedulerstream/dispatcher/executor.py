"""Deliveries on a background asyncio event loop (one thread per process).

The processor thread submits attempts and cancels them; every attempt, however it ends
(outcome, exception, cancellation), becomes one ``Completion`` on a thread-safe queue that the
processor drains. An attempt is bounded by its deadline plus a grace period even if the target
misbehaves: one sweep a quarter of the grace period cancels the attempts past their bound (a
timer per attempt cost more than the rest of the executor's work for it).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import functools
import queue
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from schedulerstream.targets.base import Delivery, Outcome, Sender

GRACE_S = 1.0
AttemptKey = tuple[int, str, int]  # (partition, run id, attempt)


@dataclass(frozen=True, slots=True)
class Completion:
    """How one submitted attempt ended; ``outcome`` is None when it was cancelled."""

    partition: int
    tenant: str
    run_id: str
    attempt: int
    outcome: Outcome | None
    host: str | None = None


class Executor:
    """Runs ``target.deliver`` coroutines on its own loop; submit/cancel/drain from one thread.

    Submissions are handed over in batches: ``submit`` appends to a queue and wakes the loop
    once for everything appended until the loop picks it up (one thread switch per batch,
    not per attempt).
    """

    def __init__(self, grace_s: float = GRACE_S) -> None:
        self._grace_s = grace_s
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="dispatch-loop", daemon=True)
        self._done: queue.SimpleQueue[Completion] = queue.SimpleQueue()
        self._submitted: collections.deque[_Submission] = collections.deque()
        self._wake_pending = False
        self._live: set[AttemptKey] = set()  # submitted and not drained (processor thread)
        self._tasks: dict[AttemptKey, asyncio.Task[Outcome]] = {}  # loop thread only
        self._bounds: dict[AttemptKey, float] = {}  # loop time past which it is cut (loop)
        self._overran: set[AttemptKey] = set()  # cut by the sweep, not cancelled (loop)
        self._sweep_s = grace_s / 4
        self._sweeping = False  # a sweep is scheduled (loop)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    @property
    def in_flight(self) -> int:
        return len(self._live)

    def submit(
        self,
        partition: int,
        tenant: str,
        delivery: Delivery,
        target: Sender[Any],
        config: Any,
        host: str | None = None,
    ) -> None:
        """Start one attempt of ``delivery`` with ``target`` (configured by ``config``)."""
        key = (partition, delivery.run_id, delivery.attempt)
        self._live.add(key)
        self._submitted.append(_Submission(key, tenant, host, delivery, target, config))
        if not self._wake_pending:
            self._wake_pending = True
            self._loop.call_soon_threadsafe(self._launch)

    def _launch(self) -> None:
        """(loop thread) Start every queued submission."""
        self._wake_pending = False  # before draining: a later submit wakes the loop again
        now = self._loop.time()
        while self._submitted:
            item = self._submitted.popleft()
            task = self._loop.create_task(self._attempt(item.key, item.target, item.delivery,
                                                        item.config))  # fmt: skip
            self._tasks[item.key] = task
            self._bounds[item.key] = now + item.delivery.deadline + self._grace_s
            task.add_done_callback(functools.partial(self._finished, item))
        if self._tasks and not self._sweeping:
            self._sweeping = True
            self._loop.call_later(self._sweep_s, self._sweep)

    def _sweep(self) -> None:
        """(loop thread) Cut the attempts past their deadline plus the grace period."""
        now = self._loop.time()
        for key, bound in self._bounds.items():
            if bound <= now and key not in self._overran:
                self._overran.add(key)
                self._tasks[key].cancel()
        self._sweeping = bool(self._tasks)
        if self._sweeping:
            self._loop.call_later(self._sweep_s, self._sweep)

    def _finished(self, item: _Submission, task: asyncio.Task[Outcome]) -> None:
        """(loop thread) One attempt ended, however it ended."""
        self._tasks.pop(item.key, None)
        self._bounds.pop(item.key, None)
        self._overran.discard(item.key)
        outcome = None if task.cancelled() else task.result()
        partition, run_id, attempt = item.key
        self._done.put(Completion(partition, item.tenant, run_id, attempt, outcome, item.host))

    def cancel(self, partition: int, run_id: str, attempt: int) -> bool:
        """Abort one attempt (its request is aborted); False if it is not running here."""
        key = (partition, run_id, attempt)
        if key not in self._live:
            return False
        self._loop.call_soon_threadsafe(self._cancel_in_loop, key)
        return True

    def _cancel_in_loop(self, key: AttemptKey) -> None:
        task = self._tasks.get(key)
        if task is not None:
            task.cancel()

    def running(self, partition: int, run_id: str, attempt: int) -> bool:
        """Whether that attempt was submitted here and its completion not drained yet."""
        return (partition, run_id, attempt) in self._live

    def cancel_partition(self, partition: int) -> int:
        """Abort every attempt of ``partition`` (its task restarted from committed state)."""
        keys = [k for k in self._live if k[0] == partition]
        for key in keys:
            self._loop.call_soon_threadsafe(self._cancel_in_loop, key)
        return len(keys)

    def drain(self) -> list[Completion]:
        """Every completion since the last call."""
        found: list[Completion] = []
        while True:
            try:
                completion = self._done.get_nowait()
            except queue.Empty:
                return found
            self._live.discard((completion.partition, completion.run_id, completion.attempt))
            found.append(completion)

    def call(self, factory: Callable[[], Awaitable[Any]], timeout: float = 10.0) -> Any:
        """Run a coroutine on the loop and wait for its result (e.g. closing targets)."""

        async def run() -> Any:
            return await factory()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout)

    def close(self) -> None:
        """Cancel what runs and stop the loop thread."""

        async def settle() -> None:  # let aborted requests unwind (close their connections)
            self._launch()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=self._grace_s + 1)

        # a target that ignores cancellation must not block shutdown
        with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
            asyncio.run_coroutine_threadsafe(settle(), self._loop).result(self._grace_s + 2)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _attempt(
        self, key: AttemptKey, target: Sender[Any], delivery: Delivery, config: Any
    ) -> Outcome:
        try:
            return await target.deliver(delivery, config)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if key not in self._overran or task is None or task.uncancel() > 0:
                raise  # cancelled (maybe as well as cut): no outcome
            limit = delivery.deadline + self._grace_s
            reason = f"no answer within {delivery.deadline:g} s"
            return Outcome("timed_out", reason, True, round(limit * 1e6))
        except Exception as exc:  # a target bug must not lose the attempt
            return Outcome("failed", f"{type(exc).__name__}: {exc}", True, 0)


@dataclass(frozen=True, slots=True)
class _Submission:
    key: AttemptKey
    tenant: str
    host: str | None
    delivery: Delivery
    target: Sender[Any]
    config: Any
