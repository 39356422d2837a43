"""The dispatcher as a real process against the real broker and a real HTTP receiver."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from harness.procs import ReceiverProcess
from schedulerstream.kafka.clients import base_config
from schedulerstream.kafka.reader import read_topic
from schedulerstream.model import KafkaTarget
from schedulerstream.partitioner import partition_for_job_key
from schedulerstream.settings import Settings
from tests.dispatcher.conftest import SpawnDispatcher
from tests.dispatcher.support import (
    CODEC,
    SECOND,
    Runs,
    attempt_events,
    body,
    job,
    kinds,
    run_id_of,
    run_value,
    wait_for,
)
from tests.support.runs import read_events
from tests.targets.helpers import expected_signature

pytestmark = pytest.mark.kafka
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
FAST_RETRY = {"max_attempts": 5, "initial_backoff": 0.2, "multiplier": 2, "max_backoff": 1}


def now_us() -> int:
    return time.time_ns() // 1000


def events_of(topo: Settings, rid: str, last: str, timeout: float = 30) -> list[tuple[str, int]]:
    """The run's committed events once one of kind ``last`` is among them."""

    def seen() -> list[tuple[str, int]] | None:
        found = kinds(attempt_events(topo, idle_timeout=1.0).get(rid, []))
        return found if any(k == last for k, _ in found) else None

    result: list[tuple[str, int]] = wait_for(seen, timeout, f"{last} of {rid}")
    return result


def delivery_children(pid: int) -> list[int]:
    """The delivery processes (``DISPATCH_DELIVERY=process``) of dispatcher ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                command = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[1]) == pid and fields[0] != "Z" and b"delivery_process" in command:
                found.append(int(entry.name))
    return found


@pytest.mark.parametrize("delivery", ["thread", "process"])
def test_a_webhook_is_delivered_once_with_a_valid_signature(
    topo: Settings, dispatcher: SpawnDispatcher, receiver: ReceiverProcess, runs: Runs,
    delivery: str,
) -> None:  # fmt: skip
    proc = dispatcher(dispatch_delivery=delivery)
    assert proc.process is not None
    children = delivery_children(proc.process.pid)
    assert len(children) == (1 if delivery == "process" else 0)
    definition = job("acme", "hello", receiver.url("/ok"), target={"secret": SECRET})
    rid = runs.trigger(definition, now_us())
    runs.flush()
    assert events_of(topo, rid, "succeeded") == [("accepted", 0), ("started", 1), ("succeeded", 1)]
    [request] = receiver.requests(rid)
    headers = request["headers"]
    raw = base64.b64decode(request["body_b64"])
    assert headers["webhook-signature"] == expected_signature(
        SECRET, rid, headers["webhook-timestamp"], raw
    )
    assert body(request)["attempt"] == 1 and body(request)["payload"] == {"job": "hello"}
    assert proc.stop() == 0
    assert not [pid for pid in children if Path(f"/proc/{pid}").exists()]  # stopped with it


def test_5xx_then_success_retries_with_the_same_webhook_id_and_new_attempts(
    topo: Settings, dispatcher: SpawnDispatcher, receiver: ReceiverProcess, runs: Runs
) -> None:
    dispatcher()
    definition = job("acme", "flaky", receiver.url("/fail-then-ok/2"), retry=FAST_RETRY,
                     target={"secret": SECRET})  # fmt: skip
    rid = runs.trigger(definition, now_us())
    runs.flush()
    events = events_of(topo, rid, "succeeded")
    assert events == [
        ("accepted", 0), ("started", 1), ("failed", 1), ("retry_scheduled", 1),
        ("started", 2), ("failed", 2), ("retry_scheduled", 2), ("started", 3), ("succeeded", 3),
    ]  # fmt: skip
    requests = receiver.requests(rid)
    assert [body(r)["attempt"] for r in requests] == [1, 2, 3]
    for request in requests:
        raw = base64.b64decode(request["body_b64"])
        signature = expected_signature(SECRET, rid, request["headers"]["webhook-timestamp"], raw)
        assert request["headers"]["webhook-signature"] == signature


def test_a_hanging_receiver_times_out_and_is_dead_lettered(
    topo: Settings, dispatcher: SpawnDispatcher, receiver: ReceiverProcess, runs: Runs
) -> None:
    dispatcher()
    definition = job("acme", "hangs", receiver.url("/hang"), timeout=1,
                     retry={"max_attempts": 1})  # fmt: skip
    started = time.monotonic()
    rid = runs.trigger(definition, now_us())
    runs.flush()
    events = events_of(topo, rid, "dead_lettered")
    assert events[-2:] == [("timed_out", 1), ("dead_lettered", 1)]
    assert time.monotonic() - started >= 1.0
    assert wait_for(lambda: receiver.requests(rid)[0]["disconnected"], 10, "abort")


def test_cancel_run_aborts_a_hanging_attempt(
    topo: Settings, dispatcher: SpawnDispatcher, receiver: ReceiverProcess, runs: Runs
) -> None:
    dispatcher()
    definition = job("acme", "stuck", receiver.url("/hang"), timeout=60)
    rid = runs.trigger(definition, now_us())
    runs.flush()
    wait_for(lambda: receiver.requests(rid), 30, "the attempt to arrive", every=0.2)
    runs.cancel(definition, rid)
    runs.flush()
    assert events_of(topo, rid, "cancelled")[-1] == ("cancelled", 1)
    assert wait_for(lambda: receiver.requests(rid)[0]["disconnected"], 10, "abort")
    # A later run of the same job (same partition, same process) succeeding is the barrier:
    # whatever the aborted attempt still recorded is committed by then.
    marker = runs.trigger(job("acme", "stuck", receiver.url("/ok")), now_us() + SECOND)
    runs.flush()
    events_of(topo, marker, "succeeded")
    assert kinds(attempt_events(topo)[rid])[-1] == ("cancelled", 1)  # nothing after it


def test_forbid_skips_a_run_while_the_previous_one_is_still_running(
    topo: Settings, dispatcher: SpawnDispatcher, receiver: ReceiverProcess, runs: Runs
) -> None:
    dispatcher()
    definition = job("acme", "slowpoke", receiver.url("/slow/3000"), overlap_policy="forbid")
    t0 = now_us()
    first = runs.trigger(definition, t0)
    second = runs.trigger(definition, t0 + SECOND, not_before_us=t0 + SECOND)
    third = runs.trigger(definition, t0 + 5 * SECOND, not_before_us=t0 + 5 * SECOND)
    runs.flush()
    assert events_of(topo, first, "succeeded")[-1] == ("succeeded", 1)
    assert events_of(topo, second, "skipped") == [("accepted", 0), ("skipped", 0)]
    assert events_of(topo, third, "succeeded")[-1] == ("succeeded", 1)
    assert len(receiver.requests(second)) == 0


@pytest.mark.parametrize("delivery", ["thread", "process"])
def test_kill_9_with_attempts_in_flight_delivers_every_run_at_least_once(
    topo: Settings, dispatcher: SpawnDispatcher, receiver: ReceiverProcess, runs: Runs,
    delivery: str,
) -> None:  # fmt: skip
    proc = dispatcher(dispatch_delivery=delivery)
    count = 120
    definitions = [job("acme", f"k{i}", receiver.url("/slow/1500")) for i in range(count)]
    t0 = now_us()
    ids = [runs.trigger(d, t0) for d in definitions]
    runs.flush()
    wait_for(lambda: len(receiver.requests()) >= 60, 30, "attempts in flight", every=0.1)
    proc.kill()
    in_flight_at_kill = len(receiver.requests())
    dispatcher(dispatch_delivery=delivery)
    events = wait_for(
        lambda: (
            (e := attempt_events(topo, 1.0))
            and all(any(k == "succeeded" for k, _ in kinds(e.get(r, []))) for r in ids)
            and e
        ),
        120,
        "every run to succeed",
    )
    requests = receiver.requests()
    by_id: dict[str, int] = {}
    for request in requests:
        webhook_id = request["headers"]["webhook-id"]
        by_id[webhook_id] = by_id.get(webhook_id, 0) + 1
    assert set(by_id) == set(ids)
    duplicates = sum(n - 1 for n in by_id.values())
    redispatched = [r for r in ids if any(a >= 2 for k, a in kinds(events[r]) if k == "started")]
    assert redispatched, "no attempt was in flight at the kill"
    print(f"\nkill -9: {count} runs, {in_flight_at_kill} requests before the kill, "
          f"{len(redispatched)} re-dispatched, {duplicates} duplicate deliveries")  # fmt: skip


def test_a_small_tenant_is_not_stuck_behind_a_big_burst(
    topo: Settings, dispatcher: SpawnDispatcher, receiver: ReceiverProcess, runs: Runs
) -> None:
    dispatcher()
    url = receiver.url("/slow/5")
    instant = (now_us() // SECOND + 8) * SECOND  # all ingested before they are due
    big = [runs.trigger(job("big", f"a{i}", url), instant) for i in range(5000)]
    small = [runs.trigger(job("small", f"b{i}", url), instant) for i in range(50)]
    runs.flush()
    wait_for(lambda: len(receiver.requests()) >= 5050, 120, "every run to arrive", every=1.0)
    requests = receiver.requests()
    arrival = {r["headers"]["webhook-id"]: r["received_at"] for r in requests}
    assert set(arrival) == set(big) | set(small)
    t = instant / 1e6
    small_last = max(arrival[r] for r in small) - t
    big_sorted = sorted(arrival[r] - t for r in big)
    big_median, big_last = big_sorted[len(big_sorted) // 2], big_sorted[-1]
    before_small_done = sum(1 for x in big_sorted if x <= small_last)
    print(f"\nfairness: small tenant's last start {small_last * 1000:.0f} ms after the instant; "
          f"big tenant median {big_median * 1000:.0f} ms, last {big_last * 1000:.0f} ms; "
          f"{before_small_done} of 5000 big runs came first")  # fmt: skip
    assert min(arrival.values()) >= t - 0.05  # nothing before not_before
    assert small_last < 1.0
    assert small_last < big_median
    assert before_small_done < 2500


def test_a_kafka_target_receives_each_run_exactly_once_inside_the_transaction(
    topo: Settings, dispatcher: SpawnDispatcher, runs: Runs
) -> None:
    out_topic = topo.topic("kafka-target")
    admin = AdminClient(base_config(topo))
    admin.create_topics([NewTopic(out_topic, 1, 1)])[out_topic].result(30)
    dispatcher()
    definition = job("acme", "to-kafka", "http://127.0.0.1:9/unused")
    definition = definition.model_copy(update={"target": KafkaTarget(topic=out_topic)})
    t0 = now_us()
    ids = [runs.trigger(definition, t0 + i * SECOND, not_before_us=t0) for i in range(5)]
    for i in range(5):  # a replay of the same runs collapses into them
        runs.trigger(definition, t0 + i * SECOND, not_before_us=t0)
    runs.flush()
    for rid in ids:
        assert events_of(topo, rid, "succeeded") == [
            ("accepted", 0), ("started", 1), ("succeeded", 1),
        ]  # fmt: skip
    records = list(read_topic(topo, out_topic, True, 2.0))
    assert sorted(m.key().decode() for m in records) == sorted(ids)
    assert {json.loads(m.value())["attempt"] for m in records} == {1}


def test_a_kafka_target_record_is_committed_when_due_not_at_the_next_commit_interval(
    topo: Settings, dispatcher: SpawnDispatcher, runs: Runs
) -> None:
    """A record's transaction commits in the tick that produces it: with commits otherwise 3 s
    apart, each record is readable (read_committed) within a second of its due time."""
    out_topic = topo.topic("kafka-prompt")
    admin = AdminClient(base_config(topo))
    admin.create_topics([NewTopic(out_topic, 1, 1)])[out_topic].result(30)
    dispatcher(commit_interval_ms=3000)
    definition = job("acme", "prompt", "http://127.0.0.1:9/unused")
    definition = definition.model_copy(update={"target": KafkaTarget(topic=out_topic)})
    first = (now_us() // SECOND + 4) * SECOND
    due = {runs.trigger(definition, first + i * SECOND): first + i * SECOND for i in range(5)}
    runs.flush()
    group = f"{topo.topic_prefix}prompt"
    reader = Consumer({**base_config(topo), "group.id": group,
                       "isolation.level": "read_committed"})  # fmt: skip
    reader.assign([TopicPartition(out_topic, 0, OFFSET_BEGINNING)])
    readable: dict[str, int] = {}
    deadline = time.monotonic() + 30
    try:
        while len(readable) < len(due) and time.monotonic() < deadline:
            message = reader.poll(0.01)
            if message is not None and message.error() is None:
                readable.setdefault(message.key().decode(), now_us())
    finally:
        reader.close()
    assert set(readable) == set(due)
    late_ms = {rid: (readable[rid] - due[rid]) / 1000 for rid in due}
    assert all(0 <= ms < 1000 for ms in late_ms.values()), late_ms


def test_a_kafka_target_burst_over_many_ticks_lands_once_and_a_webhook_tenant_stays_on_time(
    topo: Settings, dispatcher: SpawnDispatcher, receiver: ReceiverProcess, runs: Runs
) -> None:
    """2,000 records due at one instant are several ticks' record budget on every partition:
    the ticks come back to back until they are all produced, each exactly once, while another
    tenant's webhooks due at the same instant go out within the second."""
    out_topic = topo.topic("kafka-burst")
    admin = AdminClient(base_config(topo))
    admin.create_topics([NewTopic(out_topic, 1, 1)])[out_topic].result(30)
    dispatcher(tenant_rate_per_s=100_000)  # the rate is policy: lifted, as in the bench
    url = receiver.url("/ok")
    instant = (now_us() // SECOND + 8) * SECOND  # all ingested before they are due
    big = []
    for i in range(2000):
        definition = job("big", f"k{i}", "http://127.0.0.1:9/unused")
        definition = definition.model_copy(update={"target": KafkaTarget(topic=out_topic)})
        big.append(runs.trigger(definition, instant))
    small = [runs.trigger(job("small", f"w{i}", url), instant) for i in range(20)]
    runs.flush()
    wait_for(lambda: len(receiver.requests()) >= 20, 60, "the webhooks", every=1.0)
    arrival = {r["headers"]["webhook-id"]: r["received_at"] for r in receiver.requests()}
    assert set(arrival) == set(small)
    assert max(arrival.values()) - instant / 1e6 < 1.0

    def produced() -> list[str] | None:
        keys = [m.key().decode() for m in read_topic(topo, out_topic, True, 2.0)]
        return keys if len(keys) >= len(big) else None

    keys = wait_for(produced, 60, "every record", every=1.0)
    assert sorted(keys) == sorted(big)  # each once, only committed ones counted


def test_retry_after_is_honoured_then_the_run_is_dead_lettered(
    topo: Settings, dispatcher: SpawnDispatcher, receiver: ReceiverProcess, runs: Runs
) -> None:
    dispatcher()
    definition = job("acme", "throttled", receiver.url("/429?after=6"),
                     retry={**FAST_RETRY, "max_attempts": 2})  # fmt: skip
    rid = runs.trigger(definition, now_us())
    runs.flush()
    assert events_of(topo, rid, "dead_lettered")[-2:] == [("failed", 2), ("dead_lettered", 2)]
    [scheduled] = [e for e in attempt_events(topo)[rid] if e["kind"] == "retry_scheduled"]
    assert (scheduled["retry_at_us"] - scheduled["at_us"]) / SECOND == pytest.approx(6, abs=0.1)
    parked = read_events(topo, "retry.5s", 1.0)  # 6 s: the largest tier not above is 5 s
    assert [m.key().decode() for m in parked] == [rid]
    arrivals = [r["received_at"] for r in receiver.requests(rid)]
    assert len(arrivals) == 2 and 5.9 <= arrivals[1] - arrivals[0] <= 7.5


def test_a_gone_target_ends_the_run_without_retries(
    topo: Settings, dispatcher: SpawnDispatcher, receiver: ReceiverProcess, runs: Runs
) -> None:
    dispatcher()
    definition = job("acme", "removed", receiver.url("/gone"), retry=FAST_RETRY)
    rid = runs.trigger(definition, now_us())
    runs.flush()
    # no retry_scheduled committed with the failure: no retry can follow
    assert events_of(topo, rid, "failed") == [("accepted", 0), ("started", 1), ("failed", 1)]
    [failed] = [e for e in attempt_events(topo)[rid] if e["kind"] == "failed"]
    assert failed["status_code"] == 410 and failed["reason"].startswith("target gone: HTTP 410")
    assert len(attempt_events(topo)[rid]) == 3 and len(receiver.requests(rid)) == 1


def most_at_once(requests: list[dict[str, object]]) -> int:
    """The most requests the receiver was answering at once."""
    edges = sorted(
        [(float(r["received_at"]), 1) for r in requests]  # type: ignore[arg-type]
        + [(float(r["answered_at"]), -1) for r in requests]  # type: ignore[arg-type]
    )
    running = most = 0
    for _, step in edges:
        running += step
        most = max(most, running)
    return most


def test_committed_starts_wait_for_a_host_slot_and_the_limit_holds(
    topo: Settings, dispatcher: SpawnDispatcher, receiver: ReceiverProcess, runs: Runs
) -> None:
    """With prefetch, twice the host limit is started and committed, but the receiver never
    sees more than the limit at once; another tenant's host is not held behind it."""
    dispatcher(host_concurrency=3, dispatch_prefetch=1)
    slow = receiver.url("/slow/300")  # host 127.0.0.1:port
    other = f"http://localhost:{receiver.port}/ok"  # another host for the limits
    instant = now_us()
    blocked = [runs.trigger(job("a", f"s{i}", slow), instant) for i in range(15)]
    free = [runs.trigger(job("b", f"f{i}", other), instant) for i in range(15)]
    runs.flush()

    def answered() -> list[dict[str, object]] | None:
        found = receiver.requests()
        return found if len(found) >= 30 and all("answered_at" in r for r in found) else None

    requests = wait_for(answered, 60, "every run answered", every=0.2)
    by_id = {r["headers"]["webhook-id"]: r for r in requests}
    assert set(by_id) == set(blocked) | set(free)
    assert most_at_once([by_id[r] for r in blocked]) == 3
    last_free = max(by_id[r]["received_at"] for r in free)
    last_blocked = max(by_id[r]["received_at"] for r in blocked)
    assert last_free < last_blocked - 0.6  # b's runs went out while a's host was still busy


def test_a_slow_host_gets_no_committed_start_that_would_expire_waiting(
    topo: Settings, dispatcher: SpawnDispatcher, receiver: ReceiverProcess, runs: Runs
) -> None:
    """A host answering in 1.5 s, longer than a committed start may wait (half the session
    timeout): with a prefetch of 3, its starts are admitted within its limit alone, so none
    fails unsent; a fast host of another tenant beside it gets the prefetch."""
    dispatcher(host_concurrency=2, dispatch_prefetch=3)
    slow = receiver.url("/slow/1500")
    fast = f"http://localhost:{receiver.port}/ok"
    instant = now_us()
    slowed = [runs.trigger(job("a", f"s{i}", slow), instant) for i in range(6)]
    free = [runs.trigger(job("b", f"f{i}", fast), instant + n * SECOND)
            for n in range(3) for i in range(8)]  # fmt: skip
    runs.flush()

    def all_succeeded() -> dict[str, list[dict[str, object]]] | None:
        found = attempt_events(topo, idle_timeout=1.0)
        done = {rid for rid, got in found.items() if any(e["kind"] == "succeeded" for e in got)}
        return found if done >= set(slowed) | set(free) else None

    events = wait_for(all_succeeded, 60, "every run succeeded", every=0.5)
    attempts = {rid: kinds(events[rid]) for rid in slowed + free}
    assert {rid: got for rid, got in attempts.items() if ("started", 2) in got} == {}
    by_id = {r["headers"]["webhook-id"]: r for r in receiver.requests()}
    assert most_at_once([by_id[r] for r in slowed]) == 2


def test_runs_armed_ahead_are_sent_at_their_due_time_and_never_before(
    topo: Settings, dispatcher: SpawnDispatcher, receiver: ReceiverProcess, runs: Runs
) -> None:
    """With DISPATCH_ARM_MS the start of a run due soon is committed ahead and the delivery
    loop sends it at its due time: its "started" event is stamped with the due time itself,
    and the receiver never sees it before then."""
    dispatcher(dispatch_arm_ms=200)
    first = now_us() + 3 * SECOND  # ingested long before: each one is armed on a tick
    due = {}
    for i in range(12):
        instant = first + i * 137_000
        due[runs.trigger(job("acme", f"armed{i}", receiver.url("/ok")), instant)] = instant
    runs.flush()

    def all_received() -> list[dict[str, object]] | None:
        found = receiver.requests()
        return found if len(found) >= len(due) else None

    requests = wait_for(all_received, 30, "every run received", every=0.2)
    received = {str(r["headers"]["webhook-id"]): float(r["received_at"]) for r in requests}
    assert set(received) == set(due)
    early = {rid: due[rid] - received[rid] * 1e6 for rid in due if received[rid] * 1e6 < due[rid]}
    assert early == {}, f"sent before their due time (µs early): {early}"
    events = attempt_events(topo, idle_timeout=1.0)
    started_at = {rid: [e["at_us"] for e in events[rid] if e["kind"] == "started"] for rid in due}
    armed = [rid for rid in due if started_at[rid] == [due[rid]]]
    assert len(armed) >= len(due) - 1, started_at  # one tick may stall on a busy machine


def test_a_run_carrying_a_bad_spec_is_rejected_naming_it_and_the_next_run_is_delivered(
    topo: Settings, dispatcher: SpawnDispatcher, receiver: ReceiverProcess, runs: Runs
) -> None:
    dispatcher()
    bad = job("evil", "spec", receiver.url("/ok"))
    home = partition_for_job_key(bad.key, topo.partitions)
    good = next(
        j for j in (job("acme", f"beside-{i}", receiver.url("/ok")) for i in range(1000))
        if partition_for_job_key(j.key, topo.partitions) == home
    )  # fmt: skip
    instant = now_us()
    record = CODEC.decode_as("RunTriggered", run_value(bad, instant))
    record["dispatch_spec_json"] = record["dispatch_spec_json"].replace('"allow"', '"often"')
    bad_rid = run_id_of(bad, instant)
    runs.producer.produce(topo.topic("runs"), key=bad_rid.encode(),
                          value=CODEC.encode("RunTriggered", record),
                          partition=home)  # fmt: skip
    good_rid = runs.trigger(good, instant)  # the same partition, after the bad run
    runs.flush()
    assert events_of(topo, good_rid, "succeeded")[-1] == ("succeeded", 1)
    rejected = wait_for(
        lambda: [m for m in read_events(topo, "rejected", 1.0) if m.key() == bad_rid.encode()],
        30, "the bad run rejected",
    )  # fmt: skip
    reason = dict(rejected[0].headers())["rejected.reason"].decode()
    assert "overlap_policy" in reason and "often" in reason, reason
    assert receiver.requests(bad_rid) == []
