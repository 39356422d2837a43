"""The projected state of one run, merged from RunTriggered, RunRevoked and AttemptEvents.

Every field is a max (or min) over the events seen, so the state does not depend on the
order in which cron.runs and cron.attempts records arrive, and applying an event twice
changes nothing: a replay converges to the same state.

Status rules (the first that applies):

1. *Dispatcher progress*: among attempt-bound events (``started``, ``succeeded``,
   ``failed``, ``timed_out``, ``lease_expired``, ``retry_scheduled``, and any event with
   attempt >= 1) the greatest ``(attempt, rank, at)`` decides. A later attempt beats an
   earlier one; within one attempt ``started`` < ``failed``/``timed_out`` <
   ``retry_scheduled`` < ``cancelled``/``skipped`` < ``dead_lettered`` < ``succeeded``, so a
   late ``started`` never overwrites ``succeeded``.
2. *Lifecycle* (attempt 0): the latest by event time of ``RunTriggered`` (pending), a
   revocation (``RunRevoked`` or the ``revoked`` attempt event: cancelled), ``missed``
   (skipped) and attempt-0 ``skipped``/``cancelled``/``dead_lettered``. A run re-armed by a
   later RunTriggered (a backfill of a missed instant, a re-emission after an update) is
   pending again.
3. Otherwise (only ``accepted`` seen): pending.
"""

from __future__ import annotations

import calendar
import json
import re
import time
from dataclasses import dataclass
from typing import Any

from schedulerstream.ids import INSTANT_FORMAT
from schedulerstream.jsontext import compact
from schedulerstream.notices import NOTIFICATION
from schedulerstream.readmodel import RunRow

# within one attempt: rank and the status it means
ATTEMPT_RANK: dict[str, tuple[int, str]] = {
    "accepted": (0, "pending"),
    "started": (1, "running"),
    "failed": (2, "failed"),
    "timed_out": (2, "timed_out"),
    "lease_expired": (2, "timed_out"),
    "retry_scheduled": (3, "pending"),
    "revoked": (4, "cancelled"),
    "cancelled": (4, "cancelled"),
    "skipped": (4, "skipped"),
    "missed": (4, "skipped"),
    "dead_lettered": (5, "dead_lettered"),
    "succeeded": (6, "succeeded"),
}
ATTEMPT_BOUND = frozenset(
    {"started", "succeeded", "failed", "timed_out", "lease_expired", "retry_scheduled"}
)
# attempt-0 lifecycle: tie-break priority (same instant) and status
LIFECYCLE: dict[str, tuple[int, str]] = {
    "triggered": (0, "pending"),
    "missed": (1, "skipped"),
    "skipped": (1, "skipped"),
    "revoked": (2, "cancelled"),
    "cancelled": (2, "cancelled"),
    "dead_lettered": (3, "dead_lettered"),
}
KINDS = frozenset(ATTEMPT_RANK)
TERMINAL = frozenset(
    {"succeeded", "failed", "timed_out", "lease_expired", "cancelled", "skipped", "dead_lettered"}
)
NO_ERROR_KINDS = frozenset({"accepted", "started", "succeeded"})
FAILURES = frozenset({"failed", "timed_out", "lease_expired"})  # an error even without a reason
DEFAULT_ERRORS = {"timed_out": "timed out", "lease_expired": "worker lease expired"}

# where scheduled_at came from: a higher source wins
FROM_EVENT_TIME, FROM_RUN_ID, FROM_ATTEMPT, FROM_RUNS_TOPIC = 0, 1, 2, 3
_SUFFIX = re.compile(
    r"^(?:(?:(?P<instant>\d{8}T\d{6}Z)(?:~[A-Za-z0-9._:-]{1,128})?|manual-[A-Za-z0-9._:-]{1,128})"
    r"(?:!dead_lettered)?|v\d{1,19}!paused"  # notifications (``notices``)
    r"|never|stopped)$"  # the scheduler's ``missed`` events about a job, not a run of it
)


def run_id_suffix_ok(suffix: str) -> bool:
    """True for the part after '@' of a run id of DESIGN.md §2."""
    return _SUFFIX.match(suffix) is not None


def instant_of_run_id(run_id: str) -> int | None:
    """The scheduled instant encoded in a scheduled/backfill run id (None for manual runs)."""
    match = _SUFFIX.match(run_id.partition("@")[2])
    if match is None or match.group("instant") is None:
        return None
    parsed = time.strptime(match.group("instant"), INSTANT_FORMAT)
    return calendar.timegm(parsed) * 1_000_000


def trigger_of_run_id(run_id: str) -> str:
    suffix = run_id.partition("@")[2]
    if "!" in suffix:
        return NOTIFICATION
    if suffix.startswith("manual-"):
        return "manual"
    return "backfill" if "~" in suffix else "scheduled"


def error_text(kind: str, reason: str | None, status_code: int | None) -> str:
    text = reason or DEFAULT_ERRORS.get(kind, kind)
    return text if status_code is None or reason else f"{text} (status {status_code})"


@dataclass
class RunState:
    """The merge state of one run (stored as JSON in the projector's state store)."""

    run_id: str
    tenant: str
    job_id: str
    sched: int
    sched_source: int
    trigger: str | None = None
    trigger_key: list[int] | None = None  # [job_version, emitted_at] of the trigger used
    life: list[Any] | None = None  # [at, priority, status]
    best: list[Any] | None = None  # [attempt, rank, at, kind]
    error: list[Any] | None = None  # [attempt, at, kind, text]
    started_at: int | None = None
    attempts: int = 0
    updated_at: int = 0

    def encode(self) -> bytes:
        return compact(vars(self)).encode()

    @classmethod
    def decode(cls, data: bytes) -> RunState:
        return cls(**json.loads(data))

    @classmethod
    def new(cls, run_id: str, tenant: str, job_id: str, at_us: int) -> RunState:
        instant = instant_of_run_id(run_id)
        if instant is None:
            return cls(run_id, tenant, job_id, at_us, FROM_EVENT_TIME)
        return cls(run_id, tenant, job_id, instant, FROM_RUN_ID)

    # -- merging --------------------------------------------------------------------------
    def _scheduled(self, value: int | None, source: int) -> None:
        if value is None:
            return
        if (source, -value) > (self.sched_source, -self.sched):
            self.sched, self.sched_source = value, source

    def _touch(self, at_us: int) -> None:
        self.updated_at = max(self.updated_at, at_us)

    def _life(self, at_us: int, kind: str) -> None:
        priority, status = LIFECYCLE[kind]
        candidate = [at_us, priority, status]
        if self.life is None or candidate > self.life:
            self.life = candidate

    def _error(self, attempt: int, at_us: int, kind: str, text: str) -> None:
        candidate = [attempt, at_us, kind, text]
        if self.error is None or candidate > self.error:
            self.error = candidate

    def on_triggered(self, record: dict[str, Any]) -> None:
        self._scheduled(record["scheduled_at_us"], FROM_RUNS_TOPIC)
        key = [record["job_version"], record["emitted_at_us"]]
        if self.trigger_key is None or key > self.trigger_key:
            self.trigger_key, self.trigger = key, record["trigger"]
        self._life(record["emitted_at_us"], "triggered")
        self._touch(record["emitted_at_us"])

    def on_revoked(self, record: dict[str, Any]) -> None:
        at = record["revoked_at_us"]
        self._scheduled(record["scheduled_at_us"], FROM_RUNS_TOPIC)
        self._life(at, "revoked")
        self._error(0, at, "revoked", record["reason"])
        self._touch(at)

    def on_attempt(self, record: dict[str, Any]) -> None:
        kind, attempt, at = record["kind"], record["attempt"], record["at_us"]
        self._scheduled(record["scheduled_at_us"], FROM_ATTEMPT)
        self.attempts = max(self.attempts, attempt)
        if kind == "started" and (self.started_at is None or at < self.started_at):
            self.started_at = at
        if kind in ATTEMPT_BOUND or attempt >= 1:
            candidate = [attempt, ATTEMPT_RANK[kind][0], at, kind]
            if self.best is None or candidate > self.best:
                self.best = candidate
        elif kind in LIFECYCLE:
            self._life(at, kind)
        if kind in FAILURES or (kind not in NO_ERROR_KINDS and record["reason"]):
            text = error_text(kind, record["reason"], record["status_code"])
            self._error(attempt, at, kind, text)
        self._touch(at)

    # -- reading --------------------------------------------------------------------------
    def order(self) -> tuple[int, str]:
        """How runs of one job are ordered (newest = greatest): scheduled instant, run id."""
        return self.sched, self.run_id

    def status(self) -> tuple[str, int | None]:
        """(status, finished_at_us)."""
        if self.best is not None:
            status, at = ATTEMPT_RANK[self.best[3]][1], self.best[2]
        elif self.life is not None:
            status, at = self.life[2], self.life[0]
        else:
            return "pending", None
        return status, at if status in TERMINAL else None

    def row(self) -> RunRow:
        status, finished = self.status()
        return RunRow(
            run_id=self.run_id,
            tenant=self.tenant,
            job_id=self.job_id,
            trigger=self.trigger or trigger_of_run_id(self.run_id),
            status=status,
            scheduled_at_us=self.sched,
            started_at_us=self.started_at,
            finished_at_us=finished,
            attempts=self.attempts,
            last_error=None if self.error is None else self.error[3],
            updated_at_us=self.updated_at,
        )
