"""The scheduler's per-run records in Avro binary without a schema walk: the run record
(RunTriggered) from a per-job template and the job record (SchedulerJob).

Byte for byte what ``Codec.encode`` writes (same single-object header and fingerprint);
``FastRecords.for_codec`` checks that on a sample and returns None when the codec's current
schemas differ from the layout written here (the scheduler then encodes with the codec).
A job record is read back by hand too (every emission reads one), unless it was written with
another schema (then the codec reads it, resolving it to the current one).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from schedulerstream.codec import (
    MARKER,
    Codec,
    instant_bytes,
    long_bytes,
    read_long,
    string_bytes,
)
from schedulerstream.errors import CodecError
from schedulerstream.scheduler.state import BackfillCursor, JobState, PendingRun

_NULL = b"\x00"
_EMPTY = b"\x00"  # an empty array (a zero block count)
_NO_DEFINITION = b"\x00"  # empty bytes (a zero length)
RunParts = tuple[bytes, bytes, bytes]  # see run_parts
# paused, fired_through_us, next_fire_us, next_not_before_us, next_emit_us, runs_emitted
_Timers = tuple[bool, int, int | None, int | None, int | None, int]
TIMERS_LIMIT = 4096  # distinct timer tails remembered (then forgotten all at once)


def _optional(n: int | None) -> bytes:
    return _NULL if n is None else b"\x02" + instant_bytes(n)


def run_parts(tenant: str, job_id: str, payload_json: str | None, version: int,
              spec_json: str) -> RunParts:  # fmt: skip
    """A job's constant parts of its run records: the fields after the run id, those after
    the trigger (an empty definition: the run carries its dispatch spec instead), and the
    spec."""
    head = string_bytes(tenant) + string_bytes(job_id)
    payload = _NULL if payload_json is None else b"\x02" + string_bytes(payload_json)
    return head, payload + long_bytes(version) + _NO_DEFINITION, b"\x02" + string_bytes(spec_json)


class FastRecords:
    """Encodes RunTriggered and SchedulerJob records."""

    def __init__(self, codec: Codec) -> None:
        self.codec = codec
        self.run_header = MARKER + codec.current["RunTriggered"].fingerprint
        self.job_header = MARKER + codec.current["SchedulerJob"].fingerprint
        self._triggers: dict[str, bytes] = {}
        # a job record's bytes after its definition → its timer fields, for records with no
        # pending run, request or backfill: jobs on one schedule share them (see read_job)
        self._timers: dict[bytes, _Timers] = {}
        self._tails: dict[_Timers, bytes] = {}  # the other way (see job)

    @classmethod
    def for_codec(cls, codec: Codec) -> FastRecords | None:
        """FastRecords for ``codec``, or None when its schemas are not the ones written here."""
        fast = cls(codec)
        try:
            return fast if fast._matches() else None
        except (CodecError, KeyError, IndexError, TypeError, ValueError):
            return None

    def run(
        self, run_id: str, parts: RunParts, scheduled_at_us: int, not_before_us: int,
        emitted_at_us: int, trigger: str,
    ) -> bytes:  # fmt: skip
        """A RunTriggered record of the job whose ``run_parts`` are ``parts``."""
        encoded = self._triggers.get(trigger)
        if encoded is None:
            encoded = self._triggers[trigger] = string_bytes(trigger)
        return b"".join((
            self.run_header, string_bytes(run_id), parts[0], instant_bytes(scheduled_at_us),
            instant_bytes(not_before_us), instant_bytes(emitted_at_us), encoded, parts[1],
            parts[2],
        ))  # fmt: skip

    def job(self, state: JobState) -> bytes:
        """The SchedulerJob record of ``state`` (its bytes after the definition written once
        for each distinct set of timer fields, when it has no pending run, request or
        backfill: the jobs of a burst share them)."""
        head = (self.job_header, long_bytes(state.version), long_bytes(len(state.definition)),
                state.definition)  # fmt: skip
        if state.pending or state.recent_requests or state.backfills:
            return b"".join((*head, self._job_tail(state)))
        timers = (state.paused, state.fired_through_us, state.next_fire_us,
                  state.next_not_before_us, state.next_emit_us, state.runs_emitted)  # fmt: skip
        tail = self._tails.get(timers)
        if tail is None:
            if len(self._tails) >= TIMERS_LIMIT:
                self._tails.clear()
            tail = self._tails[timers] = self._job_tail(state)
        return b"".join((*head, tail))

    def _job_tail(self, state: JobState) -> bytes:
        """A SchedulerJob record's bytes after the definition."""
        parts = [
            b"\x01" if state.paused else b"\x00",
            instant_bytes(state.fired_through_us),
            _optional(state.next_fire_us),
            _optional(state.next_not_before_us),
            _optional(state.next_emit_us),
            long_bytes(state.runs_emitted),
        ]
        if state.pending:
            parts.append(long_bytes(len(state.pending)))
            for p in state.pending:
                parts += (string_bytes(p.run_id), instant_bytes(p.scheduled_at_us),
                          instant_bytes(p.not_before_us))  # fmt: skip
        parts.append(_EMPTY)
        if state.recent_requests:
            parts.append(long_bytes(len(state.recent_requests)))
            parts += (string_bytes(r) for r in state.recent_requests)
        parts.append(_EMPTY)
        if state.backfills:
            parts.append(long_bytes(len(state.backfills)))
            for b in state.backfills:
                parts += (string_bytes(b.request_id), long_bytes(b.next_after_us),
                          long_bytes(b.end_us), b"\x01" if b.rerun else b"\x00",
                          long_bytes(b.emitted))  # fmt: skip
        parts.append(_EMPTY)
        return b"".join(parts)

    def read_job(self, data: bytes) -> JobState:
        """A SchedulerJob record as a JobState (``JobState.decode``, several times faster).

        The fields after the definition are read once for each distinct run of bytes: the
        jobs of a burst (one schedule, one instant) share them, and reading their longs is
        most of the work. A hit is what the full read would give: the same bytes, read the
        same way, once found to end the record with no pending run, request or backfill."""
        if data[:10] != self.job_header:
            return JobState.decode(self.codec, data)
        try:
            version, i = read_long(data, 10)
            size, i = read_long(data, i)
            timers = self._timers.get(data[i + size :]) if size >= 0 else None
            if timers is not None:
                return JobState(version, data[i : i + size], *timers, [], [], [])
            state, end = _job_state(data, 10)
        except (IndexError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
            raise CodecError(f"SchedulerJob: corrupt Avro body: {exc}") from exc
        if end != len(data):
            raise CodecError(f"SchedulerJob: {len(data) - end} bytes after the record")
        if not (state.pending or state.recent_requests or state.backfills):
            if len(self._timers) >= TIMERS_LIMIT:
                self._timers.clear()
            self._timers[data[i + size :]] = (
                state.paused, state.fired_through_us, state.next_fire_us,
                state.next_not_before_us, state.next_emit_us, state.runs_emitted,
            )  # fmt: skip
        return state

    def _matches(self) -> bool:
        """Both ways on a sample with every field set, compared with the codec."""
        state = JobState(
            (1 << 62) + 5, b"\x00definition", True, -(1 << 40), 1, -2, None, 300,
            [PendingRun("t/j@1", 1 << 50, -7), PendingRun("t/j@2", 2, 3)],
            ["r1", "é"], [BackfillCursor("b", 5, 1 << 45, True, 64)],
        )  # fmt: skip
        if self.job(state) != state.encode(self.codec):
            return False
        if self.read_job(state.encode(self.codec)) != state:
            return False
        plain = JobState(3, b"#ref", False, 1 << 50, 1 << 51, None, -5, 7)
        for _ in range(2):  # a miss, then a hit of each memo (see job and read_job)
            if self.job(plain) != plain.encode(self.codec):
                return False
            if self.read_job(plain.encode(self.codec)) != plain:
                return False
        record: dict[str, Any] = {
            "run_id": "t/j@20240101T000000Z", "tenant": "t", "job_id": "j",
            "scheduled_at_us": 1 << 52, "not_before_us": -1, "emitted_at_us": 63,
            "trigger": "scheduled", "payload_json": '{"a": "é"}', "job_version": 1 << 60,
            "job_definition": b"", "dispatch_spec_json": '["é",1.5]',
        }  # fmt: skip
        parts = run_parts("t", "j", record["payload_json"], record["job_version"],
                          record["dispatch_spec_json"])  # fmt: skip
        fast = self.run(record["run_id"], parts, record["scheduled_at_us"],
                        record["not_before_us"], record["emitted_at_us"],
                        record["trigger"])  # fmt: skip
        return fast == self.codec.encode("RunTriggered", record)


def _job_state(data: bytes, i: int) -> tuple[JobState, int]:
    """The SchedulerJob body at ``data[i]`` (the layout ``FastRecords.job`` writes) and the
    index past it."""
    version, i = read_long(data, i)
    size, i = read_long(data, i)
    definition = data[i : i + size]
    if len(definition) != size:
        raise IndexError("the definition runs past the end")
    paused = data[i + size] == 1
    fired, i = read_long(data, i + size + 1)
    next_fire, i = _read_optional(data, i)
    next_not_before, i = _read_optional(data, i)
    next_emit, i = _read_optional(data, i)
    emitted, i = read_long(data, i)
    pending, i = _read_array(data, i, _read_pending)
    recent, i = _read_array(data, i, _read_string)
    backfills, i = _read_array(data, i, _read_backfill)
    state = JobState(version, definition, paused, fired, next_fire, next_not_before, next_emit,
                     emitted, pending, recent, backfills)  # fmt: skip
    return state, i


T = TypeVar("T")


def _read_array(
    data: bytes, i: int, item: Callable[[bytes, int], tuple[T, int]]
) -> tuple[list[T], int]:
    """An Avro array: blocks of items (a negative count is followed by the block's size)
    until an empty one."""
    items: list[T] = []
    while True:
        count, i = read_long(data, i)
        if count == 0:
            return items, i
        if count < 0:
            count = -count
            _, i = read_long(data, i)
        for _ in range(count):
            value, i = item(data, i)
            items.append(value)


def _read_optional(data: bytes, i: int) -> tuple[int | None, int]:
    if data[i] == 0:
        return None, i + 1
    return read_long(data, i + 1)


def _read_string(data: bytes, i: int) -> tuple[str, int]:
    size, i = read_long(data, i)
    if i + size > len(data):
        raise IndexError("a string runs past the end")
    return data[i : i + size].decode(), i + size


def _read_pending(data: bytes, i: int) -> tuple[PendingRun, int]:
    run_id, i = _read_string(data, i)
    scheduled, i = read_long(data, i)
    not_before, i = read_long(data, i)
    return PendingRun(run_id, scheduled, not_before), i


def _read_backfill(data: bytes, i: int) -> tuple[BackfillCursor, int]:
    request, i = _read_string(data, i)
    next_after, i = read_long(data, i)
    end, i = read_long(data, i)
    rerun = data[i] == 1
    emitted, i = read_long(data, i + 1)
    return BackfillCursor(request, next_after, end, rerun, emitted), i
