"""The read-model changes of one partition's records since the last commit, merged.

Merging keeps the result of applying the records one by one: runs and jobs are whole rows
(the last one wins), attempts are appended, a deleted run drops its staged run row and
attempts. A change that re-adds a run deleted earlier in the batch (a delete and an insert
cannot be merged into one upsert) opens a new segment, written after the first.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from schedulerstream.readmodel import AttemptRow, Changes, JobRow, RunRow


@dataclass
class Segment:
    """Merged changes with no run both deleted and written."""

    runs: dict[str, RunRow] = field(default_factory=dict)
    attempts: dict[str, list[AttemptRow]] = field(default_factory=dict)
    jobs: dict[tuple[str, str], JobRow] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)

    def conflicts(self, changes: Changes) -> bool:
        if not self.deleted:
            return False
        return any(r in self.deleted for r in changes.runs) or any(
            a.run_id in self.deleted for a in changes.attempts
        )

    def absorb(self, changes: Changes) -> None:
        self.runs.update(changes.runs)
        for attempt in changes.attempts:
            self.attempts.setdefault(attempt.run_id, []).append(attempt)
        self.jobs.update(changes.jobs)
        for run_id in changes.deleted_runs:
            self.runs.pop(run_id, None)
            self.attempts.pop(run_id, None)
            self.deleted.add(run_id)

    def extend(self, changes: Changes) -> None:
        """Add this segment to ``changes`` (of other partitions: no key in common)."""
        changes.runs.update(self.runs)
        for attempts in self.attempts.values():
            changes.attempts.extend(attempts)
        changes.jobs.update(self.jobs)
        changes.deleted_runs |= self.deleted


class Batch:
    """What one partition's records change in the read model, and the records themselves
    (``records``: (message, its changes), to apply one by one when the database refuses a
    value of the batch)."""

    def __init__(self) -> None:
        self.segments: list[Segment] = [Segment()]
        self.records: list[tuple[Any, Changes]] = []

    def add(self, message: Any, changes: Changes) -> None:
        if changes.empty():
            return
        self.records.append((message, changes))
        if self.segments[-1].conflicts(changes):
            self.segments.append(Segment())
        self.segments[-1].absorb(changes)

    def __len__(self) -> int:
        return len(self.records)


def combine(batches: Iterable[Batch]) -> list[Changes]:
    """The batches of several partitions as few Changes as possible (usually one), in order."""
    combined: list[Changes] = []
    for batch in batches:
        for index, segment in enumerate(batch.segments):
            if index == len(combined):
                combined.append(Changes())
            segment.extend(combined[index])
    return [c for c in combined if not c.empty()]
