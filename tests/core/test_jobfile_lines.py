"""Job files: an error names its line and its job in every layout, and a large file is read in
time linear in its size (line numbers were once recounted from the start for every item)."""

from __future__ import annotations

import gc
import json
import time

from schedulerstream.jobfile import parse_job_file


def _job(number: int, **fields: object) -> dict[str, object]:
    return {
        "tenant": f"t{number % 7}",
        "job_id": f"job-{number}",
        "schedule": {"cron": "*/5 * * * *", "timezone": "Europe/Paris"},
        "target": {"type": "http", "url": f"https://example.com/hook/{number}"},
        "payload": {"n": number},
        **fields,
    }


def _json_lines(jobs: list[dict[str, object]]) -> str:
    return "\n".join(json.dumps(job) for job in jobs) + "\n"


def test_an_error_on_line_k_of_json_lines_names_line_k_and_the_job() -> None:
    jobs = [_job(n) for n in range(1, 60)]
    jobs[36] = _job(37, schedule={"every": -5})  # line 37
    _, errors = parse_job_file(_json_lines(jobs))
    assert [str(e) for e in errors] == [
        "line 37: schedule.every: -5 must be a finite, non-negative duration (job t2/job-37)"
    ]


def test_an_error_in_an_indented_array_names_the_line_its_item_starts_on() -> None:
    jobs = [_job(n) for n in range(40)]
    jobs[25] = _job(25, retry={"max_attempts": 0})
    text = json.dumps(jobs, indent=2)
    starts = [n + 1 for n, row in enumerate(text.splitlines()) if row == "  {"]
    _, errors = parse_job_file(text)
    [error] = errors
    assert (error.line, error.field, error.job) == (starts[25], "retry.max_attempts", "t4/job-25")
    assert starts[25] > 25 * 10  # an item spans many lines: not the item's index


def test_a_job_defined_twice_names_both_lines() -> None:
    text = _json_lines([_job(1), _job(2), _job(3), _job(2, paused=True)])
    jobs, errors = parse_job_file(text)
    assert [str(e) for e in errors] == ["line 4: job_id: also defined on line 2 (job t2/job-2)"]
    assert [j.key for j in jobs] == ["t1/job-1", "t2/job-2", "t3/job-3"]


def test_an_item_without_ids_is_named_by_its_line_alone() -> None:
    _, errors = parse_job_file(_json_lines([_job(1), {"schedule": {"every": 5}}]))
    assert errors and all(e.line == 2 and e.job is None for e in errors)
    assert str(errors[0]).startswith("line 2: tenant: ")


def _cpu_seconds_to_read(text: str, jobs: int) -> float:
    """CPU seconds of one read, without the cyclic garbage collector (whose full collections
    rescan every live object and would blur the parser's own growth)."""
    gc.collect()
    gc.disable()
    try:
        started = time.process_time()
        found, errors = parse_job_file(text)
        elapsed = time.process_time() - started
    finally:
        gc.enable()
    assert (len(found), errors) == (jobs, [])
    return elapsed


def test_reading_ten_times_the_jobs_takes_about_ten_times_as_long() -> None:
    small = _json_lines([_job(n) for n in range(2_000)])
    large = _json_lines([_job(n) for n in range(20_000)])
    small_s = min(_cpu_seconds_to_read(small, 2_000) for _ in range(3))
    large_s = min(_cpu_seconds_to_read(large, 20_000) for _ in range(2))
    # linear: about 10x; recounting lines from the start of the text per item measured 73x
    assert large_s < 20 * small_s, f"2,000 jobs: {small_s:.3f} s, 20,000: {large_s:.3f} s"


def test_json_lines_read_as_the_same_jobs_as_an_array_of_them() -> None:
    jobs = [_job(n) for n in range(30)]
    jobs[3] = _job(3, payload={"f": 1.5, "big": 2**62, "s": "é\u2603", "deep": [{"a": None}]})
    jobs[4] = _job(4, schedule={"every": 90.5, "phase": 3}, retry={"max_attempts": 2})
    jobs[5] = _job(5, schedule={"at": "2031-05-01T12:00:00+02:00"}, paused=True)
    from_lines, line_errors = parse_job_file(_json_lines(jobs))
    from_array, array_errors = parse_job_file(json.dumps(jobs, indent=1))
    assert line_errors == array_errors == []
    assert [j.model_dump() for j in from_lines] == [j.model_dump() for j in from_array]


def test_a_broken_line_among_json_lines_is_named_by_its_line() -> None:
    rows = [json.dumps(_job(n)) for n in range(10)]
    rows[6] = rows[6][:-5] + "}"  # cut inside the payload: not JSON
    _, errors = parse_job_file("\r\n".join(rows) + "\r\n\r\n")
    [error] = errors
    assert (error.line, error.field) == (7, "json")


def test_json_lines_with_blank_lines_and_crlf_name_the_right_lines() -> None:
    rows = [json.dumps(_job(n)) for n in range(5)]
    rows[3] = json.dumps(_job(3, schedule={"every": -1}))
    text = "\r\n".join([rows[0], "", rows[1], "  ", rows[2], rows[3], rows[4]]) + "\r\n"
    jobs, errors = parse_job_file(text)
    assert [(e.line, e.field, e.job) for e in errors] == [(6, "schedule.every", "t3/job-3")]
    assert len(jobs) == 4


def test_every_broken_line_of_json_lines_is_named_beside_the_invalid_jobs() -> None:
    rows = [json.dumps(_job(n)) for n in range(10)]
    rows[2] = rows[2].replace('"job_id"', '"job_id" "x"')  # not JSON
    rows[5] = json.dumps(_job(5, schedule={"every": -1}))
    rows[8] = '{"tenant": "t1", "job_id": "j", "n": NaN}'  # JSON to json.loads only
    _, errors = parse_job_file("\n".join(rows))
    assert [(e.line, e.field) for e in errors[:2]] == [(3, "json"), (6, "schedule.every")]
    assert {e.line for e in errors[2:]} == {9}
    assert all(e.job == "t1/j" for e in errors[2:])
