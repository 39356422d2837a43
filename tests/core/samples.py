"""Sample records for every event schema (shared by codec tests)."""

from __future__ import annotations

from typing import Any

from schedulerstream.model import JobDefinition

JOB = JobDefinition.model_validate(
    {
        "tenant": "acme",
        "job_id": "nightly-backup",
        "version": 7,
        "schedule": {"every": "PT5M", "timezone": "America/New_York", "jitter": 2},
        "target": {"type": "http", "url": "https://example.com/hook", "headers": {"x-a": "1"}},
        "payload": {"any": ["json", 1, None]},
    }
)
CRON_JOB = JobDefinition.model_validate(
    {
        "tenant": "acme",
        "job_id": "reports",
        "version": 2,
        "schedule": {
            "cron": ["0 9 * * MON-FRI", "0 12 * * SAT", "0 18 * * TUE#2"],
            "timezone": "Europe/Paris",
            "exclude": ["2026-12-25", {"from": "2026-12-31", "to": "2027-01-01"}],
        },
        "target": {"type": "kafka", "topic": "reports"},
    }
)
NOTIFY_JOB = JobDefinition.model_validate(
    {
        "tenant": "acme",
        "job_id": "fragile",
        "version": 3,
        "schedule": {"cron": "*/5 * * * *"},
        "target": {"type": "http", "url": "https://example.com/fragile"},
        "pause_after_failures": 3,
        "notify": {"on": ["dead_lettered", "paused"], "target": {"type": "worker", "pool": "ops"}},
    }
)
T = 1_733_000_000_000_000


def sample_records(name: str) -> list[dict[str, Any]]:
    job = JOB.to_avro()
    worker_job = JobDefinition.model_validate(
        {**JOB.model_dump(), "target": {"type": "worker", "pool": "etl"}}
    )
    samples: dict[str, list[dict[str, Any]]] = {
        "JobDefinition": [job, CRON_JOB.to_avro(), NOTIFY_JOB.to_avro()],
        "Command": [
            {
                "tenant": "acme",
                "job_id": "j",
                "issued_at_us": T,
                "command": (
                    "io.schedulerstream.TriggerNow",
                    {"request_id": "r1", "payload_json": None},
                ),
            },
            {
                "tenant": "acme",
                "job_id": "j",
                "issued_at_us": T,
                "command": (
                    "io.schedulerstream.Backfill",
                    {"request_id": "b1", "start_us": T, "end_us": T + 10**9, "rerun": True},
                ),
            },
            {
                "tenant": "acme",
                "job_id": "j",
                "issued_at_us": T,
                "command": ("io.schedulerstream.CancelRun", {"run_id": "acme/j@x", "reason": "r"}),
            },
            {
                "tenant": "acme",
                "job_id": "j",
                "issued_at_us": T,
                "command": (
                    "io.schedulerstream.PauseJob",
                    {
                        "job_version": 4,
                        "reason": "paused after 3 consecutive failed runs",
                        "run_id": "acme/j@x",
                        "last_attempt_json": '{"attempt": 1}',
                    },
                ),
            },
        ],
        "RunTriggered": [
            {
                "run_id": "acme/nightly-backup@20241130T210000Z",
                "tenant": "acme",
                "job_id": "nightly-backup",
                "scheduled_at_us": T,
                "not_before_us": T + 5,
                "emitted_at_us": T - 1000,
                "trigger": "scheduled",
                "payload_json": '{"a": 1}',
                "job_version": 7,
                "job_definition": b"\xc3\x01definition-bytes",
                "dispatch_spec_json": None,
            },
            {
                "run_id": "acme/nightly-backup@20241201T210000Z",
                "tenant": "acme",
                "job_id": "nightly-backup",
                "scheduled_at_us": T + 86_400_000_000,
                "not_before_us": T + 86_400_000_000,
                "emitted_at_us": T,
                "trigger": "catch_up",
                "payload_json": None,
                "job_version": 8,
                "job_definition": b"\xc3\x01definition-bytes",
                "dispatch_spec_json": '["{\\"url\\":\\"https://h.test\\"}",30.0]',
            },
        ],
        "RunRevoked": [
            {
                "run_id": "acme/j@20241130T210000Z",
                "tenant": "acme",
                "job_id": "j",
                "scheduled_at_us": T,
                "revoked_at_us": T - 3,
                "reason": "paused",
                "job_version": 8,
            }
        ],
        "AttemptEvent": [
            {
                "run_id": "acme/j@20241130T210000Z",
                "tenant": "acme",
                "job_id": "j",
                "attempt": 2,
                "kind": "failed",
                "at_us": T,
                "scheduled_at_us": T - 9,
                "reason": "HTTP 503",
                "status_code": 503,
                "retry_at_us": T + 10,
                "duration_us": 1234,
                "count": 1,
                "instance": "i-1",
            }
        ],
        "RunState": [
            {
                "run_id": "acme/j@20241130T210000Z",
                "tenant": "acme",
                "job_id": "j",
                "status": "succeeded",
                "trigger": "manual",
                "scheduled_at_us": T,
                "started_at_us": T + 1,
                "finished_at_us": T + 2,
                "attempts": 1,
                "last_error": None,
                "updated_at_us": T + 2,
            }
        ],
        "SchedulerJob": [
            {
                "version": 7,
                "definition": b"\xc3\x01def",
                "paused": False,
                "fired_through_us": T,
                "next_fire_us": T + 60,
                "next_not_before_us": T + 61,
                "next_emit_us": T + 50,
                "runs_emitted": 3,
                "pending": [{"run_id": "acme/j@x", "scheduled_at_us": T, "not_before_us": T + 1}],
                "recent_requests": ["r1", "r2"],
                "backfills": [
                    {
                        "request_id": "b",
                        "next_after_us": T,
                        "end_us": T + 9,
                        "rerun": True,
                        "emitted": 2,
                    }
                ],
            }
        ],
        "Rejected": [
            {
                "topic": "cron.schedules",
                "partition": 3,
                "offset": 42,
                "key": b"acme/j",
                "value": b"\x00garbage",
                "reason": "not Avro",
                "processor": "scheduler",
                "rejected_at_us": T,
            }
        ],
    }
    assert worker_job.target.type == "worker"
    if name == "JobDefinition":
        samples[name].append(worker_job.with_version(8).to_avro())
    return samples[name]
