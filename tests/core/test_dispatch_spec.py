"""The dispatch spec a run carries: the same as its definition's, and a bad one named."""

from __future__ import annotations

import json
from typing import Any

import pytest

from schedulerstream.codec import default_codec
from schedulerstream.dispatch_spec import DispatchSpec, spec_of_definition, spec_of_json
from schedulerstream.errors import ValidationError
from schedulerstream.model import JobDefinition

CODEC = default_codec()
SECRET = "whsec_a2tra2tra2tra2tra2tra2tra2tra2tra2tra2tra2s="
SHAPES: list[dict[str, Any]] = [
    {},
    {
        "target": {
            "type": "http",
            "url": "https://h.test/é",
            "headers": {"X-A": "b"},
            "secret": SECRET,
            "method": "PUT",
        }
    },
    {"target": {"type": "kafka", "topic": "orders", "key": "k"}},
    {"target": {"type": "worker", "pool": "email"}, "timeout": 2.5, "delivery": "at_most_once"},
    {
        "target": {
            "type": "sqs",
            "queue_url": "http://127.0.0.1:9324/000000000000/q",
            "region": "elasticmq",
        }
    },
    {
        "retry": {"max_attempts": 2, "initial_backoff": 0.5, "multiplier": 3, "max_age": "PT2H"},
        "overlap_policy": "forbid",
    },
    {
        "pause_after_failures": 3,
        "notify": {
            "on": ["dead_lettered", "paused"],
            "target": {"type": "http", "url": "https://n.test/x", "secret": SECRET},
        },
    },
]


def decoded(**extra: Any) -> tuple[JobDefinition, dict[str, Any]]:
    fields = {"tenant": "acme", "job_id": "j", "version": 1, "schedule": {"every": 60},
              "target": {"type": "http", "url": "https://h.test/x"}, **extra}  # fmt: skip
    job = JobDefinition.model_validate(fields)
    return job, CODEC.decode_as("JobDefinition", CODEC.encode("JobDefinition", job.to_avro()))


@pytest.mark.parametrize("extra", SHAPES)
def test_the_carried_spec_is_the_definitions(extra: dict[str, Any]) -> None:
    job, record = decoded(**extra)
    spec = spec_of_definition(record)
    assert spec == DispatchSpec.of(job)
    assert spec_of_json(spec.to_json()) == spec


def carried(**changes: Any) -> str:
    """A valid spec's wire form with some of its fields changed."""
    fields = json.loads(spec_of_definition(decoded()[1]).to_json())
    names = ["target", "timeout", "overlap", "delivery", "retry"]
    for name, value in changes.items():
        fields[names.index(name)] = value
    return json.dumps(fields)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("not json", "dispatch_spec_json"),
        ("{}", "dispatch_spec_json"),
        ('["a", 1]', "dispatch_spec_json"),
        (carried(target='{"type": "http", "url": "ftp://h.test/x"}'), "http.url"),
        (carried(target='{"type": "carrier-pigeon"}'), "target"),
        (carried(target="{"), "target"),
        (carried(target={"type": "http"}), "target"),
        (carried(timeout=0), "timeout"),
        (carried(timeout="30"), "timeout"),
        (carried(timeout=True), "timeout"),
        (carried(overlap="sometimes"), "overlap_policy"),
        (carried(delivery="exactly_once"), "delivery"),
        (carried(retry=[5, 1.0, 2.0, 300.0]), "retry"),
        (carried(retry=["5", 1.0, 2.0, 300.0, 3600.0]), "retry"),
        (carried(retry=[1.5, 1.0, 2.0, 300.0, 3600.0]), "retry.max_attempts"),
        (carried(retry=[0, 1.0, 2.0, 300.0, 3600.0]), "max_attempts"),
        (carried(retry=[5, 1.0, 0.5, 300.0, 3600.0]), "multiplier"),
    ],
)
def test_a_bad_carried_spec_is_refused_naming_its_field(text: str, field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        spec_of_json(text)
    assert caught.value.field == field, caught.value


def test_a_bad_pause_or_notify_is_refused_naming_its_field() -> None:
    good = json.loads(spec_of_definition(decoded(**SHAPES[-1])[1]).to_json())
    for index, value, field in [
        (5, 0, "pause_after_failures"),
        (5, "3", "pause_after_failures"),
        (6, '{"type": "http", "url": "file:///etc/passwd"}', "http.url"),
        (6, 7, "notify"),
        (7, ["dead_lettered", "sometimes"], "notify.on"),
        (7, "paused", "notify.on"),
    ]:
        bad = list(good)
        bad[index] = value
        with pytest.raises(ValidationError) as caught:
            spec_of_json(json.dumps(bad))
        assert caught.value.field == field, (value, caught.value)
