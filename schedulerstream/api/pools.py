"""The worker pools the cluster holds, as the API sees them: a job naming a new pool is
refused at once (422 on ``target.pool``) when the cluster already holds
``SCHEDULERSTREAM_MAX_WORK_POOLS`` work topics (contracts/work_pools.py), as its runs would be.

The dispatcher decides; this only says so early. The topics are listed (one metadata request)
at most every ``FRESH_S``, and again before a refusal when that list is older than
``RECHECK_S``, so a pool made since is not refused for long. A cluster that does not answer
refuses nothing (the dispatcher still does)."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable

from schedulerstream.contracts.work_pools import cap_refusal, work_pools
from schedulerstream.errors import SchedulerStreamError
from schedulerstream.settings import Settings

log = logging.getLogger(__name__)
FRESH_S = 5.0
RECHECK_S = 1.0
TIMEOUT_S = 5.0
FAILED_BACKOFF_S = 30.0  # after a listing failed, the next one waits this long


class ClusterPools:
    """``refusal(pool)``: why a job may not name ``pool`` now; ``topics(timeout)`` lists the
    cluster's topics."""

    def __init__(self, settings: Settings, topics: Callable[[float], Iterable[str]],
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self._cap = settings.max_work_pools
        self._prefix = settings.topics.work_prefix
        self._topics = topics
        self._clock = clock
        self._lock = threading.Lock()  # held by the one listing under way
        self._pools: frozenset[str] | None = None  # None: the last listing failed
        self._listed_at = -math.inf

    def refusal(self, pool: str) -> str | None:
        """Why no job may name ``pool`` now (None: it may, as far as the API knows)."""
        why = self._refusal(pool, FRESH_S)
        return why if why is None else self._refusal(pool, RECHECK_S)

    def _refusal(self, pool: str, max_age_s: float) -> str | None:
        # one listing at a time; a request that finds one under way takes the answer in hand
        # (a cluster that does not answer holds one request, not every one in turn)
        if self._clock() - self._listed_at >= max_age_s and self._lock.acquire(blocking=False):
            try:
                try:
                    self._pools = work_pools(self._topics(TIMEOUT_S), self._prefix)
                    self._listed_at = self._clock()
                except SchedulerStreamError as exc:
                    log.warning("worker pools not known (new pools are not refused): %s", exc)
                    self._pools = None
                    self._listed_at = self._clock() + FAILED_BACKOFF_S - FRESH_S
            finally:
                self._lock.release()
        pools = self._pools
        return None if pools is None else cap_refusal(pool, pools, self._cap)
