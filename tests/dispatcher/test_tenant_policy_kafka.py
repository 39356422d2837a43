"""Tenant records on the real cron.tenants topic drive a follower and a real dispatcher process:
updates and tombstones apply without a restart."""

from __future__ import annotations

import itertools
import time

import pytest
from confluent_kafka import Producer

from harness.procs import ReceiverProcess
from schedulerstream.kafka.clients import producer_config
from schedulerstream.settings import Settings
from schedulerstream.tenants import TenantAdmin, TenantPolicy
from schedulerstream.tenants.record import TenantLimits
from tests.dispatcher.conftest import SpawnDispatcher
from tests.dispatcher.support import Runs, job, wait_for

pytestmark = pytest.mark.kafka


def write_raw(settings: Settings, tenant: str, value: bytes | None) -> None:
    """A record the admin code never writes: a tombstone, or a malformed value."""
    producer = Producer(producer_config(settings))
    producer.produce(settings.topic("tenants"), key=tenant.encode(), value=value)
    assert producer.flush(30) == 0


def test_the_follower_applies_updates_and_tombstones_and_survives_bad_records(
    topo: Settings,
) -> None:
    admin = TenantAdmin(topo)
    admin.create("acme", weight=2.0)
    policy = TenantPolicy.following(topo, wait_s=30)
    try:
        assert policy.ready and policy.weights.get("acme") == 2.0 and "acme" not in policy.limits
        write_raw(topo, "junk", b"{not json")
        admin.update("acme", weight=0.5, concurrency=1, rate_per_s=5.0)
        wait_for(lambda: policy.limits.get("acme") == TenantLimits(1, 5.0), 5, "the update", 0.02)
        assert policy.weights.get("acme") == 0.5 and "junk" not in policy.weights
        write_raw(topo, "acme", None)
        wait_for(lambda: "acme" not in policy.weights, 5, "the tombstone", 0.02)
        assert len(policy.limits) == 0 and policy.error is None
    finally:
        policy.close()


def spread(receiver: ReceiverProcess, rids: list[str]) -> list[float]:
    """Arrival times of the runs' first requests, in order, once every run has arrived."""

    def arrived() -> list[float] | None:
        found = [receiver.requests(rid) for rid in rids]
        return sorted(r[0]["received_at"] for r in found) if all(found) else None

    times: list[float] = wait_for(arrived, 30, f"requests of {rids}", 0.2)
    return times


def test_a_tenant_concurrency_update_applies_to_a_running_dispatcher(
    topo: Settings, dispatcher: SpawnDispatcher, receiver: ReceiverProcess, runs: Runs
) -> None:
    admin = TenantAdmin(topo)
    admin.create("slowco")
    proc = dispatcher()

    def burst(name: str, slow_ms: int) -> list[float]:
        now = time.time_ns() // 1000
        url = receiver.url(f"/slow/{slow_ms}")
        rids = [runs.trigger(job("slowco", f"{name}{i}", url), now) for i in range(3)]
        runs.flush()
        return spread(receiver, rids)

    # the default tenant concurrency (50): the three requests are in flight together
    together = burst("a", 2000)
    assert together[-1] - together[0] < 1.5

    admin.update("slowco", concurrency=1)
    proc.wait_for_log("tenant policy: slowco: weight 1, concurrency 1, rate default", 10)
    one_by_one = burst("b", 800)
    gaps = [later - earlier for earlier, later in itertools.pairwise(one_by_one)]
    assert min(gaps) >= 0.75, gaps  # each request only after the previous one was answered

    write_raw(topo, "slowco", None)  # a tombstone: back to the process defaults
    proc.wait_for_log("tenant policy: slowco removed", 10)
    again = burst("c", 2000)
    assert again[-1] - again[0] < 1.5
