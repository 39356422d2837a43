"""A fixed-bucket histogram cheap enough for a hot path: one bisect and two additions.

One thread observes; an exporter thread reads ``snapshot()`` (a consistent copy of the
bucket counts; the sum may be a few observations apart, as in any scrape).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence

# seconds: commit and write durations
DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# seconds, negative = ahead of the scheduled instant (runs are emitted up to the lookahead early).
# The Prometheus exposition of a histogram with negative buckets has no _sum and _count
# (OpenMetrics): the +Inf bucket is the count, histogram_quantile works on the buckets.
LATENESS_BUCKETS = (
    -5.0, -2.0, -1.0, -0.5, -0.25, -0.1, 0.0, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0, 60.0, 300.0, 3600.0,
)  # fmt: skip


class Histogram:
    """Counts of observations per bucket (``value <= bound``, Prometheus' ``le``) and their sum."""

    __slots__ = ("_counts", "_sum", "bounds")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(sorted(bounds))
        self._counts = [0] * (len(self.bounds) + 1)  # the last one is +Inf
        self._sum = 0.0

    def observe(self, value: float) -> None:
        self._counts[bisect_left(self.bounds, value)] += 1
        self._sum += value

    def observe_many(self, values: Iterable[float]) -> None:
        counts, bounds = self._counts, self.bounds
        total = 0.0
        for value in values:
            counts[bisect_left(bounds, value)] += 1
            total += value
        self._sum += total

    def snapshot(self) -> tuple[list[tuple[str, float]], float]:
        """Cumulative ``(le, count)`` pairs ending with ``+Inf``, and the sum."""
        counts = list(self._counts)
        cumulative: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip((*map(repr, self.bounds), "+Inf"), counts, strict=True):
            running += count
            cumulative.append((bound, float(running)))
        return cumulative, self._sum

    @property
    def count(self) -> int:
        return sum(self._counts)
