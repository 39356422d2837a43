"""The background delivery loop: outcomes, cancellation, the deadline guard, target bugs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from schedulerstream.dispatcher.deliveries import Completion
from schedulerstream.dispatcher.executor import Executor
from schedulerstream.targets.base import Delivery, Outcome


class FakeTarget:
    """Answers after ``config["sleep"]`` seconds, or raises ``config["raise"]``."""

    def __init__(self) -> None:
        self.started = 0
        self.cancelled = 0

    async def deliver(self, delivery: Delivery, target_config: dict[str, Any]) -> Outcome:
        self.started += 1
        try:
            await asyncio.sleep(target_config.get("sleep", 0))
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        if "raise" in target_config:
            raise target_config["raise"]
        return Outcome("succeeded", "ok", False, 1)

    async def close(self) -> None:
        return None


def delivery(run_id: str = "a/j@1", deadline: float = 5.0) -> Delivery:
    return Delivery(run_id, "a", "j", 0, 1, "scheduled", None, deadline)


@pytest.fixture
def executor() -> Iterator[Executor]:
    ex = Executor(grace_s=0.1)
    yield ex
    ex.close()


def drain_until(ex: Executor, count: int, timeout: float = 5.0) -> list[Completion]:
    found: list[Completion] = []
    deadline = time.monotonic() + timeout
    while len(found) < count and time.monotonic() < deadline:
        found += ex.drain()
        time.sleep(0.01)
    return found


def test_an_outcome_comes_back_as_a_completion(executor: Executor) -> None:
    executor.submit(3, "a", delivery(), FakeTarget(), {})
    [done] = drain_until(executor, 1)
    assert (done.partition, done.tenant, done.run_id, done.attempt) == (3, "a", "a/j@1", 1)
    assert done.outcome is not None and done.outcome.succeeded
    assert executor.in_flight == 0


def test_cancel_aborts_the_delivery_and_reports_no_outcome(executor: Executor) -> None:
    target = FakeTarget()
    executor.submit(0, "a", delivery(), target, {"sleep": 30})
    time.sleep(0.1)
    assert executor.cancel(0, "a/j@1", 1)
    [done] = drain_until(executor, 1)
    assert done.outcome is None
    time.sleep(0.1)
    assert target.cancelled == 1
    assert not executor.cancel(0, "a/j@1", 1)


def test_cancel_partition_aborts_only_that_partition(executor: Executor) -> None:
    executor.submit(0, "a", delivery("a/j@1"), FakeTarget(), {"sleep": 30})
    executor.submit(1, "a", delivery("a/j@2"), FakeTarget(), {"sleep": 0.2})
    assert executor.cancel_partition(0) == 1
    done = drain_until(executor, 2)
    assert {(d.run_id, d.outcome is None) for d in done} == {("a/j@1", True), ("a/j@2", False)}


def test_a_target_that_overruns_its_deadline_is_timed_out(executor: Executor) -> None:
    executor.submit(0, "a", delivery(deadline=0.2), FakeTarget(), {"sleep": 30})
    [done] = drain_until(executor, 1)
    assert done.outcome is not None and done.outcome.kind == "timed_out"
    assert done.outcome.retryable


def test_a_target_bug_is_a_retryable_failure(executor: Executor) -> None:
    executor.submit(0, "a", delivery(), FakeTarget(), {"raise": RuntimeError("boom")})
    [done] = drain_until(executor, 1)
    assert done.outcome is not None
    assert (done.outcome.kind, done.outcome.reason) == ("failed", "RuntimeError: boom")
