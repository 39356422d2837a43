"""``Committer.abort``'s choice, with a stand-in producer: abort, or abort briefly and make a
new producer because a refused record spent its sequence number (the real-broker cases are
in tests/isolation/test_tenants.py)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from schedulerstream.clock import SystemClock
from schedulerstream.errors import FencedError
from schedulerstream.runtime.committer import GAP_ABORT_S, Committer
from schedulerstream.runtime.transaction import Failure, TransactionFailed

SIZE = KafkaError.MSG_SIZE_TOO_LARGE
UNKNOWN = KafkaError.UNKNOWN_TOPIC_OR_PART


class Message:
    """The message of a delivery report."""

    def __init__(self, topic: str) -> None:
        self._topic = topic

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return 0

    def key(self) -> bytes:
        return b"k"

    def value(self) -> bytes:
        return b"v" * 2000


class Producer:
    """Records what the committer asks of its transactional producer."""

    def __init__(self, during_abort: Callable[[], None] | None = None) -> None:
        self.calls: list[Any] = []
        self.during_abort = during_abort  # delivery reports the abort's flush serves
        self.abort_fails = False
        self.recreate_fails = False

    def poll(self) -> None:
        self.calls.append("poll")

    def abort(self, timeout_s: float | None = None) -> None:
        self.calls.append(("abort", timeout_s))
        if self.during_abort is not None:
            self.during_abort()
        if self.abort_fails:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "abort timed out"))

    def recreate(self) -> None:
        self.calls.append("recreate")
        if self.recreate_fails:
            raise KafkaException(KafkaError(KafkaError._FENCED, "fenced"))


class Topology:
    changelog_topic = "t.state"
    owned_topics = ("t.runs",)


def committer(producer: Producer) -> Committer:
    return Committer(
        producer,  # type: ignore[arg-type]
        Topology(),  # type: ignore[arg-type]
        rejected_topic="t.rejected",
        group_id="g",
        max_record_bytes=1_000_000,
        metrics=defaultdict(float),
        lookup=lambda topic: None,
        clock=SystemClock(),
    )


def refuse(c: Committer, origin: str, topic: str, code: int) -> None:
    """The broker's delivery report of ``origin``'s record, refused with ``code``."""
    c.charges.callback(0, origin, topic)(KafkaError(code, "refused"), Message(topic))


def failed() -> TransactionFailed:
    return TransactionFailed(Failure.ABORTABLE, "a record was refused")


def test_a_record_refused_for_itself_gets_a_short_abort_then_a_new_producer() -> None:
    producer = Producer()
    c = committer(producer)
    refuse(c, "tenant-a/job@1", "t.runs", SIZE)
    c.abort(failed())
    assert producer.calls == ["poll", ("abort", GAP_ABORT_S), "recreate"]
    assert c.charges.sequence_gap is False  # the new producer has a new epoch
    assert c.metrics["producer_recreations"] == 1
    assert c.quarantine.reason(0, "tenant-a/job@1") is not None  # taken out of the replay


def test_a_refusal_the_abort_itself_serves_still_makes_a_new_producer() -> None:
    producer = Producer()
    c = committer(producer)
    producer.during_abort = lambda: refuse(c, "tenant-a/job@1", "t.runs", SIZE)
    c.abort(failed())
    assert producer.calls == ["poll", ("abort", None), "recreate"]
    assert c.charges.sequence_gap is False


def test_a_missing_target_topic_spends_no_sequence_number_so_the_producer_stays() -> None:
    producer = Producer()
    c = committer(producer)
    refuse(c, "tenant-a/job@1#1", "orders", UNKNOWN)
    c.abort(failed())
    assert producer.calls == ["poll", ("abort", None)]
    assert c.metrics["producer_recreations"] == 0


def test_an_abort_that_fails_is_followed_by_a_new_producer() -> None:
    producer = Producer()
    producer.abort_fails = True
    c = committer(producer)
    c.abort(failed())
    assert producer.calls == ["poll", ("abort", None), "recreate"]


def test_a_producer_that_cannot_be_made_again_is_fenced() -> None:
    producer = Producer()
    producer.recreate_fails = True
    c = committer(producer)
    refuse(c, "tenant-a/job@1", "t.runs", SIZE)
    with pytest.raises(FencedError, match="cannot recreate"):
        c.abort(failed())
    assert c.charges.sequence_gap is True  # not cleared: no new producer was made
