"""A job file checked in pieces by forked processes reaches exactly what one process reaches:
the same records and versions, or the same errors in the same order (no broker: the
publisher never connects before the pieces are forked, and these tests never write)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from schedulerstream import bulkload
from schedulerstream.publish import JobEncoder, Publisher
from schedulerstream.settings import Settings

LINES = 40
PIECE = 5  # lines: so that a 40-line file is cut into up to 8 pieces


def job(n: int, **fields: Any) -> dict[str, Any]:
    return {
        "tenant": f"t{n % 3}",
        "job_id": f"job-{n}",
        "schedule": {"every": 60 + n % 7},
        "target": {"type": "kafka", "topic": "out"},
        "payload": {"n": n},
        **fields,
    }


def text_of(jobs: list[dict[str, Any]]) -> str:
    return "\n".join(json.dumps(j) for j in jobs) + "\n"


class Unconnected(Publisher):
    """Counts ``connect`` calls and makes no producer (these tests never write)."""

    connects = 0

    def connect(self) -> None:
        self.connects += 1

    @property
    def connected(self) -> bool:
        return False


@pytest.fixture(autouse=True)
def pieces_of_small_files(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bulkload, "PIECE_LINES", PIECE)
    monkeypatch.setattr(bulkload, "now_us", lambda: 1_700_000_000_000_000)


def prepared(text: str, processes: int, **limits: Any) -> bulkload.Prepared:
    settings = Settings(bootstrap_servers="127.0.0.1:1", data_dir=Path("/nonexistent"), **limits)
    publisher = Unconnected(settings, connect=False)
    result = bulkload.prepare(publisher, text, None, processes)
    assert publisher.connects == 1
    return result


def same_in_every_count(text: str, **limits: Any) -> bulkload.Prepared:
    one = prepared(text, 1, **limits)
    for processes in (2, 3, 7):
        many = prepared(text, processes, **limits)
        assert many == one, processes
    return one


def test_a_valid_file_gives_the_same_records_and_versions() -> None:
    result = same_in_every_count(text_of([job(n) for n in range(LINES)]))
    assert not result.errors
    assert [key for key, _ in result.written] == [f"t{n % 3}/job-{n}" for n in range(LINES)]
    base = result.written[0][1]
    assert [version - base for _, version in result.written] == list(range(LINES))
    assert len(result.records) == LINES


def test_errors_across_pieces_come_in_line_order_with_the_first_definition_named() -> None:
    jobs = [job(n) for n in range(LINES)]
    jobs[33] = job(2)  # defined again in the last piece: names line 3
    jobs[25] = job(2)  # and in a middle piece
    jobs[12] = job(12, schedule={"every": -1})
    jobs[5] = job(5, payload={"blob": "x" * 3_000})  # over the limit: the file's errors win
    result = same_in_every_count(text_of(jobs), max_payload_bytes=1_000)
    assert result.written == [] and result.records == []
    assert result.errors[0].startswith("line 13: schedule.every: ")
    assert result.errors[1:] == [
        "line 26: job_id: also defined on line 3 (job t2/job-2)",
        "line 34: job_id: also defined on line 3 (job t2/job-2)",
    ]


def test_a_target_on_a_reserved_topic_is_named_with_its_line_and_nothing_is_written() -> None:
    jobs = [job(n) for n in range(LINES)]
    jobs[6] = job(6, target={"type": "kafka", "topic": "cron.dispatcher-state", "key": "run/x"})
    notify = {"on": ["dead_lettered"], "target": {"type": "kafka", "topic": "__consumer_offsets"}}
    jobs[29] = job(29, notify=notify)
    result = same_in_every_count(text_of(jobs))
    assert result.written == [] and result.records == []
    assert result.errors == [
        "line 7: target.topic: topic 'cron.dispatcher-state' is reserved: it is one of this "
        "deployment's topics (job t0/job-6)",
        "line 30: notify.target.topic: topic '__consumer_offsets' is reserved: names starting "
        "with '__' are Kafka's own topics (job t2/job-29)",
    ]


def test_with_no_other_error_the_first_job_over_a_limit_is_named() -> None:
    jobs = [job(n) for n in range(LINES)]
    for n in (17, 31):
        jobs[n] = job(n, payload={"blob": "x" * 3_000})
    result = same_in_every_count(text_of(jobs), max_payload_bytes=1_000)
    assert result.errors == [
        "payload: t2/job-17: the payload is 3,011 bytes of JSON; the limit is 1,000 "
        "(SCHEDULERSTREAM_MAX_PAYLOAD_BYTES)"
    ]


def test_a_short_file_or_another_layout_stays_in_one_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_pool(*args: object, **kwargs: object) -> None:
        raise AssertionError("no worker process for this file")

    monkeypatch.setattr(bulkload, "ProcessPoolExecutor", no_pool)
    array = json.dumps([job(n) for n in range(LINES)])
    assert bulkload.json_lines(array) is None
    assert len(prepared(array, 4).written) == LINES
    short = text_of([job(n) for n in range(2 * PIECE - 1)])
    assert len(prepared(short, 4).written) == 2 * PIECE - 1
    settings = Settings(bootstrap_servers="127.0.0.1:1", data_dir=Path("/nonexistent"))
    connected = Connected(settings, connect=False)  # its producer's threads must not fork
    long = text_of([job(n) for n in range(LINES)])
    assert len(bulkload.prepare(connected, long, None, 4).written) == LINES


class Connected(Unconnected):
    @property
    def connected(self) -> bool:
        return True


def failing_encode(monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    """``JobEncoder.encode`` raises OverflowError on ``key`` (in forked workers too)."""
    encode = JobEncoder.encode

    def encode_or_fail(self: JobEncoder, job: Any) -> Any:
        if job.key == key:
            raise OverflowError("int too big to convert")
        return encode(self, job)

    monkeypatch.setattr(JobEncoder, "encode", encode_or_fail)


def test_what_encoding_raises_is_raised_where_one_process_would_reach_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    failing_encode(monkeypatch, "t1/job-31")
    text = text_of([job(n) for n in range(LINES)])
    for processes in (1, 2, 3):
        with pytest.raises(OverflowError, match="int too big"):
            prepared(text, processes)


def test_an_error_before_it_wins_as_with_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    failing_encode(monkeypatch, "t1/job-31")
    jobs = [job(n) for n in range(LINES)]
    jobs[2] = job(2, schedule={"every": -1})
    result = same_in_every_count(text_of(jobs))
    assert len(result.errors) == 1 and result.errors[0].startswith("line 3: schedule.every: ")


def test_progress_counts_the_lines_checked_up_to_all_of_them() -> None:
    told: list[tuple[str, int, int]] = []
    settings = Settings(bootstrap_servers="127.0.0.1:1", data_dir=Path("/nonexistent"))
    publisher = Unconnected(settings, connect=False)
    lines = 2 * bulkload.PROGRESS_STEP + 10

    def progress(stage: str, done: int, total: int) -> None:
        told.append((stage, done, total))

    bulkload.prepare(publisher, text_of([job(n) for n in range(lines)]), progress, 2)
    assert {stage for stage, _, _ in told} == {"validating"}
    done = [d for _, d, _ in told]
    assert done == sorted(done) and done[-1] == lines and told[0][2] == lines
    assert done[0] < lines  # the first piece as it goes, then each piece
