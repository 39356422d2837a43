"""The job definition: validation names the field; durations; Avro round trip."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from schedulerstream.codec import Codec
from schedulerstream.durations import parse_duration
from schedulerstream.model import JobDefinition


def job(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "tenant": "acme",
        "job_id": "nightly-backup",
        "schedule": {"cron": "30 2 * * *", "timezone": "America/New_York"},
        "target": {"type": "http", "url": "https://example.com/hook"},
    }
    base.update(overrides)
    return base


def error_of(data: dict[str, Any]) -> tuple[str, str]:
    with pytest.raises(ValidationError) as info:
        JobDefinition.model_validate(data)
    first = info.value.errors()[0]
    return ".".join(str(p) for p in first["loc"]), first["msg"]


def test_the_documented_example_validates_with_defaults() -> None:
    parsed = JobDefinition.model_validate(
        job(
            payload={"any": "json"},
            misfire_policy="fire_once",
            catch_up_window=3600,
            retry={"max_attempts": 5, "initial_backoff": 1, "multiplier": 2, "max_backoff": 300},
            timeout=30,
        )
    )
    assert parsed.key == "acme/nightly-backup"
    assert parsed.schedule.dst_gap == "auto"
    assert parsed.retry.max_age == 3600
    assert parsed.delivery == "at_least_once"


@pytest.mark.parametrize(
    ("data", "field", "needle"),
    [
        (job(tenant="Acme"), "tenant", "pattern"),
        (job(job_id="-x"), "job_id", "pattern"),
        (job(schedule={"cron": "61 * * * *"}), "schedule.cron", "minute: '61'"),
        (job(schedule={"cron": "* * * *"}), "schedule.cron", "expression"),
        (
            job(schedule={"cron": "0 * * * *", "timezone": "Mars/Olympus"}),
            "schedule.timezone",
            "Mars/Olympus",
        ),
        (job(schedule={}), "schedule", "exactly one"),
        (job(schedule={"cron": "0 * * * *", "every": 5}), "schedule", "exactly one"),
        (job(schedule={"every": "PT5X"}), "schedule.every", "PT5X"),
        (job(schedule={"every": 0}), "schedule.every", "1 ms"),
        (job(schedule={"at": "2025-01-01T00:00:00"}), "schedule.at", "offset"),
        (job(target={"type": "http", "url": "ftp://x"}), "target.http.url", "http(s)"),
        (job(target={"type": "smtp"}), "target", "type"),
        (
            job(target={"type": "http", "url": "https://x", "secret": "abc"}),
            "target.http.secret",
            "whsec_",
        ),
        (
            job(target={"type": "http", "url": "https://x", "headers": {"webhook-id": "1"}}),
            "target.http.headers",
            "webhook-id",
        ),
        (job(target={"type": "worker", "pool": "Bad Pool"}), "target.worker.pool", "pattern"),
        (job(misfire_policy="sometimes"), "misfire_policy", "skip"),
        (job(timeout=-1), "timeout", "non-negative"),
        (job(retry={"max_attempts": 0}), "retry.max_attempts", "greater"),
        (job(unknown_field=1), "unknown_field", "Extra"),
    ],
)
def test_errors_name_the_field(data: dict[str, Any], field: str, needle: str) -> None:
    loc, msg = error_of(data)
    assert loc == field
    assert needle.lower() in msg.lower()


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        (30, 30.0),
        (0.5, 0.5),
        ("90", 90.0),
        ("PT30S", 30.0),
        ("PT1H30M", 5400.0),
        ("P1DT2H", 93600.0),
        ("P1W", 604800.0),
        ("pt0.5s", 0.5),
    ],
)
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["P", "PT", "P1DT", "5 minutes", True, -3, "nan", None])
def test_bad_durations(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(bad)


@pytest.mark.parametrize(
    "target",
    [
        {
            "type": "http",
            "url": "https://h/x",
            "method": "PUT",
            "headers": {"a": "b"},
            "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        },
        {"type": "kafka", "topic": "out.topic", "key": "k"},
        {
            "type": "sqs",
            "queue_url": "https://sqs.eu-west-1.amazonaws.com/1/q.fifo",
            "region": "eu-west-1",
            "message_group_id": "g",
        },
        {"type": "worker", "pool": "etl"},
    ],
)
def test_avro_round_trip_for_every_target(target: dict[str, Any]) -> None:
    original = JobDefinition.model_validate(
        job(
            version=3,
            target=target,
            schedule={
                "cron": "*/5 * * * * *",
                "timezone": "Europe/London",
                "jitter": "PT2S",
                "start_at": "2025-01-01T00:00:00+01:00",
                "end_at": "2026-01-01T00:00:00Z",
                "dst_gap": "skip",
                "dst_repeat": "both",
            },
            payload=[1, {"x": None}],
            max_runs=4,
            overlap_policy="buffer_one",
            delivery="at_most_once",
        )
    )
    codec = Codec()
    _, record = codec.decode(codec.encode("JobDefinition", original.to_avro()))
    assert JobDefinition.from_avro(record) == original


def test_to_avro_needs_a_version() -> None:
    from schedulerstream.errors import ValidationError as SSValidationError

    with pytest.raises(SSValidationError, match="version"):
        JobDefinition.model_validate(job()).to_avro()
