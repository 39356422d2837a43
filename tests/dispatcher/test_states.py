"""A run's statuses and outcomes: the table of legal moves, and runs through the real logic.

The property test drives DispatchLogic with random inputs (runs of four overlap policies and
several retry, delivery and notify settings, ticks, every kind of attempt outcome,
cancellations, revocations, retries coming back, restarts) over a store that checks every run
record it is given against the table: a status change the table does not allow fails the
test even if it bypassed ``states.move``.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedulerstream.dispatcher import records as rk
from schedulerstream.dispatcher.records import RunRecord
from schedulerstream.dispatcher.states import (
    ENDS,
    INITIAL,
    MOVES,
    AttemptOutcome,
    IllegalMove,
    RunStatus,
    end,
    move,
)
from schedulerstream.errors import SchedulerStreamError
from schedulerstream.targets.base import Outcome

from .harness import FAIL, OK, TIERS, Harness, MemoryStore, cancel, revoked, run_id, run_triggered

S = RunStatus
O = AttemptOutcome  # noqa: E741
# What the dispatcher does today (logic.py, overlap.py, retries.py), written out once more.
LEGAL = {
    (S.QUEUED, S.QUEUED),  # a newer version of a run not started replaces it
    (S.QUEUED, S.IN_FLIGHT),
    (S.QUEUED, S.BUFFERED),  # buffer_one behind an active run
    (S.QUEUED, S.REVOKED),
    (S.QUEUED, S.DONE),  # skipped, cancelled; a retry queued here is cancelled too
    (S.BUFFERED, S.QUEUED),  # the active run ended, or a newer version
    (S.BUFFERED, S.REVOKED),
    (S.BUFFERED, S.DONE),  # cancelled
    (S.IN_FLIGHT, S.QUEUED),  # a retry kept here, or re-queued after a restart
    (S.IN_FLIGHT, S.WAITING),  # a retry parked on a delay topic
    (S.IN_FLIGHT, S.DONE),
    (S.WAITING, S.QUEUED),  # the delay topic gave it back
    (S.WAITING, S.DONE),  # cancelled while it waited
    (S.REVOKED, S.QUEUED),  # re-armed by a RunTriggered of the revoking version or newer
}
ENDED_FROM = {
    O.SUCCEEDED: {S.IN_FLIGHT},
    O.FAILED: {S.IN_FLIGHT},
    O.TIMED_OUT: {S.IN_FLIGHT},
    O.LEASE_EXPIRED: {S.IN_FLIGHT},
    O.DEAD_LETTERED: {S.IN_FLIGHT},
    O.CANCELLED: {S.QUEUED, S.BUFFERED, S.IN_FLIGHT, S.WAITING},
    O.SKIPPED: {S.QUEUED},
    O.REVOKED: {S.QUEUED, S.BUFFERED, S.IN_FLIGHT},  # in flight: armed, not sent yet
}


def a_run(status: RunStatus) -> RunRecord:
    return RunRecord("acme/j1@1", "acme", "j1", 1, 1, 1, "scheduled", None, 1, None, status)


def test_the_wire_strings_are_those_of_the_stored_records_and_events() -> None:
    assert [s.value for s in RunStatus] == [
        "queued", "in_flight", "waiting", "buffered", "done", "revoked",
    ]  # fmt: skip
    assert {o.value for o in AttemptOutcome} == {
        "succeeded", "failed", "timed_out", "lease_expired", "dead_lettered", "cancelled",
        "skipped", "revoked",
    }  # fmt: skip
    run = a_run(S.IN_FLIGHT)
    run.outcome = O.TIMED_OUT
    assert json.loads(run.to_bytes())[11::6] == ["in_flight", "timed_out"]
    again = RunRecord.from_bytes(run.to_bytes())
    assert (again.status, again.outcome) == (S.IN_FLIGHT, O.TIMED_OUT)
    assert type(again.status) is RunStatus and type(again.outcome) is AttemptOutcome


def test_a_stored_status_the_dispatcher_does_not_know_is_refused() -> None:
    raw = json.loads(a_run(S.QUEUED).to_bytes())
    raw[11] = "parked"
    with pytest.raises(ValueError, match="parked"):
        RunRecord.from_bytes(json.dumps(raw).encode())


def test_the_table_is_the_dispatcher_s_moves() -> None:
    assert {(a, b) for a, tos in MOVES.items() for b in tos} == LEGAL
    assert set(MOVES) == set(RunStatus)
    assert {o: set(froms) for o, froms in ENDS.items()} == ENDED_FROM
    assert {S.QUEUED, S.REVOKED} == INITIAL


@pytest.mark.parametrize(("before", "after"), list(itertools.product(RunStatus, RunStatus)))
def test_every_legal_move_passes_and_every_other_raises(before: S, after: S) -> None:
    run = a_run(before)
    if (before, after) in LEGAL:
        move(run, after)
        assert run.status is after
        return
    with pytest.raises(IllegalMove, match=f"{run.run_id}: illegal move {before} → {after}"):
        move(run, after)
    assert run.status is before
    assert issubclass(IllegalMove, SchedulerStreamError)


@pytest.mark.parametrize(("before", "outcome"), list(itertools.product(RunStatus, O)))
def test_a_run_ends_only_from_the_statuses_its_outcome_allows(before: S, outcome: O) -> None:
    run = a_run(before)
    if before in ENDED_FROM[outcome]:
        end(run, outcome)
        assert run.outcome is outcome
        assert run.status is (S.REVOKED if outcome is O.REVOKED else S.DONE)
        return
    with pytest.raises(IllegalMove, match=f"cannot end {outcome} from {before}"):
        end(run, outcome)
    assert (run.status, run.outcome) == (before, None)


class CheckedStore(MemoryStore):
    """Fails on a run record whose status change is not in the table (or a first status
    not in INITIAL), and on a finished run's outcome its status could not end with."""

    def __init__(self) -> None:
        super().__init__()
        self.moves: set[tuple[RunStatus | None, RunStatus]] = set()

    def put(self, key: bytes, value: bytes, *, logged: bool = True) -> None:
        if key.startswith(rk.RUN_PREFIX):
            old = self.get(key)
            before = None if old is None else RunRecord.from_bytes(old).status
            after = RunRecord.from_bytes(value)
            if before is None:
                assert after.status in INITIAL, f"{key!r} first stored as {after.status}"
            else:
                assert after.status in MOVES[before], f"{key!r}: {before} → {after.status}"
            if after.status in (S.DONE, S.REVOKED) and before != after.status:
                assert after.outcome is not None
                assert before is None or before in ENDS[after.outcome], (key, before, after)
            self.moves.add((before, after.status))
        super().put(key, value, logged=logged)


def test_the_checked_store_catches_a_move_outside_the_table() -> None:
    store = CheckedStore()
    run = a_run(S.QUEUED)
    store.put(rk.run_key(run.run_id), run.to_bytes())
    run.status = S.WAITING  # bypassing states.move
    with pytest.raises(AssertionError, match="queued → waiting"):
        store.put(rk.run_key(run.run_id), run.to_bytes())


class Driven(Harness):
    """A Harness over a CheckedStore that keeps the retry records it produced."""

    def __init__(self) -> None:
        super().__init__(concurrency=4, tenant_concurrency=2)
        self.checked = self.store = CheckedStore()
        self.parked: list[tuple[str, bytes]] = []  # (run id, retry record)

    def produce(self, topic: str, key: bytes, value: bytes | None, partition: int) -> None:
        super().produce(topic, key, value, partition)
        if topic in dict(TIERS) and value is not None:
            self.parked.append((key.decode(), value))


SETTINGS: list[dict[str, Any]] = [
    {},
    {"retry": {"max_attempts": 3, "initial_backoff": 1, "multiplier": 2, "max_backoff": 60}},
    {"delivery": "at_most_once", "retry": {"max_attempts": 2}},
    {"pause_after_failures": 2},
    {"retry": {"max_attempts": 2, "initial_backoff": 0.001},
     "notify": {"on": ["dead_lettered"], "target": {"type": "http", "url": "https://n.io/x"}}},
]  # fmt: skip
POLICIES = ["allow", "forbid", "replace", "buffer_one"]
OUTCOMES = [
    OK, FAIL, Outcome("timed_out", "no answer", True, 5),
    Outcome("gone", "HTTP 410", False, 1, 410), Outcome("refused", "HTTP 400", False, 1, 400),
    Outcome("failed", "HTTP 429", True, 1, 429, retry_after_s=45),
]  # fmt: skip
STEP = st.tuples(st.integers(0, 8), st.integers(0, 3), st.integers(0, 2), st.integers(0, 5),
                 st.integers(0, 9))  # fmt: skip


def apply(h: Driven, step: tuple[int, int, int, int, int]) -> None:
    op, job, tenant, n, pick = step
    job_id, tenant_id = f"j{job}", f"t{tenant}"
    rid = run_id(n, tenant=tenant_id, job_id=job_id)
    if op <= 2:
        extra = SETTINGS[pick % len(SETTINGS)]
        h.run(run_triggered(n, tenant=tenant_id, job_id=job_id, version=1 + pick % 3,
                            overlap_policy=POLICIES[job], **extra))  # fmt: skip
    elif op == 3:
        h.advance([0.1, 1, 5, 40][pick % 4])
    elif op == 4 and h.in_flight:
        started = sorted(h.in_flight)
        h.finish(started[pick % len(started)], OUTCOMES[pick % len(OUTCOMES)])
    elif op in (5, 6):
        # a run waiting on a delay topic or buffered, half the time (else those are rare)
        rare = [r for r, _ in h.parked] + [v.decode() for _, v in h.store.prefix(b"buf/")]
        if rare and pick % 2 == 0:
            rid = rare[pick // 2 % len(rare)]
            tenant_id, job_id = rid.split("@")[0].split("/")
        if op == 5:
            h.command(cancel(rid, tenant=tenant_id, job_id=job_id))
        else:
            h.run(revoked(rid, 1 + pick % 3, tenant=tenant_id, job_id=job_id))
    elif op == 7 and h.parked:
        h.logic.on_retry(h.store, 0, h.parked.pop(pick % len(h.parked))[1])
    elif op == 8 and pick == 0:
        h.restart()


@settings(max_examples=150, deadline=None)
@given(st.lists(STEP, min_size=10, max_size=120))
def test_runs_through_the_real_dispatcher_make_only_legal_moves(steps: list[Any]) -> None:
    h = Driven()
    for step in steps:
        apply(h, step)  # an IllegalMove or a CheckedStore assertion fails the example
    h.advance(3600)
    for rid in sorted(h.in_flight):
        h.finish(rid)
    for _, value in h.parked:
        h.logic.on_retry(h.store, 0, value)
    h.advance(3600)


def test_the_random_runs_reach_every_move_of_the_table() -> None:
    """The property test's inputs are rich enough: together, a few hundred random runs make
    every legal move (so a move the dispatcher stopped making, or a new one, shows here)."""
    import random

    seen: set[tuple[RunStatus | None, RunStatus]] = set()
    for seed in range(25):
        rng = random.Random(seed)
        h = Driven()
        for _ in range(150):
            apply(h, (rng.randrange(9), rng.randrange(4), rng.randrange(3), rng.randrange(6),
                      rng.randrange(10)))  # fmt: skip
        seen |= h.checked.moves
    assert {m for m in seen if m[0] is not None} == LEGAL
    assert {m[1] for m in seen if m[0] is None} == INITIAL
