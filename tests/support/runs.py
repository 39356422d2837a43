"""Read what processors committed, decoded, for assertions."""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from schedulerstream.codec import default_codec
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


def gaps(instants: list[int], interval_us: int) -> list[tuple[int, int]]:
    """Pairs of consecutive instants further apart than one interval."""
    return [(a, b) for a, b in itertools.pairwise(instants) if b - a != interval_us]
