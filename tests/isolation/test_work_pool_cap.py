"""A tenant without grants whose jobs name more new worker pools than
SCHEDULERSTREAM_MAX_WORK_POOLS, beside a healthy tenant whose pool has a running worker (real
processes, real broker).

Each pool's topic has P partitions and is never deleted: before the cap, every new pool name
made one, so one tenant could grow the cluster's partitions until the broker fell over for every
tenant. Now the dispatcher makes a new pool's topic only while the cluster holds fewer work
topics than the cap: the greedy tenant's runs to the pools past it fail, refused, naming the
setting; the cluster holds no more work topics than the cap; the healthy tenant's pool, which
existed (made by its worker), keeps working and every one of its runs succeeds.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from schedulerstream.contracts.work_pools import CAP_VARIABLE, work_pools
from schedulerstream.kafka.clients import base_config
from schedulerstream.kafka.reader import read_topic
from schedulerstream.model import JobDefinition
from schedulerstream.publish import Publisher
from schedulerstream.settings import Settings
from tests.faults.conftest import SpawnFault
from tests.faults.helpers import next_second_us, now_us, wait_until
from tests.isolation.helpers import CODEC, SECOND, attempt_events, every_second_run_ids
from tests.worker.support import WorkerProcess

pytestmark = [pytest.mark.kafka]
CAP = 3  # the healthy tenant's pool and two of the greedy tenant's
GREEDY_POOLS = 7
HEALTHY_JOBS = 3
WINDOW_S = 8


def job(tenant: str, job_id: str, pool: str) -> JobDefinition:
    return JobDefinition.model_validate(
        {"tenant": tenant, "job_id": job_id, "schedule": {"every": 1},
         "target": {"type": "worker", "pool": pool}, "retry": {"max_attempts": 1}, "timeout": 5}
    )  # fmt: skip


def reasons_so_far(settings: Settings) -> dict[str, list[str]]:
    """The reasons of the AttemptEvents committed so far, by job key: read for at most 5 s,
    since with jobs firing every second the topic is never idle for long."""
    found: dict[str, list[str]] = defaultdict(list)
    for message in read_topic(settings, settings.topics.attempts, True, 0.5, max_seconds=5):
        _, event = CODEC.decode(message.value())
        found[f"{event['tenant']}/{event['job_id']}"].append(str(event["reason"]))
    return found


def pools_on_the_cluster(settings: Settings) -> frozenset[str]:
    topics = AdminClient(base_config(settings)).list_topics(timeout=30).topics
    return work_pools(topics, settings.topics.work_prefix)


def test_a_tenant_naming_new_pools_past_the_cap_is_refused_and_stops_no_other_tenant(
    topo: Settings, procs: SpawnFault, tmp_path: Path
) -> None:
    worker = WorkerProcess(topo, "billing-1", tmp_path, pool="billing").start()
    try:
        worker.wait_for_log("ready")  # its pool's topic is made by its worker, an operator's act
        disp = procs("dispatcher", "d", max_work_pools=CAP)
        sched = procs("scheduler", "s")
        disp.wait_running(topo.partitions)
        sched.wait_running(topo.partitions)

        greedy = [job("greedy", f"j{i}", f"greedy-{i}") for i in range(GREEDY_POOLS)]
        Publisher(topo).put_jobs(greedy)

        def refused_keys() -> set[str] | None:
            reasons = reasons_so_far(topo)
            refused = {j.key for j in greedy if any(CAP_VARIABLE in r for r in reasons[j.key])}
            return refused if len(refused) == GREEDY_POOLS - (CAP - 1) else None

        # the cap is reached by the greedy tenant before the healthy tenant's runs begin
        wait_until(refused_keys, 60, "the greedy runs past the cap refused", every=1.0)

        healthy = [job("healthy", f"bill-{i}", "billing") for i in range(HEALTHY_JOBS)]
        Publisher(topo).put_jobs(healthy)
        since = next_second_us(2)
        until = since + WINDOW_S * SECOND
        wait_until(lambda: now_us() > until + 2 * SECOND, 40, "the window to pass")
        assert sched.stop() == 0

        expected = every_second_run_ids(healthy, since, until)

        def succeeded() -> set[str] | None:
            events = attempt_events(topo)
            done = {e["run_id"] for j in healthy for e in events[j.key]
                    if e["kind"] == "succeeded" and e["run_id"] in expected}  # fmt: skip
            return done if done == expected else None

        assert wait_until(succeeded, 60, "every healthy run succeeded", every=1.0) == expected

        pools = pools_on_the_cluster(topo)
        assert len(pools) == CAP and "billing" in pools, pools
        events = attempt_events(topo)
        capped = [j for j in greedy if j.target.pool not in pools]  # type: ignore[union-attr]
        assert len(capped) == GREEDY_POOLS - (CAP - 1)
        for definition in capped:  # each of its runs failed: refused by its pool's own
            # answer, or retried while another pool's refusal answered for it (its topic
            # might have been made since), until its attempts ran out
            pool = definition.target.pool  # type: ignore[union-attr]
            ended = [e for e in events[definition.key] if e["kind"] not in ("accepted", "started")]
            assert ended and {e["kind"] for e in ended} <= {"failed", "dead_lettered"}, ended[:3]
            for event in (e for e in ended if e["kind"] == "failed"):
                assert f"worker pool {pool!r} has no work topic" in event["reason"], event
                assert f"{CAP_VARIABLE}={CAP}" in event["reason"], event
        healthy_kinds = {e["kind"] for j in healthy for e in events[j.key]}
        assert healthy_kinds <= {"accepted", "started", "succeeded"}, healthy_kinds
        assert disp.alive(), disp.log()[-3000:]
    finally:
        assert worker.stop() == 0
