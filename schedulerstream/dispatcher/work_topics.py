"""The work topics of worker pools, made sure of on a thread of their own.

A pool's ``work.<pool>`` topic is created on its first use: a few admin round trips, each up
to 30 s when the cluster is slow. Made on the dispatcher's loop, one tenant naming many new
pools (or one the cluster refuses) held every tenant's runs for them, run after run. Here the
loop only asks (``ready``) and reads the answer (``topic``); a start to a pool waits in its
queue until the answer is in, as a Kafka record waits for its topic's metadata. Up to
``THREADS`` pools are asked about at once, so a pool whose answer is slow does not hold up
the first use of another.

A new pool past ``SCHEDULERSTREAM_MAX_WORK_POOLS`` gets no topic (``TooManyWorkPools``, which
``topic`` raises again: its runs are refused). That answer names the pools the cluster held:
until it is asked again, another pool not among them is answered at once, without a round
trip, as a failure to retry (its topic may have been made since; its own answer refuses), so
one tenant naming thousands of new pools keeps no thread from the pools that exist. Every
failure is asked again after ``RETRY_AFTER_S`` (a raised cap, a pool's topic an operator
deleted).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from schedulerstream.contracts.work_pools import cap_refusal
from schedulerstream.errors import SchedulerStreamError, TooManyWorkPools

THREADS = 4
RETRY_AFTER_S = 5.0  # a pool whose topic could not be made is tried again after this
MAX_FAILED = 10_000


class WorkTopics:
    """``ensure(pool)`` → the pool's topic name, run on daemon threads, a pool on one."""

    def __init__(self, ensure: Callable[[str], str],
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self._ensure = ensure
        self._clock = clock
        self._known: dict[str, str] = {}
        self._failed: dict[str, tuple[float, str, bool]] = {}  # pool → (retry after, why, capped)
        self._capped: tuple[float, TooManyWorkPools] | None = None  # the last, until
        self._asked: list[str] = []  # in the order asked; those in ``_busy`` are being made
        self._busy: set[str] = set()
        self._wake = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._closed = False

    def ready(self, pool: str) -> bool:
        """Is there an answer for ``pool`` (its topic, or why it has none)? Asks if not."""
        with self._wake:
            if pool in self._known:
                return True
            failed = self._failed.get(pool)
            if failed is not None and failed[0] > self._clock():
                return True
            if self._past_cap(pool, self._clock()) is not None:
                return True
            if len(self._failed) > MAX_FAILED:  # bounded: the expired go
                now = self._clock()
                self._failed = {k: v for k, v in self._failed.items() if v[0] > now}
            if pool not in self._asked:
                self._asked.append(pool)
                self._start()
                self._wake.notify()
            return False

    def topic(self, pool: str) -> str:
        """The pool's topic; SchedulerStreamError naming why when it could not be made (or
        when no answer is in yet), TooManyWorkPools for a new pool past the cap."""
        with self._wake:
            name = self._known.get(pool)
            if name is not None:
                return name
            failed = self._failed.get(pool)
            if failed is None or failed[0] <= self._clock():
                # the cap's answer about other pools: the pool may have been made since
                # (a worker past the cap, another dispatcher), so retried, not refused
                capped = self._past_cap(pool, self._clock())
                failed = failed if capped is None else (0.0, capped, False)
        if failed is None:
            raise SchedulerStreamError("its work topic is not known yet")
        raise (TooManyWorkPools if failed[2] else SchedulerStreamError)(failed[1])

    def forget(self, pool: str) -> None:
        """The pool's topic refused a record (deleted, say): make sure of it again."""
        with self._wake:
            self._known.pop(pool, None)

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify_all()

    def _start(self) -> None:
        """(holding ``_wake``) One more thread while pools wait and all threads are busy."""
        idle = len(self._threads) - len(self._busy)
        if len(self._threads) < THREADS and len(self._asked) - len(self._busy) > idle:
            name = f"work-topics-{len(self._threads) + 1}"
            thread = threading.Thread(target=self._run, name=name, daemon=True)
            self._threads.append(thread)
            thread.start()

    def _past_cap(self, pool: str, now: float) -> str | None:
        """(holding ``_wake``) The cap's last refusal, still current at ``now``, for ``pool``
        when the cluster did not hold it then (kept once, not a pool: names are unbounded)."""
        if self._capped is None or self._capped[0] <= now:
            return None
        refusal = self._capped[1]
        return cap_refusal(pool, refusal.pools, refusal.cap)

    def _next(self) -> str | None:
        """(holding ``_wake``) The first pool asked that no thread is on yet."""
        return next((pool for pool in self._asked if pool not in self._busy), None)

    def _run(self) -> None:
        while True:
            with self._wake:
                while (pool := self._next()) is None and not self._closed:
                    self._wake.wait()
                if self._closed or pool is None:
                    return
                self._busy.add(pool)
            name: str | None = None
            capped: TooManyWorkPools | None = None
            try:
                name = self._ensure(pool)
            except TooManyWorkPools as exc:  # the deployment's cap: its runs are refused
                why, capped = str(exc), exc
            except Exception as exc:  # the cluster's answer, kept for the runs to report
                why = f"{type(exc).__name__}: {exc}"
            with self._wake:
                self._asked.remove(pool)
                self._busy.discard(pool)
                if name is not None:
                    self._known[pool] = name
                    self._failed.pop(pool, None)
                    continue
                until = self._clock() + RETRY_AFTER_S
                self._failed[pool] = (until, why, capped is not None)
                if capped is not None and capped.cap > 0:
                    self._capped = (until, capped)
                    now = self._clock()
                    self._asked = [p for p in self._asked if p in self._busy
                                   or self._past_cap(p, now) is None]  # fmt: skip
