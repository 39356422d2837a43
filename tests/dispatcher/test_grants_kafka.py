"""Tenant grants in a real dispatcher: a worker pool or Kafka topic its record does not grant
fails the run, refused, and reaches nothing; another tenant's runs go on beside it."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from schedulerstream.kafka.clients import base_config
from schedulerstream.kafka.reader import read_topic
from schedulerstream.model import KafkaTarget, WorkerTarget
from schedulerstream.settings import Settings
from schedulerstream.tenants import TenantAdmin
from tests.dispatcher.conftest import SpawnDispatcher
from tests.dispatcher.support import SECOND, Runs, attempt_events, job, wait_for

pytestmark = pytest.mark.kafka


def test_a_pool_or_topic_not_granted_fails_its_run_and_other_runs_go_on(
    topo: Settings, dispatcher: SpawnDispatcher, runs: Runs
) -> None:
    theirs, ours = topo.topic("globex.out"), topo.topic("acme.out")
    admin = AdminClient(base_config(topo))
    for topic in (theirs, ours):
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    tenants = TenantAdmin(topo)
    tenants.create("acme")
    tenants.update("acme", pools=["acme-reports"], topics=[topo.topic("acme.*")])
    dispatcher()
    t0 = time.time_ns() // 1000

    def run(tenant: str, job_id: str, target: KafkaTarget | WorkerTarget, n: int = 0) -> str:
        definition = job(tenant, job_id, "http://127.0.0.1:9/unused")
        definition = definition.model_copy(update={"target": target})
        return runs.trigger(definition, t0 + n * SECOND, not_before_us=t0)

    refused = [run("acme", "to-theirs", KafkaTarget(topic=theirs)),
               run("acme", "to-their-pool", WorkerTarget(pool="globex-billing"))]  # fmt: skip
    granted = [run("acme", "to-ours", KafkaTarget(topic=ours), n) for n in range(3)]
    other = [run("globex", "to-theirs", KafkaTarget(topic=theirs), n) for n in range(3)]
    runs.flush()

    def ended() -> dict[str, list[dict[str, object]]] | None:
        events = attempt_events(topo, idle_timeout=1.0)
        done = all(any(e["kind"] in ("succeeded", "failed") for e in events.get(r, []))
                   for r in refused + granted + other)  # fmt: skip
        return events if done else None

    events = wait_for(ended, 60, "every run's end")
    for rid in refused:
        [failed] = [e for e in events[rid] if e["kind"] == "failed"]
        assert "is not granted to tenant acme" in str(failed["reason"]), failed
        assert not [e for e in events[rid] if e["kind"] == "succeeded"]
    for rid in granted + other:
        assert [e["kind"] for e in events[rid]][-1] == "succeeded"
    landed = {m.key().decode() for m in read_topic(topo, theirs, True, 2.0)}
    assert landed == set(other)  # acme's record never reached globex's topic
    assert {json.loads(m.value())["run_id"] for m in read_topic(topo, ours, True, 2.0)} == set(
        granted
    )
    topics = admin.list_topics(timeout=30).topics
    assert topo.topics.work("globex-billing") not in topics  # not even asked about
