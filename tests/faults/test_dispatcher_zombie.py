"""SIGSTOP of a dispatcher with HTTP attempts in flight: a zombie dispatcher.

A scheduler emits runs of 1 s webhook jobs to a real receiver process that answers each
request after 2 s, so a dispatcher always has attempts in flight. Two dispatchers share the
partitions; one is SIGSTOPped past the session timeout, the other takes its partitions over
and re-dispatches the attempts whose outcome the zombie never committed. Then SIGCONT: the
zombie still holds queued runs of its old partitions, due by now; it must send no HTTP
request before it has partitions again (it learns it lost them, aborts, rejoins).

The zombie's requests are told apart by their client port (tests/faults/helpers.py
SocketWatch reads its sockets from /proc). Checked: every run of the window succeeded (a
committed ``succeeded`` event) and reached the receiver; each run delivered twice was in
flight when the zombie stopped or at a partition handover (explained, counted); no request
from the zombie between SIGCONT and its first task running again.

Where the stop lands decides what the zombie does first on SIGCONT, so each case places it
(tests/faults/hooks/sitecustomize.py: the process SIGSTOPs itself there, all threads, as an
external SIGSTOP would): after a poll, before the timers run (it then starts its due runs
before anything tells it that it lost them), inside a commit (the failing commit comes
first), or after a commit that succeeded, before its starts reach the delivery loop (their
time to live has run out on SIGCONT). With ``DISPATCH_DELIVERY=process`` the stop takes the
dispatcher alone (its delivery process goes on) or its whole process group (a frozen
container). An external SIGSTOP lands at any of these points at random: 3 runs in 5 sent
requests.
"""

from __future__ import annotations

import os
import signal
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from harness.procs import ReceiverProcess
from schedulerstream.model import JobDefinition
from schedulerstream.publish import Publisher
from schedulerstream.settings import Settings
from tests.faults.conftest import SpawnFault
from tests.faults.helpers import (
    SECOND,
    FaultProcess,
    SocketWatch,
    attempt_events,
    first_line_after,
    next_second_us,
    owned_partitions,
    report,
    wait_until,
)
from tests.support.runs import read_runs

pytestmark = [pytest.mark.kafka, pytest.mark.faults]
JOBS = 20
HOOKS = Path(__file__).resolve().parent / "hooks"  # sitecustomize: SIGSTOP at a point
LATE_MARGIN_S = 25  # beyond the takeover: restore, rejoin, a 2 s answer, a loaded machine
ANSWER_MS = 2000
# b's requests sent before it logs that it hands partitions back reach the receiver up to its
# closing commit (its log's clock is also cut to the millisecond): still "at the handover"
HANDOVER_SLACK_S = 0.5


def webhook_jobs(url: str) -> list[JobDefinition]:
    return [
        JobDefinition.model_validate(
            {
                "tenant": "hooks",
                "job_id": f"hook-{i}",
                "schedule": {"every": 1},
                "target": {"type": "http", "url": url},
                "timeout": 10,
                "retry": {"max_attempts": 5, "initial_backoff": 1, "max_backoff": 2},
            }
        )
        for i in range(JOBS)
    ]


def fenced(proc: FaultProcess, mark: int) -> str | None:
    after = proc.log()[mark:]
    for sign in (" lost ", "transaction failed"):
        if sign in after:
            return sign.strip()
    return "exited" if not proc.alive() else None


@pytest.mark.parametrize("delivery", ["thread", "process"])
def test_a_dispatcher_stopped_before_its_timers_sends_nothing_after_it_resumes(
    topo: Settings, procs: SpawnFault, tmp_path: Path, delivery: str
) -> None:
    """SIGSTOP after a poll, before the timers run (queued runs due at the next second).
    With ``DISPATCH_DELIVERY=process`` only the processor stops (its delivery child goes on
    with the starts it was given, each within its time to live), and the watch covers the
    child's sockets too."""
    case = f"dispatcher SIGSTOP zombie (timers, delivery {delivery})"
    dispatcher_zombie(topo, procs, tmp_path, "punctuate", case, dispatch_delivery=delivery)


def test_a_dispatcher_frozen_with_its_delivery_process_sends_nothing_after_it_resumes(
    topo: Settings, procs: SpawnFault, tmp_path: Path
) -> None:
    """The whole process group stops before the timers run (a frozen container or VM): the
    delivery child stops with its armed and waiting starts, and on SIGCONT their time to
    live (half the session timeout from their commit) has long run out, so it sends none."""
    case = "dispatcher SIGSTOP zombie (timers, delivery process, whole group)"
    dispatcher_zombie(topo, procs, tmp_path, "punctuate", case, scope="group",
                      dispatch_delivery="process")  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("delivery", ["thread", "process"])
def test_a_dispatcher_stopped_mid_commit_sends_nothing_after_it_resumes(
    topo: Settings, procs: SpawnFault, tmp_path: Path, delivery: str
) -> None:
    """SIGSTOP inside a commit (step 3): on SIGCONT the commit fails first, every task is
    rebuilt (attempts aborted), so no request goes out before the partitions are gone."""
    case = f"dispatcher SIGSTOP zombie (mid-commit, delivery {delivery})"
    dispatcher_zombie(topo, procs, tmp_path, "commit", case, dispatch_delivery=delivery)


@pytest.mark.slow
@pytest.mark.parametrize("delivery", ["thread", "process"])
def test_a_dispatcher_stopped_after_its_commit_sends_nothing_after_it_resumes(
    topo: Settings, procs: SpawnFault, tmp_path: Path, delivery: str
) -> None:
    """SIGSTOP after ``commit_transaction`` returned, before ``after_commit`` hands the
    committed starts to the delivery loop: on SIGCONT their time to live (half a session,
    counted from before the commit sent its offsets) has run out, so none is sent."""
    case = f"dispatcher SIGSTOP zombie (after commit, delivery {delivery})"
    dispatcher_zombie(topo, procs, tmp_path, "committed", case, dispatch_delivery=delivery)


def stopped(pid: int) -> bool:
    """Process ``pid`` is in the stopped state (T) of /proc."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rpartition(")")[2].split()[0] == "T"


def dispatcher_zombie(
    topo: Settings, procs: SpawnFault, tmp_path: Path, point: str, case: str,
    scope: str = "process", **overrides: object,
) -> dict[str, Any]:  # fmt: skip
    """``scope``: ``process`` stops the dispatcher alone, ``group`` its children too."""
    receiver = ReceiverProcess().start()
    watch: SocketWatch | None = None
    try:
        sched = procs("scheduler", "s")
        trigger = tmp_path / "stop-a"
        hook = {
            "PYTHONPATH": os.pathsep.join([str(HOOKS), os.environ.get("PYTHONPATH", "")]),
            "SS_TEST_STOP_AT": point,
            "SS_TEST_STOP_FILE": str(trigger),
            "SS_TEST_STOP_SCOPE": scope,
        }
        a = procs("dispatcher", "a", env=hook, **overrides)
        a.wait_running(topo.partitions)
        watch = SocketWatch(a.process.pid, receiver.port).start()  # type: ignore[union-attr]
        children = 1 if overrides.get("dispatch_delivery") == "process" else 0
        assert len(watch.pids) == 1 + children, f"a and its delivery process: {watch.pids}"
        b = procs("dispatcher", "b", **overrides)

        def split() -> bool:
            mine, theirs = owned_partitions(a.log(), "runs"), owned_partitions(b.log(), "runs")
            return bool(mine) and bool(theirs) and len(mine | theirs) == topo.partitions

        wait_until(split, 60, "a and b share the partitions", alive=b)
        sched.wait_running(topo.partitions)
        Publisher(topo).put_jobs(webhook_jobs(receiver.url(f"/slow/{ANSWER_MS}")))
        since = next_second_us(2)
        wait_until(
            lambda: len(receiver.requests()) >= 3 * JOBS, 60, "the webhooks flowing", every=0.5
        )
        a_had = owned_partitions(a.log(), "runs")
        trigger.touch()  # a stops itself at ``point``, attempts in flight (answered after 2 s)
        frozen = set(watch.pids) if scope == "group" else {watch.pids[0]}
        wait_until(lambda: all(stopped(pid) for pid in frozen), 30, f"a stopped at {point}",
                   alive=a)  # fmt: skip
        if scope == "process":
            assert not any(stopped(pid) for pid in watch.pids[1:]), "a child stopped too"
        stopped_wall = float(trigger.with_name("stop-a.at").read_text())
        wait_until(
            lambda: len(owned_partitions(b.log(), "runs")) == topo.partitions,
            90,
            "b takes over",
            alive=b,
        )
        takeover_s = time.time() - stopped_wall
        time.sleep(2)
        mark = len(a.log())
        resumed_wall = time.time()
        a.signal(signal.SIGCONT)
        how = wait_until(lambda: fenced(a, mark), 60, "a notices it was fenced")
        wait_until(
            lambda: bool(owned_partitions(a.log()[mark:], "runs")) or not a.alive(),
            90,
            "a rejoins and runs partitions again (or exits)",
        )
        if not a.alive():
            assert a.wait_exit(1) == 0, a.log()[-3000:]
        running_again = first_line_after(a.log()[mark:], "running: restored", resumed_wall)
        rejoined_wall = running_again[0] if running_again else float("inf")
        time.sleep(4)
        until = next_second_us(-2)
        assert sched.stop() == 0
        seen = read_runs(topo)
        due = {r["run_id"]: r for r in seen.triggered if since <= r["scheduled_at_us"] <= until}
        assert len(due) == JOBS * ((until - since) // SECOND + 1), "the scheduler lost runs"

        def all_succeeded() -> dict[str, list[dict[str, Any]]] | None:
            events: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for event in attempt_events(topo, 1.0):
                events[event["run_id"]].append(event)
            done = {
                rid for rid, got in events.items() if any(e["kind"] == "succeeded" for e in got)
            }
            return events if set(due) <= done else None

        events = wait_until(all_succeeded, 120, "every run of the window succeeded", every=2.0)
        zombie_ports = watch.stop()
        requests = receiver.requests()
        by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for request in requests:
            by_run[request["headers"].get("webhook-id", "")].append(request)
        missing = [rid for rid in due if rid not in by_run]
        assert missing == [], f"runs never received: {missing[:5]}"

        def from_zombie(request: dict[str, Any]) -> bool:
            peer = request["peer"]
            return (
                bool(peer)
                and peer[1] in zombie_ports
                and watch.sent(peer[1], request["received_at"])
            )

        after_resume = [
            r
            for r in requests
            if from_zombie(r) and resumed_wall <= r["received_at"] < rejoined_wall
        ]
        revoked_b = first_line_after(b.log(), " revoked ", resumed_wall)
        handover_wall = revoked_b[0] if revoked_b else float("inf")
        window_s = ANSWER_MS / 1000 + 1.0
        in_flight_at_stop, at_handover, unexplained = [], [], []
        for rid, got in by_run.items():
            if rid not in due or len(got) < 2:
                continue
            first = min(got, key=lambda r: r["received_at"])
            at = first["received_at"]
            if from_zombie(first) and stopped_wall - window_s <= at <= stopped_wall:
                in_flight_at_stop.append(rid)
            elif handover_wall - window_s <= at <= handover_wall + HANDOVER_SLACK_S:
                at_handover.append(rid)
            else:
                arrivals = [
                    (round(r["received_at"] - stopped_wall, 2), r["peer"][1:], from_zombie(r))
                    for r in got
                ]
                unexplained.append((rid, arrivals))
        figures = {
            "runs": len(due),
            "requests": sum(len(by_run[rid]) for rid in due),
            "duplicates": sum(len(by_run[rid]) - 1 for rid in due),
            "duplicates_in_flight_at_stop": len(in_flight_at_stop),
            "duplicates_at_handover": len(at_handover),
            "takeover_s": round(takeover_s, 1),
            "fenced_by": how,
            "rejoined_s": round(rejoined_wall - resumed_wall, 1),
            "zombie_requests_after_resume": len(after_resume),
            "partitions_of_zombie": sorted(a_had),
            "lateness": lateness_of(due, by_run),
            "latest": [  # the latest first arrivals: run id, s after the stop, its events
                (
                    rid,
                    round(t - stopped_wall, 1),
                    [(e["kind"], e["attempt"], (e["reason"] or "")[:50]) for e in events[rid]],
                )
                for t, rid in sorted(
                    ((min(r["received_at"] for r in by_run[rid]), rid) for rid in due),
                    reverse=True,
                )[:3]
            ],
            "failures": sorted(  # attempts that failed, by reason (breaker refusals aside)
                {
                    f"{e['kind']}: {(e['reason'] or '')[:70]}"
                    for got in events.values()
                    for e in got
                    if e["kind"] in ("failed", "timed_out")
                    and not (e["reason"] or "").startswith("circuit breaker open")
                }
            )[:6],
            "breaker_refusals": sum(
                1
                for got in events.values()
                for e in got
                if e["kind"] == "failed" and (e["reason"] or "").startswith("circuit breaker")
            ),
            "timeline_s": {  # from the SIGSTOP
                "resumed": round(resumed_wall - stopped_wall, 2),
                "rejoined": round(rejoined_wall - stopped_wall, 2),
                "handover": round(handover_wall - stopped_wall, 2),
            },
        }
        report(case, **figures)
        before = sum(1 for r in requests if from_zombie(r) and r["received_at"] < stopped_wall)
        assert before > 0, "the zombie's requests are not told apart (no port seen)"
        assert after_resume == [], (
            f"the zombie sent {len(after_resume)} requests after SIGCONT, before it had "
            f"partitions again: {[r['headers'].get('webhook-id') for r in after_resume][:5]}"
        )
        assert unexplained == [], f"duplicates not explained: {unexplained[:3]}"
        # the receiver never fails: a run waits at most for the takeover and the rejoin
        worst_s = figures["lateness"]["max_ms"] / 1000
        assert worst_s <= takeover_s + LATE_MARGIN_S, (
            f"a run first delivered {worst_s:.0f} s after its instant (takeover "
            f"{takeover_s:.0f} s); {figures['breaker_refusals']} attempts refused by a circuit "
            f"breaker although the receiver never failed: {figures['latest'][:1]}"
        )
        assert b.stop() == 0
        if a.alive():
            assert a.stop() == 0
        return figures
    finally:
        if watch is not None:
            watch.stop()
        receiver.stop()


def lateness_of(
    due: dict[str, dict[str, Any]], by_run: dict[str, list[dict[str, Any]]]
) -> dict[str, float]:
    """Scheduled instant to the first arrival at the receiver, in ms."""
    late = sorted(
        min(r["received_at"] for r in by_run[rid]) * 1000 - run["scheduled_at_us"] / 1000
        for rid, run in due.items()
    )
    return {
        "median_ms": round(late[len(late) // 2], 1),
        "p99_ms": round(late[min(len(late) - 1, int(len(late) * 0.99))], 1),
        "max_ms": round(late[-1], 1),
        "late_over_1s": sum(1 for v in late if v > 1000),
    }
