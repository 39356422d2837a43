"""pause_after_failures and notify in the model, the API body and the CLI job file (issue #16):
accepted with any target kind, errors naming the field."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from schedulerstream.api.schemas import JobBody
from schedulerstream.jobfile import parse_job_file
from schedulerstream.model import JobDefinition, field_errors

BASE = {"schedule": {"every": 60}, "target": {"type": "http", "url": "https://example.com/h"}}
TARGETS = [
    {"type": "http", "url": "https://alerts.example.com/", "secret": "whsec_" + "A" * 24},
    {"type": "kafka", "topic": "alerts"},
    {"type": "sqs", "queue_url": "https://sqs.eu-west-1.amazonaws.com/1/alerts",
     "region": "eu-west-1"},
    {"type": "worker", "pool": "ops"},
]  # fmt: skip


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t["type"])
def test_any_target_kind_is_a_notify_target_in_the_api_body(target: dict[str, object]) -> None:
    body = JobBody.model_validate(
        {**BASE, "pause_after_failures": 5, "notify": {"on": ["paused"], "target": target}}
    )
    job = body.definition("acme", "j1")
    assert job.pause_after_failures == 5 and job.notify is not None
    assert job.notify.target.type == target["type"]


@pytest.mark.parametrize(
    ("extra", "field", "says"),
    [
        ({"pause_after_failures": 0}, "pause_after_failures", "greater than or equal to 1"),
        ({"notify": {"on": [], "target": TARGETS[1]}}, "notify.on", "at least 1"),
        ({"notify": {"on": ["failed"], "target": TARGETS[1]}}, "notify.on.0", "'dead_lettered'"),
        ({"notify": {"on": ["paused", "paused"], "target": TARGETS[1]}}, "notify.on",
         "names an event twice"),
        ({"notify": {"on": ["paused"], "target": {"type": "http", "url": "ftp://x"}}},
         "notify.target.http.url", "not an http(s) URL"),
        ({"notify": {"on": ["paused"]}}, "notify.target", "Field required"),
    ],
)  # fmt: skip
def test_errors_name_the_field(extra: dict[str, object], field: str, says: str) -> None:
    with pytest.raises(ValidationError) as caught:
        JobDefinition.model_validate({**BASE, "tenant": "acme", "job_id": "j1", **extra})
    [(where, message)] = field_errors(caught.value)
    assert where == field and says in message


def test_the_cli_job_file_takes_both_fields() -> None:
    text = json.dumps(
        [{**BASE, "tenant": "acme", "job_id": "j1", "pause_after_failures": 3,
          "notify": {"on": ["dead_lettered", "paused"], "target": TARGETS[3]}}]
    )  # fmt: skip
    jobs, errors = parse_job_file(text)
    assert errors == []
    [job] = jobs
    assert job.pause_after_failures == 3 and job.notify is not None
    assert job.notify.on == ["dead_lettered", "paused"]
