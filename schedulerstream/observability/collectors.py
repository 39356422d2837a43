"""Scrape-time collectors: each scrape reads the counters the runtime and the topologies keep
anyway (plain ints and cheap histograms), so processing pays nothing per record for metrics.

Series carry a ``processor`` label (scheduler, dispatcher, projector). Topology counters are
read by attribute (``logic.counters``, ``trigger_lateness``, ...): a counter a topology does
not keep is left out, never an error.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from schedulerstream.histogram import Histogram
from schedulerstream.runtime import Processor, TaskContext

P = "schedulerstream_"
# Processor.metrics key → (series name without _total, help)
RUNTIME_COUNTERS = {
    "records_processed": ("records_processed", "Input records processed."),
    "records_rejected": ("records_rejected", "Input records sent to the rejected topic."),
    "commits": ("commits", "Transactions committed."),
    "aborts": ("transaction_aborts", "Transactions aborted (the input is processed again)."),
    "producer_recreations": ("producer_recreations", "Transactional producers replaced."),
    "group_fenced": ("group_fenced", "Commits refused for a stale group generation."),
    "lost": ("partitions_lost", "Partition sets lost (session expired, fenced)."),
    "restores": ("restores", "Tasks restored from their changelog."),
    "restored_records": ("restored_records", "Changelog records restored."),
    "changelog_records": ("changelog_records", "Changelog records produced."),
    "changelog_records_skipped": (
        "changelog_records_skipped",
        "Changelog records a restore or standby skipped because they cannot be read.",
    ),
    "corrupt_stores": ("corrupt_stores", "State stores wiped and restored after damage."),
    "stores_unavailable": (
        "stores_unavailable",
        "State-store opens or reads that failed for want of a resource (the task retries).",
    ),
    "punctuate_errors": ("punctuate_errors", "Punctuate callbacks that failed."),
    "store_write_failures": (
        "store_write_failures",
        "Local state-store writes that failed (the task restores from its changelog).",
    ),
    "fetchers_restarted": (
        "fetchers_restarted",
        "Input partitions assigned again because their fetcher never started.",
    ),
}
SCHEDULER_COUNTERS = {
    "runs_revoked": ("runs_revoked", "Runs revoked after emission (pause, update, delete)."),
    "instants_missed": ("instants_missed", "Scheduled instants not run (misfire policy)."),
    "stale_versions": ("stale_versions", "Schedule records ignored for an older version."),
    "duplicate_requests": ("duplicate_requests", "Trigger requests seen before."),
    "quarantined": ("jobs_quarantined", "Jobs paused because a run record could not be written."),
    "failed_ticks": ("job_ticks_failed", "Ticks of one job that raised (the job is quarantined)."),
    "paused_by_command": ("jobs_paused_by_command", "Jobs paused by a PauseJob command."),
    "pauses_ignored": ("pauses_ignored", "PauseJob commands ignored (stale or already paused)."),
    "backfill_rate_waits": (
        "backfill_rate_waits",
        "Ticks whose backfill runs waited for SCHEDULERSTREAM_BACKFILL_RATE.",
    ),
}
DISPATCHER_COUNTERS = {
    "accepted": ("runs_accepted", "Runs accepted into a tenant queue."),
    "duplicates": ("runs_duplicate", "Run records already known (replays, duplicates)."),
    "started": ("attempts_started", "Attempts started."),
    "late_outcomes": ("late_outcomes", "Outcomes of cancelled or superseded attempts."),
}


def _histogram(name: str, doc: str, label: str, histogram: Histogram) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, doc, labels=["processor"])
    buckets, total = histogram.snapshot()
    family.add_metric([label], buckets, total)
    return family


def _counters(
    label: str, source: Any, table: dict[str, tuple[str, str]]
) -> Iterator[CounterMetricFamily]:
    for field, (name, doc) in table.items():
        value = getattr(source, field, None)
        if isinstance(value, int | float):
            family = CounterMetricFamily(P + name, doc, labels=["processor"])
            family.add_metric([label], float(value))
            yield family


def _by(name: str, doc: str, label: str, key: str, values: dict[str, int]) -> CounterMetricFamily:
    family = CounterMetricFamily(P + name, doc, labels=["processor", key])
    for value, count in sorted(values.items()):
        family.add_metric([label, value], float(count))
    return family


class RuntimeCollector(Collector):
    """The processor's counters, commit durations, consumer lag and tasks by state."""

    def __init__(self, processor: Processor) -> None:
        self.processor = processor
        self.label = processor.topology.name

    def collect(self) -> Iterator[Metric]:
        p, label = self.processor, self.label
        metrics = dict(p.metrics)
        for key, (name, doc) in RUNTIME_COUNTERS.items():
            family = CounterMetricFamily(P + name, doc, labels=["processor"])
            family.add_metric([label], float(metrics.get(key, 0)))
            yield family
        yield _histogram(
            P + "commit_duration_seconds",
            "Duration of a successful commit (pre_commit, flush, offsets, commit, local write).",
            label,
            p.commit_seconds,
        )
        lag = GaugeMetricFamily(
            P + "consumer_lag",
            "Records behind the high watermark, per owned input partition (sampled every 5 s).",
            labels=["processor", "topic", "partition"],
        )
        for (topic, partition), behind in sorted(dict(p.sampling.lag).items()):
            lag.add_metric([label, topic, str(partition)], float(behind))
        yield lag
        isolated = CounterMetricFamily(
            P + "isolated_failures",
            "Failures kept to one run, job or record (by kind: record_refused, "
            "record_too_large, kafka_target, worker_offer, record_dropped, repeated_abort).",
            labels=["processor", "kind"],
        )
        for kind, count in sorted(dict(p.quarantine.counts).items()):
            isolated.add_metric([label, kind], float(count))
        yield isolated
        states = Counter(task.state.value for task in list(p.tasks.values()))
        tasks = GaugeMetricFamily(P + "tasks", "Tasks by state.", labels=["processor", "state"])
        for state, count in sorted(states.items()):
            tasks.add_metric([label, state], float(count))
        yield tasks


class SchedulerCollector(Collector):
    """Runs emitted by trigger, revoked, missed instants, and trigger lateness."""

    def __init__(self, topology: Any) -> None:
        self.topology = topology

    def collect(self) -> Iterator[Metric]:
        counters = self.topology.logic.counters
        yield _by("runs_emitted", "Runs emitted, by trigger.", "scheduler", "trigger",
                  dict(getattr(counters, "by_trigger", {})))  # fmt: skip
        yield from _counters("scheduler", counters, SCHEDULER_COUNTERS)
        lateness = getattr(self.topology, "trigger_lateness", None)
        if lateness is not None:
            yield _histogram(
                P + "trigger_lateness_seconds",
                "Emission time minus the scheduled instant (negative: emitted ahead, within "
                "the lookahead). Backfills and manual triggers are left out.",
                "scheduler",
                lateness.histogram,
            )


class QueueDepth:
    """A sampler (runs on the processor's loop): queued runs per tenant over the owned
    partitions, from the dispatch logic's ``queue_depths(partition)`` when it has one."""

    def __init__(self, logic: Any) -> None:
        self.logic = logic
        self.depths: dict[str, int] = {}

    def __call__(self, contexts: Sequence[TaskContext]) -> None:
        queue_depths = getattr(self.logic, "queue_depths", None)
        if queue_depths is None:
            return
        total: Counter[str] = Counter()
        for ctx in contexts:
            total.update(queue_depths(ctx.partition))
        self.depths = dict(total)


class DispatcherCollector(Collector):
    """Runs by outcome, skipped runs, attempts, queue depth and in-flight attempts per
    tenant, and dispatch lateness."""

    def __init__(self, topology: Any, queue: QueueDepth) -> None:
        self.topology = topology
        self.queue = queue

    def collect(self) -> Iterator[Metric]:
        counters = self.topology.logic.counters
        finished = dict(getattr(counters, "finished", {}))
        yield _by("runs_finished", "Runs that reached an outcome, by outcome.", "dispatcher",
                  "outcome", finished)  # fmt: skip
        skipped = CounterMetricFamily(
            P + "runs_skipped", "Runs skipped (overlap policy).", labels=["processor"]
        )
        skipped.add_metric(["dispatcher"], float(finished.get("skipped", 0)))
        yield skipped
        yield from _counters("dispatcher", counters, DISPATCHER_COUNTERS)
        depth = GaugeMetricFamily(
            P + "queue_depth", "Runs queued per tenant (sampled every 5 s).", labels=["tenant"]
        )
        for tenant, count in sorted(self.queue.depths.items()):
            depth.add_metric([tenant], float(count))
        yield depth
        limits = getattr(self.topology, "limits", None)
        if limits is not None:
            flying = GaugeMetricFamily(
                P + "in_flight", "Attempts in flight per tenant.", labels=["tenant"]
            )
            for tenant, count in sorted(dict(limits.by_tenant).items()):
                flying.add_metric([tenant], float(count))
            yield flying
        leases = getattr(self.topology, "leases", None)
        if leases is not None:
            yield _by("worker_events", "Worker-pool lease events, by kind (offered, claimed, "
                      "heartbeat, succeeded, failed, fenced, foreign, expired, timed_out, "
                      "adopted).", "dispatcher", "kind", dict(leases.counters))  # fmt: skip
        lateness = getattr(self.topology, "dispatch_lateness", None)
        if lateness is not None:
            yield _histogram(
                P + "dispatch_lateness_seconds",
                "Start of a run's first attempt minus its scheduled instant (backfills left out).",
                "dispatcher",
                lateness,
            )


class ProjectorCollector(Collector):
    """Read-model writes: transactions, rows and refused records."""

    def __init__(self, topology: Any) -> None:
        self.topology = topology

    def collect(self) -> Iterator[Metric]:
        t = self.topology
        yield _histogram(
            P + "readmodel_write_seconds",
            "Duration of one read-model transaction (a commit's batch).",
            "projector",
            t.write_seconds,
        )
        for name, doc, value in (
            ("readmodel_rows_written", "Rows upserted or deleted in the read model.",
             t.rows_written),
            ("readmodel_refused_records", "Records whose rows the read model refused.",
             t.refused),
        ):  # fmt: skip
            family = CounterMetricFamily(P + name, doc, labels=["processor"])
            family.add_metric(["projector"], float(value))
            yield family


def registry_for(processor: Processor) -> CollectorRegistry:
    """A registry with the runtime's collector and the one of the processor's topology
    (chosen by its name); the dispatcher's queue sampler is added to
    ``processor.sampling.samplers``."""
    registry = CollectorRegistry()
    registry.register(RuntimeCollector(processor))
    topology: Any = processor.topology
    if topology.name == "scheduler":
        registry.register(SchedulerCollector(topology))
    elif topology.name == "dispatcher":
        queue = QueueDepth(topology.logic)
        processor.sampling.samplers.append(queue)
        registry.register(DispatcherCollector(topology, queue))
    elif topology.name == "projector":
        registry.register(ProjectorCollector(topology))
    return registry
