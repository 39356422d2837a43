"""The executor's gate: committed starts wait for a slot of the Limits and start as attempts
end; a blocked tenant or host does not hold the others back; a start that waited too long is
not sent."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from schedulerstream.dispatcher.deliveries import Completion
from schedulerstream.dispatcher.executor import Executor
from schedulerstream.dispatcher.limits import Limits
from schedulerstream.targets.base import Delivery, Outcome


class HeldTarget:
    """Answers once its run id is released (or at once, for ``config["free"]``); counts how
    many attempts run at once, in all and per config ``"host"``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running: dict[str, int] = {}
        self.most: dict[str, int] = {}
        self.started: list[str] = []
        self.sent_at: dict[str, float] = {}  # time.monotonic() when its attempt began
        self.released: set[str] = set()

    def release(self, *run_ids: str) -> None:
        with self.lock:
            self.released.update(run_ids)

    def _count(self, host: str, n: int) -> None:
        with self.lock:
            for key in (host, "*"):
                self.running[key] = self.running.get(key, 0) + n
                self.most[key] = max(self.most.get(key, 0), self.running[key])

    async def deliver(self, delivery: Delivery, config: dict[str, Any]) -> Outcome:
        with self.lock:
            self.started.append(delivery.run_id)
            self.sent_at[delivery.run_id] = time.monotonic()
        self._count(config["host"], 1)
        try:
            while not config.get("free") and delivery.run_id not in self.released:
                await asyncio.sleep(0.005)
        finally:
            self._count(config["host"], -1)
        return Outcome("succeeded", "ok", False, 1)

    async def close(self) -> None:
        return None


def delivery(run_id: str, tenant: str = "a") -> Delivery:
    return Delivery(run_id, tenant, "j", 0, 1, "scheduled", None, 30.0)


@pytest.fixture
def executor() -> Iterator[Executor]:
    ex = Executor(grace_s=0.1)
    yield ex
    ex.close()


class Drained:
    def __init__(self, ex: Executor) -> None:
        self.ex = ex
        self.found: list[Completion] = []

    def until(self, what: str, ready: Callable[[], bool], timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.found += self.ex.drain()
            if ready():
                return
            time.sleep(0.005)
        raise AssertionError(f"timed out waiting for {what}; completions: {self.found}")

    def ids(self) -> set[str]:
        return {c.run_id for c in self.found}


def submit(ex: Executor, target: HeldTarget, run_id: str, tenant: str = "a",
           host: str = "h:80", delay_s: float = 0.0, partition: int = 0,
           **config: Any) -> None:  # fmt: skip
    ex.submit(partition, tenant, delivery(run_id, tenant), target, {"host": host, **config},
              host, delay_s)  # fmt: skip


def test_at_most_the_concurrency_runs_and_the_rest_start_as_slots_free(
    executor: Executor,
) -> None:
    executor.set_gate(Limits(2, 10, 1e6, 10), ttl_s=30)
    target, drained = HeldTarget(), Drained(executor)
    for i in range(6):
        submit(executor, target, f"a/j@{i}")
    drained.until("two started", lambda: len(target.started) == 2)
    assert target.started == ["a/j@0", "a/j@1"]  # in the order they came
    target.release(*(f"a/j@{i}" for i in range(6)))
    drained.until("all six done", lambda: len(drained.found) == 6)
    assert target.most["*"] == 2
    assert all(c.outcome is not None and c.outcome.succeeded for c in drained.found)
    assert executor.in_flight == 0


def test_a_full_host_or_tenant_does_not_hold_back_the_others(executor: Executor) -> None:
    executor.set_gate(Limits(10, 2, 1e6, 1), ttl_s=30)  # 2 per tenant, 1 per host
    target, drained = HeldTarget(), Drained(executor)
    submit(executor, target, "a/slow@1", tenant="a", host="slow:80")
    submit(executor, target, "a/slow@2", tenant="a", host="slow:80")  # waits: the host is full
    submit(executor, target, "b/x@1", tenant="b", host="b1:80")
    submit(executor, target, "b/x@2", tenant="b", host="b2:80")
    submit(executor, target, "b/x@3", tenant="b", host="b3:80")  # waits: b has 2 running
    submit(executor, target, "c/y@1", tenant="c", host="c:80", free=True)
    drained.until("c's run done behind the blocked ones", lambda: "c/y@1" in drained.ids())
    assert set(target.started) == {"a/slow@1", "b/x@1", "b/x@2", "c/y@1"}
    target.release("b/x@1")
    drained.until("b's third started when its first ended", lambda: "b/x@3" in target.started)
    assert "a/slow@2" not in target.started  # its host is still busy
    target.release("a/slow@1", "a/slow@2", "b/x@2", "b/x@3")
    drained.until("all done", lambda: len(drained.found) == 6)
    assert target.most["slow:80"] == 1


def test_a_start_that_waited_past_the_ttl_is_not_sent(executor: Executor) -> None:
    executor.set_gate(Limits(1, 10, 1e6, 10), ttl_s=0.2)
    target, drained = HeldTarget(), Drained(executor)
    submit(executor, target, "a/j@1")
    submit(executor, target, "a/j@2")
    drained.until("the first started", lambda: target.started == ["a/j@1"])
    time.sleep(0.3)  # pacing: longer than the ttl while the only slot is taken
    target.release("a/j@1")
    drained.until("both completed", lambda: len(drained.found) == 2)
    late = next(c for c in drained.found if c.run_id == "a/j@2")
    assert late.outcome is not None and late.outcome.kind == "failed"
    assert late.outcome.retryable and "not sent" in late.outcome.reason
    assert target.started == ["a/j@1"]


def test_cancelling_a_waiting_start_ends_it_unsent(executor: Executor) -> None:
    executor.set_gate(Limits(1, 10, 1e6, 10), ttl_s=30)
    target, drained = HeldTarget(), Drained(executor)
    submit(executor, target, "a/j@1")
    submit(executor, target, "a/j@2")
    drained.until("the first started", lambda: target.started == ["a/j@1"])
    assert executor.running(0, "a/j@2", 1)
    assert executor.cancel(0, "a/j@2", 1)
    drained.until("the cancel completed", lambda: "a/j@2" in drained.ids())
    [cancelled] = drained.found
    assert cancelled.outcome is None
    target.release("a/j@1")
    drained.until("the first done", lambda: len(drained.found) == 2)
    assert target.started == ["a/j@1"]


def test_an_armed_start_is_sent_at_its_time_and_not_before(executor: Executor) -> None:
    executor.set_gate(Limits(10, 10, 1e6, 10), ttl_s=30)
    target, drained = HeldTarget(), Drained(executor)
    submitted = time.monotonic()
    submit(executor, target, "a/j@late", delay_s=0.4, free=True)
    submit(executor, target, "a/j@soon", delay_s=0.2, free=True)
    submit(executor, target, "a/j@now", free=True)
    drained.until("all three done", lambda: len(drained.found) == 3)
    assert target.started == ["a/j@now", "a/j@soon", "a/j@late"]
    assert target.sent_at["a/j@now"] - submitted < 0.15
    assert target.sent_at["a/j@soon"] - submitted >= 0.2
    assert target.sent_at["a/j@late"] - submitted >= 0.4
    assert target.sent_at["a/j@late"] - submitted < 1.0  # sent when due, not on a later sweep


def test_an_armed_start_waits_for_a_slot_once_due(executor: Executor) -> None:
    executor.set_gate(Limits(1, 10, 1e6, 10), ttl_s=30)
    target, drained = HeldTarget(), Drained(executor)
    submit(executor, target, "a/j@1")
    submit(executor, target, "a/j@2", delay_s=0.05)
    drained.until("the first started", lambda: target.started == ["a/j@1"])
    time.sleep(0.2)  # pacing: past the armed start's time while the only slot is taken
    assert target.started == ["a/j@1"]
    target.release("a/j@1", "a/j@2")
    drained.until("both done", lambda: len(drained.found) == 2)
    assert target.started == ["a/j@1", "a/j@2"]


def test_a_cancelled_or_stopped_armed_start_is_never_sent(executor: Executor) -> None:
    executor.set_gate(Limits(10, 10, 1e6, 10), ttl_s=30)
    target, drained = HeldTarget(), Drained(executor)
    submit(executor, target, "a/j@1", delay_s=0.3, free=True)
    submit(executor, target, "a/j@2", delay_s=0.3, free=True, partition=1)
    submit(executor, target, "a/j@3", delay_s=0.3, free=True)
    assert executor.cancel(0, "a/j@1", 1)
    assert executor.cancel_partition(1) == 1
    drained.until("two ended unsent", lambda: {"a/j@1", "a/j@2"} <= drained.ids())
    assert all(c.outcome is None for c in drained.found)
    drained.until("the third sent at its time", lambda: "a/j@3" in drained.ids())
    assert target.started == ["a/j@3"]
    assert executor.in_flight == 0


def test_a_start_behind_a_hung_host_ends_unsent_without_any_attempt_ending(
    executor: Executor,
) -> None:
    executor.set_gate(Limits(10, 10, 1e6, 1), ttl_s=0.2)  # one attempt per host
    target, drained = HeldTarget(), Drained(executor)
    submit(executor, target, "a/hung@1", host="hung:80")
    submit(executor, target, "a/hung@2", host="hung:80")  # waits behind the hung one
    drained.until("the second ended unsent", lambda: "a/hung@2" in drained.ids())
    [late] = drained.found
    assert late.outcome is not None and "not sent" in late.outcome.reason
    assert target.started == ["a/hung@1"]  # still running: no completion freed the slot
    target.release("a/hung@1")
    drained.until("the first done", lambda: len(drained.found) == 2)


class SwallowingTarget(HeldTarget):
    """``config["swallow"]``: a target that catches the cancel of its attempt and answers."""

    async def deliver(self, delivery: Delivery, config: dict[str, Any]) -> Outcome:
        if not config.get("swallow"):
            return await super().deliver(delivery, config)
        with self.lock:
            self.started.append(delivery.run_id)
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            return Outcome("failed", "swallowed the cancel", True, 1)
        return Outcome("succeeded", "ok", False, 1)


def test_a_cancelled_attempts_slot_goes_to_the_next_waiting_start(executor: Executor) -> None:
    executor.set_gate(Limits(1, 10, 1e6, 10), ttl_s=30)
    target, drained = HeldTarget(), Drained(executor)
    submit(executor, target, "a/j@1")
    submit(executor, target, "a/j@2", free=True)
    submit(executor, target, "a/j@3", free=True)
    drained.until("the first started", lambda: target.started == ["a/j@1"])
    assert executor.cancel(0, "a/j@1", 1)
    drained.until("all three ended", lambda: len(drained.found) == 3)
    outcomes = {c.run_id: c.outcome for c in drained.found}
    assert outcomes["a/j@1"] is None  # aborted: no outcome, and only it
    assert all(o is not None and o.succeeded for k, o in outcomes.items() if k != "a/j@1")
    assert target.started == ["a/j@1", "a/j@2", "a/j@3"]
    assert executor.in_flight == 0


def test_a_cancel_swallowed_by_a_target_does_not_reach_the_next_attempt() -> None:
    ex = Executor(grace_s=0.2)
    try:
        ex.set_gate(Limits(1, 10, 1e6, 10), ttl_s=30)
        target, drained = SwallowingTarget(), Drained(ex)
        submit(ex, target, "a/j@1", swallow=True)
        ex.submit(0, "a", Delivery("a/j@2", "a", "j", 0, 1, "scheduled", None, 0.2), target,
                  {"host": "h:80"}, "h:80")  # fmt: skip
        drained.until("the first started", lambda: target.started == ["a/j@1"])
        assert ex.cancel(0, "a/j@1", 1)
        drained.until("both ended", lambda: len(drained.found) == 2, timeout=5)
        first, second = sorted(drained.found, key=lambda c: c.run_id)
        assert first.outcome is not None and first.outcome.reason == "swallowed the cancel"
        # the second ran on the same worker: cut by the sweep, it is timed out, not cancelled
        assert second.outcome is not None and second.outcome.kind == "timed_out"
    finally:
        ex.close()


def test_closing_sends_none_of_the_waiting_starts() -> None:
    ex = Executor(grace_s=0.1)
    target, drained = HeldTarget(), Drained(ex)
    try:
        ex.set_gate(Limits(1, 10, 1e6, 10), ttl_s=30)
        for i in range(3):
            submit(ex, target, f"a/j@{i}")
        drained.until("the first started", lambda: target.started == ["a/j@0"])
    finally:
        ex.close()
    assert target.started == ["a/j@0"]  # its cancel did not start the next one
    assert [c.outcome for c in ex.drain()] == [None]


def test_a_failure_between_attempts_is_logged_and_the_waiting_starts_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[str] = []

    def on_complete(completion: Completion) -> None:
        seen.append(completion.run_id)
        if len(seen) == 1:
            raise RuntimeError("a bug in the completion handler")

    ex = Executor(grace_s=0.2, on_complete=on_complete)
    try:
        ex.set_gate(Limits(1, 10, 1e6, 10), ttl_s=30)
        target = HeldTarget()
        for i in range(3):
            submit(ex, target, f"a/j@{i}", free=True)
        deadline = time.monotonic() + 5
        while len(seen) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert seen == ["a/j@0", "a/j@1", "a/j@2"]  # the next worker took them, in order
        assert "a delivery worker failed between attempts" in caplog.text
    finally:
        ex.close()


class SelfCancellingTarget(HeldTarget):
    """Cancels the task it runs on (a library's stray cancel), unless ``config["free"]``."""

    async def deliver(self, delivery: Delivery, config: dict[str, Any]) -> Outcome:
        with self.lock:
            self.started.append(delivery.run_id)
        if not config.get("free"):
            task = asyncio.current_task()
            assert task is not None
            task.cancel()
            await asyncio.sleep(30)
        return Outcome("succeeded", "ok", False, 1)


def test_a_cancel_nobody_asked_for_is_a_failure_to_retry_and_the_worker_goes_on(
    executor: Executor,
) -> None:
    executor.set_gate(Limits(1, 10, 1e6, 10), ttl_s=30)
    target, drained = SelfCancellingTarget(), Drained(executor)
    submit(executor, target, "a/j@1")
    submit(executor, target, "a/j@2", free=True)
    drained.until("both ended", lambda: len(drained.found) == 2)
    outcomes = {c.run_id: c.outcome for c in drained.found}
    stray = outcomes["a/j@1"]
    assert stray is not None and stray.kind == "failed" and stray.retryable  # not left in flight
    assert "not by the dispatcher" in stray.reason
    after = outcomes["a/j@2"]
    assert after is not None and after.succeeded
    assert executor.in_flight == 0


def test_an_attempt_submitted_twice_at_once_ends_twice(
    executor: Executor, caplog: pytest.LogCaptureFixture
) -> None:
    executor.set_gate(Limits(2, 10, 1e6, 10), ttl_s=30)
    target, drained = HeldTarget(), Drained(executor)
    submit(executor, target, "a/j@1")
    submit(executor, target, "a/j@1")
    drained.until("both started", lambda: len(target.started) == 2)
    target.release("a/j@1")
    drained.until("both ended", lambda: len(drained.found) == 2)
    assert all(c.outcome is not None and c.outcome.succeeded for c in drained.found)
    assert "ran twice at once" in caplog.text
    assert "failed between attempts" not in caplog.text
