"""The delivery loop in a child process: attempts reach a real receiver, the gate and the time to
live hold, held partitions send nothing, and the child stops when its parent's socket closes."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest

from harness.procs import ReceiverProcess
from schedulerstream.dispatcher.deliveries import Completion
from schedulerstream.dispatcher.delivery_process import DeliveryProcess
from schedulerstream.dispatcher.limits import Limits
from schedulerstream.errors import DependencyDown
from schedulerstream.model import HttpTarget
from schedulerstream.settings import Settings
from schedulerstream.targets.base import Delivery
from schedulerstream.targets.http import HttpSender
from tests.dispatcher.support import wait_for

SENDER = HttpSender(allow_private=True)  # stands for the child's own: never used here


@pytest.fixture(scope="module")
def receiver() -> Iterator[ReceiverProcess]:
    process = ReceiverProcess().start()
    yield process
    process.stop()


@pytest.fixture
def delivery_process() -> Iterator[DeliveryProcess]:
    process = DeliveryProcess(allow_private=True, grace_s=0.5)
    yield process
    process.close()


def delivery(run_id: str, deadline: float = 10.0) -> Delivery:
    tenant, rest = run_id.split("/", 1)
    return Delivery(run_id, tenant, rest.split("@")[0], 0, 1, "scheduled", '{"n":1}', deadline)


def completions(process: DeliveryProcess, count: int, timeout: float = 15.0) -> list[Completion]:
    found: list[Completion] = []

    def enough() -> bool:
        found.extend(process.drain())
        return len(found) >= count

    wait_for(enough, timeout, f"{count} completions", every=0.02)
    return found


def gate(process: DeliveryProcess, concurrency: int = 10, ttl_s: float = 30.0) -> Limits:
    limits = Limits(concurrency, concurrency, 1e9, concurrency)
    process.set_gate(limits, ttl_s)
    return limits


def submit(process: DeliveryProcess, partition: int, run_id: str, url: str, **extra: Any) -> None:
    config = HttpTarget(url=url)
    process.submit(partition, run_id.split("/")[0], delivery(run_id), SENDER, config,
                   "127.0.0.1", **extra)  # fmt: skip
    process.flush()


def test_an_attempt_is_sent_from_the_child_and_its_outcome_comes_back(
    delivery_process: DeliveryProcess, receiver: ReceiverProcess
) -> None:
    gate(delivery_process)
    submit(delivery_process, 3, "acme/one@1", receiver.url("/ok"))
    assert delivery_process.running(3, "acme/one@1", 1) and delivery_process.in_flight == 1
    [done] = completions(delivery_process, 1)
    assert (done.partition, done.tenant, done.run_id, done.attempt) == (3, "acme", "acme/one@1", 1)
    assert done.outcome is not None and done.outcome.succeeded and done.outcome.status_code == 200
    assert delivery_process.in_flight == 0
    [request] = receiver.requests("acme/one@1")
    assert request["headers"]["webhook-id"] == "acme/one@1"
    assert os.getpid() != delivery_process.pid


def test_the_gate_holds_in_the_child(
    delivery_process: DeliveryProcess, receiver: ReceiverProcess
) -> None:
    gate(delivery_process, concurrency=1)
    for n in (1, 2):
        submit(delivery_process, 0, f"gated/j{n}@1", receiver.url("/slow/400"))
    wait_for(lambda: receiver.requests("gated/j1@1"), 15, "the first request", every=0.02)
    assert not receiver.requests("gated/j2@1")  # it waits for the first one's slot
    done = completions(delivery_process, 2)
    assert [c.run_id for c in done] == ["gated/j1@1", "gated/j2@1"]
    assert all(c.outcome is not None and c.outcome.succeeded for c in done)


def test_a_start_committed_longer_ago_than_the_time_to_live_is_not_sent(
    delivery_process: DeliveryProcess, receiver: ReceiverProcess
) -> None:
    gate(delivery_process, ttl_s=1.0)
    submit(delivery_process, 0, "late/j@1", receiver.url("/ok"), committed_at=time.monotonic() - 5)
    [done] = completions(delivery_process, 1)
    assert done.outcome is not None and not done.outcome.succeeded
    assert "not sent" in done.outcome.reason
    assert not receiver.requests("late/j@1")


def test_a_held_partition_sends_nothing_and_its_attempts_are_cancelled(
    delivery_process: DeliveryProcess, receiver: ReceiverProcess
) -> None:
    gate(delivery_process)
    delivery_process.hold(7)
    submit(delivery_process, 7, "held/j@1", receiver.url("/ok"))
    submit(delivery_process, 8, "free/j@1", receiver.url("/ok"))  # queued behind it
    [free] = completions(delivery_process, 1)
    assert free.run_id == "free/j@1"
    assert delivery_process.cancel_partition(7) == 1
    [held] = completions(delivery_process, 1)
    assert held.run_id == "held/j@1" and held.outcome is None  # cancelled, never sent
    assert not receiver.requests("held/j@1")


def test_an_armed_attempt_waits_for_its_time_and_a_cancel_aborts_it(
    delivery_process: DeliveryProcess, receiver: ReceiverProcess
) -> None:
    gate(delivery_process)
    submit(delivery_process, 1, "armed/j@1", receiver.url("/ok"), delay_s=0.3)
    submit(delivery_process, 1, "armed/k@1", receiver.url("/ok"), delay_s=30)
    sent_after = time.monotonic()
    [done] = completions(delivery_process, 1)
    assert done.run_id == "armed/j@1" and time.monotonic() - sent_after >= 0.3
    assert delivery_process.cancel(1, "armed/k@1", 1)
    [cancelled] = completions(delivery_process, 1)
    assert cancelled.run_id == "armed/k@1" and cancelled.outcome is None
    assert not receiver.requests("armed/k@1")
    assert not delivery_process.cancel(1, "armed/k@1", 1)  # no longer in flight


def test_the_child_stops_sending_when_its_parent_is_gone(receiver: ReceiverProcess) -> None:
    process = DeliveryProcess(allow_private=True, grace_s=0.5)
    gate(process)
    submit(process, 0, "orphan/j@1", receiver.url("/ok"), delay_s=1.0)
    process._sock.close()  # what the kernel does when the parent dies
    process._process.wait(10)  # it exits at once, before the armed attempt's time
    assert not receiver.requests("orphan/j@1")


def test_a_child_that_dies_stops_the_processor(receiver: ReceiverProcess) -> None:
    process = DeliveryProcess(allow_private=True, grace_s=0.5)
    try:
        gate(process)
        os.kill(process.pid, signal.SIGKILL)

        def refused() -> str | None:
            try:
                process.drain()
            except DependencyDown as exc:
                return str(exc)
            return None

        assert "exit code -9" in wait_for(refused, 15, "the child's death", every=0.02)
    finally:
        process.close()


def test_a_stop_signal_while_the_child_starts_does_not_end_it(receiver: ReceiverProcess) -> None:
    process = DeliveryProcess(allow_private=True, grace_s=0.5)
    try:
        for stop in (signal.SIGTERM, signal.SIGINT):  # as a group's stop reaches it, at once
            os.kill(process.pid, stop)
        gate(process)
        submit(process, 0, "early/j@1", receiver.url("/ok"))
        [done] = completions(process, 1)
        assert done.outcome is not None and done.outcome.succeeded
        assert process._process.poll() is None
    finally:
        process.close()
    assert process._process.returncode == 0


def test_the_setting_takes_thread_or_process() -> None:
    assert Settings(dispatch_delivery="process").dispatch_delivery == "process"
    with pytest.raises(ValueError, match="'thread' or 'process'"):
        Settings(dispatch_delivery="fork")
