"""Notices when the event loop itself did not run for a while: the process was stopped
(SIGSTOP, a VM pause), swapped out or starved. An attempt that timed out across such a stall
says nothing about its target, so the circuit breaker must not count it."""

from __future__ import annotations

import asyncio
import contextlib
import math


class LoopStallMonitor:
    """A ticker on the running loop; a gap between ticks beyond ``threshold_s`` is a stall."""

    def __init__(self, interval_s: float = 0.2, threshold_s: float = 1.0) -> None:
        self._interval_s = interval_s
        self._threshold_s = threshold_s
        self._last_tick = math.inf
        self._last_stall_end = -math.inf
        self._task: asyncio.Task[None] | None = None

    def ensure_started(self) -> None:
        """Start ticking on the running loop (once)."""
        if self._task is None or self._task.done():
            loop = asyncio.get_running_loop()
            self._last_tick = loop.time()
            self._task = loop.create_task(self._tick())

    def stalled_since(self, started: float) -> bool:
        """True when the loop stalled after ``started`` (loop time), or is only now coming
        out of a stall (the ticker has not run yet)."""
        now = asyncio.get_running_loop().time()
        late = now - self._last_tick > self._interval_s + self._threshold_s
        return self._last_stall_end > started or late

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self._interval_s)
            now = loop.time()
            if now - self._last_tick > self._interval_s + self._threshold_s:
                self._last_stall_end = now
            self._last_tick = now
