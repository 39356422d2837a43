"""Charges: which origin each record of the open transaction belongs to, and which of them
the broker refused, so a failed transaction is charged to those origins alone (§8).

Three ways a record fails on its own: the client refuses it at ``produce`` (its topic is
known to be gone), the broker refuses it in its delivery report (size, topic), or the whole
transaction fails or stalls on it (the coordinator cannot add a partition of a topic deleted
a moment ago). The last leaves no delivery report to read, so while a flush waits the
topics of the transaction's foreign records (topics the topology does not own: a job's Kafka
target) are looked up, and a missing one ends the wait at once.

Any other failed delivery report of the open transaction (a sequence gap after an earlier
refusal, a purge: librdkafka's "abortable error") dooms the whole transaction, while records
it no longer sends may wait out ``message.timeout.ms``: ``check`` ends the flush at once.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from schedulerstream.runtime.context import OutRecord
from schedulerstream.runtime.quarantine import (
    RECORD_CODES,
    Quarantine,
    Refusal,
    culprits,
    refusal,
)
from schedulerstream.runtime.transaction import DeliveryCallback, Failure, TransactionFailed

log = logging.getLogger(__name__)
TopicLookup = Callable[[str], str | None]  # topic → why it cannot be written (None: it can)
STALL_S = 0.15  # a flush waiting this long looks for a missing foreign topic


class Charges:
    """One per processor; ``start_flush``/``check`` bracket step (2) of a commit."""

    def __init__(self, owned: frozenset[str], quarantine: Quarantine, lookup: TopicLookup) -> None:
        self.owned = owned
        self.quarantine = quarantine
        self._lookup = lookup
        self._refusals: list[Refusal] = []
        self._foreign: list[tuple[int, str, str]] = []  # (partition, origin, topic)
        self._charged = False  # this transaction's failure was charged to origins
        self._transaction = 0  # which transaction a delivery report belongs to
        self._flush_started = 0.0
        self._looked = False
        self._doomed = ""  # why the open transaction cannot commit (a failed delivery)
        # the broker refused a record of a partition that stays in use: its sequence number
        # is spent, so the next transaction's records there fail as out of order
        self.sequence_gap = False

    def callback(self, partition: int, origin: str, topic: str) -> DeliveryCallback:
        """The delivery callback of one record of ``origin``."""
        if topic not in self.owned:
            self._foreign.append((partition, origin, topic))
        return functools.partial(self._delivered, self._transaction, partition, origin)

    def plain_callback(self) -> DeliveryCallback:
        """The delivery callback of a record charged to no origin (the rejected topic)."""
        return functools.partial(self._delivered_plain, self._transaction)

    def refused_at_produce(self, partition: int, output: OutRecord, exc: KafkaException) -> bool:
        """``produce`` raised for ``output``: True when that is its own fault (charged)."""
        err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        if err is None or output.origin is None:
            return False
        reason = refusal(err, output.topic, self.owned)
        if reason is None:
            return False
        self._refusals.append(Refusal(partition, output.origin, reason, output.topic, -1,
                                      output.size(), err.code()))  # fmt: skip
        return True

    def start_flush(self) -> None:
        self._flush_started = time.monotonic()
        self._looked = False

    def failing(self) -> bool:
        """Is the open transaction known to fail (a record refused or not delivered)? Unlike
        ``check``, charges nothing."""
        return bool(self._refusals or self._doomed)

    def check(self) -> None:
        """Raise ``TransactionFailed`` as soon as this transaction is known to fail because
        of some records: refused ones, or ones for a topic that is gone (looked up once, after
        the flush has waited ``STALL_S``). Their origins are quarantined first."""
        charged = self._charge_refusals()
        if charged:
            raise TransactionFailed(Failure.ABORTABLE, charged)
        if self._doomed:
            raise TransactionFailed(Failure.ABORTABLE, self._doomed)
        stalled = time.monotonic() - self._flush_started > STALL_S
        if self._foreign and stalled and not self._looked:
            self._looked = True
            if self._charge_missing_topics():
                raise TransactionFailed(
                    Failure.ABORTABLE, "records for a topic that is gone, taken out on replay"
                )

    def aborted(self) -> str:
        """The transaction is being aborted (its delivery reports served): charge what was
        refused, else the records whose topic is gone now (the coordinator's refusal to add
        a partition names no record). Returns what was charged ('' if nothing)."""
        charged = self._charge_refusals()
        if self._foreign and not self._charged and not self._looked:
            count = self._charge_missing_topics()
            charged = f"{count} record(s) for a topic that is gone" if count else ""
        self._clear()
        return charged

    def _charge_refusals(self) -> str:
        """Quarantine the culprits among the refused records; what happened, or ''."""
        if not self._refusals:
            return ""
        refusals, self._refusals = self._refusals, []
        blamed = culprits(refusals)
        for r in blamed:
            self.quarantine.add(r.partition, r.origin, r.reason, "record_refused", r.code,
                                r.batch)  # fmt: skip
        self._charged = True
        first = blamed[0]
        return (
            f"{len(refusals)} record(s) refused, {len(blamed)} taken out on replay: "
            f"{first.origin}: {first.reason}"
        )

    def committed(self) -> None:
        self._clear()

    def _clear(self) -> None:
        self._refusals.clear()
        self._foreign.clear()
        self._charged = False
        self._doomed = ""
        self._transaction += 1

    def _delivered(self, transaction: int, partition: int, origin: str, err: Any,
                   msg: Any) -> None:  # fmt: skip
        if err is None:
            return
        reason = refusal(err, msg.topic(), self.owned)
        if reason is not None and err.code() in RECORD_CODES:
            self.sequence_gap = True
        if reason is not None and transaction != self._transaction:
            # a report of an aborted transaction, served after its abort: the replay takes
            # the origin out, but the refusal neither fails the open transaction nor counts
            # as a second one (which would drop the origin's own records, see ``produce``)
            self.quarantine.note(partition, origin, reason, err.code())
        elif reason is not None:
            size = len(msg.key() or b"") + len(msg.value() or b"")
            self._refusals.append(Refusal(partition, origin, reason, msg.topic(),
                                          msg.partition(), size, err.code()))  # fmt: skip
        elif transaction == self._transaction:
            self.doomed(err, msg.topic())

    def _delivered_plain(self, transaction: int, err: Any, msg: Any) -> None:
        if err is None:
            return
        if refusal(err, msg.topic(), self.owned) is not None:
            log.warning("a record for %s with no origin was refused: %s", msg.topic(), err)
            self.sequence_gap = self.sequence_gap or err.code() in RECORD_CODES
        if transaction == self._transaction:
            self.doomed(err, msg.topic())

    def doomed(self, err: Any, topic: str) -> None:
        """A record of the open transaction was not delivered, for no fault of its own:
        the transaction cannot commit (``check`` ends its flush)."""
        if not self._doomed:
            self._doomed = f"a record for {topic} was not delivered: {err}"

    def _charge_missing_topics(self) -> int:
        missing: dict[str, str] = {}
        for topic in {t for _, _, t in self._foreign}:
            problem = self._lookup(topic)
            if problem is not None:
                missing[topic] = problem
        charged = 0
        for partition, origin, topic in self._foreign:
            if topic in missing:
                self.quarantine.add(partition, origin, missing[topic], "record_refused")
                charged += 1
        self._charged = self._charged or charged > 0
        return charged


def admin_lookup(admin_factory: Callable[[], Any], timeout_s: float = 2.0) -> TopicLookup:
    """A lookup asking the cluster (an AdminClient made on first use) for one topic."""
    made: list[Any] = []

    def lookup(topic: str) -> str | None:
        if not made:
            made.append(admin_factory())
        try:
            found = made[0].list_topics(topic=topic, timeout=timeout_s).topics.get(topic)
        except KafkaException as exc:  # the cluster did not answer: nothing to charge
            log.warning("cannot look up topic %r: %s", topic, exc)
            return None
        if found is None:
            return f"topic {topic!r} cannot be written: no such topic"
        if found.error is not None:
            return f"topic {topic!r} cannot be written: {found.error.str()}"
        if not found.partitions:
            return f"topic {topic!r} cannot be written: it has no partitions"
        return None

    return lookup
