"""A job's Kafka target may not name a topic of the deployment or of Kafka itself
(``reserved_topic``): a record there would be read back as the deployment's own state or
input (a dispatcher changelog record it cannot decode stopped every member that restored it)."""

from __future__ import annotations

from typing import Any

import pytest

from schedulerstream.contracts.topic_names import DECLARED, reserved_topic
from schedulerstream.model import JobDefinition, topic_refusals


@pytest.mark.parametrize(
    "topic",
    ["cron.dispatcher-state", "cron.schedules", "cron.tenants", "cron.retry.5s", "cron.work.p1",
     "cron.connect-offsets", "__consumer_offsets", "__transaction_state"],
)  # fmt: skip
def test_the_deployments_topics_and_kafkas_own_are_reserved(topic: str) -> None:
    why = reserved_topic(topic, "cron.")
    assert why is not None and why.startswith(f"topic {topic!r} is reserved")


@pytest.mark.parametrize(
    "topic", ["orders", "orders.cron.x", "cron", "xcron.runs", "_private", "cron.exports",
              "cron.runs.archive", "cron.dispatcher-state-copy"],
)  # fmt: skip
def test_a_user_topic_is_allowed_even_under_the_prefix(topic: str) -> None:
    assert reserved_topic(topic, "cron.") is None


def test_the_reason_says_whose_topic_it_is() -> None:
    assert "one of this deployment's topics" in str(reserved_topic("cron.tenants", "cron."))
    assert "worker pools'" in str(reserved_topic("cron.work.email", "cron."))
    assert "Kafka Connect's" in str(reserved_topic("cron.connect-status", "cron."))
    assert "Kafka's own" in str(reserved_topic("__consumer_offsets", "cron."))


@pytest.mark.parametrize(
    "topic",
    [*DECLARED, "work.pool-a", "connect-configs", "connect-offsets", "__consumer_offsets"],
)
def test_with_no_prefix_the_declared_topics_and_the_work_and_connect_prefixes_are_reserved(
    topic: str,
) -> None:
    assert reserved_topic(topic, "") is not None


@pytest.mark.parametrize("topic", ["orders", "dispatcher-state-copy", "runs.archive", "work"])
def test_with_no_prefix_other_topics_are_allowed(topic: str) -> None:
    assert reserved_topic(topic, "") is None


def _job(**fields: Any) -> JobDefinition:
    return JobDefinition.model_validate(
        {"tenant": "evil", "job_id": "j", "schedule": {"every": 1}, **fields}
    )


def test_topic_refusals_name_the_target_and_the_notify_target() -> None:
    job = _job(
        target={"type": "kafka", "topic": "cron.dispatcher-state", "key": "run/x"},
        notify={"on": ["dead_lettered"], "target": {"type": "kafka", "topic": "cron.tenants"}},
    )
    refused = topic_refusals(job, "cron.")
    assert [field for field, _ in refused] == ["target.topic", "notify.target.topic"]
    assert "'cron.dispatcher-state'" in refused[0][1] and "'cron.tenants'" in refused[1][1]
    fine = _job(target={"type": "kafka", "topic": "orders.cron.x"})
    assert topic_refusals(fine, "cron.") == []
