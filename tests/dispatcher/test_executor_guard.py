"""The executor's deadline guard: one sweep cuts the attempts past deadline plus grace."""

from __future__ import annotations

import time

from schedulerstream.dispatcher.executor import Executor
from tests.dispatcher.test_executor import FakeTarget, delivery, drain_until


def test_an_overrun_is_cut_after_deadline_plus_grace_and_only_it() -> None:
    ex = Executor(grace_s=0.2)
    try:
        target = FakeTarget()
        started = time.monotonic()
        ex.submit(0, "a", delivery("a/j@1", deadline=0.3), target, {"sleep": 30})
        ex.submit(0, "a", delivery("a/j@2", deadline=0.3), target, {"sleep": 0.1})
        done = {d.run_id: d for d in drain_until(ex, 2)}
        elapsed = time.monotonic() - started
        cut = done["a/j@1"].outcome
        assert cut is not None and (cut.kind, cut.reason) == ("timed_out", "no answer within 0.3 s")
        assert cut.duration_us == 500_000
        assert 0.5 <= elapsed < 2.0  # not before the bound; one sweep (0.05 s) after it
        assert done["a/j@2"].outcome is not None and done["a/j@2"].outcome.succeeded
        assert target.cancelled == 1 and ex.in_flight == 0
    finally:
        ex.close()


def test_a_cancel_of_an_attempt_being_cut_reports_no_outcome() -> None:
    ex = Executor(grace_s=0.1)
    key = (0, "a/j@1", 1)
    try:
        ex.submit(*key[:1], "a", delivery("a/j@1", deadline=30), FakeTarget(), {"sleep": 30})
        time.sleep(0.1)

        def cut_and_cancel() -> None:  # the sweep and the processor's cancel, one loop turn
            ex._bounds[key] = 0.0
            ex._sweep()
            ex._cancel_in_loop(key)

        ex._loop.call_soon_threadsafe(cut_and_cancel)
        [done] = drain_until(ex, 1)
        assert done.outcome is None  # the processor's cancel wins: aborted, not timed out
    finally:
        ex.close()
