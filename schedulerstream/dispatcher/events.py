"""AttemptEvents: every state change of a run, on cron.attempts keyed by run id."""

from __future__ import annotations

from typing import Any, Protocol

from schedulerstream.codec import Codec
from schedulerstream.dispatcher.records import RunRecord


class Output(Protocol):
    """Where the logic's records go (the task context in production, a list in tests)."""

    def produce(self, topic: str, key: bytes, value: bytes | None, partition: int) -> None: ...


class EventWriter:
    """Encodes AttemptEvents for one dispatcher instance."""

    def __init__(self, codec: Codec, topic: str, instance: str) -> None:
        self.codec = codec
        self.topic = topic
        self.instance = instance

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
