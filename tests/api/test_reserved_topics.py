"""The API refuses a job whose target or notify target names a topic reserved for the
deployment or Kafka, naming the field (no broker: ``_check_targets`` on a bare state; the
in-process 422 is ``test_jobs.py::test_a_target_on_a_reserved_topic_is_refused_at_once...``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from schedulerstream.api.jobs import _check_targets
from schedulerstream.errors import ValidationError
from schedulerstream.model import JobDefinition
from schedulerstream.settings import Settings


class NoGrants:
    def grants(self, tenant: str) -> None:
        return None  # the default: any topic


def check(prefix: str, **fields: Any) -> None:
    state = SimpleNamespace(settings=Settings(topic_prefix=prefix), tenants=NoGrants())
    job = JobDefinition.model_validate(
        {"tenant": "evil", "job_id": "j", "schedule": {"every": 1}, **fields}
    )
    _check_targets(state, job)  # type: ignore[arg-type]


def test_the_dispatchers_changelog_is_refused_for_a_tenant_without_grants() -> None:
    with pytest.raises(ValidationError) as refused:
        check("cron.", target={"type": "kafka", "topic": "cron.dispatcher-state", "key": "run/x"})
    assert refused.value.field == "target.topic"
    assert "is reserved: it is one of this deployment's topics" in refused.value.message


def test_a_notify_target_on_a_reserved_topic_names_its_field() -> None:
    notify = {"on": ["dead_lettered"], "target": {"type": "kafka", "topic": "tenants"}}
    with pytest.raises(ValidationError) as refused:
        check("", target={"type": "kafka", "topic": "orders"}, notify=notify)
    assert refused.value.field == "notify.target.topic"
    assert "one of this deployment's topics" in refused.value.message


def test_a_user_topic_goes_through() -> None:
    check("cron.", target={"type": "kafka", "topic": "orders.cron.dispatcher-state"})
