"""The metrics building blocks without a broker: the cheap histogram, run-id instants, the
trigger-lateness filter and the dev stack's metrics ports."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

from schedulerstream.cli.dev_cmd import processor_metrics
from schedulerstream.codec import default_codec
from schedulerstream.histogram import Histogram
from schedulerstream.ids import manual_run_id, rerun_run_id, scheduled_run_id
from schedulerstream.observability.collectors import DispatcherCollector, QueueDepth
from schedulerstream.observability.lateness import TriggerLateness, instant_us
from schedulerstream.runtime import OutRecord

T0 = 1_767_225_600_000_000


def test_histogram_buckets_are_cumulative_and_inclusive() -> None:
    histogram = Histogram((-1.0, 0.0, 1.0))
    histogram.observe_many([-2.0, -1.0, 0.5, 1.0, 7.0])
    buckets, total = histogram.snapshot()
    assert buckets == [("-1.0", 2.0), ("0.0", 2.0), ("1.0", 4.0), ("+Inf", 5.0)]
    assert total == 5.5 and histogram.count == 5


def test_the_instant_of_a_run_id() -> None:
    for instant in (0, T0, T0 + 59_000_000):
        assert instant_us(scheduled_run_id("a/b", instant).encode()) == instant
    assert instant_us(manual_run_id("a/b", "r1").encode()) is None
    assert instant_us(rerun_run_id("a/b", T0, "r1").encode()) is None
    assert instant_us(b"a/b@2026XX01T000000Z") is None


def _run(trigger: str, instant: int) -> OutRecord:
    rid = scheduled_run_id("acme/job", instant)
    value = default_codec().encode("RunTriggered", {
        "run_id": rid, "tenant": "acme", "job_id": "job", "scheduled_at_us": instant,
        "not_before_us": instant, "emitted_at_us": T0, "trigger": trigger,
        "payload_json": None, "job_version": 1, "job_definition": b"",
    })  # fmt: skip
    return OutRecord("runs", rid.encode(), value, 0)


def test_trigger_lateness_counts_run_triggered_records_but_not_backfills() -> None:
    lateness = TriggerLateness(default_codec(), "runs")
    revoked = OutRecord("runs", _run("scheduled", T0).key, b"\xc3\x01" + b"\0" * 12, 0)
    other_topic = OutRecord("attempts", _run("scheduled", T0).key, _run("scheduled", T0).value, 0)
    outputs = [_run("scheduled", T0 + 1_000_000), revoked, other_topic]
    lateness.observe(outputs, T0, backfills=False)
    lateness.observe([_run("backfill", T0 - 10**9), _run("catch_up", T0 - 2_000_000)], T0, True)
    buckets, total = lateness.histogram.snapshot()
    assert buckets[-1] == ("+Inf", 2.0) and total == -1.0 + 2.0


def test_dev_gives_each_processor_its_own_metrics_port() -> None:
    assert processor_metrics(9100) == {
        "scheduler": {"SCHEDULERSTREAM_METRICS_PORT": "9100"},
        "dispatcher": {"SCHEDULERSTREAM_METRICS_PORT": "9101"},
        "projector": {"SCHEDULERSTREAM_METRICS_PORT": "9102"},
    }
    assert {e["SCHEDULERSTREAM_METRICS_PORT"] for e in processor_metrics(0).values()} == {"0"}


def test_the_dispatcher_exports_worker_lease_events_by_kind() -> None:
    logic = SimpleNamespace(counters=SimpleNamespace(finished={"succeeded": 2}))
    leases = SimpleNamespace(counters=Counter(offered=3, claimed=2, fenced=1))
    topology = SimpleNamespace(logic=logic, leases=leases)
    families = {f.name: f for f in DispatcherCollector(topology, QueueDepth(logic)).collect()}
    samples = {s.labels["kind"]: s.value for s in families["schedulerstream_worker_events"].samples}
    assert samples == {"offered": 3.0, "claimed": 2.0, "fenced": 1.0}
