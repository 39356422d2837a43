"""Worker pools end to end on the real broker: the dispatcher topology on the runtime (in this
process), workers in this process and as ``schedulerstream worker`` processes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from schedulerstream.contracts.worker import WorkerEvent
from schedulerstream.partitioner import partition_for_job_key
from schedulerstream.settings import Settings
from tests.dispatcher.support import attempt_events, wait_for
from tests.worker.apps import started
from tests.worker.support import (
    FAST_RETRY,
    Runs,
    WorkerProcess,
    dispatcher_thread,
    events_of,
    now_us,
    records,
    worker_job,
    worker_thread,
)

pytestmark = pytest.mark.kafka


def test_a_worker_run_succeeds_and_poison_worker_events_are_rejected(
    topo: Settings, tmp_path: Path
) -> None:
    settings = topo.model_copy(update={"worker_lease_ms": 3000})
    runs = Runs(settings)
    home = partition_for_job_key("acme/x", settings.partitions)
    runs.produce("worker-events", b"acme/x@1", b"{not json", "acme/x")
    runs.produce("worker-events", b"acme/x@1",
                 b'{"kind":"bogus","run_id":"acme/x@1","attempt":1}', "acme/x")  # fmt: skip
    bad_partition = WorkerEvent("heartbeat", "acme/x@1", 1, "w9", 0).to_bytes()
    runs.produce("worker-events", b"acme/x@1", bad_partition, "acme/x",
                 partition=(home + 1) % settings.partitions)  # fmt: skip
    definition = worker_job("hello", timeout=30)
    with (
        dispatcher_thread(settings) as dispatcher,
        worker_thread(settings, worker_id="w1", concurrency=2),
    ):
        rid = runs.trigger(definition, {"sleep": 1.2, "marker": str(tmp_path)})
        failing = runs.trigger(worker_job("fails", retry=FAST_RETRY), {"fail": "bad input"})
        assert events_of(settings, rid, "succeeded") == [
            ("accepted", 0), ("started", 1), ("succeeded", 1),
        ]  # fmt: skip
        # JobFailed(retryable=False): failed once, not retried
        assert events_of(settings, failing, "failed") == [
            ("accepted", 0), ("started", 1), ("failed", 1),
        ]  # fmt: skip
        assert dispatcher.leases.counters["claimed"] == 2
        at = {e["kind"]: e["at_us"] for e in attempt_events(settings)[failing]}
        print(f"\nworker round trip (offer → claim → failed, empty handler): "
              f"{(at['failed'] - at['started']) / 1000:.0f} ms")  # fmt: skip
        assert dispatcher.leases.counters["heartbeat"] >= 1  # every lease/3 = 1 s
    [offer] = records(settings, "work.p", rid)
    partition = partition_for_job_key(definition.key, settings.partitions)
    assert offer["kind"] == "offer" and offer["attempt"] == 1 and offer["pool"] == "p"
    assert offer["payload"] == {"sleep": 1.2, "marker": str(tmp_path)}
    assert offer["lease_ms"] == 3000 and offer["dispatcher_partition"] == partition
    assert offer["deadline_at_us"] - offer["offered_at_us"] == pytest.approx(30e6, abs=1e6)
    events = records(settings, "worker-events", rid)
    assert {e["_partition"] for e in events} == {partition}
    assert events[0]["kind"] == "claimed" and events[-1]["kind"] == "succeeded"
    assert events[-1]["worker"] == "w1" and events[-1]["reason"] == "done in 1"
    rejected = records(settings, "rejected")
    reasons = sorted(r["_headers"]["rejected.reason"].decode() for r in rejected)
    assert len(reasons) == 3, reasons
    assert "belongs on partition" in reasons[0]
    assert "worker event is not JSON" in reasons[1]
    assert "worker event kind 'bogus'" in reasons[2]


def test_cancellation_and_the_deadline_reach_running_sync_and_async_handlers(
    topo: Settings, tmp_path: Path
) -> None:
    settings = topo.model_copy(update={"worker_lease_ms": 5000})
    runs = Runs(settings)
    sync_job, async_job = worker_job("stuck"), worker_job("async-job")
    short = worker_job("short", timeout=2, retry={"max_attempts": 1})
    payload = {"sleep": 60, "marker": str(tmp_path)}
    with (
        dispatcher_thread(settings) as dispatcher,
        worker_thread(settings, worker_id="w1", concurrency=3) as worker,
    ):
        ids = [runs.trigger(sync_job, payload), runs.trigger(async_job, payload)]
        late = runs.trigger(short, payload)
        wait_for(lambda: all(started(tmp_path, r, 1) for r in [*ids, late]), 30, "3 handlers")
        # the worker is at capacity: this offer waits in Kafka until a handler ends
        queued = runs.trigger(worker_job("queued"), {"marker": str(tmp_path)})
        runs.cancel(sync_job, ids[0])
        runs.cancel(async_job, ids[1])
        wait_for(lambda: all(started(tmp_path, r, 1, "cancelled") for r in [*ids, late]), 30,
                 "the handlers to see the cancel and the deadline")  # fmt: skip
        for rid in ids:
            assert events_of(settings, rid, "cancelled")[-1] == ("cancelled", 1)
        assert events_of(settings, late, "dead_lettered")[-2:] == [
            ("timed_out", 1), ("dead_lettered", 1),
        ]  # fmt: skip
        # the deadline: seen by the worker itself or by the dispatcher's cancel, whichever first
        assert worker.counters["cancelled"] + worker.counters["deadline"] == 3
        assert events_of(settings, queued, "succeeded")[-1] == ("succeeded", 1)
        assert worker.counters["claimed"] == 4
        wait_for(lambda: worker.running == [], 5, "the handlers to end", every=0.1)
        assert dispatcher.limits.in_flight == 0
    [timed_out] = [e for e in attempt_events(settings)[late] if e["kind"] == "timed_out"]
    assert timed_out["reason"].startswith("timed out after 2 s: worker w1 last heartbeat at ")
    for rid in ids:
        cancel = records(settings, "work.p", rid)[-1]
        assert cancel["kind"] == "cancel" and cancel["attempt"] == 1
        assert cancel["reason"] == "by test"
        assert [e["kind"] for e in records(settings, "worker-events", rid)][-1] != "succeeded"


def test_a_killed_worker_loses_its_lease_and_a_second_worker_finishes_attempt_2(
    topo: Settings, tmp_path: Path
) -> None:
    settings = topo.model_copy(update={"worker_lease_ms": 2000})
    runs = Runs(settings)
    # classic protocol and a 2 s session: the dead member's partitions move on quickly
    group = {"group_protocol": "classic", "session_timeout_ms": 2000}
    definition = worker_job("crashy", timeout=60, retry=FAST_RETRY)
    first = WorkerProcess(settings, "w1", tmp_path, **group)
    second = WorkerProcess(settings, "w2", tmp_path, **group)
    with dispatcher_thread(settings) as dispatcher:
        try:
            first.start().wait_for_log("assigned")
            rid = runs.trigger(definition, {"sleep_first": 60, "marker": str(tmp_path)})
            wait_for(lambda: started(tmp_path, rid, 1), 30, "attempt 1 to start", every=0.1)
            second.start().wait_for_log("ready")
            first.kill()  # kill -9 mid-handler
            killed_at = now_us()
            events = events_of(settings, rid, "succeeded", timeout=60)
            assert events == [
                ("accepted", 0), ("started", 1), ("lease_expired", 1), ("retry_scheduled", 1),
                ("started", 2), ("succeeded", 2),
            ]  # fmt: skip
            assert started(tmp_path, rid, 2, "done")
            [done] = [
                e for e in records(settings, "worker-events", rid) if e["kind"] == "succeeded"
            ]
            assert (done["worker"], done["attempt"]) == ("w2", 2)
            # a late completion (and heartbeat) of attempt 1 is ignored
            fenced = dispatcher.leases.counters["fenced"]
            runs.worker_event(WorkerEvent("heartbeat", rid, 1, "w1", now_us()))
            runs.worker_event(WorkerEvent("succeeded", rid, 1, "w1", now_us()))
            wait_for(lambda: dispatcher.leases.counters["fenced"] >= fenced + 2, 20,
                     "the late events to be fenced", every=0.1)  # fmt: skip
            assert events_of(settings, rid, "succeeded") == events
            assert second.stop() == 0  # SIGTERM: leaves the group and exits cleanly
            at = {(e["kind"], e["attempt"]): e["at_us"] for e in attempt_events(settings)[rid]}
            print(f"\nworker kill -9 (lease 2 s, session 2 s): lease expired "
                  f"{(at['lease_expired', 1] - killed_at) / 1e6:.1f} s after the kill, attempt 2 "
                  f"started at {(at['started', 2] - killed_at) / 1e6:.1f} s, succeeded at "
                  f"{(at['succeeded', 2] - killed_at) / 1e6:.1f} s")  # fmt: skip
        finally:
            for worker in (first, second):
                if worker.process is not None and worker.process.poll() is None:
                    worker.stop()
    cancels = [r for r in records(settings, "work.p", rid) if r["kind"] == "cancel"]
    assert [(c["attempt"], c["reason"]) for c in cancels] == [
        (1, "the lease ran out: the run is no longer yours")
    ]


@pytest.mark.slow
def test_a_dispatcher_restart_keeps_a_run_its_worker_is_still_on(
    topo: Settings, tmp_path: Path
) -> None:
    settings = topo.model_copy(update={"worker_lease_ms": 2000})
    runs = Runs(settings)
    definition = worker_job("long", timeout=60, retry=FAST_RETRY)
    with worker_thread(settings, worker_id="w1") as worker:
        with dispatcher_thread(settings):
            rid = runs.trigger(definition, {"sleep": 8, "marker": str(tmp_path)})
            wait_for(lambda: started(tmp_path, rid, 1), 30, "the handler", every=0.1)
        time.sleep(3)  # down longer than a lease: heartbeats pile up unread
        with dispatcher_thread(settings) as again:
            assert again.leases.counters["adopted"] == 1
            assert again.limits.in_flight == 1  # the worker run holds its slot again
            events = events_of(settings, rid, "succeeded", timeout=30)
            assert events == [("accepted", 0), ("started", 1), ("succeeded", 1)]
            assert worker.counters["claimed"] == 1 and again.leases.counters["expired"] == 0
            wait_for(lambda: again.limits.in_flight == 0, 5, "the slot back", every=0.1)


def test_a_worker_serving_one_tenant_fails_anothers_offer_unrun(
    topo: Settings, tmp_path: Path
) -> None:
    runs = Runs(topo)
    markers = tmp_path / "markers"
    markers.mkdir()
    with (
        dispatcher_thread(topo),
        worker_thread(topo, worker_id="w1", tenants=frozenset({"acme"})) as worker,
    ):
        intruder = runs.trigger(worker_job("sneaky", tenant="globex"), {"marker": str(markers)})
        own = runs.trigger(worker_job("own"), {"sleep": 0.1})
        assert events_of(topo, own, "succeeded")[-1] == ("succeeded", 1)
        assert events_of(topo, intruder, "failed") == [
            ("accepted", 0), ("started", 1), ("failed", 1),
        ]  # fmt: skip
        assert worker.counters["other_tenant"] == 1 and worker.counters["claimed"] == 1
    [failed] = [e for e in attempt_events(topo)[intruder] if e["kind"] == "failed"]
    assert "takes the work of acme only, not of globex" in failed["reason"]
    assert not started(markers, intruder, 1)  # its handler never ran
    assert not list(markers.iterdir())
