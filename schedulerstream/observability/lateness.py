"""Trigger lateness from emitted run records, without decoding them: a scheduled run id ends
with its instant (``…@20240310T070000Z``, DESIGN.md §2), parsed once per distinct instant."""

from __future__ import annotations

import calendar
from collections.abc import Callable, Iterable
from typing import Any

from schedulerstream.codec import Codec
from schedulerstream.histogram import LATENESS_BUCKETS, Histogram

_CACHE_LIMIT = 4096
_instants: dict[bytes, int] = {}


def instant_us(run_id: bytes) -> int | None:
    """The scheduled instant of a scheduled/catch-up/backfill run id; None for another id
    (manual triggers, reruns)."""
    _, at, stamp = run_id.rpartition(b"@")
    cached = _instants.get(stamp)
    if cached is not None:
        return cached
    if not at or len(stamp) != 16 or stamp[8:9] != b"T" or stamp[15:16] != b"Z":
        return None
    try:
        fields = (stamp[0:4], stamp[4:6], stamp[6:8], stamp[9:11], stamp[11:13], stamp[13:15])
        value = calendar.timegm((*(int(f) for f in fields), 0, 0, 0)) * 1_000_000
    except ValueError:
        return None
    if len(_instants) >= _CACHE_LIMIT:
        _instants.clear()
    _instants[stamp] = value
    return value


def observe_emitted(
    histogram: Histogram,
    outputs: Iterable[Any],
    runs_topic: str,
    now_us: int,
    keep: Callable[[bytes | None], bool] | None = None,
) -> None:
    """Observe ``now − scheduled instant`` (seconds) of each run record in ``outputs``
    (``OutRecord`` tuples) on ``runs_topic``; ``keep(value)``, when given, filters records."""
    for output in outputs:
        if output.topic != runs_topic or output.value is None or output.key is None:
            continue
        at = instant_us(output.key)
        if at is not None and (keep is None or keep(output.value)):
            histogram.observe((now_us - at) / 1e6)


class TriggerLateness:
    """Emission time − scheduled instant of the runs a scheduler tick emitted, in seconds
    (negative: emitted ahead, within the lookahead). RunTriggered records only (the schema
    fingerprint of the single-object encoding); backfills, never late by intent, are left out
    (decoded only when the tick emitted some)."""

    def __init__(self, codec: Codec, runs_topic: str) -> None:
        self.histogram = Histogram(LATENESS_BUCKETS)
        self._codec = codec
        self._runs_topic = runs_topic
        self._fingerprint = codec.current["RunTriggered"].fingerprint

    def observe(self, outputs: Iterable[Any], now_us: int, backfills: bool) -> None:
        keep = self._not_backfill if backfills else self._triggered
        observe_emitted(self.histogram, outputs, self._runs_topic, now_us, keep)

    def _triggered(self, value: bytes | None) -> bool:
        return value is not None and value[2:10] == self._fingerprint

    def _not_backfill(self, value: bytes | None) -> bool:
        if not self._triggered(value):
            return False
        return self._codec.decode(value)[1].get("trigger") != "backfill"
