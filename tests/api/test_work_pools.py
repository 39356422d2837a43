"""The API refuses a job naming a new worker pool when the cluster holds
SCHEDULERSTREAM_MAX_WORK_POOLS work topics, naming the field (``ClusterPools`` on a listing
the test hands it: no broker; the in-process 422 is in ``test_jobs.py``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from schedulerstream.api.jobs import _check_targets
from schedulerstream.api.pools import FAILED_BACKOFF_S, FRESH_S, RECHECK_S, ClusterPools
from schedulerstream.contracts.work_pools import CAP_VARIABLE
from schedulerstream.errors import SchedulerStreamError, ValidationError
from schedulerstream.model import JobDefinition
from schedulerstream.settings import Settings

SETTINGS = Settings(max_work_pools=2)


class Cluster:
    """The topics a listing answers, and how many times it was asked."""

    def __init__(self, *pools: str) -> None:
        self.topics = [SETTINGS.topics.runs, *(SETTINGS.topics.work(p) for p in pools)]
        self.listed = 0
        self.down = False

    def __call__(self, timeout: float) -> list[str]:
        self.listed += 1
        if self.down:
            raise SchedulerStreamError("no broker answered")
        return list(self.topics)


def pools_of(cluster: Cluster, now: list[float]) -> ClusterPools:
    return ClusterPools(SETTINGS, cluster, clock=lambda: now[0])


def test_a_new_pool_is_refused_at_the_cap_and_a_pool_that_has_its_topic_is_not() -> None:
    now = [0.0]
    pools = pools_of(Cluster("etl", "gpu"), now)
    assert pools.refusal("etl") is None and pools.refusal("gpu") is None
    why = pools.refusal("new")
    assert why is not None and "'new'" in why and f"{CAP_VARIABLE}=2" in why
    below = pools_of(Cluster("etl"), now)
    assert below.refusal("new") is None


def test_the_listing_is_cached_and_asked_again_before_a_stale_refusal() -> None:
    now = [0.0]
    cluster = Cluster("etl", "gpu")
    pools = pools_of(cluster, now)
    for _ in range(5):
        assert pools.refusal("etl") is None
        assert pools.refusal("new") is not None
    assert cluster.listed == 1  # one metadata request, not one a request
    now[0] += RECHECK_S
    cluster.topics.remove(SETTINGS.topics.work("gpu"))  # an operator deleted a pool
    assert pools.refusal("etl") is None and cluster.listed == 1  # fresh enough to accept
    assert pools.refusal("new") is None and cluster.listed == 2  # rechecked before refusing
    now[0] += FRESH_S
    cluster.topics.append(SETTINGS.topics.work("gpu"))
    assert pools.refusal("other") is not None and cluster.listed == 3


def test_a_cluster_that_does_not_answer_refuses_nothing() -> None:
    now = [0.0]
    cluster = Cluster("etl", "gpu")
    cluster.down = True
    pools = pools_of(cluster, now)
    assert pools.refusal("new") is None and pools.refusal("more") is None
    assert cluster.listed == 1  # not asked again at each request either
    cluster.down = False
    now[0] += FRESH_S
    assert pools.refusal("new") is None and cluster.listed == 1  # it backs off a while
    now[0] += FAILED_BACKOFF_S - FRESH_S
    assert pools.refusal("new") is not None and cluster.listed == 2


class NoGrants:
    def grants(self, tenant: str) -> None:
        return None  # the default: any pool


def check(pools: ClusterPools, **fields: Any) -> None:
    state = SimpleNamespace(settings=SETTINGS, tenants=NoGrants(), pools=pools)
    job = JobDefinition.model_validate(
        {"tenant": "greedy", "job_id": "j", "schedule": {"every": 1}, **fields}
    )
    _check_targets(state, job)  # type: ignore[arg-type]


def test_the_refusal_names_the_target_or_notify_targets_pool() -> None:
    pools = pools_of(Cluster("etl", "gpu"), [0.0])
    with pytest.raises(ValidationError) as refused:
        check(pools, target={"type": "worker", "pool": "new"})
    assert refused.value.field == "target.pool"
    assert refused.value.message.startswith("worker pool 'new' has no work topic")
    notify = {"on": ["dead_lettered"], "target": {"type": "worker", "pool": "alerts"}}
    with pytest.raises(ValidationError) as refused:
        check(pools, target={"type": "worker", "pool": "etl"}, notify=notify)
    assert refused.value.field == "notify.target.pool"
    check(pools, target={"type": "worker", "pool": "gpu"})
    check(pools, target={"type": "kafka", "topic": "orders"})
