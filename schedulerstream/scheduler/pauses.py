"""The pauses the scheduler writes itself: a PauseJob command's (the dispatcher's: a 410, N
failed runs) and a quarantine's (a job whose run could not be written, or whose tick raised):
version + 1, paused with the reason, to cron.schedules, applied here, with its "paused" notice."""

from __future__ import annotations

import logging
from typing import Any, Protocol

from schedulerstream.codec import Codec
from schedulerstream.errors import DependencyDown, StateError
from schedulerstream.limits import RecordLimits
from schedulerstream.model import MAX_PAUSED_REASON
from schedulerstream.scheduler.counters import Counters
from schedulerstream.scheduler.jobs import JobRecords, Store
from schedulerstream.scheduler.pause_notice import paused_notice
from schedulerstream.scheduler.plan import PlanCache
from schedulerstream.scheduler.state import JobState, PendingRun
from schedulerstream.scheduler.timers import next_instant, schedule_next
from schedulerstream.scheduler.writer import Output, RecordWriter, Topics

log = logging.getLogger(__name__)


class Versions(Protocol):
    """What the pauses ask of ``SchedulerLogic``: apply a job's new version, revoke its runs."""

    def on_schedule(
        self, store: Store, out: Output, partition: int, key: bytes | None, value: bytes | None,
        timestamp_us: int, now_us: int,
    ) -> None: ...  # fmt: skip

    def revoke(
        self, out: Output, partition: int, job_key: str, state: JobState, now_us: int,
        version: int, reason: str,
    ) -> list[PendingRun]: ...  # fmt: skip


class Pauses:
    """Pauses jobs for a PauseJob command or a quarantine, and keeps which jobs wait for theirs."""

    def __init__(
        self, codec: Codec, limits: RecordLimits, topics: Topics, jobs: JobRecords,
        plans: PlanCache, writer: RecordWriter, counters: Counters, versions: Versions,
    ) -> None:  # fmt: skip
        self.codec = codec
        self.limits = limits
        self.topics = topics
        self.jobs = jobs
        self.plans = plans
        self.writer = writer
        self.counters = counters
        self.versions = versions
        # per partition: jobs whose run could not be written, paused when the input is done
        self._to_quarantine: dict[int, dict[str, str]] = {}
        # jobs whose tick and quarantine both raised: left out of ticks until a new version
        self.broken: dict[int, set[str]] = {}

    def pause_job(
        self, store: Store, out: Output, partition: int, job_key: str, fields: dict[str, Any],
        now_us: int,
    ) -> None:  # fmt: skip
        """PauseJob: if the job is still at ``job_version`` and running, write version
        ``job_version + 1`` (paused, with the reason) to cron.schedules and apply it here in the
        same transaction. A deleted job, a newer version (a user's fix, a resume: µs versions
        win) or a job already paused (a duplicate) leaves everything as it is."""
        old = self.jobs.load(store, job_key)
        if old is None or old.version != fields["job_version"] or old.paused:
            self.counters.pauses_ignored += 1
            return
        definition = self.jobs.definition_of(store, job_key, old)
        record = self.codec.decode_as("JobDefinition", definition)
        record.update(version=old.version + 1, paused=True, paused_reason=fields["reason"])
        value = self.codec.encode("JobDefinition", record)
        out.produce(self.topics.schedules, job_key.encode(), value, partition)
        self.versions.on_schedule(store, out, partition, job_key.encode(), value, now_us, now_us)
        self.counters.paused_by_command += 1
        self._notify_paused(out, partition, record, fields.get("run_id"),
                            fields.get("last_attempt_json"), now_us)  # fmt: skip

    def _notify_paused(
        self, out: Output, partition: int, record: dict[str, Any], run_id: str | None,
        last_attempt_json: str | None, now_us: int,
    ) -> None:  # fmt: skip
        """The job's "paused" notification, if it asks for one (``pause_notice``); a notice
        the broker refused (or too large) is a ``missed`` event of its own, nothing more."""
        notice = paused_notice(self.codec, record, run_id, last_attempt_json, now_us)
        if notice is None:
            return
        notice_id, value = notice
        tenant, job_id = record["tenant"], record["job_id"]
        reason = out.failed(notice_id)
        if reason is None and len(value) + len(notice_id) > self.limits.max_record_bytes:
            reason = f"its run record is {len(value):,} bytes, over the limit"
        if reason is not None:
            self.writer.attempt(out, partition, notice_id, tenant, job_id, "missed", now_us,
                                now_us, f"notification not emitted: {reason}", 1)  # fmt: skip
            return
        out.produce(self.topics.runs, notice_id.encode(), value, partition, origin=notice_id)
        self.counters.by_trigger["notification"] = (
            self.counters.by_trigger.get("notification", 0) + 1
        )

    def failed_job(self, partition: int, job_key: str, exc: Exception) -> None:
        """One job's tick raised (a bug met by its input): it is quarantined, the tick goes on
        with the others. Runs it emitted before it raised stay emitted."""
        log.error("job %s: its tick failed, it is quarantined", job_key, exc_info=exc)
        self.counters.failed_ticks += 1
        reason = f"the scheduler failed on it ({type(exc).__name__}: {exc})"
        self.quarantine(partition, job_key, reason)

    def quarantine(self, partition: int, job_key: str, reason: str) -> None:
        """Pause the job once the current input or tick is done (``quarantine_jobs``)."""
        self._to_quarantine.setdefault(partition, {}).setdefault(job_key, reason)

    def quarantine_jobs(self, store: Store, out: Output, partition: int, now_us: int) -> None:
        """Pause the jobs whose run could not be written: version + 1, paused, with the reason
        (written to cron.schedules, so the API shows it, and applied here at once). A fix is a
        new version, which resumes it."""
        jobs = self._to_quarantine.pop(partition, None)
        for job_key, reason in (jobs or {}).items():
            try:
                self._quarantine_job(store, out, partition, job_key, reason, now_us)
            except (StateError, DependencyDown):
                raise
            except Exception as exc:  # its record cannot be read back either
                log.error("job %s cannot be quarantined either: this process's ticks leave it "
                          "out until its next version", job_key, exc_info=exc)  # fmt: skip
                self.broken.setdefault(partition, set()).add(job_key)
                tenant, job_id = job_key.split("/", 1)
                stopped = (f"the job stopped: {reason}; it cannot be paused either "
                           f"({type(exc).__name__}: {exc}): its runs resume with its next "
                           "version")  # fmt: skip
                self.writer.attempt(out, partition, f"{job_key}@stopped", tenant, job_id,
                                    "missed", now_us, None, stopped[:1000], 0)  # fmt: skip

    def _quarantine_job(self, store: Store, out: Output, partition: int, job_key: str,
                        reason: str, now_us: int) -> None:  # fmt: skip
        old = self.jobs.load(store, job_key)
        if old is None or old.paused:
            return
        paused_reason = f"quarantined: {reason}"
        if len(paused_reason) > MAX_PAUSED_REASON:
            paused_reason = paused_reason[: MAX_PAUSED_REASON - 1] + "…"
        record = self.codec.decode_as("JobDefinition", self.jobs.definition_of(store, job_key, old))
        record.update(version=old.version + 1, paused=True, paused_reason=paused_reason)
        value = self.codec.encode("JobDefinition", record)
        pause_origin = f"{job_key}#pause"
        if out.failed(pause_origin) is None:  # else the paused version stays local
            out.produce(self.topics.schedules, job_key.encode(), value, partition,
                        origin=pause_origin)  # fmt: skip
        state = old.copy()
        self.versions.revoke(out, partition, job_key, state, now_us, old.version + 1,
                             paused_reason)  # fmt: skip
        state.version, state.definition, state.paused = old.version + 1, value, True
        plan = self.plans.get(job_key, state.version, value, record)
        schedule_next(state, plan, next_instant)
        self.jobs.save(store, job_key, old, state)
        self.counters.quarantined += 1
        self._notify_paused(out, partition, record, None, None, now_us)
