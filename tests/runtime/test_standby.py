"""Standby tasks and fast takeover: the counter app in two processes, one killed with -9."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest

from schedulerstream.runtime.membership import choose_standbys, departed_owners
from schedulerstream.settings import Settings
from tests.runtime.rt_helpers import (
    App,
    assert_exactly_once,
    counts,
    keyed,
    produce,
    wait_for,
)

RESTORED = re.compile(r"task (\d+) running: restored (\d+) records \((warm|cold)\)")


def test_each_partition_gets_its_replicas_other_than_its_owner() -> None:
    owners = {"a": frozenset({0, 1, 2}), "b": frozenset({3, 4, 5}), "c": frozenset({6, 7})}
    for replicas in (1, 2):
        chosen = {member: choose_standbys(member, owners, replicas) for member in owners}
        for partition in range(8):
            holders = [m for m, parts in chosen.items() if partition in parts]
            owner = next(m for m, parts in owners.items() if partition in parts)
            assert len(holders) == replicas and owner not in holders
    assert choose_standbys("a", owners, 0) == set()
    assert choose_standbys("z", owners, 1) == set()  # not (yet) a member
    # with two members each keeps the other's partitions
    pair = {"a": frozenset({0, 1}), "b": frozenset({2, 3})}
    assert choose_standbys("a", pair, 1) == {2, 3}
    assert choose_standbys("b", pair, 5) == {0, 1}


def test_a_departed_owner_is_named_only_for_the_partitions_it_held() -> None:
    departed = {"x": frozenset({1, 2}), "y": frozenset({5})}
    assert departed_owners(departed, {2, 3}) == {"x"}
    assert departed_owners(departed, {3}) == set()


@pytest.mark.kafka
def test_a_standby_takes_over_warm_after_kill_9(counter_settings: Settings, tmp_path: Path) -> None:
    s = counter_settings
    a = App(s, tmp_path, "a")
    b = None
    try:
        wait_for(lambda: len(a.running()) == 4, 30, "a runs all")
        b = App(s, tmp_path, "b")
        wait_for(lambda: len(a.running()) == 2 and len(b.running()) == 2, 30, "split 2/2")
        produce(s, "in", keyed(40, 25))
        wait_for(lambda: len(counts(s)) >= 1000, 60, "first 1000 outputs")
        mine = set(a.running())
        b_log = b  # narrowed for the lambdas
        wait_for(
            lambda: all(f"standby {p} caught up" in b_log.log_text() for p in mine), 30,
            "b's standbys of a's partitions caught up",
        )  # fmt: skip
        before = len(RESTORED.findall(b.log_text()))
        killed = time.monotonic()
        a.kill()
        wait_for(lambda: len(b_log.running()) == 4, 60, "b takes over")
        takeover_s = time.monotonic() - killed
        taken = RESTORED.findall(b.log_text())[before:]
        assert {int(p) for p, _, _ in taken} == mine
        for _, records, kind in taken:
            assert kind == "warm" and int(records) < 50, taken  # only the tail, never the log
        # detection (2 s session) + assignment + tail restore; generous for a loaded CI box
        assert takeover_s < 15, f"takeover took {takeover_s:.1f} s"
        print(f"takeover after kill -9 with a warm standby: {takeover_s:.2f} s, restored {taken}")
        produce(s, "in", keyed(40, 25))  # b continues from the standby's counts
        wait_for(lambda: len(counts(s)) == 2000, 60, "all outputs")
        assert_exactly_once(s, {f"k{k:03d}".encode(): 50 for k in range(40)})
    finally:
        a.kill()
        if b is not None:
            assert b.stop() == 0


@pytest.mark.kafka
def following(log: str, partition: int) -> bool:
    """The member of ``log`` keeps a caught-up standby of ``partition``: it reported one since
    it last ran the partition itself (the reassignment after a departure may hand it a
    partition whose standby it held all along, caught up before the departure)."""
    caught = log.rfind(f"standby {partition} caught up")
    return caught >= 0 and caught > log.rfind(f"task {partition} running")


def test_a_stopped_standby_is_replaced_by_a_live_one(
    counter_settings: Settings, tmp_path: Path
) -> None:
    """Three members, one standby per partition. The holder of the standby of one of a's
    partitions is SIGSTOPped: it leaves the group, so the live member becomes that partition's
    standby and catches up; a then dies, and the partition goes warm to the live member, never
    to the stale copy."""
    s = counter_settings
    apps = {name: App(s, tmp_path, name) for name in ("a", "b", "c")}
    stopped: App | None = None
    try:
        wait_for(lambda: sorted(p for x in apps.values() for p in x.running()) == [0, 1, 2, 3],
                 60, "three members share the four partitions")  # fmt: skip
        wait_for(lambda: all(x.running() for x in apps.values()), 60, "each runs a partition")
        owners = {
            f"{s.topic_prefix}counter-{name}": frozenset(app.running())
            for name, app in apps.items()
        }
        partition = min(apps["a"].running())
        holder = next(
            name for name in ("b", "c")
            if partition in choose_standbys(f"{s.topic_prefix}counter-{name}", owners, 1)
        )  # fmt: skip
        live = "c" if holder == "b" else "b"
        produce(s, "in", keyed(20, 10))
        wait_for(lambda: len(counts(s)) >= 200, 60, "first outputs")
        stopped = apps[holder]
        live_app = apps[live]
        os.kill(stopped.proc.pid, signal.SIGSTOP)
        # reassigning the stopped member's partitions, the broker may move a's as well
        wait_for(lambda: sorted([*apps["a"].running(), *live_app.running()]) == [0, 1, 2, 3],
                 60, f"a and {live} run the four partitions once {holder} left")  # fmt: skip
        partition = min(apps["a"].running())
        wait_for(lambda: following(live_app.log_text(), partition), 60,
                 f"{live} follows partition {partition} once {holder} left")  # fmt: skip
        produce(s, "in", keyed(20, 10))  # the stopped copy falls behind, the live one follows
        wait_for(lambda: len(counts(s)) >= 400, 60, "more outputs")
        before = len(RESTORED.findall(live_app.log_text()))
        apps["a"].kill()
        wait_for(lambda: partition in live_app.running(), 60, f"{live} takes {partition} over")
        taken = {int(p): (int(n), kind) for p, n, kind in
                 RESTORED.findall(live_app.log_text())[before:]}  # fmt: skip
        records, kind = taken[partition]
        assert kind == "warm" and records < 50, taken
        os.kill(stopped.proc.pid, signal.SIGCONT)
        stopped = None
        produce(s, "in", keyed(20, 10))
        wait_for(lambda: len(counts(s)) == 600, 60, "all outputs")
        assert_exactly_once(s, {f"k{k:03d}".encode(): 30 for k in range(20)})
    finally:
        if stopped is not None:
            os.kill(stopped.proc.pid, signal.SIGCONT)
        for app in apps.values():
            app.kill()
