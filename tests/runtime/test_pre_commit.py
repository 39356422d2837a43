"""The runtime's ``pre_commit`` hook against the real broker: it runs before the Kafka commit,
its records join the transaction, and a failure aborts the transaction and replays the input."""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest

from schedulerstream.runtime import Processor, TaskContext
from schedulerstream.settings import Settings
from tests.runtime.rt_helpers import (
    assert_exactly_once,
    committed_offsets,
    drive,
    end_offsets,
    keyed,
    produce,
    read_all,
)
from tests.runtime.runtime_counter_app import CounterTopology

pytestmark = pytest.mark.kafka


class Staging(CounterTopology):
    """A counter whose pre_commit writes a marker per call and fails on chosen calls."""

    def __init__(self, settings: Settings, fail: set[int], group: str) -> None:
        super().__init__(settings)
        self.fail = fail
        self.group = group
        self.calls = 0
        self.seen_committed: list[dict[int, int]] = []

    def pre_commit(self, contexts: Sequence[TaskContext]) -> None:
        self.calls += 1
        self.seen_committed.append(committed_offsets(self.settings, self.group, "in"))
        for ctx in contexts:
            ctx.produce(self.settings.topic("rejected"), b"marker", b"%d" % self.calls)
        if self.calls in self.fail:
            raise RuntimeError("the external write failed")


def test_a_failing_pre_commit_aborts_and_the_input_is_processed_again(
    counter_settings: Settings,
) -> None:
    s = counter_settings
    produce(s, "in", keyed(10, 3))
    group = f"{s.topic_prefix}counter"
    topology = Staging(s, fail={1}, group=group)
    proc = Processor(s, topology)
    proc.start()
    try:
        drive([proc], lambda: proc.metrics["records_processed"] >= 30 and proc.commit() is False)
        drive([proc], lambda: committed_offsets(s, group, "in") == end_offsets(s, "in"))
    finally:
        proc.close()
    assert proc.metrics["aborts"] == 1
    assert proc.metrics["records_processed"] > 30  # the aborted batch was processed again
    assert_exactly_once(s, {f"k{k:03d}".encode(): 3 for k in range(10)})
    markers = {int(m.value()) for m in read_all(s, "rejected") if m.key() == b"marker"}
    assert 1 not in markers and markers  # the failed call's records were aborted with it
    # the first call ran before anything was committed: pre_commit precedes the Kafka commit
    assert all(offset < 0 for offset in topology.seen_committed[0].values())


class AfterCommit(Staging):
    """Records, for every after_commit, the committed input offsets it sees; asks for a
    commit at once from every record."""

    def __init__(self, settings: Settings, fail: set[int], group: str) -> None:
        super().__init__(settings, fail, group)
        self.after: list[dict[int, int]] = []

    def process(self, ctx: TaskContext, message: object) -> None:
        super().process(ctx, message)
        ctx.request_commit()

    def after_commit(self, validated: float) -> None:
        assert validated <= time.monotonic()
        self.after.append(committed_offsets(self.settings, self.group, "in"))


def test_after_commit_runs_only_after_a_successful_commit(counter_settings: Settings) -> None:
    """Side effects wait for their state (the dispatcher's HTTP sends): after_commit sees
    the offsets of its commit already committed, and an aborted commit calls it not at all."""
    s = counter_settings
    produce(s, "in", keyed(10, 3))
    group = f"{s.topic_prefix}counter"
    topology = AfterCommit(s, fail={1}, group=group)
    proc = Processor(s, topology)
    proc.start()
    try:
        drive([proc], lambda: committed_offsets(s, group, "in") == end_offsets(s, "in"))
    finally:
        proc.close()
    assert proc.metrics["aborts"] == 1
    assert len(topology.after) == proc.metrics["commits"] >= 1
    assert topology.after[-1] == end_offsets(s, "in")
    assert all(sum(seen.values()) > 0 for seen in topology.after)
