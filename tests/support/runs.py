"""Read what processors committed, decoded, for assertions."""

from __future__ import annotations

import contextlib
import itertools
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from schedulerstream.codec import default_codec
from schedulerstream.kafka.clients import base_config
from schedulerstream.kafka.reader import read_topic
from schedulerstream.settings import Settings


@dataclass
class RunsSeen:
    triggered: list[dict[str, Any]] = field(default_factory=list)
    revoked: list[dict[str, Any]] = field(default_factory=list)

    def ids(self) -> list[str]:
        return [r["run_id"] for r in self.triggered]

    def duplicates(self) -> dict[str, int]:
        return {k: n for k, n in Counter(self.ids()).items() if n > 1}

    def instants_by_job(self) -> dict[str, list[int]]:
        by_job: dict[str, list[int]] = defaultdict(list)
        for r in self.triggered:
            by_job[f"{r['tenant']}/{r['job_id']}"].append(r["scheduled_at_us"])
        return {k: sorted(v) for k, v in by_job.items()}


def emitted_through(seen: RunsSeen, jobs: int, until_us: int) -> bool:
    """Whether each of ``jobs`` jobs has a committed run scheduled at ``until_us`` or later."""
    by_job = seen.instants_by_job()
    return len(by_job) >= jobs and all(instants[-1] >= until_us for instants in by_job.values())


class RunsFollower:
    """Follows ``{prefix}runs`` (committed records, from the beginning) so a test can wait for
    what the processors have emitted instead of sleeping; ``seen`` grows with every wait."""

    def __init__(self, settings: Settings) -> None:
        self.seen = RunsSeen()
        self._codec = default_codec()
        config = base_config(settings)
        config.update(
            {
                "group.id": f"tests-follower-{uuid.uuid4().hex[:8]}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
            }
        )
        self._consumer = Consumer(config)
        topic = settings.topic("runs")
        partitions = self._consumer.list_topics(topic, timeout=10).topics[topic].partitions
        self._consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])

    def wait_until(self, done: Callable[[RunsSeen], bool], timeout: float, what: str) -> RunsSeen:
        """Read on until ``done(seen)``; fail after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not done(self.seen):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
            for message in self._consumer.consume(1000, timeout=0.2):
                if message.error() is not None:
                    raise AssertionError(f"reading runs: {message.error()}")
                name, record = self._codec.decode(message.value())
                runs = self.seen.triggered if name == "RunTriggered" else self.seen.revoked
                runs.append(record)
        return self.seen

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self) -> RunsFollower:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


def read_runs(settings: Settings, idle_timeout: float = 3.0) -> RunsSeen:
    codec = default_codec()
    seen = RunsSeen()
    for message in read_topic(settings, settings.topic("runs"), True, idle_timeout):
        name, record = codec.decode(message.value())
        (seen.triggered if name == "RunTriggered" else seen.revoked).append(record)
    return seen


def read_events(settings: Settings, logical_topic: str, idle_timeout: float = 3.0) -> list[Any]:
    """Raw messages of a topic (committed only)."""
    return list(read_topic(settings, settings.topic(logical_topic), True, idle_timeout))


def first_event(settings: Settings, logical_topic: str, timeout: float = 30.0) -> Any:
    """The first committed record of a topic, waited for up to ``timeout`` s (a reader's
    first fetch may take longer than any short idle time on a busy machine)."""
    records = read_topic(settings, settings.topic(logical_topic), True, idle_timeout=timeout)
    with contextlib.closing(records):
        for message in records:
            return message
    raise AssertionError(f"no record on {logical_topic} within {timeout:g} s")


def gaps(instants: list[int], interval_us: int) -> list[tuple[int, int]]:
    """Pairs of consecutive instants further apart than one interval."""
    return [(a, b) for a, b in itertools.pairwise(instants) if b - a != interval_us]
