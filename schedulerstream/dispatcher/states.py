"""A run's status and how it ends, with the moves the dispatcher may make between them.

    (new) ──► QUEUED ──► IN_FLIGHT ──► WAITING (a retry on a delay topic)
                │  ▲  ◄──────┘ ◄──────────┘  (a retry queued here, a restart)
                ▼  │
             BUFFERED (buffer_one: behind an active run of its job)

- a new run is QUEUED; a RunRevoked for a run never seen makes it REVOKED at once;
- QUEUED → QUEUED: a newer version of a run not started replaces it;
- REVOKED → QUEUED: a RunTriggered of at least the revoking version re-arms it;
- a run ends with an ``AttemptOutcome``: REVOKED for "revoked", DONE for every other, from
  the statuses ``ENDS`` lists for it (a success only in flight, a skip only queued, ...);
  REVOKED also from IN_FLIGHT for a first attempt armed ahead of its due time and not sent.

The values are the strings stored in run records and written as AttemptEvent kinds.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from schedulerstream.errors import SchedulerStreamError

if TYPE_CHECKING:
    from schedulerstream.dispatcher.records import RunRecord


class IllegalMove(SchedulerStreamError):
    """A run was asked to move where its status allows no move: a bug, never input."""


class RunStatus(enum.StrEnum):
    QUEUED = "queued"  # in its tenant queue, due at ``due_us``
    IN_FLIGHT = "in_flight"  # an attempt started and has not ended
    WAITING = "waiting"  # a retry that sits on a delay topic
    BUFFERED = "buffered"  # buffer_one: waits for the job's active run to end
    DONE = "done"
    REVOKED = "revoked"  # a newer job version dropped it before it started


class AttemptOutcome(enum.StrEnum):
    """How an attempt ended (the first four), or the run without one; a run record's
    ``outcome`` once it ended."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    LEASE_EXPIRED = "lease_expired"
    DEAD_LETTERED = "dead_lettered"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"
    REVOKED = "revoked"


QUEUED, IN_FLIGHT, WAITING, BUFFERED = (
    RunStatus.QUEUED, RunStatus.IN_FLIGHT, RunStatus.WAITING, RunStatus.BUFFERED,
)  # fmt: skip
DONE, REVOKED = RunStatus.DONE, RunStatus.REVOKED
TERMINAL = frozenset({DONE, REVOKED})  # REVOKED only until a newer version re-arms it
INITIAL = frozenset({QUEUED, REVOKED})  # the status of a run record when first written

MOVES: dict[RunStatus, frozenset[RunStatus]] = {
    QUEUED: frozenset({QUEUED, IN_FLIGHT, BUFFERED, REVOKED, DONE}),
    BUFFERED: frozenset({QUEUED, REVOKED, DONE}),
    IN_FLIGHT: frozenset({QUEUED, WAITING, DONE}),
    WAITING: frozenset({QUEUED, DONE}),
    REVOKED: frozenset({QUEUED}),
    DONE: frozenset(),
}

_LIVE = frozenset({QUEUED, IN_FLIGHT, WAITING, BUFFERED})
# outcome -> the statuses a run may end from with it
ENDS: dict[AttemptOutcome, frozenset[RunStatus]] = {
    AttemptOutcome.SUCCEEDED: frozenset({IN_FLIGHT}),
    AttemptOutcome.FAILED: frozenset({IN_FLIGHT}),
    AttemptOutcome.TIMED_OUT: frozenset({IN_FLIGHT}),
    AttemptOutcome.LEASE_EXPIRED: frozenset({IN_FLIGHT}),
    AttemptOutcome.DEAD_LETTERED: frozenset({IN_FLIGHT}),
    AttemptOutcome.CANCELLED: _LIVE,
    AttemptOutcome.SKIPPED: frozenset({QUEUED}),
    # in flight: an attempt armed ahead of its due time, aborted before it was sent
    AttemptOutcome.REVOKED: frozenset({QUEUED, BUFFERED, IN_FLIGHT}),
}
# attempt outcomes after which the target may or may not have done the work
UNKNOWN = frozenset({AttemptOutcome.TIMED_OUT, AttemptOutcome.LEASE_EXPIRED})

_REVOKED = AttemptOutcome.REVOKED
STATUS_OF: dict[str, RunStatus] = {s.value: s for s in RunStatus}
OUTCOME_OF: dict[str, AttemptOutcome] = {o.value: o for o in AttemptOutcome}


def move(run: RunRecord, to: RunStatus) -> None:
    """Set ``run.status`` to ``to``; IllegalMove unless ``MOVES`` allows it."""
    if to not in MOVES[run.status]:
        raise IllegalMove(f"run {run.run_id}: illegal move {run.status} → {to}")
    run.status = to


def end(run: RunRecord, outcome: AttemptOutcome) -> None:
    """End ``run`` with ``outcome`` (REVOKED or DONE); IllegalMove unless ``ENDS`` allows it
    from the run's status."""
    if run.status not in ENDS[outcome]:
        raise IllegalMove(f"run {run.run_id}: cannot end {outcome} from {run.status}")
    run.status = REVOKED if outcome is _REVOKED else DONE
    run.outcome = outcome
