"""A dispatcher whose partition stops (revoked, lost, rebuilt) aborts that partition's attempts."""

from __future__ import annotations

import time

from schedulerstream.dispatcher.executor import Executor
from schedulerstream.dispatcher.topology import DispatcherTopology
from schedulerstream.settings import Settings
from schedulerstream.tenants.policy import TenantPolicy

from .test_executor import FakeTarget, delivery, drain_until


def test_on_stopped_aborts_only_the_stopped_partitions_attempts(tmp_path) -> None:
    settings = Settings(data_dir=tmp_path)
    executor = Executor(grace_s=0.1)
    topology = DispatcherTopology(settings, executor=executor, tenants=TenantPolicy())
    try:
        target = FakeTarget()
        executor.submit(1, "a", delivery("a/j@1"), target, {"sleep": 30}, "h:1")
        executor.submit(2, "a", delivery("a/j@2"), target, {"sleep": 30}, "h:1")
        deadline = time.monotonic() + 5
        while target.started < 2 and time.monotonic() < deadline:  # both requests are out
            time.sleep(0.01)
        topology.on_stopped(1)
        [done] = drain_until(executor, 1)
        assert (done.partition, done.run_id, done.outcome, done.host) == (1, "a/j@1", None, "h:1")
        assert executor.in_flight == 1  # partition 2 still delivers
        deadline = time.monotonic() + 5
        while target.cancelled < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert target.cancelled == 1  # the request itself was aborted
    finally:
        topology.close()
    assert target.cancelled == 2  # close aborts and unwinds the rest
