"""``schedules put`` against the real broker: stdout holds one line per job written and nothing
else; progress goes to stderr (a bar on a terminal, lines with --progress, nothing on a pipe by
default); an invalid job anywhere in the file names its line and job, and nothing is produced."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.procs import settings_env
from schedulerstream.bulkload import PIECE_LINES
from schedulerstream.cli.schedules_cmd import schedules
from schedulerstream.kafka.reader import read_topic
from schedulerstream.settings import Settings

pytestmark = pytest.mark.kafka

JOBS = 2_500


def _job(number: int, **fields: object) -> dict[str, object]:
    return {
        "tenant": f"t{number % 3}",
        "job_id": f"job-{number}",
        "schedule": {"every": 60 + number % 10},
        "target": {"type": "kafka", "topic": "out"},
        **fields,
    }


def _file(tmp_path: Path, jobs: list[dict[str, object]]) -> Path:
    path = tmp_path / "jobs.jsonl"
    path.write_text("\n".join(json.dumps(job) for job in jobs) + "\n")
    return path


def _written_keys(settings: Settings) -> list[str]:
    return sorted(
        m.key().decode() for m in read_topic(settings, settings.topics.schedules, idle_timeout=1)
    )


def _assert_job_lines(stdout: str, count: int) -> None:
    lines = stdout.splitlines()
    assert len(lines) == count
    expected = [f"t{n % 3}/job-{n}" for n in range(count)]
    assert [line.split(" version ")[0] for line in lines] == expected
    assert all(line.split(" version ")[1].isdigit() for line in lines)


def test_progress_lines_go_to_stderr_and_stdout_holds_only_the_jobs(
    topo: Settings, tmp_path: Path
) -> None:
    path = _file(tmp_path, [_job(n) for n in range(JOBS)])
    result = CliRunner().invoke(schedules, ["put", "--progress", str(path)], env=settings_env(topo))
    assert result.exit_code == 0, result.output
    _assert_job_lines(result.stdout, JOBS)
    assert result.stderr.splitlines() == [
        f"{stage}: {done:,} of {JOBS:,} jobs"
        for stage in ("validating", "writing")  # each job is encoded once it is valid
        for done in (1000, 2000, JOBS)
    ]
    assert _written_keys(topo) == sorted(f"t{n % 3}/job-{n}" for n in range(JOBS))


def test_a_pipe_gets_no_progress_by_default(topo: Settings, tmp_path: Path) -> None:
    path = _file(tmp_path, [_job(n) for n in range(JOBS)])
    done = subprocess.run(
        [sys.executable, "-m", "schedulerstream.cli", "schedules", "put", str(path)],
        env=settings_env(topo), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (0, "")
    _assert_job_lines(done.stdout, JOBS)


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def test_a_terminal_gets_bars_on_stderr_and_stdout_stays_clean(
    topo: Settings, tmp_path: Path
) -> None:
    path = _file(tmp_path, [_job(n) for n in range(JOBS)])
    terminal, child_end = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "schedulerstream.cli", "schedules", "put", str(path)],
        env=settings_env(topo), stdout=subprocess.PIPE, stderr=child_end,
    )  # fmt: skip
    os.close(child_end)
    stdout, _ = proc.communicate(timeout=120)
    shown = _read_all(terminal).decode()
    os.close(terminal)
    assert proc.returncode == 0, shown
    _assert_job_lines(stdout.decode(), JOBS)
    for stage in ("validating", "writing"):
        assert f"{stage:10}  [{'#' * 36}]  100%" in shown, shown


def test_an_invalid_job_on_line_k_is_named_and_nothing_is_produced(
    topo: Settings, tmp_path: Path
) -> None:
    jobs = [_job(n) for n in range(JOBS)]
    jobs[1_733] = _job(1_733, target={"type": "http", "url": "ftp://example.com/x"})
    path = _file(tmp_path, jobs)
    result = CliRunner().invoke(schedules, ["put", "--progress", str(path)], env=settings_env(topo))
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert (
        "error: line 1734: target.http.url: 'ftp://example.com/x' is not an http(s) URL with a "
        "host (job t2/job-1733)"
    ) in result.stderr.splitlines()
    assert result.stderr.splitlines()[-1] == "nothing was produced"
    assert _written_keys(topo) == []


def test_a_job_over_the_payload_limit_is_named_and_nothing_is_produced(
    topo: Settings, tmp_path: Path
) -> None:
    jobs = [_job(n) for n in range(JOBS)]
    jobs[900] = _job(900, payload={"blob": "x" * 2_000})
    path = _file(tmp_path, jobs)
    env = settings_env(topo, max_payload_bytes=1_000)
    result = CliRunner().invoke(schedules, ["put", str(path)], env=env)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [
        "error: payload: t0/job-900: the payload is 2,011 bytes of JSON; the limit is 1,000 "
        "(SCHEDULERSTREAM_MAX_PAYLOAD_BYTES)",
        "nothing was produced",
    ]
    jobs[2_000] = _job(2_000, schedule={"every": -1})  # the file's own errors come first
    path = _file(tmp_path, jobs)
    result = CliRunner().invoke(schedules, ["put", str(path)], env=env)
    assert result.stderr.splitlines()[0].startswith("error: line 2001: schedule.every: ")
    assert len(result.stderr.splitlines()) == 2
    assert _written_keys(topo) == []


def test_an_sqs_region_botocore_does_not_know_is_named_and_nothing_is_produced(
    topo: Settings, tmp_path: Path, real_aws: Path
) -> None:
    queue = "https://sqs.us-east-1.amazonaws.com/123456789012/q"
    jobs = [_job(n) for n in range(20)]
    jobs[7] = _job(7, target={"type": "sqs", "queue_url": queue, "region": "us-east1"})
    jobs[8] = _job(8, target={"type": "sqs", "queue_url": queue, "region": "us-east-1"})
    result = CliRunner().invoke(schedules, ["put", str(_file(tmp_path, jobs))],
                                env=settings_env(topo))  # fmt: skip
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [
        "error: line 8: target: 'us-east1' is not an SQS region this botocore knows (a newer "
        "botocore may; an emulator takes any name once AWS_ENDPOINT_URL_SQS is set) "
        "(job t1/job-7)",
        "nothing was produced",
    ]
    assert _written_keys(topo) == []


def test_a_long_file_checked_by_two_processes_is_written_whole_and_in_order(
    topo: Settings, tmp_path: Path
) -> None:
    count = 2 * PIECE_LINES + 500
    jobs = [_job(n) for n in range(count)]
    jobs[count - 3] = _job(4)  # defined again in the second piece: nothing is written
    command = [sys.executable, "-m", "schedulerstream.cli", "schedules", "put", "--processes", "2"]
    env = settings_env(topo)
    refused = subprocess.run([*command, str(_file(tmp_path, jobs))], env=env,
                             capture_output=True, text=True, timeout=120)  # fmt: skip
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.splitlines() == [
        f"error: line {count - 2}: job_id: also defined on line 5 (job t1/job-4)",
        "nothing was produced",
    ]
    assert _written_keys(topo) == []
    jobs[count - 3] = _job(count - 3)
    done = subprocess.run([*command, str(_file(tmp_path, jobs))], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    _assert_job_lines(done.stdout, count)
    versions = [int(line.split(" version ")[1]) for line in done.stdout.splitlines()]
    assert versions == list(range(versions[0], versions[0] + count))
    assert _written_keys(topo) == sorted(f"t{n % 3}/job-{n}" for n in range(count))
