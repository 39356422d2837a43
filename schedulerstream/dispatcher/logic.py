"""DispatchLogic: the dispatcher's pure state machine for the partitions of one process.

Input records, outcomes and ticks change the partition's store and produce AttemptEvents (and
retry records) through an ``Output``; what must happen outside (start a delivery, abort one)
is returned as ``Start``/``Cancel`` actions. No Kafka, no HTTP, no clock of its own.

The queues and active sets are served from an in-memory ``PartitionIndex`` (rebuilt in
``on_running``), so a start costs point reads, never a range scan of the store.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from schedulerstream import notices
from schedulerstream.codec import Codec
from schedulerstream.dispatcher import records as rk
from schedulerstream.dispatcher.aftermath import after_finish
from schedulerstream.dispatcher.backoff import backoff_us, tier_for
from schedulerstream.dispatcher.events import EventWriter, Output
from schedulerstream.dispatcher.fairness import DeficitRing
from schedulerstream.dispatcher.index import PartitionIndex
from schedulerstream.dispatcher.limits import Limits
from schedulerstream.dispatcher.records import RunRecord
from schedulerstream.dispatcher.spec import DispatchSpec, SpecReader, TargetConfig
from schedulerstream.ingest import decode_command, pause_job_command
from schedulerstream.model import HttpTarget, SqsTarget
from schedulerstream.runtime.store import StateStore, prefix_end
from schedulerstream.targets.base import Delivery, Outcome

# Finished runs are remembered (to drop replays) longer than cron.runs keeps records (7 d).
DEDUPE_RETENTION_US = 8 * 86_400 * 1_000_000
PRUNE_EVERY_US = 1_000_000
# attempt outcomes after which the target may or may not have done the work
UNKNOWN_OUTCOMES = frozenset({"timed_out", "lease_expired"})


@dataclass(frozen=True, slots=True)
class Start:
    """Begin ``delivery`` (attempt ``delivery.attempt``) to ``target``; a Limits slot is held."""

    partition: int
    tenant: str
    delivery: Delivery
    target: TargetConfig
    host: str | None = None  # the Limits lane of the target's host (None: no host limit)


@dataclass(frozen=True, slots=True)
class Cancel:
    """Abort the in-flight ``attempt`` of ``run_id``."""

    partition: int
    run_id: str
    attempt: int


Action = Start | Cancel


@dataclass(frozen=True, slots=True)
class Topics:
    attempts: str
    tiers: tuple[tuple[str, int], ...] = ()  # (delay topic, delay µs), shortest first
    commands: str = "cron.commands"  # a 410 sends PauseJob here


@dataclass(slots=True)
class Counters:
    accepted: int = 0
    duplicates: int = 0
    started: int = 0
    late_outcomes: int = 0
    finished: dict[str, int] = field(default_factory=dict)


def target_host(target: TargetConfig) -> str | None:
    """The host (with port) a delivery connects to, for the per-host limit; None when the
    attempt is produced in the dispatcher's own transaction (Kafka) or pulled (workers)."""
    if isinstance(target, HttpTarget):
        url = target.url
    elif isinstance(target, SqsTarget):
        url = target.queue_url
    else:
        return None
    return urlsplit(url).netloc.lower() or None


class DispatchLogic:
    """Runs, revocations, cancellations, outcomes and ticks → state, events and actions."""

    def __init__(
        self,
        codec: Codec,
        topics: Topics,
        limits: Limits,
        instance: str,
        *,
        weights: Mapping[str, float] | None = None,
        start_budget: int = 2000,
        retention_us: int = DEDUPE_RETENTION_US,
        prune_budget: int = 1000,
    ) -> None:
        self.codec = codec
        self.topics = topics
        self.limits = limits
        self.events = EventWriter(codec, topics.attempts, instance)
        self.counters = Counters()
        self.specs = SpecReader(codec)
        self._weights: Mapping[str, float] = weights if weights is not None else {}
        self._rings: dict[int, DeficitRing] = {}
        self._index: dict[int, PartitionIndex] = {}
        self._prune_from: dict[int, bytes] = {}  # per partition: where the last prune stopped
        self._prune_at: dict[int, int] = {}
        self._start_budget = start_budget
        self._retention_us = retention_us
        self._prune_budget = prune_budget

    def spec(self, run: RunRecord) -> DispatchSpec:
        """The run's DispatchSpec (read from the snapshot of a record of the older format)."""
        if run.spec is None:
            run.spec = self.specs.read(run.legacy_definition)[1]
            run.legacy_definition = b""
        return run.spec

    def queue_depths(self, partition: int) -> dict[str, int]:
        """Queued runs per tenant of ``partition`` (for metrics; stale entries included)."""
        index = self._index.get(partition)
        return {} if index is None else {t: index.queued(t) for t in index.tenants()}

    # -- inputs ---------------------------------------------------------------------------
    def on_run(self, store: StateStore, out: Output, partition: int, value: bytes | None,
               now_us: int) -> None:  # fmt: skip
        """A cron.runs record: RunTriggered or RunRevoked."""
        name, record = self.codec.decode(value)
        if name == "RunTriggered":
            self._triggered(store, out, partition, record, now_us)
        elif name == "RunRevoked":
            self._revoked(store, out, partition, record, now_us)
        else:
            raise ValueError(f"{name} does not belong on the runs topic")

    def on_retry(self, store: StateStore, partition: int, value: bytes | None) -> None:
        """A delay-topic record came back: the retry is queued locally for its due time."""
        record = self.codec.decode_as("AttemptEvent", value)
        run = self.load(store, record["run_id"])
        if run is None or run.status != rk.WAITING or run.attempt != record["attempt"]:
            return  # cancelled or superseded while it waited on the topic
        self._enqueue(store, partition, run, record["retry_at_us"] or 0)

    def on_command(self, store: StateStore, out: Output, partition: int, key: bytes | None,
                   value: bytes | None, now_us: int) -> list[Action]:  # fmt: skip
        """A cron.commands record: CancelRun is ours; trigger and backfill are the scheduler's."""
        _, kind, fields = decode_command(self.codec, key, value)
        if kind != "CancelRun":
            return []
        run = self.load(store, fields["run_id"])
        if run is None or run.status in rk.TERMINAL:
            return []
        return self._cancel(store, out, partition, run, fields["reason"], now_us)

    def on_outcome(self, store: StateStore, out: Output, partition: int, run_id: str,
                   attempt: int, outcome: Outcome, now_us: int) -> bool:  # fmt: skip
        """The end of one attempt; False when it is late (cancelled, superseded: ignored)."""
        run = self.load(store, run_id)
        if run is None or run.status != rk.IN_FLIGHT or run.attempt != attempt:
            self.counters.late_outcomes += 1
            return False
        extra: dict[str, Any] = {"status_code": outcome.status_code,
                                 "duration_us": outcome.duration_us}  # fmt: skip
        if outcome.succeeded:
            self._finish(store, out, partition, run, "succeeded", now_us, outcome.reason, **extra)
            return True
        if outcome.kind == "gone":
            seen = store.get(rk.gone_key(run.job_key))
            gone = {"version": run.job_version, "reason": outcome.reason}
            store.put(rk.gone_key(run.job_key), rk.encode_json(gone))
            reason = f"target gone: {outcome.reason}"
            if seen is None or rk.decode_json(seen)["version"] < run.job_version:
                # The scheduler pauses the job if it is still at this version (one ask each).
                last = notices.last_attempt(run.attempt, "failed", outcome.status_code,
                                            outcome.reason, now_us)  # fmt: skip
                pause = pause_job_command(self.codec, run.job_key, run.job_version,
                                          f"{reason} (run {run.run_id})", now_us, run.run_id,
                                          rk.encode_json(last).decode())  # fmt: skip
                out.produce(self.topics.commands, run.job_key.encode(), pause, partition)
            self._finish(store, out, partition, run, "failed", now_us, reason, counts=False,
                         **extra)  # fmt: skip
            return True
        kind = outcome.kind if outcome.kind in UNKNOWN_OUTCOMES else "failed"
        unknown = kind in UNKNOWN_OUTCOMES and self.spec(run).delivery == "at_most_once"
        if not outcome.retryable or unknown:  # a timed-out request may have landed
            self._finish(store, out, partition, run, kind, now_us, outcome.reason, **extra)
            return True
        run.last_error = outcome.reason
        self.events.emit(out, partition, run, kind, now_us, reason=outcome.reason, **extra)
        self._retry(store, out, partition, run, now_us, outcome.retry_after_s,
                    (kind, outcome.status_code))  # fmt: skip
        return True

    def on_tick(self, store: StateStore, out: Output, partition: int,
                now_us: int) -> list[Action]:  # fmt: skip
        """Forget long-finished runs; start the due runs that fairness and the limits allow."""
        if now_us >= self._prune_at.get(partition, 0):
            self._prune_at[partition] = now_us + PRUNE_EVERY_US
            self._prune(store, partition, now_us)
        return self._select(store, out, partition, now_us)

    def on_running(self, store: StateStore, out: Output, partition: int, now_us: int,
                   adopt: Callable[[RunRecord], bool] | None = None) -> None:  # fmt: skip
        """The task (re)started from committed state: rebuild the index and the tenant ring;
        runs that were in flight are re-queued for their next attempt (at_least_once) or
        failed as "outcome unknown" (at_most_once), except those ``adopt`` keeps in flight (a
        worker still holds their lease)."""
        index = self._index[partition] = PartitionIndex()
        ring = self._rings[partition] = DeficitRing(self._weights)
        self._prune_from.pop(partition, None)
        for key, raw_id in store.range(b"q/", prefix_end(b"q/")):
            tenant = rk.tenant_of_queue_key(key)
            due_us, seq = rk.queue_entry(key)
            index.push(tenant, due_us, seq, raw_id.decode())
            ring.add(tenant)
        in_flight = []
        for key, _ in list(store.range(b"active/", prefix_end(b"active/"))):
            run = self.load(store, rk.active_run_id(key))
            if run is None or run.status in rk.TERMINAL:
                continue
            index.activate(run.job_key, run.run_id)
            if run.status == rk.IN_FLIGHT and not (adopt is not None and adopt(run)):
                in_flight.append(run)
        for run in in_flight:
            spec = self.spec(run)
            reason = f"outcome unknown: the dispatcher stopped during attempt {run.attempt}"
            if spec.delivery == "at_most_once":
                reason += " (delivery at_most_once: not re-dispatched)"
                self._finish(store, out, partition, run, "failed", now_us, reason)
            elif run.attempt >= spec.retry[0]:
                run.last_error = reason
                self.events.emit(out, partition, run, "failed", now_us, reason=reason)
                self._dead_letter(store, out, partition, run, now_us, "attempts exhausted")
            else:
                run.last_error = reason
                self.events.emit(out, partition, run, "failed", now_us, reason=reason)
                self._enqueue(store, partition, run, now_us)

    # -- ingest ---------------------------------------------------------------------------
    def _triggered(self, store: StateStore, out: Output, partition: int,
                   rec: dict[str, Any], now_us: int) -> None:  # fmt: skip
        old = self.load(store, rec["run_id"])
        if old is not None:
            rearm = old.status == rk.REVOKED and rec["job_version"] >= old.job_version
            update = old.not_started and rec["job_version"] > old.job_version
            if not (rearm or update):
                self.counters.duplicates += 1
                return
            self._unindex(store, old)
        job_key, spec = self.specs.read(rec["job_definition"])  # validates (else: rejected)
        if rec["trigger"] == notices.NOTIFICATION:
            spec = spec.notice()  # the job's notify target (the scheduler's "paused" notice)
        run = RunRecord(
            run_id=rec["run_id"], tenant=rec["tenant"], job_id=rec["job_id"],
            scheduled_at_us=rec["scheduled_at_us"], not_before_us=rec["not_before_us"],
            accepted_at_us=now_us, trigger=rec["trigger"], payload_json=rec["payload_json"],
            job_version=rec["job_version"], spec=spec,
        )  # fmt: skip
        if job_key != run.job_key:
            raise ValueError(f"run {run.run_id!r} carries the definition of {job_key!r}")
        self.counters.accepted += 1
        self.events.emit(out, partition, run, "accepted", now_us)
        self._enqueue(store, partition, run, run.not_before_us)

    def _revoked(self, store: StateStore, out: Output, partition: int,
                 rec: dict[str, Any], now_us: int) -> None:  # fmt: skip
        run = self.load(store, rec["run_id"])
        if run is None:  # keep the revocation: an older RunTriggered must not arm it
            run = RunRecord(
                rec["run_id"], rec["tenant"], rec["job_id"], rec["scheduled_at_us"],
                rec["scheduled_at_us"], now_us, "scheduled", None, rec["job_version"], None,
                status=rk.REVOKED, outcome="revoked",
            )  # fmt: skip
            self.save(store, run)
            store.put(rk.done_key(now_us, run.run_id), b"")
            return
        if not run.not_started or run.job_version >= rec["job_version"]:
            return
        self._unindex(store, run)
        run.status, run.outcome = rk.REVOKED, "revoked"
        run.job_version, run.spec = rec["job_version"], None
        self.events.emit(out, partition, run, "revoked", now_us, reason=rec["reason"])
        self.save(store, run)
        store.put(rk.done_key(now_us, run.run_id), b"")

    # -- queues ---------------------------------------------------------------------------
    def _enqueue(self, store: StateStore, partition: int, run: RunRecord, due_us: int) -> None:
        raw = store.get(rk.SEQ_KEY)
        seq = int(raw) + 1 if raw else 1
        store.put(rk.SEQ_KEY, str(seq).encode())
        run.status, run.seq, run.due_us = rk.QUEUED, seq, due_us
        store.put(rk.queue_key(run.tenant, due_us, seq), run.run_id.encode(), logged=False)
        self.save(store, run)
        self._index_of(partition).push(run.tenant, max(0, due_us), seq, run.run_id)
        self._ring(partition).add(run.tenant)

    def _prune(self, store: StateStore, partition: int, now_us: int) -> None:
        """Drop finished runs older than the retention (a replay cannot reach them any more).

        The scan starts where the last one stopped: the keys before it are deleted, and a
        seek from the prefix start would skip all of them again until compaction."""
        start = self._prune_from.get(partition, b"done/")
        old = store.range(start, rk.done_key(now_us - self._retention_us, ""))
        for key, _ in list(itertools.islice(old, self._prune_budget)):
            store.delete(key)
            self._prune_from[partition] = key
            run = self.load(store, rk.done_run_id(key))
            if run is not None and run.status in rk.TERMINAL:
                store.delete(rk.run_key(run.run_id))

    def _index_of(self, partition: int) -> PartitionIndex:
        index = self._index.get(partition)
        if index is None:
            index = self._index[partition] = PartitionIndex()
        return index

    def _ring(self, partition: int) -> DeficitRing:
        ring = self._rings.get(partition)
        if ring is None:
            ring = self._rings[partition] = DeficitRing(self._weights)
        return ring

    def _select(self, store: StateStore, out: Output, partition: int,
                now_us: int) -> list[Action]:  # fmt: skip
        ring = self._ring(partition)
        index = self._index_of(partition)
        actions: list[Action] = []
        budget = [self._start_budget]

        def serve(tenant: str) -> str:
            if budget[0] <= 0 or self.limits.full():
                return "blocked"
            return self._serve(store, out, partition, index, tenant, now_us, actions, budget)

        while ring and budget[0] > 0 and not self.limits.full():
            if not ring.round(serve):
                break
        return actions

    def _serve(self, store: StateStore, out: Output, partition: int, index: PartitionIndex,
               tenant: str, now_us: int, actions: list[Action],
               budget: list[int]) -> str:  # fmt: skip
        head = index.head(tenant)
        if head is None:
            return "empty"
        due_us, seq, run_id = head
        if due_us > now_us:
            return "blocked"  # the tenant's earliest run is not due yet
        qkey = rk.queue_key(tenant, due_us, seq)
        run = self.load(store, run_id)
        if run is None or run.status != rk.QUEUED or run.seq != seq:
            index.pop(tenant)  # cancelled, revoked or re-queued since
            store.delete(qkey, logged=False)
            return "skipped"
        if run.attempt == 0 and not self._first_start_allowed(
            store, out, partition, index, run, qkey, now_us, actions
        ):
            index.pop(tenant)
            return "skipped"
        host = target_host(self.spec(run).target)
        if not self.limits.acquire(tenant, now_us, host):
            return "blocked"
        store.delete(qkey, logged=False)
        index.pop(tenant)
        actions.append(self._start(store, out, partition, run, now_us, host))
        budget[0] -= 1
        return "started"

    def _active_others(self, store: StateStore, index: PartitionIndex,
                       run: RunRecord) -> list[RunRecord]:  # fmt: skip
        """The job's other runs that started and have not finished."""
        others = []
        for other_id in index.active(run.job_key):
            if other_id == run.run_id or notices.is_notification(other_id):
                continue  # a notification neither waits for nor blocks the job's runs
            other = self.load(store, other_id)
            if other is not None and other.status not in rk.TERMINAL:
                others.append(other)
            else:
                index.deactivate(run.job_key, other_id)
        return others

    def _first_start_allowed(self, store: StateStore, out: Output, partition: int,
                             index: PartitionIndex, run: RunRecord, qkey: bytes, now_us: int,
                             actions: list[Action]) -> bool:  # fmt: skip
        """Gone targets and the overlap policy; False when the run was consumed instead."""
        if run.trigger == notices.NOTIFICATION:
            return True  # it goes to the notify target, whatever the job's target does
        gone_raw = store.get(rk.gone_key(run.job_key))
        if gone_raw is not None and rk.decode_json(gone_raw)["version"] >= run.job_version:
            store.delete(qkey, logged=False)
            reason = f"target gone: {rk.decode_json(gone_raw)['reason']}"
            self._finish(store, out, partition, run, "skipped", now_us, reason)
            return False
        others = self._active_others(store, index, run)
        if not others:
            return True
        policy = self.spec(run).overlap_policy
        if policy == "allow":
            return True
        if policy == "replace":
            for other in others:
                reason = f"replaced by {run.run_id}"
                actions.extend(self._cancel(store, out, partition, other, reason, now_us))
            return True
        store.delete(qkey, logged=False)
        buffered = store.get(rk.buffer_key(run.job_key))
        if policy == "buffer_one" and (buffered is None or buffered.decode() == run.run_id):
            run.status = rk.BUFFERED
            store.put(rk.buffer_key(run.job_key), run.run_id.encode())
            self.save(store, run)
            return False
        reason = f"overlap_policy {policy}: {others[0].run_id} is still active"
        self._finish(store, out, partition, run, "skipped", now_us, reason)
        return False

    # -- attempts -------------------------------------------------------------------------
    def _start(self, store: StateStore, out: Output, partition: int, run: RunRecord,
               now_us: int, host: str | None) -> Start:  # fmt: skip
        spec = self.spec(run)
        run.attempt += 1
        run.status = rk.IN_FLIGHT
        run.deadline_us = now_us + round(spec.timeout * 1e6)
        store.put(rk.active_key(run.job_key, run.run_id), b"", logged=False)
        self._index_of(partition).activate(run.job_key, run.run_id)
        self.save(store, run)
        self.counters.started += 1
        deadline = f"deadline {run.deadline_us} µs"
        self.events.emit(out, partition, run, "started", now_us, reason=deadline)
        delivery = Delivery.from_run(run.run_view(), attempt=run.attempt, deadline=spec.timeout)
        return Start(partition, run.tenant, delivery, spec.target, host)

    def _retry(self, store: StateStore, out: Output, partition: int, run: RunRecord,
               now_us: int, retry_after_s: float | None,
               last: tuple[str, int | None] = ("failed", None)) -> None:  # fmt: skip
        """Retry ``run`` after its attempt ended as ``last`` (kind, status code), or dead-letter
        it when its policy allows no more."""
        policy = self.spec(run).retry_policy
        if run.attempt >= policy.max_attempts:
            self._dead_letter(store, out, partition, run, now_us, f"{run.attempt} attempts", last)
            return
        retry_at = now_us + backoff_us(policy, run.run_id, run.attempt, retry_after_s)
        if retry_at > run.accepted_at_us + round(policy.max_age * 1e6):
            self._dead_letter(store, out, partition, run, now_us, "max_age exceeded", last)
            return
        value = self.events.emit(out, partition, run, "retry_scheduled", now_us,
                                 reason=run.last_error, retry_at_us=retry_at)  # fmt: skip
        tier = tier_for(retry_at - now_us, self.topics.tiers)
        if tier is None:
            self._enqueue(store, partition, run, retry_at)
            return
        run.status, run.due_us = rk.WAITING, retry_at
        out.produce(tier, run.run_id.encode(), value, partition)
        self.save(store, run)

    def _dead_letter(self, store: StateStore, out: Output, partition: int, run: RunRecord,
                     now_us: int, why: str,
                     last: tuple[str, int | None] = ("failed", None)) -> None:  # fmt: skip
        reason = f"{why}; last error: {run.last_error}"
        self._finish(store, out, partition, run, "dead_lettered", now_us, reason,
                     status_code=last[1], last_kind=last[0])  # fmt: skip

    def _cancel(self, store: StateStore, out: Output, partition: int, run: RunRecord,
                reason: str, now_us: int) -> list[Action]:  # fmt: skip
        actions: list[Action] = []
        if run.status == rk.IN_FLIGHT:
            actions.append(Cancel(partition, run.run_id, run.attempt))
        self._unindex(store, run)
        self._finish(store, out, partition, run, "cancelled", now_us, reason)
        return actions

    def _finish(self, store: StateStore, out: Output, partition: int, run: RunRecord,
                kind: str, now_us: int, reason: str | None, *, status_code: int | None = None,
                duration_us: int | None = None, last_kind: str | None = None,
                counts: bool = True) -> None:  # fmt: skip
        """A terminal event; the run leaves the job's active set, freeing a buffered run. Its
        aftermath (``aftermath``): a pause after N failed runs, a dead letter's notification."""
        if kind != "dead_lettered":  # a dead letter's status code is its last attempt's
            self.events.emit(out, partition, run, kind, now_us, reason=reason,
                             status_code=status_code, duration_us=duration_us)  # fmt: skip
        else:
            self.events.emit(out, partition, run, kind, now_us, reason=reason)
        spec = run.spec if run.spec is not None or not run.legacy_definition else self.spec(run)
        after = after_finish(self.codec, store, run, spec, kind, reason, now_us,
                             status_code=status_code, last_kind=last_kind,
                             counts=counts)  # fmt: skip
        if after.pause is not None:
            out.produce(self.topics.commands, run.job_key.encode(), after.pause, partition)
        if after.notice is not None:
            self._admit(store, out, partition, after.notice, now_us)
        store.delete(rk.active_key(run.job_key, run.run_id), logged=False)
        index = self._index_of(partition)
        index.deactivate(run.job_key, run.run_id)
        run.status, run.outcome, run.spec, run.legacy_definition = rk.DONE, kind, None, b""
        run.last_error = reason if kind != "succeeded" else None
        self.save(store, run)
        store.put(rk.done_key(now_us, run.run_id), b"")
        self.counters.finished[kind] = self.counters.finished.get(kind, 0) + 1
        buffered = store.get(rk.buffer_key(run.job_key))
        if buffered is None or buffered.decode() == run.run_id:
            return
        waiting = self.load(store, buffered.decode())
        if waiting is None or waiting.status != rk.BUFFERED:
            store.delete(rk.buffer_key(run.job_key))
        elif not self._active_others(store, index, waiting):
            store.delete(rk.buffer_key(run.job_key))
            self._enqueue(store, partition, waiting, now_us)

    def _admit(self, store: StateStore, out: Output, partition: int, run: RunRecord,
               now_us: int) -> None:  # fmt: skip
        """Queue a run made here (a notification): once per id, like a RunTriggered."""
        if self.load(store, run.run_id) is not None:
            self.counters.duplicates += 1
            return
        self.counters.accepted += 1
        self.events.emit(out, partition, run, "accepted", now_us)
        self._enqueue(store, partition, run, run.not_before_us)

    def _unindex(self, store: StateStore, run: RunRecord) -> None:
        """Remove ``run`` from its tenant queue and the job's buffer slot (the in-memory queue
        entry is dropped when it reaches the head)."""
        if run.status == rk.QUEUED:
            store.delete(rk.queue_key(run.tenant, run.due_us, run.seq), logged=False)
        elif run.status == rk.BUFFERED:
            store.delete(rk.buffer_key(run.job_key))

    # -- records --------------------------------------------------------------------------
    @staticmethod
    def restore_record(store: StateStore, key: bytes, value: bytes | None) -> None:
        """Apply one changelog record while restoring, rebuilding the unlogged indexes.

        ``q/`` and ``active/`` keys are derived from run records, never changelogged: a run
        record puts or deletes the queue key of its (tenant, due, seq) and its active key.
        (A queue key of an earlier position compacted away stays behind: it is dropped when
        it reaches the head of its queue.)"""
        if value is None:
            store.delete(key, logged=False)
        else:
            store.put(key, value, logged=False)
        if value is None or not key.startswith(rk.RUN_PREFIX):
            return
        run = RunRecord.from_bytes(value)
        qkey = rk.queue_key(run.tenant, run.due_us, run.seq)
        if run.status == rk.QUEUED:
            store.put(qkey, run.run_id.encode(), logged=False)
        else:
            store.delete(qkey, logged=False)
        akey = rk.active_key(run.job_key, run.run_id)
        if run.attempt > 0 and run.status not in rk.TERMINAL:
            store.put(akey, b"", logged=False)
        else:
            store.delete(akey, logged=False)

    @staticmethod
    def load(store: StateStore, run_id: str) -> RunRecord | None:
        raw = store.get(rk.run_key(run_id))
        return None if raw is None else RunRecord.from_bytes(raw)

    @staticmethod
    def save(store: StateStore, run: RunRecord) -> None:
        store.put(rk.run_key(run.run_id), run.to_bytes())
