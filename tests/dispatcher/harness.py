"""Drive DispatchLogic by hand: an in-memory store, a recording output, a ManualClock."""

from __future__ import annotations

import json
from typing import Any

from schedulerstream.clock import ManualClock
from schedulerstream.codec import Codec
from schedulerstream.dispatcher.actions import in_transaction
from schedulerstream.dispatcher.context import Topics
from schedulerstream.dispatcher.limits import Limits
from schedulerstream.dispatcher.logic import Action, Cancel, DispatchLogic, Start
from schedulerstream.model import JobDefinition
from schedulerstream.runtime.store import prefix_end
from schedulerstream.scheduler.plan import dispatch_spec_json
from schedulerstream.targets.base import Outcome
from tests.scheduler.harness import SortedStore

CODEC = Codec()
SECOND = 1_000_000
T0 = 1_767_225_600 * SECOND  # 2026-01-01T00:00:00Z
TIERS = (("retry.5s", 5 * SECOND), ("retry.30s", 30 * SECOND), ("retry.2m", 120 * SECOND))
OK = Outcome("succeeded", "HTTP 200", False, 1000, 200)
FAIL = Outcome("failed", "HTTP 503: try again", True, 1000, 503)


class MemoryStore(SortedStore):
    """SortedStore with ``prefix`` (the full StateStore protocol)."""

    def prefix(self, prefix: bytes) -> Any:
        return self.range(prefix, prefix_end(prefix))


def definition(tenant: str = "acme", job_id: str = "j1", version: int = 1, **extra: Any) -> bytes:
    data: dict[str, Any] = {
        "tenant": tenant,
        "job_id": job_id,
        "version": version,
        "schedule": {"every": 60},
        "target": {"type": "http", "url": "https://example.com/h"},
        **extra,
    }
    return CODEC.encode("JobDefinition", JobDefinition.model_validate(data).to_avro())


def run_triggered(
    n: int = 0,
    tenant: str = "acme",
    job_id: str = "j1",
    at: int = T0,
    version: int = 1,
    not_before: int | None = None,
    carried: bool = True,
    **extra: Any,
) -> bytes:
    """A run as the scheduler writes it: its dispatch spec and an empty definition, or (not
    ``carried``) as an older scheduler did: the definition alone."""
    instant = at + n * SECOND
    snapshot = definition(tenant, job_id, version, **extra)
    spec = dispatch_spec_json(CODEC.decode_as("JobDefinition", snapshot)) if carried else None
    return CODEC.encode(
        "RunTriggered",
        {
            "run_id": f"{tenant}/{job_id}@{instant}",
            "tenant": tenant,
            "job_id": job_id,
            "scheduled_at_us": instant,
            "not_before_us": at if not_before is None else not_before,
            "emitted_at_us": instant,
            "trigger": "scheduled",
            "payload_json": json.dumps({"n": n}),
            "job_version": version,
            "job_definition": b"" if carried else snapshot,
            "dispatch_spec_json": spec,
        },
    )


def run_id(n: int = 0, tenant: str = "acme", job_id: str = "j1", at: int = T0) -> str:
    return f"{tenant}/{job_id}@{at + n * SECOND}"


def revoked(rid: str, version: int, tenant: str = "acme", job_id: str = "j1") -> bytes:
    return CODEC.encode(
        "RunRevoked",
        {
            "run_id": rid,
            "tenant": tenant,
            "job_id": job_id,
            "scheduled_at_us": T0,
            "revoked_at_us": T0,
            "reason": "job updated",
            "job_version": version,
        },
    )


def cancel(rid: str, tenant: str = "acme", job_id: str = "j1") -> tuple[bytes, bytes]:
    value = CODEC.encode(
        "Command",
        {
            "tenant": tenant,
            "job_id": job_id,
            "issued_at_us": T0,
            "command": ("io.schedulerstream.CancelRun", {"run_id": rid, "reason": "by test"}),
        },
    )
    return f"{tenant}/{job_id}".encode(), value


class Harness:
    """One partition of dispatcher logic; starts are recorded, outcomes fed back by hand."""

    def __init__(self, concurrency: int = 100, tenant_concurrency: int = 100,
                 rate: float = 10_000.0, host_concurrency: int = 10_000,
                 **kwargs: Any) -> None:  # fmt: skip
        self.clock = ManualClock(T0)
        self.limits = Limits(concurrency, tenant_concurrency, rate, host_concurrency)
        self.logic = DispatchLogic(
            CODEC, Topics("attempts", "commands", TIERS), self.limits, "t", **kwargs
        )
        self.store = MemoryStore()
        self.records: list[tuple[str, bytes, dict[str, Any], int]] = []
        self.started: list[Start] = []
        self.cancelled: list[Cancel] = []
        self.in_flight: dict[str, Start] = {}

    @property
    def now(self) -> int:
        return self.clock.now_us()

    def produce(self, topic: str, key: bytes, value: bytes | None, partition: int) -> None:
        assert value is not None
        self.records.append((topic, key, CODEC.decode(value)[1], partition))

    def run(self, value: bytes) -> None:
        self._take(self.logic.on_run(self.store, self, 0, value, self.now))

    def command(self, kv: tuple[bytes, bytes]) -> None:
        self._take(self.logic.on_command(self.store, self, 0, kv[0], kv[1], self.now))

    def tick(self) -> list[Start]:
        before = len(self.started)
        self._take(self.logic.on_tick(self.store, self, 0, self.now))
        return self.started[before:]

    def advance(self, seconds: float) -> list[Start]:
        self.clock.advance(seconds)
        return self.tick()

    def finish(self, rid: str, outcome: Outcome = OK, attempt: int | None = None) -> bool:
        start = self.in_flight.pop(rid)
        if not in_transaction(start.target):  # a Kafka record holds no slot
            self.limits.release(start.tenant, start.host)
        n = start.delivery.attempt if attempt is None else attempt
        return self.logic.on_outcome(self.store, self, 0, rid, n, outcome, self.now)

    def restart(self) -> None:
        """A new process: fresh limits and logic over the same committed store."""
        self.limits = Limits(self.limits.concurrency, self.limits.tenant_concurrency, 10_000.0,
                             self.limits.host_concurrency)  # fmt: skip
        self.logic = DispatchLogic(CODEC, Topics("attempts", "commands", TIERS), self.limits, "t")
        self.in_flight.clear()
        self.logic.on_running(self.store, self, 0, self.now)

    def _take(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Start):
                self.started.append(action)
                self.in_flight[action.delivery.run_id] = action
            else:
                self.cancelled.append(action)
                start = self.in_flight.pop(action.run_id, None)
                if start is not None:
                    self.limits.release(start.tenant, start.host)

    def events(self, rid: str | None = None) -> list[tuple[str, int]]:
        """(kind, attempt) of the attempts-topic records, for one run or all."""
        return [
            (r["kind"], r["attempt"])
            for t, _, r, _ in self.records
            if t == "attempts" and (rid is None or r["run_id"] == rid)
        ]

    def kinds(self, kind: str) -> list[dict[str, Any]]:
        return [r for t, _, r, _ in self.records if t == "attempts" and r["kind"] == kind]

    def on_topic(self, topic: str) -> list[dict[str, Any]]:
        return [r for t, _, r, _ in self.records if t == topic]
