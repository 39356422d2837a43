"""Retry waits: exponential backoff with full jitter, deterministic per (run id, attempt)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from schedulerstream.model import RetryPolicy


def jitter_fraction(run_id: str, attempt: int) -> float:
    """A uniform fraction in [0, 1) fixed by ``(run_id, attempt)``."""
    digest = hashlib.blake2b(f"{run_id}#{attempt}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def backoff_us(
    policy: RetryPolicy, run_id: str, attempt: int, retry_after_s: float | None = None
) -> int:
    """The wait after failed ``attempt`` (1-based): ``Retry-After`` if the target gave one,
    else uniform in [0, min(max_backoff, initial × multiplier^(attempt-1)))."""
    if retry_after_s is not None:
        return round(retry_after_s * 1e6)
    ceiling = min(policy.max_backoff, policy.initial_backoff * policy.multiplier ** (attempt - 1))
    return round(ceiling * jitter_fraction(run_id, attempt) * 1e6)


def tier_for(wait_us: int, tiers: Sequence[tuple[str, int]]) -> str | None:
    """The delay topic with the largest delay not above ``wait_us`` (``tiers``: (topic, delay
    µs), shortest first); None when the wait is shorter than every tier (kept locally)."""
    chosen: str | None = None
    for topic, delay_us in tiers:
        if delay_us <= wait_us:
            chosen = topic
    return chosen
