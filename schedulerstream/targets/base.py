"""What every dispatch target shares: the attempt to deliver, its outcome, and the Protocol.

A target knows nothing of consumer loops or state stores: the dispatcher hands it one
``Delivery`` and the job's target configuration, and gets one ``Outcome`` back. To cancel an
attempt the dispatcher cancels the task running ``deliver``; the target lets ``CancelledError``
through after aborting its in-flight request.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from pydantic import JsonValue

OutcomeKind = Literal["succeeded", "failed", "timed_out", "lease_expired", "gone", "refused"]
ConfigT_contra = TypeVar("ConfigT_contra", contravariant=True)


@dataclass(frozen=True, slots=True)
class Delivery:
    """One attempt of one run: what is sent and how long it may take (``deadline`` seconds).

    ``payload_json`` is the payload's JSON text as the run carries it (checked once, where the
    run's first attempt starts): envelopes splice it in, so an attempt parses, copies and
    encodes no payload (a 256 KiB one cost ~10 ms a time)."""

    run_id: str
    tenant: str
    job_id: str
    scheduled_at_us: int
    attempt: int
    trigger: str
    payload_json: str | None
    deadline: float

    @property
    def payload(self) -> JsonValue:
        """The payload as a value (parsed on each call)."""
        return None if self.payload_json is None else json.loads(self.payload_json)

    def __post_init__(self) -> None:
        if self.attempt < 1:
            raise ValueError(f"attempt must be at least 1 (got {self.attempt})")
        if not self.deadline > 0:
            raise ValueError(f"deadline must be positive seconds (got {self.deadline})")

    @classmethod
    def from_run(cls, run: Mapping[str, Any], *, attempt: int, deadline: float) -> Delivery:
        """A delivery of a decoded ``RunTriggered`` record (its payload text as it is)."""
        return cls(
            run_id=run["run_id"],
            tenant=run["tenant"],
            job_id=run["job_id"],
            scheduled_at_us=run["scheduled_at_us"],
            attempt=attempt,
            trigger=run["trigger"],
            payload_json=run.get("payload_json"),
            deadline=deadline,
        )

    def __reduce__(self) -> tuple[type[Delivery], tuple[Any, ...]]:
        # pickled as its fields (to the delivery process): a slots dataclass's own
        # __getstate__ asks ``fields()`` each time, about twice the cost
        return Delivery, (self.run_id, self.tenant, self.job_id, self.scheduled_at_us,
                          self.attempt, self.trigger, self.payload_json, self.deadline)  # fmt: skip


def printable(text: str) -> str:
    """``text`` as valid UTF-8: a byte that was not (kept by ``surrogateescape``, as aiohttp
    decodes headers) becomes U+FFFD, any other lone surrogate "?"."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one attempt ended.

    ``gone``: the target says it no longer exists (HTTP 410): pause the job. ``refused``: the
    attempt was not made (SSRF guard, bad configuration); never retryable. ``timed_out`` and
    ``lease_expired`` (a worker stopped heartbeating) leave the outcome unknown: the work may
    have been done, so ``at_most_once`` runs are not retried after them. ``retry_after_s`` is
    the target's own wish (``Retry-After``), which the dispatcher honours over its backoff.
    """

    kind: OutcomeKind
    reason: str
    retryable: bool
    duration_us: int
    status_code: int | None = None
    retry_after_s: float | None = None

    def __post_init__(self) -> None:
        if not self.reason.isascii():  # text a target sent: bytes not UTF-8 would not encode
            object.__setattr__(self, "reason", printable(self.reason))

    @property
    def succeeded(self) -> bool:
        return self.kind == "succeeded"

    def __reduce__(self) -> tuple[type[Outcome], tuple[Any, ...]]:
        return Outcome, (self.kind, self.reason, self.retryable, self.duration_us,
                         self.status_code, self.retry_after_s)  # fmt: skip


class Sender(Protocol[ConfigT_contra]):
    """A way to deliver a run; ``ConfigT_contra`` is the job's target model (e.g. HttpTarget)."""

    async def deliver(self, delivery: Delivery, target_config: ConfigT_contra) -> Outcome:
        """Make one attempt; never raises for a failed delivery (only on cancellation)."""
        ...

    async def close(self) -> None:
        """Release connections and clients."""
        ...
