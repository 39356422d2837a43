"""The job definition: validation names the field; durations; Avro round trip."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from pydantic import ValidationError

from schedulerstream.codec import Codec
from schedulerstream.durations import parse_duration
from schedulerstream.ingest import RejectedRecord, decode_schedule
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
        (job(schedule={"every": 0}), "schedule.every", "1 s"),
        (job(schedule={"every": 0.5}), "schedule.every", "identified to the second"),
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
        (job(schedule={"cron": []}), "schedule.cron", "1 to 20 expressions (got 0)"),
        (job(schedule={"cron": ["0 9 * * *"] * 21}), "schedule.cron", "(got 21)"),
        (
            job(schedule={"cron": ["0 9 * * *", "0 9 * * TUE#6"]}),
            "schedule.cron",
            "[1] '0 9 * * TUE#6': day_of_week: 'TUE#6': the occurrence after '#' must be 1-5",
        ),
        (job(schedule={"cron": "0 9 LW-1 * *"}), "schedule.cron", "day_of_month: 'LW-1'"),
        (
            job(schedule={"cron": "0 9 * * *", "exclude": ["2026-02-30"]}),
            "schedule.exclude.0.date",
            "day value is outside",
        ),
        (
            job(
                schedule={
                    "cron": "0 9 * * *",
                    "exclude": [{"from": "2026-02-03", "to": "2026-02-01"}],
                }
            ),
            "schedule.exclude.0.range",
            "'to' (2026-02-01) is before 'from' (2026-02-03)",
        ),
        (
            job(schedule={"cron": "0 9 * * *", "exclude": ["2026-01-01", {"from": "2026-02-03"}]}),
            "schedule.exclude.1.range.to",
            "required",
        ),
        (
            job(schedule={"cron": "0 9 * * *", "exclude": ["2026-01-01"] * 1001}),
            "schedule.exclude",
            "at most 1000",
        ),
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


@pytest.mark.parametrize("long", [1e14, 10**12 + 1, "P11574075D", "1e30", 10**400])
def test_a_duration_no_record_holds_is_refused_by_name(long: object) -> None:
    with pytest.raises(ValueError, match=r"longer than 1e12 s \(~31,700 years\)"):
        parse_duration(long)
    assert parse_duration(10**12) == 1e12  # an old job's "forever" (1e10 s) still reads
    with pytest.raises(ValueError, match="non-negative"):  # not OverflowError (a 500)
        parse_duration(-(10**400))


HUGE = {"timeout": 1e14, "retry": {"max_backoff": 1e15}, "schedule": {"every": 1e300}}


@pytest.mark.parametrize(("field", "value"), HUGE.items())
def test_a_json_job_whose_duration_no_record_holds_is_rejected_naming_it(
    field: str, value: object
) -> None:
    job = {"tenant": "acme", "job_id": "j", "schedule": {"every": 60},
           "target": {"type": "http", "url": "https://example.com/x"}, field: value}  # fmt: skip
    with pytest.raises(RejectedRecord, match=f"{field}.*longer than 1e12 s"):
        decode_schedule(Codec(), b"acme/j", json.dumps(job).encode(), 1)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            {"at_us": 2**62, "every_us": None},
            "schedule.at: 4611686018427387904 µs is not an instant",
        ),
        ({"end_at_us": -(2**62)}, "schedule.end_at: -4611686018427387904 µs is not an instant"),
        ({"payload_json": "{"}, "payload_json: not a JSON document"),
        ({"payload_json": "[" * 100_000}, "payload_json: not a JSON document"),
    ],
)
def test_an_avro_job_no_model_holds_is_rejected_naming_the_field(
    change: dict[str, Any], reason: str
) -> None:
    codec = Codec()
    target = {"type": "http", "url": "https://x.test/"}
    job = JobDefinition.model_validate(
        {"tenant": "acme", "job_id": "j", "version": 1, "schedule": {"every": 60}, "target": target}
    )
    record = job.to_avro()
    if "payload_json" in change:
        record.update(change)
    else:
        record["schedule"] = {**record["schedule"], **change}
    with pytest.raises(RejectedRecord, match=re.escape(reason)):
        decode_schedule(codec, b"acme/j", codec.encode("JobDefinition", record), 1)


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


def test_several_expressions_and_excluded_dates_round_trip() -> None:
    original = JobDefinition.model_validate(
        job(
            version=5,
            schedule={
                "cron": [
                    "0 9 * * MON-FRI",
                    "0 12 * * SAT",
                    "0 18 * * TUE#2,FRIL",
                    "0 8 15W,LW * ?",
                ],
                "timezone": "Europe/Paris",
                "exclude": ["2026-12-25", {"from": "2026-12-31", "to": "2027-01-02"}],
            },
        )
    )
    avro = original.to_avro()["schedule"]
    assert avro["cron"] == [
        "0 9 * * MON-FRI",
        "0 12 * * SAT",
        "0 18 * * TUE#2,FRIL",
        "0 8 15W,LW * ?",
    ]
    assert avro["exclude"] == [
        {"from_date": "2026-12-25", "to_date": "2026-12-25"},
        {"from_date": "2026-12-31", "to_date": "2027-01-02"},
    ]
    codec = Codec()
    _, record = codec.decode(codec.encode("JobDefinition", original.to_avro()))
    assert JobDefinition.from_avro(record) == original
    shown = original.model_dump(mode="json")["schedule"]
    assert shown["exclude"] == ["2026-12-25", {"from": "2026-12-31", "to": "2027-01-02"}]
    assert JobDefinition.model_validate_json(original.model_dump_json()) == original


def test_a_single_expression_stays_a_string() -> None:
    original = JobDefinition.model_validate(job(version=1))
    assert original.to_avro()["schedule"]["cron"] == "30 2 * * *"
    assert original.to_avro()["schedule"]["exclude"] == []
    assert original.schedule.cron_expressions == ["30 2 * * *"]


def test_a_record_written_before_exclude_existed_reads_with_none() -> None:
    record = JobDefinition.model_validate(job(version=1)).to_avro()
    del record["schedule"]["exclude"]
    assert JobDefinition.from_avro(record).schedule.exclude == []


def test_a_version_past_avros_long_is_refused_by_name() -> None:
    assert JobDefinition.model_validate(job(version=2**63 - 1)).version == 2**63 - 1
    field, message = error_of(job(version=2**63))
    assert field == "version" and "9223372036854775807" in message
