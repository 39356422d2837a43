"""Standby tasks and fast takeover: the counter app in two processes, one killed with -9."""

from __future__ import annotations

import re
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
