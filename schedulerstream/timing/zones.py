"""IANA zone lookup with clear errors, and each zone's UTC offsets as a timeline of segments."""

from __future__ import annotations

import bisect
import functools
import re
import threading
import zoneinfo
from datetime import UTC, datetime, timedelta
from typing import NamedTuple, Protocol

from schedulerstream.errors import UnknownTimeZoneError
from schedulerstream.timing.civil import MAX_SECOND, MIN_SECOND

DEFAULT_ZONE = "UTC"

# Keys that exist as files but are not zones a schedule may name.
_REJECTED_KEYS = frozenset({"localtime", "Factory", "posixrules"})
_UTC_KEYS = frozenset(
    {"UTC", "Etc/UTC", "Etc/UCT", "UCT", "Etc/Universal", "Universal", "Etc/Zulu", "Zulu"}
    | {"GMT", "Etc/GMT", "Etc/GMT0", "Etc/GMT+0", "Etc/GMT-0", "GMT0", "GMT+0", "GMT-0"}
    | {"Etc/Greenwich", "Greenwich"}
)
_ETC_GMT = re.compile(r"^Etc/GMT([+-])(\d{1,2})$")

# Transitions that change the UTC offset are at least ~4 days apart in tzdata since 1900, so
# sampling every 12 hours and bisecting between differing samples finds every one of them.
_CHUNK_SECONDS = 1 << 25
_PROBE_SECONDS = 43_200
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@functools.cache
def _known_keys() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones()) - _REJECTED_KEYS


def _unknown(name: object) -> UnknownTimeZoneError:
    message = f"unknown IANA time zone {name!r}"
    if isinstance(name, str):
        folded = {key.lower(): key for key in _known_keys()}
        suggestion = folded.get(name.strip().lower())
        if suggestion is not None:
            message += f" (did you mean {suggestion!r}?)"
    return UnknownTimeZoneError("timezone", message)


def get_zone(name: str) -> zoneinfo.ZoneInfo:
    """The ZoneInfo of an IANA zone name; raises UnknownTimeZoneError naming the bad value."""
    return _zone_cached(name)


@functools.lru_cache(maxsize=1024)
def _zone_cached(name: str) -> zoneinfo.ZoneInfo:
    if not isinstance(name, str) or name not in _known_keys():
        raise _unknown(name)
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise _unknown(name) from exc


class Segment(NamedTuple):
    """A span ``[start, end)`` of UTC seconds with one UTC offset.

    ``prev_offset`` is the offset just before ``start``; it differs from ``offset`` when ``start``
    is a transition (a forward jump if ``offset > prev_offset``, a backward one if smaller).
    """

    start: int
    end: int
    offset: int
    prev_offset: int


class Transition(NamedTuple):
    instant: int
    before: int
    after: int


class Timeline(Protocol):
    """UTC offsets of one zone over time, in whole seconds."""

    def offset_at(self, instant: int) -> int: ...

    def segment(self, instant: int) -> Segment: ...

    def transitions(self, start: int, end: int) -> list[Transition]: ...


class FixedTimeline:
    """A zone whose offset never changes."""

    __slots__ = ("_segment",)

    def __init__(self, offset: int) -> None:
        self._segment = Segment(MIN_SECOND, MAX_SECOND + 1, offset, offset)

    def offset_at(self, instant: int) -> int:
        return self._segment.offset

    def segment(self, instant: int) -> Segment:
        return self._segment

    def transitions(self, start: int, end: int) -> list[Transition]:
        return []


class _Chunk(NamedTuple):
    instants: list[int]
    transitions: list[Transition]
    initial_offset: int


class ZoneTimeline:
    """Offsets of a zone with transitions, found from zoneinfo chunk by chunk and kept."""

    def __init__(self, zone: zoneinfo.ZoneInfo) -> None:
        self._zone = zone
        self._chunks: dict[int, _Chunk] = {}
        self._lock = threading.Lock()

    def offset_at(self, instant: int) -> int:
        clamped = min(max(instant, MIN_SECOND), MAX_SECOND)
        offset = (_EPOCH + timedelta(seconds=clamped)).astimezone(self._zone).utcoffset()
        return 0 if offset is None else int(offset.total_seconds())

    def _build(self, index: int) -> _Chunk:
        start = index * _CHUNK_SECONDS
        end = start + _CHUNK_SECONDS
        probes = [start - 1, *range(start, end, _PROBE_SECONDS), end - 1]
        offsets = [self.offset_at(probe) for probe in probes]
        transitions: list[Transition] = []
        for i in range(1, len(probes)):
            if offsets[i] == offsets[i - 1]:
                continue
            low, high = probes[i - 1], probes[i]
            while high - low > 1:
                middle = (low + high) // 2
                if self.offset_at(middle) == offsets[i - 1]:
                    low = middle
                else:
                    high = middle
            transitions.append(Transition(high, offsets[i - 1], self.offset_at(high)))
        return _Chunk([t.instant for t in transitions], transitions, offsets[0])

    def _chunk(self, index: int) -> _Chunk:
        chunk = self._chunks.get(index)
        if chunk is None:
            with self._lock:
                chunk = self._chunks.get(index)
                if chunk is None:
                    chunk = self._build(index)
                    self._chunks[index] = chunk
        return chunk

    def segment(self, instant: int) -> Segment:
        index = instant // _CHUNK_SECONDS
        chunk = self._chunk(index)
        position = bisect.bisect_right(chunk.instants, instant)
        transitions = chunk.transitions
        if position:
            start, before, offset = transitions[position - 1]
        else:
            start, offset = index * _CHUNK_SECONDS, chunk.initial_offset
            before = offset
        if position < len(transitions):
            end = transitions[position].instant
        else:
            end = (index + 1) * _CHUNK_SECONDS
        return Segment(start, end, offset, before)

    def transitions(self, start: int, end: int) -> list[Transition]:
        """Transitions with ``start <= instant < end``."""
        found: list[Transition] = []
        for index in range(start // _CHUNK_SECONDS, (end - 1) // _CHUNK_SECONDS + 1):
            found.extend(t for t in self._chunk(index).transitions if start <= t.instant < end)
        return found


def timeline_for(name: str) -> Timeline:
    """The shared offset timeline of a zone name; raises UnknownTimeZoneError."""
    return _timeline_cached(name)


@functools.cache
def _timeline_cached(name: str) -> Timeline:
    zone = get_zone(name)
    if name in _UTC_KEYS:
        return FixedTimeline(0)
    etc = _ETC_GMT.match(name)
    if etc is not None:
        # POSIX sign convention: Etc/GMT+5 is five hours *behind* UTC.
        hours = int(etc.group(2))
        return FixedTimeline(-hours * 3600 if etc.group(1) == "+" else hours * 3600)
    return ZoneTimeline(zone)
