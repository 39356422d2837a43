"""The Kafka target: a record for the dispatcher to produce inside its own transaction.

Producing to the job's topic in the transaction that records the attempt makes the delivery
exactly-once, so this module builds the record and sends nothing. ``TargetTopics`` says
before producing whether a target topic exists, so that a missing one fails that attempt
and not the transaction it would have joined (DESIGN.md §8); it asks the cluster on a
thread of its own.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection
from typing import Any

from confluent_kafka import KafkaError

from schedulerstream.clock import Clock, SystemClock
from schedulerstream.model import KafkaTarget as KafkaTargetConfig
from schedulerstream.targets.base import Delivery
from schedulerstream.targets.envelope import envelope_bytes

KafkaHeaders = list[tuple[str, bytes]]
UNKNOWN_TOPIC = KafkaError.UNKNOWN_TOPIC_OR_PART


def kafka_record(
    delivery: Delivery, target: KafkaTargetConfig, *, clock: Clock | None = None
) -> tuple[str, bytes, bytes, KafkaHeaders]:
    """``(topic, key, value, headers)``: key = the target's ``key``, else the run id."""
    timestamp = (clock or SystemClock()).now_us() // 1_000_000
    key = target.key if target.key is not None else delivery.run_id
    headers: KafkaHeaders = [
        ("webhook-id", delivery.run_id.encode()),
        ("webhook-timestamp", str(timestamp).encode()),
        ("content-type", b"application/json"),
    ]
    return target.topic, key.encode(), envelope_bytes(delivery), headers


log = logging.getLogger(__name__)
# topics → why each cannot be written (None: it can); raises when the cluster does not answer
Lookup = Callable[[Collection[str]], dict[str, str | None]]
PRUNE_AT = 4096  # topics remembered before the stale ones are forgotten (then twice the rest)


class TargetTopics:
    """Which target topics exist, from the cluster's metadata, asked on a thread of its own so
    the dispatcher's loop never waits on the cluster (a tenant with a thousand missing topics
    would otherwise stall every tenant's runs for the lookups).

    ``known`` says whether a current answer is in, asking for one if not; ``problem`` gives
    it. A topic seen is trusted for ``known_s``, a missing one (or one the cluster did not
    answer for) for ``missing_s``; an answer is asked for again when four fifths of that
    have passed, so a topic in use never goes unknown. A record the broker refuses anyway is
    ``refused``: the topic counts as unwritable for ``missing_s``, whatever a lookup already
    under way says. The topics waiting for an answer are asked together, in one request
    when there are several. A record refused for its size is ``refused_size``: records as
    large for that topic are ``too_large`` for ``known_s`` (the topic's limit may be raised
    meanwhile), so a job whose records never fit does not abort a transaction each run."""

    def __init__(
        self, lookup: Lookup, clock: Clock, known_s: float = 60.0, missing_s: float = 1.0
    ) -> None:
        self._lookup = lookup
        self._clock = clock
        self._known_us = round(known_s * 1e6)
        self._missing_us = round(missing_s * 1e6)
        # topic → (asked again from µs, trusted until µs, why it cannot be written)
        self._seen: dict[str, tuple[int, int, str | None]] = {}
        self._asked: set[str] = set()  # waiting for the lookup thread
        self._refusals: dict[str, int] = {}  # topic → refusals so far (a lookup's answer
        # from before the latest refusal is dropped)
        self._wake = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None
        # topic → (smallest size refused, until µs, why): the loop's own, not the thread's
        self._too_large: dict[str, tuple[int, int, str]] = {}
        self._prune_at = PRUNE_AT

    @property
    def tracked(self) -> int:
        """Topics remembered (answers, refusals and sizes): bounded by the topics in use, not
        by every topic a job ever named."""
        with self._wake:
            return len(self._seen.keys() | self._refusals.keys() | self._too_large.keys())

    def known(self, topic: str) -> bool:
        """Is a current answer for ``topic`` in? Asks for one when there is none or it is
        getting old."""
        cached = self._seen.get(topic)
        now = self._clock.now_us()
        if cached is None or cached[0] <= now:
            if len(self._seen) >= self._prune_at:
                self._prune(now)
            self._ask(topic)
        return cached is not None and cached[1] > now

    def _prune(self, now: int) -> None:
        """Forget the topics whose last answer went out of use a ``known_s`` ago and that no
        lookup is on (a tenant naming a new topic each run must not grow this for ever)."""
        stale = now - self._known_us
        with self._wake:
            for topic in [t for t, (_, until, _) in self._seen.items() if until <= stale]:
                if topic not in self._asked:
                    del self._seen[topic]
                    self._refusals.pop(topic, None)
            for topic in [t for t, (_, until, _) in self._too_large.items() if until <= now]:
                del self._too_large[topic]
            self._prune_at = max(PRUNE_AT, 2 * len(self._seen))

    def problem(self, topic: str) -> str | None:
        """Why ``topic`` cannot take a record, from the last answer (None: it can, or no
        answer yet: the broker's own refusal then fails the record)."""
        cached = self._seen.get(topic)
        return None if cached is None else cached[2]

    def refused(self, topic: str, reason: str) -> None:
        """The broker refused a record for ``topic``: unwritable until asked again."""
        with self._wake:
            self._refusals[topic] = self._refusals.get(topic, 0) + 1
            self._remember(topic, reason, self._clock.now_us(), self._missing_us)

    def refused_size(self, topic: str, size: int, reason: str) -> None:
        """The broker refused a record of ``size`` bytes for ``topic`` because of its size."""
        now = self._clock.now_us()
        held = self._too_large.get(topic)
        if held is None or held[1] <= now or size < held[0]:
            self._too_large[topic] = (size, now + self._known_us, reason)

    def too_large(self, topic: str, size: int) -> str | None:
        """Why a record of ``size`` bytes for ``topic`` would be refused (None: it may fit)."""
        held = self._too_large.get(topic)
        if held is None or size < held[0]:
            return None
        if held[1] <= self._clock.now_us():
            del self._too_large[topic]
            return None
        return f"{held[2]} (a record of {held[0]:,} bytes was; this one has {size:,})"

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify()
        if self._thread is not None:
            self._thread.join(5.0)

    def _remember(self, topic: str, reason: str | None, now: int, ttl: int) -> None:
        self._seen[topic] = (now + ttl * 4 // 5, now + ttl, reason)

    def _ask(self, topic: str) -> None:
        with self._wake:
            if topic in self._asked or self._closed:
                return
            self._asked.add(topic)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._answer, name="target-topics", daemon=True
                )
                self._thread.start()
            self._wake.notify()

    def _answer(self) -> None:
        """(its thread) Look up what was asked, all of it at once, until closed."""
        while True:
            with self._wake:
                while not self._asked and not self._closed:
                    self._wake.wait()
                if self._closed:
                    return
                topics = sorted(self._asked)
                refusals = {t: self._refusals.get(t, 0) for t in topics}
            try:
                answers: dict[str, str | None] = self._lookup(topics)
            except Exception as exc:  # the cluster did not answer: the produce decides
                log.warning("metadata of target topics %s unavailable: %s", topics[:5], exc)
                answers = {}
            now = self._clock.now_us()
            with self._wake:
                for topic in topics:
                    self._asked.discard(topic)
                    if self._refusals.get(topic, 0) != refusals[topic]:
                        continue  # refused meanwhile: that stands until asked again
                    reason = answers.get(topic)
                    ttl = (
                        self._known_us if topic in answers and reason is None else self._missing_us
                    )
                    self._remember(topic, reason, now, ttl)


def admin_lookup(admin: Any, timeout_s: float = 2.0) -> Lookup:
    """A lookup asking the cluster (an AdminClient): one topic's metadata, or every topic's
    when several are asked at once."""

    def lookup(topics: Collection[str]) -> dict[str, str | None]:
        """Raises when the cluster does not answer."""
        if len(topics) == 1:
            metadata = admin.list_topics(topic=next(iter(topics)), timeout=timeout_s)
        else:
            metadata = admin.list_topics(timeout=timeout_s)
        return {topic: _unwritable(topic, metadata.topics.get(topic)) for topic in topics}

    return lookup


def _unwritable(topic: str, found: Any) -> str | None:
    """Why a topic of this metadata (None: not in it) cannot be written."""
    error = None if found is None else found.error
    if found is None or (error is not None and error.code() == UNKNOWN_TOPIC):
        return f"Kafka target topic {topic!r} cannot be written: no such topic"
    if error is not None and error.code() != 0:
        return f"Kafka target topic {topic!r} cannot be written: {error.str()}"
    if not found.partitions:
        return f"Kafka target topic {topic!r} has no partitions"
    return None
