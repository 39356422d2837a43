"""Backfill runs' share of a partition: ``rate`` runs a second for all tenants together.

A backfill is background work with a known end; the runs it emits share the ``runs`` topic with
every tenant's runs due now. Unbounded, one tenant's backfill of millions of runs is emitted far
faster than the dispatchers read them, and the healthy runs behind it in the same partitions
wait. A token bucket per partition bounds it; the tokens of a tick are split evenly between the
tenants backfilling there, in turns that start after the tenant served last, so what is left
of a tick's tokens goes round too and no tenant's backfill starves another's.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

MICROS = 1_000_000


class BackfillBudget:
    """Per partition: tokens (runs) refilled at ``rate_per_s`` up to one second's worth."""

    def __init__(self, rate_per_s: float) -> None:
        self.rate_per_s = rate_per_s
        self.burst = max(1.0, rate_per_s)
        self._tokens: dict[int, tuple[float, int]] = {}  # partition → (tokens, refilled at µs)
        self._last: dict[int, str] = {}  # partition → the tenant served last

    def available(self, partition: int, now_us: int) -> int:
        """Whole runs this partition may emit now (refills first; a clock stepped back adds
        nothing)."""
        tokens, at_us = self._tokens.get(partition, (self.burst, now_us))
        if now_us > at_us:
            tokens = min(self.burst, tokens + (now_us - at_us) * self.rate_per_s / MICROS)
            at_us = now_us
        self._tokens[partition] = (tokens, at_us)
        return int(tokens)

    def spend(self, partition: int, runs: int) -> None:
        tokens, at_us = self._tokens[partition]
        self._tokens[partition] = (tokens - runs, at_us)

    def turns(self, partition: int, tenants: Iterable[str]) -> list[str]:
        """``tenants`` in name order, starting after the one ``served`` last."""
        ordered = sorted(tenants)
        last = self._last.get(partition)
        if last is None:
            return ordered
        after = bisect.bisect_right(ordered, last)
        return ordered[after:] + ordered[:after]

    def served(self, partition: int, tenant: str) -> None:
        self._last[partition] = tenant

    def forget(self, partition: int) -> None:
        """The partition moved away: a new owner starts with a full bucket."""
        self._tokens.pop(partition, None)
        self._last.pop(partition, None)
