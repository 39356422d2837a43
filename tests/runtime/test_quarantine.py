"""Failure domains without a broker: which refusals are charged to which origin, how long a
quarantined origin is taken out, and the per-record size rules."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from schedulerstream.errors import ValidationError
from schedulerstream.limits import RecordLimits
from schedulerstream.runtime.charges import Charges
from schedulerstream.runtime.context import OutRecord
from schedulerstream.runtime.quarantine import Quarantine, Refusal, culprits, refusal
from schedulerstream.runtime.transaction import TransactionFailed

OWNED = frozenset({"cron.runs", "cron.attempts"})
SIZE = KafkaError.MSG_SIZE_TOO_LARGE
UNKNOWN = KafkaError.UNKNOWN_TOPIC_OR_PART


class Reported:
    """The message of a delivery report."""

    def __init__(self, topic: str, partition: int, size: int) -> None:
        self._topic, self._partition, self._size = topic, partition, size

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def key(self) -> bytes:
        return b"k"

    def value(self) -> bytes:
        return b"v" * self._size


def test_a_size_error_is_the_records_on_any_topic_a_missing_topic_only_on_foreign_ones() -> None:
    too_big = KafkaError(SIZE, "Message size too large")
    gone = KafkaError(UNKNOWN, "Unknown topic or partition")
    assert "MSG_SIZE_TOO_LARGE" in (refusal(too_big, "cron.runs", OWNED) or "")
    assert refusal(gone, "cron.runs", OWNED) is None  # our own topic gone: an outage
    assert "'orders'" in (refusal(gone, "orders", OWNED) or "")
    assert refusal(KafkaError(KafkaError._MSG_TIMED_OUT), "orders", OWNED) is None


def test_only_the_largest_record_of_a_batch_is_blamed_for_its_size() -> None:
    def r(origin: str, size: int, partition: int = 0, code: int = SIZE) -> Refusal:
        return Refusal(0, origin, "why", "cron.runs", partition, size, code)

    refused = [r("small", 100), r("huge", 1_200_000), r("other", 900, partition=1)]
    refused.append(Refusal(0, "target", "gone", "orders", 0, 10, UNKNOWN))
    blamed = {x.origin: x.reason for x in culprits(refused)}
    assert sorted(blamed) == ["huge", "other", "target"]
    # refused with another record, "huge" may fit alone: not known to be too large itself
    assert blamed["huge"] == "why (refused together with 1 other records)"
    assert blamed["other"] == "why"


def test_only_a_record_refused_alone_for_its_size_is_too_large_itself() -> None:
    too_big = refusal(KafkaError(SIZE, "Message size too large"), "orders", OWNED) or ""
    gone = refusal(KafkaError(UNKNOWN, "Unknown topic or partition"), "orders", OWNED) or ""
    assert too_big and gone
    refused = [Refusal(0, "alone", too_big, "orders", 0, 2_000_000, SIZE),
               Refusal(0, "big", too_big, "orders", 1, 1_500_000, SIZE),
               Refusal(0, "small", too_big, "orders", 1, 100, SIZE),
               Refusal(0, "lost", gone, "orders", 2, 100, UNKNOWN)]  # fmt: skip
    q = Quarantine()
    for r in culprits(refused):
        q.add(r.partition, r.origin, r.reason, "record_refused", r.code, r.batch)
    assert q.refused_for_size(0, "alone") and q.refused_for_size(0, "alone", alone=False)
    # refused with "small", "big" may fit on its own: its batch was too large
    assert not q.refused_for_size(0, "big") and q.refused_for_size(0, "big", alone=False)
    assert not q.refused_for_size(0, "lost", alone=False)  # its topic, not its size
    assert not q.refused_for_size(0, "small", alone=False)  # not charged at all
    # the same refusal reported late (its transaction already aborted) is its own size
    q.note(0, "late", too_big, SIZE)
    assert q.refused_for_size(0, "late")
    # the reason's wording has no part in it
    q.add(0, "worded", "refused the record: MSG_SIZE_TOO_LARGE: x", "record_refused", UNKNOWN)
    assert not q.refused_for_size(0, "worded", alone=False)


def test_a_quarantined_origin_is_taken_out_until_a_commit_holds_it() -> None:
    clock = [100.0]
    q = Quarantine(lambda: clock[0])
    q.add(3, "acme/job", "too large", "record_refused")
    assert q.reason(2, "acme/job") is None  # another partition's
    assert q.reason(3, "acme/job") == "too large"
    q.aborted()  # the replay that took it out was aborted: it is taken out again
    q.committed()
    assert q.reason(3, "acme/job") == "too large"
    q.committed()  # consulted in a committed transaction: settled
    assert q.reason(3, "acme/job") is None
    q.add(3, "never/asked", "gone", "record_refused")
    clock[0] += 601
    q.committed()
    assert q.reason(3, "never/asked") is None
    assert q.counts["record_refused"] == 2


def test_charges_blame_the_refused_record_and_a_topic_found_gone() -> None:
    q = Quarantine()
    missing = {"deleted"}
    charges = Charges(OWNED, q, lambda t: "gone" if t in missing else None)
    ok = charges.callback(0, "acme/a@1#1", "orders")
    bad = charges.callback(1, "acme/b@1#1", "deleted")
    charges.callback(1, "acme/c@1", "cron.runs")  # owned: never looked up
    ok(None, None)
    charges.start_flush()
    charges.check()  # nothing refused, not stalled yet
    assert charges.aborted() == "1 record(s) for a topic that is gone"
    assert q.reason(1, "acme/b@1#1") == "gone" and q.reason(0, "acme/a@1#1") is None
    del bad

    charges.callback(2, "acme/d@1#1", "orders")(KafkaError(UNKNOWN), Reported("orders", 0, 10))
    with pytest.raises(TransactionFailed, match="acme/d@1#1"):
        charges.check()
    assert q.reason(2, "acme/d@1#1") is not None


def test_a_report_served_after_its_transaction_aborted_is_charged_once_not_to_the_replay() -> None:
    """Two records of one job refused in a transaction; one report is served before the
    abort, the other only during the replay. The replay still takes the job out, once, and
    its own transaction does not fail for the old refusal."""
    q = Quarantine()
    charges = Charges(OWNED, q, lambda t: None)
    first = charges.callback(1, "acme/huge", "cron.runs")
    second = charges.callback(1, "acme/huge", "cron.runs")
    first(KafkaError(SIZE), Reported("cron.runs", 1, 600_000))
    assert "acme/huge" in charges.aborted()  # charged: the replay takes it out
    q.aborted()
    huge = Reported("cron.runs", 1, 600_000)
    second(KafkaError(SIZE), huge)  # served late, while the replay runs
    charges.start_flush()
    charges.check()  # the replay's own records were all accepted: it commits
    assert q.failures(1, "acme/huge") == 1  # not "refused twice" (its records kept)
    assert q.reason(1, "acme/huge") is not None

    late = Quarantine()  # a report served only after the abort still takes its origin out
    charges = Charges(OWNED, late, lambda t: None)
    only = charges.callback(1, "acme/huge", "cron.runs")
    assert charges.aborted() == ""
    only(KafkaError(SIZE), Reported("cron.runs", 1, 600_000))
    charges.check()
    assert late.reason(1, "acme/huge") is not None and late.failures(1, "acme/huge") == 1


def test_any_other_failed_report_of_the_open_transaction_ends_its_flush_at_once() -> None:
    """A sequence gap or a purge fails no origin but dooms the transaction: ``check`` raises
    at once instead of letting the flush wait out the records librdkafka no longer sends. A
    report of an earlier, aborted transaction does not doom the open one."""
    charges = Charges(OWNED, Quarantine(), lambda t: None)
    stale = charges.plain_callback()
    stale_run = charges.callback(1, "acme/old", "cron.runs")
    charges.aborted()  # a new transaction opens
    stale(KafkaError(KafkaError._PURGE_QUEUE), Reported("cron.rejected", 0, 10))
    stale_run(KafkaError(KafkaError._PURGE_QUEUE), Reported("cron.runs", 1, 10))
    charges.start_flush()
    charges.check()  # nothing of this transaction failed
    run = charges.callback(2, "acme/ok", "cron.runs")
    gap = KafkaError(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, "skipped sequence numbers")
    run(gap, Reported("cron.runs", 2, 100))
    with pytest.raises(TransactionFailed) as failed:
        charges.check()
    assert "cron.runs" in failed.value.reason and "sequence" in failed.value.reason
    assert charges.aborted() == ""  # no origin is blamed for it
    charges.start_flush()
    charges.check()  # the replay starts clean


def test_a_record_the_broker_refused_for_itself_leaves_a_sequence_gap() -> None:
    """Its sequence number is spent: the committer then starts a fresh producer (epoch), or
    the replay's records for that partition would fail as out of order."""
    charges = Charges(OWNED, Quarantine(), lambda t: None)
    charges.callback(0, "acme/gone", "orders")(KafkaError(UNKNOWN), Reported("orders", 0, 10))
    assert not charges.sequence_gap  # a topic that is gone gets no more records
    charges.callback(1, "acme/huge", "cron.runs")(KafkaError(SIZE), Reported("cron.runs", 1, 9))
    assert charges.sequence_gap
    plain = Charges(OWNED, Quarantine(), lambda t: None)  # a record with no origin, too
    plain.plain_callback()(KafkaError(SIZE), Reported("cron.rejected", 0, 9))
    assert plain.sequence_gap


def test_a_record_refused_at_produce_is_charged_only_for_its_own_fault() -> None:
    q = Quarantine()
    charges = Charges(OWNED, q, lambda t: None)
    out = OutRecord("orders", b"k", b"v", None, None, "acme/e@1#2")
    unknown = KafkaException(KafkaError(KafkaError._UNKNOWN_TOPIC))
    assert charges.refused_at_produce(0, out, unknown)
    state = KafkaException(KafkaError(KafkaError._STATE))
    assert not charges.refused_at_produce(0, out, state)
    assert "acme/e@1#2" in charges.aborted()


def test_record_limits_name_the_field_and_the_setting() -> None:
    limits = RecordLimits(max_payload_bytes=1000, max_record_bytes=100_000)
    limits.check("a/b", 5000, 1000)
    with pytest.raises(ValidationError) as payload:
        limits.check("a/b", 5000, 1001)
    assert payload.value.field == "payload" and "1,000" in payload.value.message
    assert "SCHEDULERSTREAM_MAX_PAYLOAD_BYTES" in payload.value.message
    with pytest.raises(ValidationError) as whole:
        limits.check("a/b", 60_000, 10)
    assert whole.value.field == "definition" and "SCHEDULERSTREAM_MAX_RECORD_BYTES" in str(
        whole.value
    )
    # the defaults let a payload at the limit through with the rest of a definition
    RecordLimits().check("a/b", 262_144 + 8_000, 262_144)
