"""A target that answered 410 Gone: its job version is not dispatched again.

``gone/{job key}`` → ``{version, reason}`` remembers the newest version that got a 410; runs
of that version or older are skipped at their first start, and the scheduler is asked once
per version to pause the job (it does if the job is still at that version).
"""

from __future__ import annotations

from schedulerstream import notices
from schedulerstream.codec import Codec
from schedulerstream.dispatcher import records as rk
from schedulerstream.dispatcher.index import PartitionIndex
from schedulerstream.dispatcher.records import RunRecord
from schedulerstream.ingest import pause_job_command
from schedulerstream.runtime.store import StateStore
from schedulerstream.targets.base import Outcome


def gone_reason(store: StateStore, index: PartitionIndex, run: RunRecord) -> str | None:
    """Why ``run`` is not to start: its job version's target is gone (None: it is not)."""
    key = rk.gone_key(run.job_key)
    raw = store.get(key) if index.may_exist(key) else None
    if raw is None:
        return None
    gone = rk.decode_json(raw)
    return f"target gone: {gone['reason']}" if gone["version"] >= run.job_version else None


def remember_gone(codec: Codec, store: StateStore, index: PartitionIndex, run: RunRecord,
                  outcome: Outcome, now_us: int) -> bytes | None:  # fmt: skip
    """Record the 410 ``run``'s attempt got; a PauseJob command value the first time for its
    job version (None after)."""
    key = rk.gone_key(run.job_key)
    seen = store.get(key)
    index.mark(key)
    store.put(key, rk.encode_json({"version": run.job_version, "reason": outcome.reason}))
    if seen is not None and rk.decode_json(seen)["version"] >= run.job_version:
        return None
    last = notices.last_attempt(run.attempt, "failed", outcome.status_code, outcome.reason,
                                now_us)  # fmt: skip
    why = f"target gone: {outcome.reason} (run {run.run_id})"
    return pause_job_command(codec, run.job_key, run.job_version, why, now_us, run.run_id,
                             rk.encode_json(last).decode())  # fmt: skip
