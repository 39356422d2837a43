"""The counter app in subprocesses: SIGTERM, kill -9, two members, a zombie."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from schedulerstream.settings import Settings
from tests.runtime.rt_helpers import (
    App,
    assert_exactly_once,
    changelog_counts,
    committed_offsets,
    counts,
    end_offsets,
    keyed,
    produce,
    read_all,
    wait_for,
)

pytestmark = pytest.mark.kafka

GROUP = "counter"


def expected(n_keys: int, per_key: int) -> dict[bytes, int]:
    return {f"k{k:03d}".encode(): per_key for k in range(n_keys)}


def test_sigterm_finishes_the_transaction_and_leaves(
    counter_settings: Settings, tmp_path: Path
) -> None:
    s = counter_settings
    app = App(s, tmp_path, "a")
    try:
        wait_for(lambda: len(app.running()) == 4, 30, "4 running tasks")
        produce(s, "in", keyed(10, 20))
        wait_for(lambda: len(counts(s)) >= 50, 30, "some outputs")
        assert app.stop() == 0
        assert '"exit": "clean"' in app.log_text()
        # whatever was processed is committed: offsets, outputs and changelog agree
        offsets = committed_offsets(s, s.topic(GROUP), "in")
        assert sum(offsets.values()) == len(counts(s))
        state = changelog_counts(s)
        for key, count in counts(s):
            assert count <= state[key]
    finally:
        app.kill()
    again = App(s, tmp_path, "a")  # resumes where it stopped, nothing twice
    try:
        # the first may have processed all 200: stop this one only once it runs (not mid-import)
        wait_for(lambda: len(again.running()) == 4, 30, "4 running tasks again")
        wait_for(lambda: len(counts(s)) == 200, 30, "all outputs")
        assert_exactly_once(s, expected(10, 20))
        assert committed_offsets(s, s.topic(GROUP), "in") == end_offsets(s, "in")
    finally:
        assert again.stop() == 0


def test_kill_9_mid_stream_then_restart_is_exactly_once(
    counter_settings: Settings, tmp_path: Path
) -> None:
    s = counter_settings
    produce(s, "in", keyed(40, 50))  # 2000 records, 2 ms each
    app = App(s, tmp_path, "a", delay_ms=2)
    wait_for(lambda: len(counts(s)) >= 300, 60, "outputs before the crash")
    app.kill()
    before = len(counts(s))
    assert before < 2000
    again = App(s, tmp_path, "a")
    try:
        wait_for(lambda: len(counts(s)) >= 2000, 60, "all outputs after restart")
        wait_for(
            lambda: committed_offsets(s, s.topic(GROUP), "in") == end_offsets(s, "in"),
            30,
            "every input committed",
        )
        assert_exactly_once(s, expected(40, 50))
        assert changelog_counts(s) == expected(40, 50)
        assert len(read_all(s, "out", committed=False)) > 2000 or before > 0
    finally:
        assert again.stop() == 0


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_two_members_split_then_one_leaves(
    counter_settings: Settings, tmp_path: Path, protocol: str
) -> None:
    s = counter_settings.model_copy(update={"group_protocol": protocol})
    a = App(s, tmp_path, "a")
    b = None
    try:
        wait_for(lambda: len(a.running()) == 4, 30, "a runs all")
        produce(s, "in", keyed(20, 10))
        b = App(s, tmp_path, "b")
        wait_for(lambda: len(a.running()) == 2 and len(b.running()) == 2, 30, "split 2/2")
        assert set(a.running()) | set(b.running()) == {0, 1, 2, 3}
        produce(s, "in", keyed(20, 10))
        wait_for(lambda: len(counts(s)) == 400, 30, "first 400 outputs")
        assert a.stop() == 0
        wait_for(lambda: len(b.running()) == 4, 30, "b takes over")
        produce(s, "in", keyed(20, 10))  # b continues from a's restored counts
        wait_for(lambda: len(counts(s)) == 600, 30, "all outputs")
        assert_exactly_once(s, expected(20, 30))
    finally:
        a.kill()
        if b is not None:
            assert b.stop() == 0


def zombie_outputs(s: Settings) -> int:
    """Committed outputs of member "a" before it first lost its partitions."""
    return sum(
        1
        for m in read_all(s, "out")
        if dict(m.headers())["by"] == b"a" and dict(m.headers())["life"] == b"0"
    )


def test_a_zombie_commits_nothing(counter_settings: Settings, tmp_path: Path) -> None:
    s = counter_settings
    a = App(s, tmp_path, "a", delay_ms=5)
    b = None
    try:
        wait_for(lambda: len(a.running()) == 4, 30, "a runs all")
        b = App(s, tmp_path, "b", delay_ms=5)
        wait_for(lambda: len(a.running()) == 2 and len(b.running()) == 2, 30, "split 2/2")
        produce(s, "in", keyed(30, 40))  # 1200 records at 5 ms: both busy for seconds
        wait_for(lambda: zombie_outputs(s) >= 50, 30, "a's outputs")
        os.kill(a.proc.pid, signal.SIGSTOP)  # mid-transaction, past its session timeout
        wait_for(lambda: len(b.running()) == 4, 40, "b takes over after a's session expires")
        by_a = zombie_outputs(s)  # b fenced a's transactional id: nothing of a's is pending
        os.kill(a.proc.pid, signal.SIGCONT)
        wait_for(lambda: len(counts(s)) >= 1200, 60, "all outputs")
        # its commit was refused: b fenced its transactional id on taking over (or, had that
        # failed, the group refused the stale member)
        log_says = ("fenced by a newer instance", "Unknown member")
        wait_for(lambda: any(m in a.log_text() for m in log_says), 30, "a's commit refused")
        # nothing the stopped member produced became visible (after losing its partitions
        # it may rejoin as a new member and legitimately take some back: life > 0)
        assert zombie_outputs(s) == by_a
        assert_exactly_once(s, expected(30, 40))
        assert changelog_counts(s) == expected(30, 40)
    finally:
        os.kill(a.proc.pid, signal.SIGCONT)
        a.kill()
        if b is not None:
            assert b.stop() == 0
