"""DispatchLogic: the dispatcher's pure state machine for the partitions of one process.

Input records, outcomes and ticks change the partition's store and produce AttemptEvents (and
retry records) through an ``Output``; what must happen outside (start a delivery, abort one)
is returned as ``Start``/``Cancel`` actions. No Kafka, no HTTP, no clock of its own.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from schedulerstream.codec import Codec
from schedulerstream.dispatcher import records as rk
from schedulerstream.dispatcher.backoff import backoff_us, tier_for
from schedulerstream.dispatcher.events import EventWriter, Output
from schedulerstream.dispatcher.fairness import DeficitRing
from schedulerstream.dispatcher.limits import Limits
from schedulerstream.dispatcher.records import RunRecord
from schedulerstream.ingest import decode_command
from schedulerstream.model import HttpTarget, JobDefinition, KafkaTarget, SqsTarget, WorkerTarget
from schedulerstream.runtime.store import StateStore, prefix_end
from schedulerstream.targets.base import Delivery, Outcome

# Finished runs are remembered (to drop replays) longer than cron.runs keeps records (7 d).
DEDUPE_RETENTION_US = 8 * 86_400 * 1_000_000
TargetConfig = HttpTarget | KafkaTarget | SqsTarget | WorkerTarget
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


def _decode_definition(codec: Codec, raw: bytes) -> JobDefinition:
    return JobDefinition.from_avro(codec.decode_as("JobDefinition", raw))


class DispatchLogic:
    """Runs, revocations, cancellations, outcomes and ticks → state, events and actions."""

    def __init__(
        self,
        codec: Codec,
        topics: Topics,
        limits: Limits,
        instance: str,
        *,
        weights: Mapping[str, int] | None = None,
        start_budget: int = 2000,
        retention_us: int = DEDUPE_RETENTION_US,
        prune_budget: int = 1000,
    ) -> None:
        self.codec = codec
        self.topics = topics
        self.limits = limits
        self.events = EventWriter(codec, topics.attempts, instance)
        self.counters = Counters()
        self._weights = dict(weights or {})
        self._rings: dict[int, DeficitRing] = {}
        self._start_budget = start_budget
        self._retention_us = retention_us
        self._prune_budget = prune_budget
        self.definition = lru_cache(maxsize=4096)(lambda raw: _decode_definition(codec, raw))

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
                from schedulerstream.ingest import pause_job_command

                # The scheduler pauses the job if it is still at this version (one ask each).
                pause = pause_job_command(self.codec, run.job_key, run.job_version,
                                          f"{reason} (run {run.run_id})", now_us)  # fmt: skip
                out.produce(self.topics.commands, run.job_key.encode(), pause, partition)
            self._finish(store, out, partition, run, "failed", now_us, reason, **extra)
            return True
        kind = outcome.kind if outcome.kind in UNKNOWN_OUTCOMES else "failed"
        unknown = (
            kind in UNKNOWN_OUTCOMES and self.definition(run.definition).delivery == "at_most_once"
        )
        if not outcome.retryable or unknown:  # a timed-out request may have landed
            self._finish(store, out, partition, run, kind, now_us, outcome.reason, **extra)
            return True
        run.last_error = outcome.reason
        self.events.emit(out, partition, run, kind, now_us, reason=outcome.reason, **extra)
        self._retry(store, out, partition, run, now_us, outcome.retry_after_s)
        return True

    def on_tick(self, store: StateStore, out: Output, partition: int,
                now_us: int) -> list[Action]:  # fmt: skip
        """Forget long-finished runs; start the due runs that fairness and the limits allow."""
        self._prune(store, now_us)
        return self._select(store, out, partition, now_us)

    def on_running(self, store: StateStore, out: Output, partition: int, now_us: int,
                   adopt: Callable[[RunRecord], bool] | None = None) -> None:  # fmt: skip
        """The task (re)started from committed state: rebuild the tenant ring; runs that were
        in flight are re-queued for their next attempt (at_least_once) or failed as
        "outcome unknown" (at_most_once), except those ``adopt`` keeps in flight (a worker
        still holds their lease)."""
        ring = self._rings[partition] = DeficitRing(self._weights)
        for tenant in self._queued_tenants(store):
            ring.add(tenant)
        for key, _ in list(store.range(b"active/", prefix_end(b"active/"))):
            run = self.load(store, rk.active_run_id(key))
            if run is None or run.status != rk.IN_FLIGHT or (adopt is not None and adopt(run)):
                continue
            job = self.definition(run.definition)
            reason = f"outcome unknown: the dispatcher stopped during attempt {run.attempt}"
            if job.delivery == "at_most_once":
                reason += " (delivery at_most_once: not re-dispatched)"
                self._finish(store, out, partition, run, "failed", now_us, reason)
            elif run.attempt >= job.retry.max_attempts:
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
        job = self.definition(rec["job_definition"])  # validates the snapshot (else: rejected)
        run = RunRecord(
            run_id=rec["run_id"], tenant=rec["tenant"], job_id=rec["job_id"],
            scheduled_at_us=rec["scheduled_at_us"], not_before_us=rec["not_before_us"],
            accepted_at_us=now_us, trigger=rec["trigger"], payload_json=rec["payload_json"],
            job_version=rec["job_version"], definition=rec["job_definition"],
        )  # fmt: skip
        if job.key != run.job_key:
            raise ValueError(f"run {run.run_id!r} carries the definition of {job.key!r}")
        self.counters.accepted += 1
        self.events.emit(out, partition, run, "accepted", now_us)
        self._enqueue(store, partition, run, run.not_before_us)

    def _revoked(self, store: StateStore, out: Output, partition: int,
                 rec: dict[str, Any], now_us: int) -> None:  # fmt: skip
        run = self.load(store, rec["run_id"])
        if run is None:  # keep the revocation: an older RunTriggered must not arm it
            run = RunRecord(
                rec["run_id"], rec["tenant"], rec["job_id"], rec["scheduled_at_us"],
                rec["scheduled_at_us"], now_us, "scheduled", None, rec["job_version"], b"",
                status=rk.REVOKED, outcome="revoked",
            )  # fmt: skip
            self.save(store, run)
            store.put(rk.done_key(now_us, run.run_id), b"")
            return
        if not run.not_started or run.job_version >= rec["job_version"]:
            return
        self._unindex(store, run)
        run.status, run.outcome = rk.REVOKED, "revoked"
        run.job_version, run.definition = rec["job_version"], b""
        self.events.emit(out, partition, run, "revoked", now_us, reason=rec["reason"])
        self.save(store, run)
        store.put(rk.done_key(now_us, run.run_id), b"")

    # -- queues ---------------------------------------------------------------------------
    def _enqueue(self, store: StateStore, partition: int, run: RunRecord, due_us: int) -> None:
        raw = store.get(rk.SEQ_KEY)
        seq = int(raw) + 1 if raw else 1
        store.put(rk.SEQ_KEY, str(seq).encode())
        run.status, run.seq, run.due_us = rk.QUEUED, seq, due_us
        store.put(rk.queue_key(run.tenant, due_us, seq), run.run_id.encode())
        self.save(store, run)
        self._ring(partition).add(run.tenant)

    def _prune(self, store: StateStore, now_us: int) -> None:
        """Drop finished runs older than the retention (a replay cannot reach them any more)."""
        old = store.range(b"done/", rk.done_key(now_us - self._retention_us, ""))
        for key, _ in list(itertools.islice(old, self._prune_budget)):
            store.delete(key)
            run = self.load(store, rk.done_run_id(key))
            if run is not None and run.status in rk.TERMINAL:
                store.delete(rk.run_key(run.run_id))

    def _queued_tenants(self, store: StateStore) -> Iterator[str]:
        """Tenants with a queue, one seek each (not a scan of every queued run)."""
        start: bytes = b"q/"
        while True:
            first = next(iter(store.range(start, prefix_end(b"q/"))), None)
            if first is None:
                return
            tenant = rk.tenant_of_queue_key(first[0])
            yield tenant
            start = prefix_end(rk.queue_prefix(tenant)) or b"r"

    def _ring(self, partition: int) -> DeficitRing:
        ring = self._rings.get(partition)
        if ring is None:
            ring = self._rings[partition] = DeficitRing(self._weights)
        return ring

    def _select(self, store: StateStore, out: Output, partition: int,
                now_us: int) -> list[Action]:  # fmt: skip
        ring = self._ring(partition)
        actions: list[Action] = []
        budget = [self._start_budget]

        def serve(tenant: str) -> str:
            if budget[0] <= 0 or self.limits.full():
                return "blocked"
            return self._serve(store, out, partition, tenant, now_us, actions, budget)

        while ring and budget[0] > 0 and not self.limits.full():
            if not ring.round(serve):
                break
        return actions

    def _serve(self, store: StateStore, out: Output, partition: int, tenant: str, now_us: int,
               actions: list[Action], budget: list[int]) -> str:  # fmt: skip
        prefix = rk.queue_prefix(tenant)
        head = next(iter(store.range(prefix, prefix_end(prefix))), None)
        if head is None:
            return "empty"
        qkey, raw_id = head
        due_us, seq = rk.queue_entry(qkey)
        if due_us > now_us:
            return "blocked"  # the tenant's earliest run is not due yet
        run = self.load(store, raw_id.decode())
        if run is None or run.status != rk.QUEUED or run.seq != seq:
            store.delete(qkey)
            return "skipped"
        if run.attempt == 0 and not self._first_start_allowed(
            store, out, partition, run, qkey, now_us, actions
        ):
            return "skipped"
        host = target_host(self.definition(run.definition).target)
        if not self.limits.acquire(tenant, now_us, host):
            return "blocked"
        store.delete(qkey)
        actions.append(self._start(store, out, partition, run, now_us, host))
        budget[0] -= 1
        return "started"

    def _first_start_allowed(self, store: StateStore, out: Output, partition: int,
                             run: RunRecord, qkey: bytes, now_us: int,
                             actions: list[Action]) -> bool:  # fmt: skip
        """Gone targets and the overlap policy; False when the run was consumed instead."""
        gone_raw = store.get(rk.gone_key(run.job_key))
        if gone_raw is not None and rk.decode_json(gone_raw)["version"] >= run.job_version:
            store.delete(qkey)
            reason = f"target gone: {rk.decode_json(gone_raw)['reason']}"
            self._finish(store, out, partition, run, "skipped", now_us, reason)
            return False
        prefix = rk.active_prefix(run.job_key)
        active = [self.load(store, rk.active_run_id(k))
                  for k, _ in store.range(prefix, prefix_end(prefix))]  # fmt: skip
        others = [a for a in active if a is not None and a.run_id != run.run_id]
        if not others:
            return True
        policy = self.definition(run.definition).overlap_policy
        if policy == "allow":
            return True
        if policy == "replace":
            for other in others:
                reason = f"replaced by {run.run_id}"
                actions.extend(self._cancel(store, out, partition, other, reason, now_us))
            return True
        store.delete(qkey)
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
        job = self.definition(run.definition)
        run.attempt += 1
        run.status = rk.IN_FLIGHT
        run.deadline_us = now_us + round(job.timeout * 1e6)
        store.put(rk.active_key(run.job_key, run.run_id), b"")
        self.save(store, run)
        self.counters.started += 1
        deadline = f"deadline {run.deadline_us} µs"
        self.events.emit(out, partition, run, "started", now_us, reason=deadline)
        delivery = Delivery.from_run(run.run_view(), attempt=run.attempt, deadline=job.timeout)
        return Start(partition, run.tenant, delivery, job.target, host)

    def _retry(self, store: StateStore, out: Output, partition: int, run: RunRecord,
               now_us: int, retry_after_s: float | None) -> None:  # fmt: skip
        policy = self.definition(run.definition).retry
        if run.attempt >= policy.max_attempts:
            self._dead_letter(store, out, partition, run, now_us, f"{run.attempt} attempts")
            return
        retry_at = now_us + backoff_us(policy, run.run_id, run.attempt, retry_after_s)
        if retry_at > run.accepted_at_us + round(policy.max_age * 1e6):
            self._dead_letter(store, out, partition, run, now_us, "max_age exceeded")
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
                     now_us: int, why: str) -> None:  # fmt: skip
        reason = f"{why}; last error: {run.last_error}"
        self._finish(store, out, partition, run, "dead_lettered", now_us, reason)

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
                duration_us: int | None = None) -> None:  # fmt: skip
        """A terminal event; the run leaves the job's active set, freeing a buffered run."""
        self.events.emit(out, partition, run, kind, now_us, reason=reason,
                         status_code=status_code, duration_us=duration_us)  # fmt: skip
        store.delete(rk.active_key(run.job_key, run.run_id))
        run.status, run.outcome, run.definition = rk.DONE, kind, b""
        run.last_error = reason if kind != "succeeded" else None
        self.save(store, run)
        store.put(rk.done_key(now_us, run.run_id), b"")
        self.counters.finished[kind] = self.counters.finished.get(kind, 0) + 1
        buffered = store.get(rk.buffer_key(run.job_key))
        if buffered is not None and buffered.decode() != run.run_id:
            waiting = self.load(store, buffered.decode())
            if waiting is not None and waiting.status == rk.BUFFERED:
                if not any(
                    True
                    for _ in store.range(
                        rk.active_prefix(run.job_key), prefix_end(rk.active_prefix(run.job_key))
                    )
                ):
                    store.delete(rk.buffer_key(run.job_key))
                    self._enqueue(store, partition, waiting, now_us)
            else:
                store.delete(rk.buffer_key(run.job_key))

    def _unindex(self, store: StateStore, run: RunRecord) -> None:
        """Remove ``run`` from its tenant queue and the job's buffer slot."""
        if run.status == rk.QUEUED:
            store.delete(rk.queue_key(run.tenant, run.due_us, run.seq))
        elif run.status == rk.BUFFERED:
            store.delete(rk.buffer_key(run.job_key))

    # -- records --------------------------------------------------------------------------
    @staticmethod
    def load(store: StateStore, run_id: str) -> RunRecord | None:
        raw = store.get(rk.run_key(run_id))
        return None if raw is None else RunRecord.from_bytes(raw)

    @staticmethod
    def save(store: StateStore, run: RunRecord) -> None:
        store.put(rk.run_key(run.run_id), run.to_bytes())
