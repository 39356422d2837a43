"""What the end of a run means for its job (issue #16): the count of consecutive failed runs
that pauses it (``pause_after_failures``) and the notification of a dead letter (``notify``).

The count lives in the partition's store, ``fails/{job key}`` → ``{"version", "count"}``
(changelogged: runs and their job share a partition, and the store commits with the outcomes,
so a replay or a move continues the count and never counts an outcome twice):

- a run ending dead-lettered, failed (not a 410: that pauses by itself), timed out or with its
  worker lease expired, for good, adds one; a success deletes the key; skipped, cancelled and
  revoked runs change nothing;
- a run of a newer job version starts the count again (a fix, a resume); an older version's run
  ending late changes nothing;
- at N, a ``PauseJob`` for the run's version goes to cron.commands in the same transaction (the
  scheduler pauses the job if it is still at that version, as for a 410) and the count restarts.

Notifications never count and their own dead letters never notify.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from schedulerstream import notices
from schedulerstream.codec import Codec
from schedulerstream.dispatch_spec import DispatchSpec
from schedulerstream.dispatcher import records as rk
from schedulerstream.dispatcher.records import RunRecord
from schedulerstream.ingest import pause_job_command
from schedulerstream.runtime.store import StateStore

COUNTED = frozenset({"dead_lettered", "failed", "timed_out", "lease_expired"})


@dataclass(frozen=True, slots=True)
class Aftermath:
    """What to do beside a run's terminal event: ask for a pause, admit a notification."""

    pause: bytes | None = None  # a PauseJob command value for cron.commands
    notice: RunRecord | None = None  # a notification run to queue on this partition


NOTHING = Aftermath()


def fails_key(job_key: str) -> bytes:
    return b"fails/" + job_key.encode()


def after_finish(
    codec: Codec, store: StateStore, run: RunRecord, spec: DispatchSpec | None, kind: str,
    reason: str | None, now_us: int, *, status_code: int | None = None,
    last_kind: str | None = None, counts: bool = True,
) -> Aftermath:  # fmt: skip
    """The aftermath of ``run`` ending as ``kind`` (its terminal event is being written).

    ``last_kind`` is the outcome of the last attempt when the run ends otherwise (a dead letter
    after a failed attempt); ``counts`` is False for a 410 (which pauses the job by itself)."""
    if spec is None or run.trigger == notices.NOTIFICATION:
        return NOTHING
    notify = kind == "dead_lettered" and notices.DEAD_LETTERED in spec.notify_on
    if spec.pause_after_failures is None and not notify:
        return NOTHING  # most runs: nothing to count or notify
    error = run.last_error if kind == "dead_lettered" else reason
    last = notices.last_attempt(run.attempt, last_kind or kind, status_code, error, now_us)
    pause = None
    if spec.pause_after_failures is not None and (counts or kind == "succeeded"):
        pause = _count(codec, store, run, spec.pause_after_failures, kind, reason, last, now_us)
    notice = None
    if notify:
        payload = notices.envelope(notices.DEAD_LETTERED, run.tenant, run.job_id,
                                   run.job_version, run.run_id, reason, last)  # fmt: skip
        notice = RunRecord(
            notices.dead_lettered_id(run.run_id), run.tenant, run.job_id, run.scheduled_at_us,
            now_us, now_us, notices.NOTIFICATION, payload, run.job_version, spec.notice(),
        )  # fmt: skip
    return Aftermath(pause, notice)


def _count(
    codec: Codec, store: StateStore, run: RunRecord, limit: int, kind: str, reason: str | None,
    last: dict[str, Any], now_us: int,
) -> bytes | None:  # fmt: skip
    """Count ``run``'s end; the PauseJob value when it is the ``limit``-th failure in a row."""
    key = fails_key(run.job_key)
    raw = store.get(key)
    seen = None if raw is None else rk.decode_json(raw)
    if seen is not None and seen["version"] > run.job_version:
        return None  # a run of an older version ended late
    if kind == "succeeded":
        if seen is not None:
            store.delete(key)
        return None
    if kind not in COUNTED:
        return None
    count = 1 if seen is None or seen["version"] < run.job_version else seen["count"] + 1
    tripped = count >= limit
    store.put(key, rk.encode_json({"version": run.job_version, "count": 0 if tripped else count}))
    if not tripped:
        return None
    why = f"paused after {limit} consecutive failed runs (last: {run.run_id}: {kind}: {reason})"
    return pause_job_command(codec, run.job_key, run.job_version, why, now_us, run.run_id,
                             rk.encode_json(last).decode())  # fmt: skip
