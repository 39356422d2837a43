"""What one input record does to a partition's projection: new store state, read-model
changes and cron.run-state records. No Kafka or SQL code lives here.

Retention: each job keeps its newest ``keep_per_job`` runs (by scheduled instant, then run
id). Older runs are deleted from the read model and tombstoned on cron.run-state; the newest
pruned run becomes the job's floor, and later events of runs at or below it are ignored.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from schedulerstream.codec import Codec
from schedulerstream.errors import UndecodableRecord
from schedulerstream.ingest import decode_schedule, job_key_from_record_key
from schedulerstream.limits import RecordLimits
from schedulerstream.notices import is_notification
from schedulerstream.projector import keys
from schedulerstream.projector.connect import encode_run_state
from schedulerstream.projector.events import RunEvent
from schedulerstream.projector.jobstate import JobDef, JobRuns, job_row
from schedulerstream.projector.runstate import RunState
from schedulerstream.projector.staged import Staged
from schedulerstream.readmodel import AttemptRow, Changes
from schedulerstream.runtime.store import StateStore

FIRED_TRIGGERS = ("scheduled", "catch_up")


@dataclass
class Effects:
    """The read-model changes and the cron.run-state records (None = tombstone) of a record."""

    changes: Changes = field(default_factory=Changes)
    run_state: dict[str, bytes | None] = field(default_factory=dict)


class Projection:
    """The projector's state machine for one partition."""

    def __init__(
        self,
        codec: Codec,
        keep_per_job: int = 100,
        next_fires: int = 3,
        limits: RecordLimits | None = None,
    ) -> None:
        if keep_per_job < 1:
            raise ValueError("keep_per_job must be at least 1")
        self.codec = codec
        self.limits = limits  # the scheduler's: a job it rejects is not shown as accepted
        self.keep_per_job = keep_per_job
        self.next_fires = next_fires

    # -- cron.schedules -------------------------------------------------------------------
    def on_schedule(
        self, store: Staged, key: bytes | None, value: bytes | None, stamp_us: int
    ) -> Effects:
        """A definition (higher version wins) or a tombstone (marks the job deleted)."""
        job_key = job_key_from_record_key(key)
        old = _load_def(store, job_key)
        if value is None:
            new = None if old is None else old.delete(stamp_us)
        else:
            upsert = decode_schedule(self.codec, key, value, stamp_us, self.limits)
            new = JobDef.accept(old, upsert.job, stamp_us)
        effects = Effects()
        if new is not None:
            store.put(keys.def_key(job_key), new.encode())
            self._job_changed(store, effects, job_key, new, _load_runs(store, job_key))
        return effects

    # -- cron.runs and cron.attempts ------------------------------------------------------
    def on_run_event(self, store: Staged, event: RunEvent, seq: int) -> Effects:
        """Merge one RunTriggered, RunRevoked or AttemptEvent into its run and job."""
        effects = Effects()
        job_key, record = event.job_key, event.record
        runs = _load_runs(store, job_key)
        raw = store.get(keys.run_key(event.run_id))
        at = record.get("at_us", record.get("emitted_at_us", record.get("revoked_at_us", 0)))
        run = (
            RunState.new(event.run_id, event.tenant, event.job_id, at)
            if raw is None
            else RunState.decode(raw)
        )
        before_order = None if raw is None else run.order()
        if event.name == "RunTriggered":
            run.on_triggered(record)
        elif event.name == "RunRevoked":
            run.on_revoked(record)
        else:
            run.on_attempt(record)
        if raw is None and runs.below_floor(run.order()):
            return effects  # older than every run the job keeps: already pruned
        old_runs = runs.encode()
        self._fired(runs, event, run)
        if event.name == "AttemptEvent":
            effects.changes.attempts.append(_attempt_row(record, seq))
        encoded = run.encode()
        if encoded != raw:
            store.put(keys.run_key(run.run_id), encoded)
            if before_order != run.order():
                if before_order is not None:
                    store.delete(keys.index_key(job_key, *before_order), logged=False)
                else:
                    runs.count += 1
                store.put(keys.index_key(job_key, *run.order()), b"", logged=False)
            row = run.row()
            effects.changes.put_run(row)
            effects.run_state[run.run_id] = encode_run_state(row)
            self._newest(store, runs, job_key, run, before_order)
            self._prune(store, runs, job_key, effects)
        new_runs = runs.encode()
        if new_runs != old_runs:
            store.put(keys.runs_key(job_key), new_runs)
            job = _load_def(store, job_key)
            if job is not None:
                self._job_changed(store, effects, job_key, job, runs)
        return effects

    def _fired(self, runs: JobRuns, event: RunEvent, run: RunState) -> None:
        record = event.record
        fired = (event.name == "RunTriggered" and record["trigger"] in FIRED_TRIGGERS) or (
            event.name == "AttemptEvent" and record["kind"] == "missed"
        )
        if fired and (runs.fired is None or run.sched > runs.fired):
            runs.fired = run.sched

    def _newest(
        self, store: Staged, runs: JobRuns, job_key: str, run: RunState,
        before: tuple[int, str] | None,
    ) -> None:  # fmt: skip
        """Keep ``runs.last`` on the job's newest run (and its status); a notification is no
        run of the job's own target, so it is never the job's last run."""
        if is_notification(run.run_id):
            return
        order = list(run.order())
        if runs.last is None or order >= runs.last[:2]:
            runs.last = [*order, run.status()[0]]
        elif runs.last[1] == run.run_id and before is not None:  # the newest moved back
            newest = None
            for index_key, _ in store.prefix(keys.index_prefix(job_key)):
                found = keys.parse_index_key(index_key, job_key)
                newest = newest if is_notification(found[1]) else found
            if newest is not None:
                raw = store.get(keys.run_key(newest[1]))
                status = "pending" if raw is None else RunState.decode(raw).status()[0]
                runs.last = [*newest, status]

    def _prune(self, store: Staged, runs: JobRuns, job_key: str, effects: Effects) -> None:
        excess = runs.count - self.keep_per_job
        if excess <= 0:
            return
        oldest = [k for k, _ in _take(store.prefix(keys.index_prefix(job_key)), excess)]
        for index_key in oldest:
            scheduled, run_id = keys.parse_index_key(index_key, job_key)
            store.delete(index_key, logged=False)
            store.delete(keys.run_key(run_id))
            runs.count -= 1
            if runs.floor is None or [scheduled, run_id] > runs.floor:
                runs.floor = [scheduled, run_id]
            effects.changes.delete_run(run_id)
            effects.run_state[run_id] = None

    def _job_changed(
        self, store: Staged, effects: Effects, job_key: str, job: JobDef, runs: JobRuns
    ) -> None:
        tenant, job_id = job_key.split("/", 1)
        effects.changes.jobs[(tenant, job_id)] = job_row(tenant, job_id, job, runs, self.next_fires)

    # -- restore and resync ---------------------------------------------------------------
    def restore_record(self, store: StateStore, key: bytes, value: bytes | None) -> None:
        """Apply one changelog record, keeping the (unlogged) run index in step (a run state
        that cannot be read raises ``UndecodableRecord`` first: the restore skips it)."""
        if key.startswith(keys.RUN_PREFIX):
            new_key = None
            if value is not None:
                try:
                    new = RunState.decode(value)
                    new_key = keys.index_key(f"{new.tenant}/{new.job_id}", *new.order())
                except Exception as exc:  # a pure decode of bytes: whatever it raises, unreadable
                    raise UndecodableRecord.at(key, exc) from exc
            old = store.get(key)
            if old is not None:
                run = RunState.decode(old)
                job_key = f"{run.tenant}/{run.job_id}"
                store.delete(keys.index_key(job_key, *run.order()), logged=False)
            if new_key is not None:
                store.put(new_key, b"", logged=False)
        if value is None:
            store.delete(key, logged=False)
        else:
            store.put(key, value, logged=False)

    def snapshot(self, store: StateStore, chunk: int = 1000) -> Iterator[Changes]:
        """Every row this partition's state implies, in chunks (to refill a new read model)."""
        changes = Changes()
        for _, raw in store.prefix(keys.RUN_PREFIX):
            changes.put_run(RunState.decode(raw).row())
            if len(changes.runs) >= chunk:
                yield changes
                changes = Changes()
        for def_key, raw in store.prefix(keys.DEF_PREFIX):
            job_key = def_key[len(keys.DEF_PREFIX) :].decode()
            runs = JobRuns.decode(store.get(keys.runs_key(job_key)) or JobRuns().encode())
            tenant, job_id = job_key.split("/", 1)
            row = job_row(tenant, job_id, JobDef.decode(raw), runs, self.next_fires)
            changes.jobs[(tenant, job_id)] = row
            if len(changes.jobs) >= chunk:
                yield changes
                changes = Changes()
        if not changes.empty():
            yield changes


def _load_def(store: Staged, job_key: str) -> JobDef | None:
    raw = store.get(keys.def_key(job_key))
    return None if raw is None else JobDef.decode(raw)


def _load_runs(store: Staged, job_key: str) -> JobRuns:
    raw = store.get(keys.runs_key(job_key))
    return JobRuns() if raw is None else JobRuns.decode(raw)


def _attempt_row(record: dict[str, Any], seq: int) -> AttemptRow:
    return AttemptRow(
        run_id=record["run_id"],
        attempt=record["attempt"],
        kind=record["kind"],
        at_us=record["at_us"],
        reason=record["reason"],
        status_code=record["status_code"],
        retry_at_us=record["retry_at_us"],
        duration_us=record["duration_us"],
        count=record["count"],
        seq=seq,
    )


def _take(items: Iterator[tuple[bytes, bytes]], limit: int) -> list[tuple[bytes, bytes]]:
    taken = []
    for item in items:
        taken.append(item)
        if len(taken) >= limit:
            break
    return taken
