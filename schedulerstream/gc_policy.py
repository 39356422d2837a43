"""How often a long-running process runs Python's cyclic garbage collector.

Python collects its youngest generation every 700 net allocations and the older ones 10 and
100 times more rarely. A processor allocates and frees a few hundred objects per run, most
of them freed by reference counting, so at those defaults a dispatcher or a scheduler spent
8-17 % of its CPU in collections, and each full one (every few seconds under load, over every
cached plan and spec) stopped the process for 20-70 ms (docs/performance-history.md,
session 13).
"""

from __future__ import annotations

import gc

OLDER = (20, 100)  # the middle and oldest generations: this many collections of the one below


def tune_gc(young: int) -> None:
    """Collect the youngest generation every ``young`` net allocations and the older ones
    ``OLDER`` times more rarely; 0 keeps Python's thresholds. Cycles are still collected."""
    if young > 0:
        gc.set_threshold(young, *OLDER)
