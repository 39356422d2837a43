"""AttemptEvents: every state change of a run, on cron.attempts keyed by run id.

Three or more per run, so they are written in Avro binary by hand, byte for byte what
``Codec.encode`` writes; the writer checks that on samples when it is made and encodes with
the codec when the codec's current schema is not the layout written here.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Protocol

from schedulerstream.codec import MARKER, Codec, instant_bytes, long_bytes, string_bytes
from schedulerstream.dispatcher.records import RunRecord
from schedulerstream.errors import CodecError

_NULL = b"\x00"
_IDS_LIMIT = 8192
_SOME = b"\x02"  # the second branch of ["null", T]


class Output(Protocol):
    """Where the logic's records go (the task context in production, a list in tests)."""

    def produce(self, topic: str, key: bytes, value: bytes | None, partition: int) -> None: ...


def _optional(n: int | None) -> bytes:
    return _NULL if n is None else _SOME + long_bytes(n)


class EventWriter:
    """Encodes AttemptEvents for one dispatcher instance."""

    def __init__(self, codec: Codec, topic: str, instance: str) -> None:
        self.codec = codec
        self.topic = topic
        self.instance = instance
        self._header = MARKER + codec.current["AttemptEvent"].fingerprint
        self._tail = long_bytes(1) + string_bytes(instance)  # count, instance
        self._kinds: dict[str, bytes] = {}
        self._ids: OrderedDict[str, bytes] = OrderedDict()  # run id → its ids, encoded
        try:
            self.fast = self._matches()
        except (CodecError, KeyError, TypeError, ValueError):
            self.fast = False

    def value(
        self,
        run: RunRecord,
        kind: str,
        at_us: int,
        *,
        reason: str | None = None,
        status_code: int | None = None,
        retry_at_us: int | None = None,
        duration_us: int | None = None,
    ) -> bytes:
        if not self.fast:
            return self.encoded(run, kind, at_us, reason, status_code, retry_at_us, duration_us)
        kind_bytes = self._kinds.get(kind)
        if kind_bytes is None:
            kind_bytes = self._kinds[kind] = string_bytes(kind)
        ids = self._ids.get(run.run_id)
        if ids is None:  # a run's events come in twos and threes: its ids are encoded once
            if len(self._ids) >= _IDS_LIMIT:
                self._ids.popitem(last=False)
            ids = self._ids[run.run_id] = b"".join(
                (string_bytes(run.run_id), string_bytes(run.tenant), string_bytes(run.job_id))
            )
        return b"".join((
            self._header, ids, long_bytes(run.attempt), kind_bytes, instant_bytes(at_us),
            _SOME + instant_bytes(run.scheduled_at_us),
            _NULL if reason is None else _SOME + string_bytes(reason),
            _optional(status_code), _optional(retry_at_us), _optional(duration_us), self._tail,
        ))  # fmt: skip

    def encoded(
        self, run: RunRecord, kind: str, at_us: int, reason: str | None = None,
        status_code: int | None = None, retry_at_us: int | None = None,
        duration_us: int | None = None,
    ) -> bytes:  # fmt: skip
        """``value`` through the codec (the reference the hand-written bytes must equal)."""
        return self.codec.encode(
            "AttemptEvent",
            {
                "run_id": run.run_id,
                "tenant": run.tenant,
                "job_id": run.job_id,
                "attempt": run.attempt,
                "kind": kind,
                "at_us": at_us,
                "scheduled_at_us": run.scheduled_at_us,
                "reason": reason,
                "status_code": status_code,
                "retry_at_us": retry_at_us,
                "duration_us": duration_us,
                "count": 1,
                "instance": self.instance,
            },
        )

    def emit(
        self, out: Output, partition: int, run: RunRecord, kind: str, at_us: int, **detail: Any
    ) -> bytes:
        """Produce one event on the attempts topic (``detail``: the keywords of ``value``);
        returns its value."""
        value = self.value(run, kind, at_us, **detail)
        out.produce(self.topic, run.run_id.encode(), value, partition)
        return value

    def _matches(self) -> bool:
        """The hand-written bytes equal the codec's on samples with every field unset and set."""
        run = RunRecord("t/j\u00e9@1", "t", "j\u00e9", -(1 << 40), 1, 1, "scheduled", None, 1, None)
        run.attempt = 70_000
        self.fast = True
        samples: list[tuple[RunRecord, str, int, dict[str, Any]]] = [
            (run, "started", 1 << 52, {}),
            (run, "failed", -5, {"reason": "HTTP 503 \u2603", "status_code": 503,
                                 "retry_at_us": 1 << 60, "duration_us": 0}),
        ]  # fmt: skip
        return all(
            self.value(r, k, at, **d) == self.encoded(r, k, at, **d) for r, k, at, d in samples
        )
