"""JobState: the scheduler's per-job record, stored as a SchedulerJob Avro record."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from schedulerstream.codec import Codec

RECENT_REQUESTS = 64
REF_MARK = b"#"  # a definition reference; a definition starts with Avro's marker, C3 01


def definition_ref(definition: bytes) -> bytes:
    """What a job record holds in place of ``definition``, kept under its own key: the mark
    and an 8-byte digest (the plan cache and the stored definition are checked against it)."""
    return REF_MARK + hashlib.blake2b(definition, digest_size=8).digest()


def is_ref(definition: bytes) -> bool:
    return definition[:1] == REF_MARK


@dataclass(slots=True)
class PendingRun:
    """A run emitted ahead of its time that a mutation may still revoke."""

    run_id: str
    scheduled_at_us: int
    not_before_us: int


# the request id of a catch_up job's late instants (no request id can hold "~")
CATCH_UP_REQUEST = "~catch_up"


@dataclass(slots=True)
class BackfillCursor:
    """The instants after ``next_after_us`` and before ``end_us`` still to emit: a Backfill
    command's, or a ``catch_up`` job's late ones (``CATCH_UP_REQUEST``)."""

    request_id: str
    next_after_us: int
    end_us: int
    rerun: bool
    emitted: int = 0

    @property
    def catch_up(self) -> bool:
        return self.request_id == CATCH_UP_REQUEST


@dataclass(slots=True)
class JobState:
    """One job's timer state. ``definition`` is a ``definition_ref`` (the definition is
    under ``def/``), or the definition itself: set by a mutation and not saved yet, or saved
    inline (by an earlier version, or in ``JobRecords``' inline mode)."""

    version: int
    definition: bytes
    paused: bool
    fired_through_us: int
    next_fire_us: int | None = None
    next_not_before_us: int | None = None
    next_emit_us: int | None = None
    runs_emitted: int = 0
    pending: list[PendingRun] = field(default_factory=list)
    recent_requests: list[str] = field(default_factory=list)
    backfills: list[BackfillCursor] = field(default_factory=list)

    def remember_request(self, request_id: str) -> bool:
        """Record ``request_id``; False if it was already seen (a duplicate)."""
        if request_id in self.recent_requests:
            return False
        self.recent_requests.append(request_id)
        del self.recent_requests[:-RECENT_REQUESTS]
        return True

    def copy(self) -> JobState:
        """A deep copy (mutations on it leave this one untouched)."""
        return JobState(
            self.version, self.definition, self.paused, self.fired_through_us,
            self.next_fire_us, self.next_not_before_us, self.next_emit_us, self.runs_emitted,
            [PendingRun(p.run_id, p.scheduled_at_us, p.not_before_us) for p in self.pending],
            list(self.recent_requests),
            [BackfillCursor(b.request_id, b.next_after_us, b.end_us, b.rerun, b.emitted)
             for b in self.backfills],
        )  # fmt: skip

    def to_record(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "definition": self.definition,
            "paused": self.paused,
            "fired_through_us": self.fired_through_us,
            "next_fire_us": self.next_fire_us,
            "next_not_before_us": self.next_not_before_us,
            "next_emit_us": self.next_emit_us,
            "runs_emitted": self.runs_emitted,
            "pending": [
                {
                    "run_id": p.run_id,
                    "scheduled_at_us": p.scheduled_at_us,
                    "not_before_us": p.not_before_us,
                }
                for p in self.pending
            ],
            "recent_requests": list(self.recent_requests),
            "backfills": [
                {
                    "request_id": b.request_id,
                    "next_after_us": b.next_after_us,
                    "end_us": b.end_us,
                    "rerun": b.rerun,
                    "emitted": b.emitted,
                }
                for b in self.backfills
            ],
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> JobState:
        return cls(
            version=record["version"],
            definition=record["definition"],
            paused=record["paused"],
            fired_through_us=record["fired_through_us"],
            next_fire_us=record["next_fire_us"],
            next_not_before_us=record["next_not_before_us"],
            next_emit_us=record["next_emit_us"],
            runs_emitted=record["runs_emitted"],
            pending=[PendingRun(**p) for p in record["pending"]],
            recent_requests=list(record["recent_requests"]),
            backfills=[BackfillCursor(**b) for b in record["backfills"]],
        )

    def encode(self, codec: Codec) -> bytes:
        return codec.encode("SchedulerJob", self.to_record())

    @classmethod
    def decode(cls, codec: Codec, data: bytes) -> JobState:
        return cls.from_record(codec.decode_as("SchedulerJob", data))
