"""The delivery loop's attempts bounded by their deadline plus a grace period (one sweep cuts
those past their bound: a timer per attempt cost more than the rest of the executor's work for
it), and what a cancelled attempt ended with."""

from __future__ import annotations

import asyncio
import logging

from schedulerstream.dispatcher.waiting import AttemptKey, Submission
from schedulerstream.targets.base import Outcome

log = logging.getLogger(__name__)


class Deadlines:
    """Per running attempt (loop thread): its bound, and whether the sweep cut it or
    ``cancel`` asked for its end."""

    def __init__(self, grace_s: float) -> None:
        self._grace_s = grace_s
        self.bounds: dict[AttemptKey, float] = {}  # loop time past which it is cut (loop)
        self.overran: set[AttemptKey] = set()  # cut by the sweep (loop)
        self.asked: set[AttemptKey] = set()  # cancelled by ``cancel`` (loop)

    def cut(self, tasks: dict[AttemptKey, asyncio.Task[None]], now: float) -> None:
        """Cancel the tasks of the attempts past their bound."""
        for key, bound in self.bounds.items():
            if bound <= now and key not in self.overran:
                self.overran.add(key)
                tasks[key].cancel()

    def cancelled(self, item: Submission) -> Outcome | None:
        """What a cancelled attempt ended with: nothing when ``cancel`` asked for it (the
        processor knows), timed out when the sweep cut it, and a failure to retry when
        neither did (a cancel from elsewhere must not leave the run in flight)."""
        key = item.key
        if key in self.asked:
            return None
        delivery = item.delivery
        if key in self.overran:
            limit = delivery.deadline + self._grace_s
            reason = f"no answer within {delivery.deadline:g} s"
            return Outcome("timed_out", reason, True, round(limit * 1e6))
        log.warning("attempt %s of %s was cancelled, not by the dispatcher: it is retried",
                    delivery.attempt, delivery.run_id)  # fmt: skip
        return Outcome("failed", "cancelled while running (not by the dispatcher)", True, 0)
