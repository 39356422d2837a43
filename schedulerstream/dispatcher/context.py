"""What the parts of the dispatcher share: the logic's topics and counters, the partition a call
works on (``PartitionContext``), the run lifecycle they call back into (``Runs``), and where a
call's records go (a task context: ``ContextOutput``; nowhere: ``NO_OUTPUT``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from schedulerstream.dispatch_spec import DispatchSpec
from schedulerstream.dispatcher.actions import Action
from schedulerstream.dispatcher.events import Output
from schedulerstream.dispatcher.fairness import DeficitRing
from schedulerstream.dispatcher.index import PartitionIndex
from schedulerstream.dispatcher.records import RunRecord
from schedulerstream.dispatcher.states import AttemptOutcome
from schedulerstream.runtime.context import TaskContext
from schedulerstream.runtime.store import StateStore


@dataclass(frozen=True, slots=True)
class Topics:
    attempts: str
    commands: str  # a 410 sends PauseJob here
    tiers: tuple[tuple[str, int], ...] = ()  # (delay topic, delay µs), shortest first


@dataclass(slots=True)
class Counters:
    accepted: int = 0
    duplicates: int = 0
    started: int = 0
    late_outcomes: int = 0
    finished: dict[str, int] = field(default_factory=dict)


class PartitionContext:
    """The partition's store and output for this call, and its in-memory queue index and
    tenant ring (kept by the logic across calls, rebuilt when the task starts running)."""

    __slots__ = ("index", "out", "partition", "ring", "store")

    def __init__(self, store: StateStore, out: Output, partition: int, index: PartitionIndex,
                 ring: DeficitRing) -> None:  # fmt: skip
        self.store = store
        self.out = out
        self.partition = partition
        self.index = index
        self.ring = ring


class Runs(Protocol):
    """What the parts of the dispatcher logic (overlap, retries, arrivals, endings) ask of it."""

    def spec(self, run: RunRecord) -> DispatchSpec: ...

    def current(self, store: StateStore, run_id: str) -> RunRecord | None: ...

    def finish(self, pc: PartitionContext, run: RunRecord, kind: AttemptOutcome, now_us: int,
               reason: str | None, *, status_code: int | None = None,
               last_kind: str | None = None) -> None: ...  # fmt: skip

    def cancel(self, pc: PartitionContext, run: RunRecord, reason: str,
               now_us: int) -> list[Action]: ...  # fmt: skip

    def enqueue(self, pc: PartitionContext, run: RunRecord, due_us: int) -> None: ...


class ContextOutput:
    """The logic's Output on a task context: a record's origin is its key (a run id or a
    job key)."""

    def __init__(self, ctx: TaskContext) -> None:
        self.ctx = ctx

    def produce(self, topic: str, key: bytes, value: bytes | None, partition: int) -> None:
        self.ctx.produce(topic, key, value, partition, origin=key.decode("utf-8", "replace"))


class NoOutput:
    """The Output of a call that must produce nothing (a retry record coming back)."""

    def produce(self, topic: str, key: bytes, value: bytes | None, partition: int) -> None:
        raise AssertionError(f"nothing may be produced here (to {topic})")


NO_OUTPUT = NoOutput()
