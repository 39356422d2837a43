"""Failure domains inside one transaction (DESIGN.md §8).

Every record a topology produces may name its ``origin``: the run, attempt or job it belongs
to. When the broker refuses one record for a reason of its own (its size, its topic missing or
not authorized), the transaction is aborted and replayed as always, but the origin is kept
here first, so the replay takes that one origin out (``TaskContext.failed``) — its attempt
fails or its job is quarantined with the reason — and everything else commits.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace

from confluent_kafka import KafkaError

log = logging.getLogger(__name__)

# The record itself is at fault, whatever its topic.
RECORD_CODES = frozenset(
    {
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.INVALID_MSG_SIZE,
        KafkaError.RECORD_LIST_TOO_LARGE,
        KafkaError.INVALID_RECORD,
        KafkaError.INVALID_TIMESTAMP,
        KafkaError.POLICY_VIOLATION,
    }
)
# Of those, the ones about its size: the same record (or a larger one) is refused again.
SIZE_CODES = frozenset({KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE})
# the broker checks a whole batch: a record refused with others may fit on its own
IN_A_BATCH = " (refused together with {} other records)"
# The record's topic is at fault: isolated only for topics the topology does not own (a job's
# Kafka target); for its own topics it is an outage of the pipeline, not of one run.
TOPIC_CODES = frozenset(
    {
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.UNKNOWN_TOPIC_ID,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.TOPIC_EXCEPTION,
        KafkaError.INVALID_REPLICATION_FACTOR,
    }
)
TTL_S = 600.0  # an origin never consulted again (its job deleted meanwhile) is forgotten
MAX_ENTRIES = 100_000


def refusal(err: KafkaError, topic: str, owned: frozenset[str]) -> str | None:
    """The reason when ``err`` belongs to one record of ``topic``, else None."""
    code = err.code()
    if code in RECORD_CODES or (code in TOPIC_CODES and topic not in owned):
        return f"topic {topic!r} refused the record: {err.name()}: {err.str()}"
    return None


@dataclass(frozen=True, slots=True)
class Refusal:
    """One record the broker refused: whose it was (task partition, origin) and why."""

    partition: int
    origin: str
    reason: str
    topic: str
    topic_partition: int
    size: int
    code: int
    batch: int = 1  # records of its topic partition refused with it, itself included


def culprits(refusals: list[Refusal]) -> list[Refusal]:
    """The refusals to charge to their origins. A missing or forbidden topic fails every
    record sent to it. A size error fails the whole batch the broker was sent, small records
    beside the large one included: only the largest record of each topic partition is
    charged (if another is too large too, the replay fails on it and charges it next), and
    when others were refused with it its reason says so (it may fit on its own)."""
    charged = [r for r in refusals if r.code not in RECORD_CODES]
    largest: dict[tuple[str, int], Refusal] = {}
    together: Counter[tuple[str, int]] = Counter()
    for r in refusals:
        if r.code in RECORD_CODES:
            where = (r.topic, r.topic_partition)
            together[where] += 1
            if where not in largest or r.size > largest[where].size:
                largest[where] = r
    for where, r in largest.items():
        if together[where] > 1:  # the batch was too large, perhaps not this record
            reason = r.reason + IN_A_BATCH.format(together[where] - 1)
            largest[where] = replace(r, reason=reason, batch=together[where])
    return charged + list(largest.values())


@dataclass(slots=True)
class Entry:
    reason: str
    since: float
    code: int | None = None  # the broker's error code, when the broker refused it
    batch: int = 1  # records refused with it in its topic partition, itself included
    failures: int = 1
    consulted: bool = False


class Quarantine:
    """Origins refused in this process, by partition, until a commit after they were taken
    out. ``counts`` holds the isolated failures by kind (exported as a metric)."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._entries: OrderedDict[tuple[int, str], Entry] = OrderedDict()  # oldest first
        self._monotonic = monotonic
        self.counts: Counter[str] = Counter()

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, partition: int, origin: str, reason: str, kind: str,
            code: int | None = None, batch: int = 1) -> None:  # fmt: skip
        """``origin`` of ``partition`` was refused for ``reason`` (by the broker with
        ``code``, in a batch of ``batch`` refused records)."""
        entry = self._entries.get((partition, origin))
        if entry is None:
            if len(self._entries) >= MAX_ENTRIES:
                self._entries.popitem(last=False)
            self._entries[(partition, origin)] = Entry(reason, self._monotonic(), code, batch)
        else:
            entry.failures += 1
            entry.reason, entry.code, entry.batch = reason, code, batch
        self.count(kind, f"partition {partition}, {origin}: {reason}")

    def note(self, partition: int, origin: str, reason: str, code: int | None = None) -> None:
        """A late report of a refusal in a transaction already aborted: taken out like one
        charged then, without counting again if it was."""
        if (partition, origin) not in self._entries:
            self.add(partition, origin, reason, "record_refused", code)

    def count(self, kind: str, detail: str) -> None:
        """One isolated failure: logged and counted."""
        self.counts[kind] += 1
        log.warning("isolated failure (%s): %s", kind, detail)

    def reason(self, partition: int, origin: str) -> str | None:
        """Why ``origin`` was refused (None: it was not); the caller takes it out now."""
        entry = self._entries.get((partition, origin))
        if entry is None:
            return None
        entry.consulted = True
        return entry.reason

    def refused_for_size(self, partition: int, origin: str, alone: bool = True) -> bool:
        """Did the broker refuse ``origin`` for size: its own (``alone``: no other record
        was refused with it), or its batch's?"""
        entry = self._entries.get((partition, origin))
        if entry is None or entry.code not in SIZE_CODES:
            return False
        return not alone or entry.batch == 1

    def failures(self, partition: int, origin: str) -> int:
        entry = self._entries.get((partition, origin))
        return 0 if entry is None else entry.failures

    def committed(self) -> None:
        """A commit succeeded: what was taken out is settled; stale entries go."""
        if not self._entries:
            return
        horizon = self._monotonic() - TTL_S
        for key, entry in list(self._entries.items()):
            if entry.consulted or entry.since < horizon:
                del self._entries[key]

    def aborted(self) -> None:
        """The open transaction was aborted: what it took out is replayed, so every origin
        is taken out again (until a commit holds it)."""
        for entry in self._entries.values():
            entry.consulted = False

    def forget(self, partition: int) -> None:
        """The partition moved away: its next owner learns of its refusals by itself."""
        for key in [k for k in self._entries if k[0] == partition]:
            del self._entries[key]
