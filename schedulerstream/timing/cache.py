"""A bounded LRU of next-fire answers shared by every job with the same schedule."""

from __future__ import annotations

import threading
from collections import OrderedDict

from schedulerstream.timing.schedule import Schedule


class NextInstantCache:
    """``next_after`` memoized on (schedule, after): 100k jobs on "0 * * * *" compute it once.

    Schedules are keys, so they must hash by their definition (CronSchedule, EverySchedule and
    AtSchedule do).
    """

    def __init__(self, maxsize: int = 65_536) -> None:
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        self.maxsize = maxsize
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[tuple[Schedule, int], int | None] = OrderedDict()
        self._lock = threading.Lock()

    def next_after(self, schedule: Schedule, after_us: int) -> int | None:
        key = (schedule, after_us)
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                self.hits += 1
                return self._entries[key]
        result = schedule.next_after(after_us)
        with self._lock:
            self.misses += 1
            self._entries[key] = result
            if len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)
        return result

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.hits = 0
            self.misses = 0
