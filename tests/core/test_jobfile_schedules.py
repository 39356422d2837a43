"""Job files with several cron expressions and excluded dates: parsed, or errors by line."""

from __future__ import annotations

import json

from schedulerstream.jobfile import parse_job_file


def _job(**schedule: object) -> str:
    return json.dumps(
        {
            "tenant": "acme",
            "job_id": "reports",
            "schedule": {"timezone": "Europe/Paris", **schedule},
            "target": {"type": "kafka", "topic": "reports"},
        }
    )


def test_a_list_of_expressions_and_exclusions_is_read() -> None:
    text = _job(
        cron=["0 9 * * MON-FRI", "0 12 * * SAT"],
        exclude=["2026-12-25", {"from": "2026-12-31", "to": "2027-01-01"}],
    )
    jobs, errors = parse_job_file(text)
    assert errors == []
    [job] = jobs
    assert job.schedule.cron_expressions == ["0 9 * * MON-FRI", "0 12 * * SAT"]
    assert [str(r) for pair in job.schedule.excluded_ranges for r in pair] == [
        "2026-12-25", "2026-12-25", "2026-12-31", "2027-01-01",
    ]  # fmt: skip


def test_errors_name_the_line_and_the_field() -> None:
    text = "\n".join(
        [
            _job(cron=["0 9 * * MON-FRI", "0 9 * * FRI#6"]),
            _job(cron="0 9 * * *", exclude=[{"from": "2026-02-02", "to": "2026-02-01"}]),
        ]
    )
    _, errors = parse_job_file(text)
    assert [str(e) for e in errors] == [
        "line 1: schedule.cron: [1] '0 9 * * FRI#6': day_of_week: 'FRI#6': the occurrence "
        "after '#' must be 1-5 (a month has at most five of a weekday) (job acme/reports)",
        "line 2: schedule.exclude.0.range: 'to' (2026-02-01) is before 'from' (2026-02-02) "
        "(job acme/reports)",
    ]
