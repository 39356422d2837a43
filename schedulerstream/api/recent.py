"""What this instance wrote recently, so a job just PUT or deleted reads back at once (marked
"pending") before the projector has applied it, and pause/resume keep its webhook secret."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from schedulerstream.model import JobDefinition

TTL_S = 300.0
MAX_ENTRIES = 10_000


@dataclass(frozen=True, slots=True)
class RecentWrite:
    """A definition written (``job``) or deleted (``job`` None) at ``version``."""

    version: int
    job: JobDefinition | None
    at: float


class RecentWrites:
    """A bounded, expiring map of (tenant, job_id) to this instance's latest write."""

    def __init__(self, ttl_s: float = TTL_S, max_entries: int = MAX_ENTRIES) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple[str, str], RecentWrite] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, tenant: str, job_id: str, version: int, job: JobDefinition | None) -> None:
        with self._lock:
            self._entries[(tenant, job_id)] = RecentWrite(version, job, time.monotonic())
            self._entries.move_to_end((tenant, job_id))
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def get(self, tenant: str, job_id: str) -> RecentWrite | None:
        with self._lock:
            entry = self._entries.get((tenant, job_id))
            if entry is not None and time.monotonic() - entry.at > self.ttl_s:
                del self._entries[(tenant, job_id)]
                return None
            return entry
