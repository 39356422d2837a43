"""Poison records on every input topic of the scheduler and the dispatcher.

Each poison lands on cron.rejected (same topic/offset in its ``rejected.*`` headers, with a
reason), the processor keeps running, and the good records around it on the same partition
are not lost. The dispatcher's input topics are taken from its topology, so an input added
later (cron.worker-events, once the dispatcher reads it) is covered without editing this file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Producer

from harness.procs import ReceiverProcess
from schedulerstream.dispatcher.backoff import backoff_us
from schedulerstream.dispatcher.topology import DispatcherTopology
from schedulerstream.kafka.clients import producer_config
from schedulerstream.model import JobDefinition
from schedulerstream.partitioner import partition_for_job_key
from schedulerstream.publish import Publisher
from schedulerstream.settings import Settings
from tests.dispatcher.support import Runs, job
from tests.faults.conftest import SpawnFault
from tests.faults.helpers import (
    CODEC,
    SECOND,
    attempt_events,
    check_every_instant_once,
    every_second_jobs,
    next_second_us,
    now_us,
    rejected,
    report,
    wait_until,
)
from tests.support.runs import read_runs

pytestmark = [pytest.mark.kafka, pytest.mark.faults]
HOUR_MS = 3_600_000


@dataclass
class Poison:
    label: str
    topic: str
    key: bytes | None
    value: bytes | None
    partition: int
    timestamp_ms: int | None = None
    offset: int = -1


def job_ids_on(partition: int, partitions: int, prefix: str, count: int) -> list[str]:
    found = []
    i = 0
    while len(found) < count:
        if partition_for_job_key(f"acme/{prefix}{i}", partitions) == partition:
            found.append(f"{prefix}{i}")
        i += 1
    return found


def produce_all(settings: Settings, poisons: list[Poison]) -> None:
    producer = Producer(producer_config(settings))
    for poison in poisons:

        def delivered(err: Any, msg: Any, poison: Poison = poison) -> None:
            assert err is None, err
            poison.offset = msg.offset()

        extra = {} if poison.timestamp_ms is None else {"timestamp": poison.timestamp_ms}
        producer.produce(
            poison.topic, poison.value, poison.key, poison.partition, on_delivery=delivered,
            **extra,
        )  # fmt: skip
    assert producer.flush(30) == 0
    assert all(p.offset >= 0 for p in poisons)


def wrong_record(for_topic: str) -> bytes:
    """A valid Avro single-object record of a type that does not belong on ``for_topic``."""
    if "schedules" in for_topic or "runs" in for_topic or "retry" in for_topic:
        return CODEC.encode(
            "Command",
            {"tenant": "acme", "job_id": "x", "issued_at_us": 0,
             "command": ("io.schedulerstream.CancelRun", {"run_id": "acme/x@1", "reason": ""})},
        )  # fmt: skip
    return CODEC.encode(
        "RunRevoked",
        {"run_id": "acme/x@1", "tenant": "acme", "job_id": "x", "scheduled_at_us": 0,
         "revoked_at_us": 0, "reason": "", "job_version": 1},
    )  # fmt: skip


def poisons_for(topic: str, partition: int, settings: Settings, run_keys: bool) -> list[Poison]:
    """Garbage, an unknown schema fingerprint, a record of the wrong type, a key of another
    partition, an unparsable key, and (except on the compacted schedules, where the broker
    refuses a keyless record and a null value is a delete) no key and a null value."""
    [own] = job_ids_on(partition, settings.partitions, "poison-", 1)
    [other] = job_ids_on((partition + 1) % settings.partitions, settings.partitions, "else-", 1)
    suffix = "@20250101T000000Z" if run_keys else ""
    own_key, other_key = f"acme/{own}{suffix}".encode(), f"acme/{other}{suffix}".encode()
    # the delay topics hold a record until its timestamp + the tier's delay: an old timestamp
    # makes it due at once (a future one is test_a_future_timestamp_..., below)
    old = now_us() // 1000 - 2 * HOUR_MS if "retry" in topic else None
    cases = [
        ("garbage", own_key, b"\x00garbage"),
        ("unknown fingerprint", own_key, b"\xc3\x01" + b"\x01" * 8 + b"\x02\x04"),
        ("wrong record type", own_key, wrong_record(topic)),
        ("key of another partition", other_key, wrong_record(topic)),
        ("unparsable key", b"NOT A KEY \xff", b"{}"),
    ]
    if "schedules" not in topic:  # compacted: the broker itself refuses a record with no key
        cases += [("no key", None, b"{}"), ("null value", own_key, None)]
    return [Poison(label, topic, key, value, partition, old) for label, key, value in cases]


def assert_rejected(settings: Settings, poisons: list[Poison]) -> dict[tuple[str, int], str]:
    def all_there() -> dict[tuple[str, int], str] | None:
        found = {(r["rejected.topic"], int(r["rejected.offset"])): r for r in rejected(settings)}
        wanted = {(p.topic, p.offset) for p in poisons}
        return {k: v["rejected.reason"] for k, v in found.items()} if wanted <= set(found) else None

    reasons: dict[tuple[str, int], str] = wait_until(all_there, 90, "every poison rejected", 1.0)
    for poison in poisons:
        reason = reasons[(poison.topic, poison.offset)]
        assert reason.strip(), f"{poison.label} on {poison.topic}: empty reason"
    assert len(reasons) == len(poisons), f"unexpected rejections: {reasons}"
    return reasons


def test_poison_on_scheduler_inputs_is_rejected_and_good_jobs_keep_running(
    topo: Settings, procs: SpawnFault
) -> None:
    sched = procs("scheduler", "a")
    sched.wait_running(topo.partitions)
    partition = 0
    before_id, after_id = job_ids_on(partition, topo.partitions, "good-", 2)
    publisher = Publisher(topo)

    def jobs(job_id: str) -> list[JobDefinition]:
        [one] = every_second_jobs(1, tenant="acme")
        return [one.model_copy(update={"job_id": job_id})]

    publisher.put_jobs(jobs(before_id))
    poisons = [
        *poisons_for(topo.topic("schedules"), partition, topo, run_keys=False),
        *poisons_for(topo.topic("commands"), partition, topo, run_keys=False),
    ]
    produce_all(topo, poisons)
    publisher.put_jobs(jobs(after_id))
    since = next_second_us(2)
    reasons = assert_rejected(topo, poisons)
    wait_until(lambda: now_us() > since + 5 * SECOND, 30, "5 s of runs after the poison")
    until = next_second_us(-2)
    assert sched.alive(), sched.this_log()[-3000:]
    assert sched.stop() == 0
    seen = read_runs(topo)
    figures = check_every_instant_once(topo, 2, since, until, seen=seen)
    report(
        "poison on scheduler inputs",
        poisons=len(poisons),
        reasons=sorted({r[:60] for r in reasons.values()}),
        **figures,
    )


RETRY = {"max_attempts": 3, "initial_backoff": 8, "multiplier": 1, "max_backoff": 8}


def slow_retry_job_id(partition: int, partitions: int, instant_us: int) -> str:
    """A job on ``partition`` whose first retry waits 5.5-8 s (so it goes through retry.5s)."""
    for job_id in job_ids_on(partition, partitions, "retry-", 200):
        definition = job("acme", job_id, "http://x/", retry=RETRY)
        rid = f"{definition.key}@{instant_us}"  # tests.dispatcher.support.run_id_of
        wait = backoff_us(definition.retry, rid, 1) / SECOND
        if 5.5 <= wait <= 8:
            return job_id
    raise AssertionError("no job id with a 5.5-8 s first retry")


def test_poison_on_dispatcher_inputs_is_rejected_and_good_runs_are_delivered(
    topo: Settings, procs: SpawnFault, tmp_path: Any
) -> None:
    receiver = ReceiverProcess().start()
    try:
        disp = procs("dispatcher", "d")
        disp.wait_running(topo.partitions)
        partition = 1
        runs = Runs(topo)
        inputs = list(DispatcherTopology(topo).input_topics)
        t0 = now_us() // SECOND * SECOND
        retry_id = slow_retry_job_id(partition, topo.partitions, t0)
        retrying = job("acme", retry_id, receiver.url("/fail-then-ok/1"), retry=RETRY)
        first, last = job_ids_on(partition, topo.partitions, "deliver-", 2)
        good_before = runs.trigger(job("acme", first, receiver.url("/ok")), t0)
        rid_retry = runs.trigger(retrying, t0)
        runs.flush()
        # the good retry record lands on retry.5s[partition] among the poison records
        poisons = [
            p
            for topic in inputs
            for p in poisons_for(topic, partition, topo, run_keys="commands" not in topic)
        ]
        produce_all(topo, poisons)
        good_after = runs.trigger(job("acme", last, receiver.url("/ok")), t0 + SECOND)
        runs.flush()
        reasons = assert_rejected(topo, poisons)

        def delivered() -> dict[str, list[dict[str, Any]]] | None:
            events: dict[str, list[dict[str, Any]]] = {}
            for event in attempt_events(topo, 1.0):
                events.setdefault(event["run_id"], []).append(event)
            ok = all(
                any(e["kind"] == "succeeded" for e in events.get(rid, []))
                for rid in (good_before, good_after, rid_retry)
            )
            return events if ok else None

        events = wait_until(delivered, 90, "the good runs to succeed", 1.0)
        assert disp.alive(), disp.this_log()[-3000:]
        kinds = [(e["kind"], e["attempt"]) for e in events[rid_retry]]
        assert ("retry_scheduled", 1) in kinds and kinds[-1] == ("succeeded", 2), kinds
        arrivals = {rid: len(receiver.requests(rid)) for rid in (good_before, good_after)}
        assert arrivals == {good_before: 1, good_after: 1}
        assert len(receiver.requests(rid_retry)) == 2
        assert disp.stop() == 0
        report(
            "poison on dispatcher inputs",
            topics=[t.removeprefix(topo.topic_prefix) for t in inputs],
            poisons=len(poisons),
            reasons=sorted({r[:60] for r in reasons.values()}),
            duplicates=0,
        )
    finally:
        receiver.stop()


@pytest.mark.slow
def test_a_future_timestamp_on_a_delay_topic_does_not_hold_the_retries_behind_it(
    topo: Settings, procs: SpawnFault
) -> None:
    receiver = ReceiverProcess().start()
    try:
        disp = procs("dispatcher", "d")
        disp.wait_running(topo.partitions)
        partition = 2
        [own] = job_ids_on(partition, topo.partitions, "skewed-", 1)
        future = Poison(
            "timestamp 30 min ahead", topo.topic("retry.5s"), f"acme/{own}@1".encode(),
            b"\x00garbage", partition, now_us() // 1000 + HOUR_MS // 2,
        )  # fmt: skip
        produce_all(topo, [future])
        runs = Runs(topo)
        t0 = now_us() // SECOND * SECOND
        retry_id = slow_retry_job_id(partition, topo.partitions, t0)
        retrying = job("acme", retry_id, receiver.url("/fail-then-ok/1"), retry=RETRY)
        rid = runs.trigger(retrying, t0)
        runs.flush()

        def succeeded() -> bool:
            return any(
                e["run_id"] == rid and e["kind"] == "succeeded" for e in attempt_events(topo, 1.0)
            )

        try:
            wait_until(succeeded, 60, "the retry behind the skewed record to succeed", 1.0)
        finally:
            report(
                "future timestamp on retry.5s",
                retry_requests=len(receiver.requests(rid)),
                held=not succeeded(),
            )
    finally:
        receiver.stop()
