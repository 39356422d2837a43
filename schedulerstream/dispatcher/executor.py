"""Deliveries on a background asyncio event loop (one thread per process).

The processor thread submits attempts and cancels them; every attempt, however it ends
(outcome, exception, cancellation), becomes one ``Completion`` on a thread-safe queue that the
processor drains. An attempt is bounded by its deadline plus a grace period even if the target
misbehaves: one sweep a quarter of the grace period cancels the attempts past their bound
(``deadlines``).

With a ``Gate`` (the dispatcher's Limits), at most its concurrency runs at once, in all, per
tenant and per target host; the rest wait in arrival order and start as attempts end, on
this loop, with no round trip through the processor. A start committed more than ``ttl_s``
ago is not sent any more (a paused process must not send what a successor may have taken
over): it ends as a retryable failure that says so.

A start armed ahead of its due time (``submit``'s ``delay_s``) waits on this loop until then,
and then for a slot like any other; its time to live still counts from its commit.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import functools
import heapq
import itertools
import logging
import queue
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from schedulerstream.dispatcher.deadlines import Deadlines
from schedulerstream.dispatcher.deliveries import Completion, Gate
from schedulerstream.dispatcher.waiting import AttemptKey, RunningCounts, Submission, WaitingRoom
from schedulerstream.targets.base import Delivery, Outcome, Sender

log = logging.getLogger(__name__)
GRACE_S = 1.0


class Executor:
    """Runs ``target.deliver`` coroutines on its own loop; submit/cancel/drain from one thread.

    Submissions are handed over in batches: ``submit`` appends to a queue and wakes the loop
    once for everything appended until the loop picks it up (one thread switch per batch,
    not per attempt).
    """

    def __init__(
        self,
        grace_s: float = GRACE_S,
        *,
        thread: bool = True,
        on_complete: Callable[[Completion], None] | None = None,
    ) -> None:
        """``thread=False``: the caller runs the loop (``run``) and submits from it (the
        delivery process); ``on_complete`` (loop thread) then takes each completion instead
        of ``drain``."""
        self._grace_s = grace_s
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.run, name="dispatch-loop", daemon=True)
        self._on_complete = on_complete
        self._done: queue.SimpleQueue[Completion] = queue.SimpleQueue()
        self._submitted: collections.deque[Submission] = collections.deque()
        self._wake_pending = False
        self._live: set[AttemptKey] = set()  # submitted and not drained (processor thread)
        self._tasks: dict[AttemptKey, asyncio.Task[None]] = {}  # its worker (loop thread)
        self._deadlines = Deadlines(grace_s)
        # its entries, bound once: every attempt's start and end writes them (loop)
        self._bounds, self._overran = self._deadlines.bounds, self._deadlines.overran
        self._asked = self._deadlines.asked
        self._sweep_s = grace_s / 4
        self._sweeping = False  # a sweep is scheduled (loop)
        self._gate: Gate | None = None
        self._ttl_s = 0.0
        self._waiting = WaitingRoom()  # (loop)
        self._running_in = RunningCounts()  # attempts running, by tenant and host (loop)
        self._held: set[int] = set()  # partitions whose waiting starts may not start
        self._host_room = self._host_has_room  # bound once: asked for every start
        self._tenant_room = self._tenant_has_room
        self._armed: list[tuple[float, int, Submission]] = []  # heap by send time (loop)
        self._armed_seq = itertools.count()
        self._arm_timer: asyncio.TimerHandle | None = None  # wakes at the earliest (loop)
        self._arm_timer_at = 0.0
        self._closing = False  # workers stop (loop)
        if thread:
            self._thread.start()

    def set_gate(self, gate: Gate, ttl_s: float) -> None:
        """Hold to ``gate``'s limits; a start waits at most ``ttl_s`` for a slot."""
        self._gate = gate
        self._ttl_s = ttl_s

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def run(self) -> None:
        """Run the loop on this thread until it is stopped (``thread=False``)."""
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
        delay_s: float = 0.0,
        committed_at: float | None = None,
    ) -> None:
        """Start one attempt of ``delivery`` with ``target`` (configured by ``config``), not
        before ``delay_s`` from now; its time to live counts from ``committed_at``
        (``time.monotonic``, when its start committed; default: when the loop takes it)."""
        key = (partition, delivery.run_id, delivery.attempt)
        self._live.add(key)
        item = Submission(key, tenant, host, delivery, target, config)
        if committed_at is not None:  # the loop's clock is time.monotonic (the default loop)
            item.arrived = committed_at
        if delay_s > 0:
            item.send_at = time.monotonic() + delay_s
        self._submitted.append(item)
        if not self._wake_pending:
            self._wake_pending = True
            self._loop.call_soon_threadsafe(self._launch)

    def flush(self) -> None:
        """Nothing to send: ``submit`` hands each attempt to the loop at once."""

    def _launch(self) -> None:
        """(loop thread) Start every queued submission."""
        self._wake_pending = False  # before draining: a later submit wakes the loop again
        now = self._loop.time()
        while self._submitted:
            item = self._submitted.popleft()
            item.arrived = item.arrived or now
            if item.send_at > now:
                heapq.heappush(self._armed, (item.send_at, next(self._armed_seq), item))
            else:
                self._waiting.add(item)
        self._start_waiting(now)
        self._arm()

    def _arm(self) -> None:
        """(loop thread) Wake when the earliest armed start is due."""
        if not self._armed:
            return
        at = self._armed[0][0]
        if self._arm_timer is not None:
            if self._arm_timer_at <= at:
                return
            self._arm_timer.cancel()
        self._arm_timer, self._arm_timer_at = self._loop.call_at(at, self._release), at

    def _release(self) -> None:
        """(loop thread) The armed starts now due join the waiting ones."""
        self._arm_timer = None
        now = self._loop.time()
        armed = self._armed
        while armed and armed[0][0] <= now:
            self._waiting.add(heapq.heappop(armed)[2])
        self._start_waiting(now)
        self._arm()

    def _start_waiting(self, now: float) -> None:
        """(loop thread) Start what the gate admits, oldest first; end the expired."""
        if self._gate is None:
            for item in self._waiting.take_all():
                self._spawn(item, now)
        else:
            while self._waiting and self._running_in.total < self._gate.concurrency:
                found = self._next_admitted(now)
                if found is None:
                    break
                self._spawn(found, now)
        if self._tasks and not self._sweeping:
            self._sweeping = True
            self._loop.call_later(self._sweep_s, self._sweep)

    def _next_admitted(self, now: float) -> Submission | None:
        """(loop thread) Take out the oldest waiting start the gate admits, given a free slot
        in all; a held partition's starts are parked, the expired end."""
        waiting = self._waiting
        if self._gate is None:
            return None
        while waiting:
            found = waiting.next_admitted(self._host_room, self._tenant_room)
            if found is None:
                return None
            if found.key[0] in self._held:
                waiting.park(found)
            elif now - found.arrived > self._ttl_s:
                self._expire(found)
            else:
                return found
        return None

    def _host_has_room(self, host: str | None) -> bool:
        assert self._gate is not None
        return host is None or self._running_in.by_host[host] < self._gate.host_concurrency

    def _tenant_has_room(self, tenant: str) -> bool:
        assert self._gate is not None
        return self._running_in.by_tenant[tenant] < self._gate.tenant_concurrency_of(tenant)

    def _spawn(self, item: Submission, now: float) -> None:
        """(loop thread) A worker for ``item``; it goes on with the next admitted start."""
        slot: list[Submission | None] = [item]
        task = self._loop.create_task(self._work(slot))
        self._begin(item, task, now)
        task.add_done_callback(functools.partial(self._worker_ended, slot))

    def _begin(self, item: Submission, task: asyncio.Task[None], now: float) -> None:
        self._tasks[item.key] = task
        self._bounds[item.key] = now + item.delivery.deadline + self._grace_s
        self._running_in.add(item, 1)

    async def _work(self, slot: list[Submission | None]) -> None:
        """A worker: attempts one after another while the gate admits a waiting start (no
        task per attempt). ``slot`` holds its current start. It awaits nothing but its
        attempt, so a cancel of this task is always a cancel of its current attempt."""
        task = asyncio.current_task()
        assert task is not None
        item = slot[0]
        while item is not None:
            outcome = await self._attempt(item, task)
            while task.cancelling():  # swallowed by the target: the next attempt starts clean
                task.uncancel()
            slot[0] = None
            self._end(item, task, outcome)
            item = None
            if self._waiting and not self._closing:
                now = self._loop.time()
                item = self._next_admitted(now)
                if item is not None:
                    self._begin(item, task, now)
                    slot[0] = item
                    if self._waiting:  # the gate may have grown: more than one slot free
                        self._start_waiting(now)

    async def _attempt(self, item: Submission, task: asyncio.Task[None]) -> Outcome | None:
        """The attempt's outcome; None when it was cancelled here (``cancel``)."""
        try:
            return await item.target.deliver(item.delivery, item.config)
        except asyncio.CancelledError:
            if self._closing:
                raise
            while task.uncancel():
                pass
            return self._deadlines.cancelled(item)
        except Exception as exc:  # a target bug must not lose the attempt
            return Outcome("failed", f"{type(exc).__name__}: {exc}", True, 0)

    def _worker_ended(self, slot: list[Submission | None], task: asyncio.Task[None]) -> None:
        """(loop thread) A worker that stopped inside an attempt (cancelled before it began,
        or at close) still ends that attempt; one that failed between attempts is logged."""
        exc = None if task.cancelled() else task.exception()
        item = slot[0]
        if item is None:
            if exc is not None:
                log.error("a delivery worker failed between attempts", exc_info=exc)
            return
        slot[0] = None
        outcome: Outcome | None = None  # closing: no outcome, the run is not done here
        if exc is not None:
            outcome = Outcome("failed", f"{type(exc).__name__}: {exc}", True, 0)
        elif not self._closing:
            outcome = self._deadlines.cancelled(item)
        self._end(item, task, outcome)

    def _expire(self, item: Submission) -> None:
        reason = (f"not sent: no free slot within {self._ttl_s:g} s of its start being "
                  "committed")  # fmt: skip
        self._complete(item, Outcome("failed", reason, True, 0))

    def _complete(self, item: Submission, outcome: Outcome | None) -> None:
        partition, run_id, attempt = item.key
        completion = Completion(partition, item.tenant, run_id, attempt, outcome, item.host)
        if self._on_complete is None:
            self._done.put(completion)
            return
        self._live.discard(item.key)  # one thread: nobody drains
        self._on_complete(completion)

    def _sweep(self) -> None:
        """(loop thread) Cut the attempts past their deadline plus the grace period."""
        now = self._loop.time()
        self._deadlines.cut(self._tasks, now)
        if self._waiting:
            if self._gate is not None:  # also the starts behind a full host or tenant
                for item in self._waiting.take_expired(now, self._ttl_s):
                    self._expire(item)
            self._start_waiting(now)
        self._sweeping = bool(self._tasks)
        if self._sweeping:
            self._loop.call_later(self._sweep_s, self._sweep)

    def _end(self, item: Submission, task: asyncio.Task[None], outcome: Outcome | None) -> None:
        """(loop thread) One attempt ended, however it ended."""
        key = item.key
        if self._tasks.get(key) is task:
            del self._tasks[key]
            del self._bounds[key]
            if self._overran:
                self._overran.discard(key)
            if self._asked:
                self._asked.discard(key)
        else:  # submitted again while this one ran (its entries are the other's now)
            log.warning("attempt %s of %s ran twice at once", key[2], key[1])
        self._running_in.add(item, -1)
        self._complete(item, outcome)

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
            self._asked.add(key)
            task.cancel()
            return
        item = self._waiting.remove(key)
        if item is not None:
            self._complete(item, None)
            return
        for i, (_, _, item) in enumerate(self._armed):
            if item.key == key:
                self._armed[i] = self._armed[-1]
                self._armed.pop()
                heapq.heapify(self._armed)
                self._complete(item, None)
                return

    def running(self, partition: int, run_id: str, attempt: int) -> bool:
        """Whether that attempt was submitted here and its completion not drained yet."""
        return (partition, run_id, attempt) in self._live

    def hold(self, partition: int) -> None:
        """Start none of ``partition``'s waiting attempts until ``cancel_partition``."""
        self._held.add(partition)

    def cancel_partition(self, partition: int) -> int:
        """Abort every attempt of ``partition`` (its task restarted from committed state)."""
        keys = [k for k in self._live if k[0] == partition]
        for key in keys:
            self._loop.call_soon_threadsafe(self._cancel_in_loop, key)
        if partition in self._held:  # after the cancels: none of its starts is left waiting
            self._loop.call_soon_threadsafe(self._unhold, partition)
        return len(keys)

    def _unhold(self, partition: int) -> None:
        self._held.discard(partition)
        self._waiting.unpark(partition)

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

    def stop_starting(self) -> None:
        """(loop thread) Start no attempt any more: a cancel now ends its worker (shutdown)."""
        self._closing = True

    def close(self) -> None:
        """Cancel what runs and stop the loop thread."""

        async def settle() -> None:  # let aborted requests unwind (close their connections)
            self._launch()
            self.stop_starting()
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
