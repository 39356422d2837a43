"""Notifications (a job's ``notify``): runs of their own that tell a target a run of the job was
dead-lettered or the job was paused by the system.

A notification is one more run of its job, with trigger ``notification``, the job's retry
policy, timeout and delivery, the notify target and the envelope below as its payload; it is
signed, retried, dead-lettered and shown like any run. Its id is derived from the event, so a
replay or a second ask is the same run (deduplicated by the dispatcher):

- a dead letter: ``{run id}!dead_lettered`` (``acme/reports@20260308T070000Z!dead_lettered``)
- a pause: ``{job key}@v{paused version}!paused`` (``acme/reports@v8!paused``)

A notification never counts towards ``pause_after_failures`` and its own dead letter never
notifies (no loops).
"""

from __future__ import annotations

import time
from typing import Any

from schedulerstream.jsontext import compact

NOTIFICATION = "notification"  # the trigger of a notification run
DEAD_LETTERED, PAUSED = "dead_lettered", "paused"
ENVELOPE_TYPE = "schedulerstream.notification"
MAX_ERROR = 1000  # characters of the last error kept in an envelope


def dead_lettered_id(run_id: str) -> str:
    """The notification run id of ``run_id``'s dead letter."""
    return f"{run_id}!{DEAD_LETTERED}"


def paused_id(job_key: str, paused_version: int) -> str:
    """The notification run id of the pause that wrote ``paused_version``."""
    return f"{job_key}@v{paused_version}!{PAUSED}"


def is_notification(run_id: str) -> bool:
    return "!" in run_id.partition("@")[2]


def iso(at_us: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at_us // 1_000_000))


def _cut(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_ERROR:
        return text
    return text[: MAX_ERROR - 1] + "…"


def last_attempt(
    attempt: int, outcome: str, status_code: int | None, error: str | None, at_us: int
) -> dict[str, Any]:
    """The envelope's ``last_attempt``: how the run's last attempt ended."""
    return {"attempt": attempt, "outcome": outcome, "status_code": status_code,
            "error": _cut(error), "at": iso(at_us)}  # fmt: skip


def envelope(
    event: str, tenant: str, job_id: str, job_version: int, run_id: str | None,
    reason: str | None, last: dict[str, Any] | None,
) -> str:  # fmt: skip
    """The payload (JSON text) of a notification run."""
    value = {"type": ENVELOPE_TYPE, "event": event, "tenant": tenant, "job_id": job_id,
             "job_version": job_version, "run_id": run_id, "reason": _cut(reason),
             "last_attempt": last}  # fmt: skip
    return compact(value)
