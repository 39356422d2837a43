"""Drive SchedulerLogic by hand: a sorted in-memory store and a recording output."""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from schedulerstream.codec import Codec
from schedulerstream.model import JobDefinition
from schedulerstream.scheduler.logic import SchedulerLogic
from schedulerstream.scheduler.timers import TimerSettings
from schedulerstream.scheduler.writer import Topics

CODEC = Codec()
TOPICS = Topics(runs="runs", attempts="attempts", rejected="rejected", schedules="schedules")


class SortedStore:
    """Store protocol over a dict with ordered range scans; ``logged`` records changelog keys."""

    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}
        self.sorted_keys: list[bytes] = []
        self.logged: list[tuple[bytes, bytes | None]] = []

    def get(self, key: bytes) -> bytes | None:
        return self.data.get(key)

    def put(self, key: bytes, value: bytes, *, logged: bool = True) -> None:
        if key not in self.data:
            bisect.insort(self.sorted_keys, key)
        self.data[key] = value
        if logged:
            self.logged.append((key, value))

    def delete(self, key: bytes, *, logged: bool = True) -> None:
        if key in self.data:
            del self.data[key]
            self.sorted_keys.pop(bisect.bisect_left(self.sorted_keys, key))
        if logged:
            self.logged.append((key, None))

    def range(self, start: bytes, end: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        lo = bisect.bisect_left(self.sorted_keys, start)
        hi = len(self.sorted_keys) if end is None else bisect.bisect_left(self.sorted_keys, end)
        for key in list(self.sorted_keys[lo:hi]):
            yield key, self.data[key]


@dataclass
class Recorder:
    records: list[tuple[str, bytes, dict[str, Any] | None, str, int]] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)  # origin → reason (a replay)

    def produce(
        self, topic: str, key: bytes, value: bytes | None, partition: int,
        origin: str | None = None,
    ) -> None:  # fmt: skip
        name, record = CODEC.decode(value) if value is not None else ("", None)
        self.records.append((topic, key, record, name, partition))

    def failed(self, origin: str) -> str | None:
        return self.refused.get(origin)

    def runs(self) -> list[dict[str, Any]]:
        return [r for t, _, r, n, _ in self.records if n == "RunTriggered" and r is not None]

    def revoked(self) -> list[dict[str, Any]]:
        return [r for t, _, r, n, _ in self.records if n == "RunRevoked" and r is not None]

    def attempts(self, kind: str) -> list[dict[str, Any]]:
        return [
            r for t, _, r, n, _ in self.records if n == "AttemptEvent" and r and r["kind"] == kind
        ]

    def clear(self) -> None:
        self.records.clear()


def us(text: str) -> int:
    """UTC epoch µs of an ISO 8601 instant with offset."""
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1_000_000)


def definition(version: int, **overrides: Any) -> bytes:
    data: dict[str, Any] = {
        "tenant": "acme",
        "job_id": "j1",
        "version": version,
        "schedule": {"cron": "* * * * *"},
        "target": {"type": "http", "url": "https://example.com/h"},
    }
    data.update(overrides)
    return CODEC.encode("JobDefinition", JobDefinition.model_validate(data).to_avro())


class Harness:
    """One partition's scheduler logic with a hand-moved clock."""

    def __init__(
        self,
        lookahead_s: float = 1.0,
        grace_s: float = 60.0,
        burst_lead_s: float = 0.0,
        **kwargs: Any,
    ) -> None:
        timers = TimerSettings(
            int(lookahead_s * 1e6),
            int(grace_s * 1e6),
            count_cap=10_000,
            burst_lead_us=int(burst_lead_s * 1e6),
        )
        self.logic = SchedulerLogic(CODEC, TOPICS, timers, "test", **kwargs)
        self.store = SortedStore()
        self.out = Recorder()
        self.now = 0

    def put(self, value: bytes | None, key: bytes = b"acme/j1", ts: int | None = None) -> None:
        self.logic.on_schedule(
            self.store, self.out, 0, key, value, self.now if ts is None else ts, self.now
        )

    def command(self, value: bytes, key: bytes = b"acme/j1") -> None:
        self.logic.on_command(self.store, self.out, 0, key, value, self.now)

    def tick_until(self, until: int, step_s: float = 0.05) -> None:
        while self.now < until:
            self.now = min(until, self.now + int(step_s * 1e6))
            while self.logic.on_tick(self.store, self.out, 0, self.now):
                pass

    def run_ids(self) -> list[str]:
        return [r["run_id"] for r in self.out.runs()]


def command(
    kind: str, fields: dict[str, Any], job: str = "j1", at: int = 0, tenant: str = "acme"
) -> bytes:
    return CODEC.encode(
        "Command",
        {
            "tenant": tenant,
            "job_id": job,
            "issued_at_us": at,
            "command": (f"io.schedulerstream.{kind}", fields),
        },
    )
