"""Starts armed ahead of their due time (``arm_us``): an HTTP run due within the window is
started and committed early and sent at its due time; what cannot wait outside the
transaction, or would meet the overlap policy, starts only when due; a revocation that comes
before the send aborts it; a restart does not send an armed run early."""

from __future__ import annotations

from schedulerstream.dispatcher import records as rk
from schedulerstream.dispatcher.states import REVOKED

from .harness import SECOND, T0, Harness, revoked, run_id, run_triggered

ARM = 100_000  # µs
KAFKA = {"target": {"type": "kafka", "topic": "out"}}


def test_a_run_due_within_the_window_starts_ahead_to_be_sent_at_its_due_time() -> None:
    h = Harness(arm_us=ARM)
    due = T0 + 60_000
    h.run(run_triggered(not_before=due))
    [start] = h.tick()
    assert start.at_us == due
    [started] = h.kinds("started")
    assert started["at_us"] == due  # the attempt begins when it is sent
    assert f"deadline {due + 30 * SECOND} µs" in started["reason"]


def test_a_run_due_later_than_the_window_waits() -> None:
    h = Harness(arm_us=ARM)
    h.run(run_triggered(not_before=T0 + 150_000))
    assert h.tick() == []
    [start] = h.advance(0.06)
    assert start.at_us == T0 + 150_000


def test_a_due_run_is_not_armed_and_without_a_window_nothing_starts_early() -> None:
    h = Harness(arm_us=ARM)
    h.run(run_triggered(not_before=T0))
    [start] = h.tick()
    assert start.at_us == 0  # sent once committed
    plain = Harness()
    plain.run(run_triggered(not_before=T0 + 60_000))
    assert plain.tick() == []
    assert [s.at_us for s in plain.advance(0.06)] == [0]


def test_a_kafka_target_run_starts_only_when_due() -> None:
    h = Harness(arm_us=ARM)
    h.run(run_triggered(not_before=T0 + 60_000, **KAFKA))
    assert h.tick() == []  # its record would join this transaction: visible before its time
    [start] = h.advance(0.06)
    assert start.at_us == 0


def test_a_run_whose_job_has_an_active_run_starts_only_when_due() -> None:
    h = Harness(arm_us=ARM)
    h.run(run_triggered(0, not_before=T0))
    [first] = h.tick()
    h.run(run_triggered(1, not_before=T0 + 60_000))
    assert h.tick() == []  # the overlap policy is asked when it is due, not before
    h.finish(first.delivery.run_id)
    [second] = h.tick()
    assert second.delivery.run_id == run_id(1)
    assert second.at_us == T0 + 60_000  # the first ended in time: it is armed after all


def test_a_revocation_before_the_send_aborts_the_armed_attempt() -> None:
    h = Harness(arm_us=ARM)
    h.run(run_triggered(not_before=T0 + 90_000))
    [start] = h.tick()
    assert start.at_us == T0 + 90_000
    h.run(revoked(run_id(), version=2))
    [cancel] = h.cancelled
    assert (cancel.run_id, cancel.attempt) == (run_id(), 1)
    assert h.events() == [("accepted", 0), ("started", 1), ("revoked", 1)]
    run = rk.load(h.store, run_id())
    assert run is not None and run.status == REVOKED and run.job_version == 2
    assert h.limits.in_flight == 0
    assert not list(h.store.prefix(b"active/"))


def test_a_revocation_at_the_send_leaves_the_attempt_to_finish() -> None:
    h = Harness(arm_us=ARM)
    h.run(run_triggered(not_before=T0 + 90_000))
    [start] = h.tick()
    assert start.at_us == T0 + 90_000
    h.clock.advance(0.08)  # 10 ms before it is sent: too late to abort it reliably
    h.run(revoked(run_id(), version=2))
    assert h.cancelled == []
    assert h.finish(run_id())
    assert h.events()[-1] == ("succeeded", 1)


def test_a_restart_requeues_an_armed_run_for_its_due_time() -> None:
    h = Harness(arm_us=ARM)
    due = T0 + 90_000
    h.run(run_triggered(not_before=due))
    h.tick()
    h.restart()  # the process died before the send; its successor has no window
    assert h.tick() == []
    [again] = h.advance(0.09)
    assert (again.delivery.run_id, again.delivery.attempt) == (run_id(), 2)
