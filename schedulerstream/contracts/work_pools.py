"""How many worker pools a deployment makes. Each pool's ``work.<pool>`` topic has P
partitions and is never deleted, and any tenant without grants may name a new pool in a job:
without a cap, one tenant could grow the cluster's partitions until the broker (and every
tenant) fell over. A dispatcher makes a missing work topic only while the cluster holds fewer
than ``SCHEDULERSTREAM_MAX_WORK_POOLS``; pools that have a topic always keep working."""

from __future__ import annotations

from collections.abc import Collection, Iterable

CAP_VARIABLE = "SCHEDULERSTREAM_MAX_WORK_POOLS"


def work_pools(topics: Iterable[str], work_prefix: str) -> frozenset[str]:
    """The pools whose work topics are among ``topics`` (the names under ``work_prefix``)."""
    start = len(work_prefix)
    return frozenset(t[start:] for t in topics if t.startswith(work_prefix) and len(t) > start)


def cap_refusal(pool: str, pools: Collection[str], cap: int) -> str | None:
    """Why no topic is made for ``pool`` when the cluster holds the work topics of ``pools``;
    None when one may be: the pool has one already, or there are fewer than ``cap``."""
    if pool in pools or len(pools) < cap:
        return None
    return (
        f"worker pool {pool!r} has no work topic and none is made: the cluster holds "
        f"{len(pools)} work topics and {CAP_VARIABLE}={cap} (an operator may raise the cap, or "
        f"delete the topic of a pool no job uses)"
    )
