"""A network partition between one scheduler and the broker (a TCP proxy the test controls).

Scheduler ``a`` reaches the fault matrix's own broker only through tests/faults/broker.py's
TcpProxy (the broker advertises the proxy on the listener ``a`` bootstraps from, so every
reconnection goes through it too); scheduler ``b`` and the test's readers connect directly.
The proxy stops forwarding for longer than the session timeout (bytes held, no reset, as in a
real partition); ``b`` takes ``a``'s partitions over. When the partition heals, ``a``'s
held requests (a commit, heartbeats) reach the broker late: ``a`` must be fenced, rejoin
(or stop cleanly), and nothing it produced during or after the partition may be committed
twice. Checked on the committed runs: every instant once, one run id each.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from schedulerstream.publish import Publisher
from schedulerstream.settings import Settings
from tests.faults.broker import ProxiedBroker, TcpProxy
from tests.faults.conftest import SpawnFault
from tests.faults.helpers import (
    FaultProcess,
    check_every_instant_once,
    every_second_jobs,
    next_second_us,
    now_us,
    owned_partitions,
    report,
    uncommitted_run_ids,
    wait_until,
)

pytestmark = [pytest.mark.kafka, pytest.mark.faults]
JOBS = 100


def fenced_or_gone(proc: FaultProcess, mark: int) -> str | None:
    after = proc.log()[mark:]
    for sign in (" lost ", "transaction failed", " revoked "):
        if sign in after:
            return sign.strip()
    return "exited" if not proc.alive() else None


def partitions(
    topo: Settings, broker: ProxiedBroker, procs: SpawnFault, cuts_s: list[float]
) -> dict[str, Any]:
    proxy = TcpProxy(broker.proxy_port, broker.proxied_port).start()
    try:
        behind = topo.model_copy(update={"bootstrap_servers": f"127.0.0.1:{broker.proxy_port}"})
        a = procs("scheduler", "a", settings=behind)
        a.wait_running(topo.partitions)
        Publisher(topo).put_jobs(every_second_jobs(JOBS))
        b = procs("scheduler", "b", settings=topo)

        def split() -> bool:
            mine, theirs = (
                owned_partitions(a.log(), "schedules"),
                owned_partitions(b.log(), "schedules"),
            )
            return bool(mine) and bool(theirs) and len(mine | theirs) == topo.partitions

        wait_until(split, 60, "a and b share the partitions", alive=b)
        assert proxy.connections > 0, "a does not go through the proxy"
        since = next_second_us(1)
        time.sleep(3)
        rounds: list[dict[str, Any]] = []
        for cut_s in cuts_s:
            if not split():  # a previous round's rebalance still settling
                wait_until(split, 90, "a and b share the partitions again", alive=b)
            mark = len(a.log())
            proxy.block()
            cut_at = time.monotonic()
            wait_until(
                lambda: len(owned_partitions(b.log(), "schedules")) == topo.partitions,
                90,
                "b takes a's partitions over",
                alive=b,
            )
            takeover_s = time.monotonic() - cut_at
            time.sleep(max(0.0, cut_s - (time.monotonic() - cut_at)))
            proxy.unblock()
            healed_at = time.monotonic()
            how = wait_until(
                lambda m=mark, p=a: fenced_or_gone(p, m), 90, "a notices the partition"
            )

            def settled(m: int = mark, p: FaultProcess = a) -> str | None:
                if owned_partitions(p.log()[m:], "schedules"):
                    return "rejoined"
                return None if p.alive() else "exited"

            outcome = wait_until(settled, 120, "a rejoins (runs partitions again) or exits")
            rejoin_s = round(time.monotonic() - healed_at, 1)
            code = a.wait_exit(5) if outcome == "exited" else None
            rounds.append(
                {
                    "cut_s": round(healed_at - cut_at, 1),
                    "takeover_s": round(takeover_s, 1),
                    "a_noticed_by": how,
                    "outcome": outcome,
                    "settled_after_heal_s": rejoin_s,
                    "a_exit": code,
                }
            )
            if code is not None:
                assert "Traceback" not in a.this_log(), a.this_log()[-3000:]
                a = procs("scheduler", "a", settings=behind)  # restarted, as a supervisor would
                a.wait_running(1)
        resumed = now_us()
        wait_until(lambda: now_us() > resumed + 4_000_000, 10, "4 s of steady running")
        until = next_second_us(-2)
        assert b.stop() == 0
        assert a.stop() == 0
        checked = check_every_instant_once(topo, JOBS, since, until)
        aborted = sum(n - 1 for n in uncommitted_run_ids(topo).values() if n > 1)
        return {"rounds": rounds, "aborted_duplicates": aborted, **checked}
    finally:
        proxy.close()


@pytest.mark.slow
def test_a_partitioned_scheduler_is_fenced_and_nothing_is_lost(
    own_topo: Settings, own_broker: ProxiedBroker, procs: SpawnFault
) -> None:
    """CI: one partition of 15 s (the session timeout is 6 s)."""
    figures = partitions(own_topo, own_broker, procs, [15.0])
    report("network partition scheduler/broker", **figures)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_partitions_of_several_lengths_in_a_row(
    own_topo: Settings, own_broker: ProxiedBroker, procs: SpawnFault
) -> None:
    """Partitions just past the session timeout, past the transaction timeout (10 s), and
    past librdkafka's request timeouts (30 s+)."""
    figures = partitions(own_topo, own_broker, procs, [8.0, 15.0, 40.0])
    report("network partition x3 (8, 15, 40 s)", **figures)
