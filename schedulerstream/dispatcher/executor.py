"""Deliveries on a background asyncio event loop (one thread per process).

The processor thread submits attempts and cancels them; every attempt, however it ends
(outcome, exception, cancellation), becomes one ``Completion`` on a thread-safe queue that the
processor drains. An attempt is bounded by its deadline plus a grace period even if the target
misbehaves.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import queue
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from schedulerstream.targets.base import Delivery, Outcome, Target

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
    """Runs ``target.deliver`` coroutines on its own loop; submit/cancel/drain from one thread."""

    def __init__(self, grace_s: float = GRACE_S) -> None:
        self._grace_s = grace_s
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="dispatch-loop", daemon=True)
        self._done: queue.SimpleQueue[Completion] = queue.SimpleQueue()
        self._futures: dict[AttemptKey, concurrent.futures.Future[Outcome]] = {}
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    @property
    def in_flight(self) -> int:
        return len(self._futures)

    def submit(
        self,
        partition: int,
        tenant: str,
        delivery: Delivery,
        target: Target[Any],
        config: Any,
        host: str | None = None,
    ) -> None:
        """Start one attempt of ``delivery`` with ``target`` (configured by ``config``)."""
        key = (partition, delivery.run_id, delivery.attempt)
        future = asyncio.run_coroutine_threadsafe(
            self._attempt(target, delivery, config), self._loop
        )
        self._futures[key] = future

        def finished(done: concurrent.futures.Future[Outcome]) -> None:
            outcome = None if done.cancelled() else done.result()
            self._done.put(
                Completion(partition, tenant, delivery.run_id, delivery.attempt, outcome, host)
            )

        future.add_done_callback(finished)

    def cancel(self, partition: int, run_id: str, attempt: int) -> bool:
        """Abort one attempt (its request is aborted); False if it is not running here."""
        future = self._futures.get((partition, run_id, attempt))
        return future is not None and future.cancel()

    def cancel_partition(self, partition: int) -> int:
        """Abort every attempt of ``partition`` (its task restarted from committed state)."""
        keys = [k for k in self._futures if k[0] == partition]
        for key in keys:
            self._futures[key].cancel()
        return len(keys)

    def drain(self) -> list[Completion]:
        """Every completion since the last call."""
        found: list[Completion] = []
        while True:
            try:
                completion = self._done.get_nowait()
            except queue.Empty:
                return found
            self._futures.pop((completion.partition, completion.run_id, completion.attempt), None)
            found.append(completion)

    def call(self, factory: Callable[[], Awaitable[Any]], timeout: float = 10.0) -> Any:
        """Run a coroutine on the loop and wait for its result (e.g. closing targets)."""

        async def run() -> Any:
            return await factory()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout)

    def close(self) -> None:
        """Cancel what runs and stop the loop thread."""
        for future in list(self._futures.values()):
            future.cancel()

        async def settle() -> None:  # let aborted requests unwind (close their connections)
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

    async def _attempt(self, target: Target[Any], delivery: Delivery, config: Any) -> Outcome:
        limit = delivery.deadline + self._grace_s
        try:
            return await asyncio.wait_for(target.deliver(delivery, config), limit)
        except TimeoutError:
            reason = f"no answer within {delivery.deadline:g} s"
            return Outcome("timed_out", reason, True, round(limit * 1e6))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a target bug must not lose the attempt
            return Outcome("failed", f"{type(exc).__name__}: {exc}", True, 0)
