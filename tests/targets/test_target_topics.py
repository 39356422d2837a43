"""TargetTopics: target topics' metadata asked on a thread of its own, never on the caller's."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from schedulerstream.clock import ManualClock
from schedulerstream.kafka import clients
from schedulerstream.settings import Settings
from schedulerstream.targets import kafka as kafka_target
from schedulerstream.targets.kafka import TargetTopics, admin_lookup
from tests.support.waits import wait_until

MISSING = "Kafka target topic {!r} cannot be written: no such topic"


class SlowCluster:
    """A lookup that answers only when let go, recording each call's topics."""

    def __init__(self, missing: set[str]) -> None:
        self.missing = missing
        self.calls: list[list[str]] = []
        self.go = threading.Event()

    def __call__(self, topics: Collection[str]) -> dict[str, str | None]:
        self.calls.append(sorted(topics))
        self.go.wait(10)
        return {t: MISSING.format(t) if t in self.missing else None for t in topics}


def soon(predicate: Callable[[], object]) -> None:
    wait_until(predicate, 5.0, "the lookup thread's answer", every=0.005)


def test_the_caller_never_waits_for_the_cluster_and_the_answers_come_in_one_lookup() -> None:
    cluster = SlowCluster({"gone"})
    topics = TargetTopics(cluster, ManualClock(1_000_000))
    try:
        started = time.monotonic()
        assert topics.known("orders") is False
        soon(lambda: len(cluster.calls) == 1)  # the thread is on "orders", held
        assert [topics.known(t) for t in ("gone", "billing", "orders")] == [False] * 3
        assert time.monotonic() - started < 0.5, "known() waited for the lookup"
        cluster.go.set()
        soon(lambda: topics.known("gone") and topics.known("billing"))
        # what was asked while the first lookup ran came in one more lookup, not one each
        assert cluster.calls == [["orders"], ["billing", "gone"]]
        assert topics.problem("orders") is None
        assert topics.problem("gone") == MISSING.format("gone")
    finally:
        cluster.go.set()
        topics.close()


def test_an_answer_is_asked_again_before_it_is_old_and_an_old_one_is_not_used() -> None:
    cluster = SlowCluster({"gone"})
    cluster.go.set()
    clock = ManualClock(1_000_000)
    topics = TargetTopics(cluster, clock, known_s=60.0, missing_s=1.0)
    try:
        topics.known("orders"), topics.known("gone")
        soon(lambda: topics.known("orders") and topics.known("gone"))
        asked = len(cluster.calls)
        cluster.go.clear()
        clock.advance(0.9)  # four fifths of the missing topic's second: asked again, still used
        assert topics.known("gone") and topics.problem("gone") == MISSING.format("gone")
        assert topics.known("orders")
        soon(lambda: len(cluster.calls) == asked + 1)
        assert cluster.calls[-1] == ["gone"]
        cluster.missing.clear()  # created meanwhile
        cluster.go.set()
        soon(lambda: topics.problem("gone") is None)
        clock.advance(61.0)  # every answer is old now: not used until a new one is in
        assert topics.known("orders") is False
        soon(lambda: topics.known("orders"))
    finally:
        cluster.go.set()
        topics.close()


def test_a_refusal_stands_over_an_answer_asked_before_it() -> None:
    cluster = SlowCluster(set())
    clock = ManualClock(1_000_000)
    topics = TargetTopics(cluster, clock, known_s=60.0, missing_s=1.0)
    try:
        topics.known("orders")
        soon(lambda: len(cluster.calls) == 1)  # the lookup is under way: "it exists"
        topics.refused("orders", "UNKNOWN_TOPIC_OR_PART")  # deleted meanwhile
        cluster.go.set()
        topics.known("billing")  # asked after it: answered once the first answer is in
        soon(lambda: topics.known("billing"))
        assert topics.known("orders")
        assert topics.problem("orders") == "UNKNOWN_TOPIC_OR_PART"
        clock.advance(1.0)  # a second later it is asked again
        assert topics.known("orders") is False
        soon(lambda: topics.known("orders") and topics.problem("orders") is None)
    finally:
        cluster.go.set()
        topics.close()


def test_a_lookup_that_raises_leaves_the_produce_to_decide_for_a_second() -> None:
    calls: list[list[str]] = []

    def broken(asked: Collection[str]) -> dict[str, str | None]:
        calls.append(sorted(asked))
        raise RuntimeError("the cluster did not answer")

    clock = ManualClock(1_000_000)
    topics = TargetTopics(broken, clock, missing_s=1.0, known_s=60.0)
    try:
        topics.known("orders")
        soon(lambda: topics.known("orders"))
        assert topics.problem("orders") is None
        clock.advance(1.0)
        assert topics.known("orders") is False
        soon(lambda: len(calls) == 2)
    finally:
        topics.close()


@pytest.mark.kafka
def test_the_admin_lookup_names_a_missing_topic_alone_or_among_several(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    admin = AdminClient(clients.base_config(kafka_settings))
    there = kafka_settings.topic("there")
    admin.create_topics([NewTopic(there, 1, 1)])[there].result(30)
    missing = kafka_settings.topic("not-there")
    lookup = admin_lookup(admin)
    wait_until(lambda: lookup([there]) == {there: None}, 30, "the new topic's metadata")
    assert lookup([missing]) == {missing: MISSING.format(missing)}
    assert lookup([there, missing]) == {there: None, missing: MISSING.format(missing)}


def test_a_size_refused_is_remembered_for_records_as_large_until_it_is_old() -> None:
    clock = ManualClock(1_000_000)
    topics = TargetTopics(SlowCluster(set()), clock, known_s=60.0)
    try:
        why = "topic 'orders' refused the record: MSG_SIZE_TOO_LARGE: Broker: too large"
        topics.refused_size("orders", 4_000, why)
        assert topics.too_large("orders", 3_999) is None
        assert topics.too_large("billing", 9_000) is None  # another topic: its own limit
        said = topics.too_large("orders", 5_000)
        assert said is not None and why in said and "4,000" in said and "5,000" in said
        topics.refused_size("orders", 3_000, why)  # a smaller one refused: the bound drops
        assert topics.too_large("orders", 3_500) is not None
        topics.refused_size("orders", 3_800, why)  # a larger one does not raise it again
        assert topics.too_large("orders", 3_500) is not None
        assert topics.problem("orders") is None  # the topic itself is fine
        clock.advance(61.0)  # the topic's limit may have been raised meanwhile
        assert topics.too_large("orders", 5_000) is None
    finally:
        topics.close()


def test_topics_long_out_of_use_are_forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tenant naming a new topic in every run must not grow the answers kept for ever: at
    most about twice the topics in use are remembered."""
    monkeypatch.setattr(kafka_target, "PRUNE_AT", 100)
    cluster = SlowCluster({f"gone-{i}" for i in range(150)})
    cluster.go.set()
    clock = ManualClock(1_000_000)
    topics = TargetTopics(cluster, clock, known_s=60.0, missing_s=1.0)
    named = ["orders", *(f"gone-{i}" for i in range(150)), *(f"new-{i}" for i in range(150))]
    try:
        for topic in named:
            topics.known(topic)
        soon(lambda: all(topics.known(t) for t in named))
        topics.refused("gone-0", "UNKNOWN_TOPIC_OR_PART")
        topics.refused_size("new-0", 4_000, "MSG_SIZE_TOO_LARGE")
        assert topics.tracked == len(named)
        clock.advance(110.0)
        assert topics.known("orders") is False  # still in use: asked again
        soon(lambda: topics.known("orders"))
        clock.advance(11.0)  # every other answer went out of use over a known_s ago
        fresh = [f"fresh-{i}" for i in range(400)]  # past twice the topics of the last look
        for topic in fresh:
            topics.known(topic)
        soon(lambda: all(topics.known(t) for t in fresh))
        topics.known("last")  # the next topic asked for finds twice as many as at the last look
        # "orders", the fresh ones and maybe "last" (its answer may be in already)
        assert topics.tracked <= 2 + len(fresh), topics.tracked
        assert topics.known("orders") and topics.problem("orders") is None
        assert topics.known("gone-0") is False  # forgotten: asked again, answered again
        soon(lambda: topics.problem("gone-0") == MISSING.format("gone-0"))
        assert topics.too_large("new-0", 5_000) is None
    finally:
        topics.close()
