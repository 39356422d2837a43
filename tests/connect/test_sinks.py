"""The sinks of topologies/connect/ on a real Kafka Connect worker: the projector's cron.run-state
lands in PostgreSQL through Debezium's JDBC sink (inserts, upserts of the same run, deletes from
tombstones), and cron.attempts lands in a file through FileStreamSink, one line per record."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from schedulerstream.kafka.connect import (
    apply_connectors,
    connector_files,
    connector_variables,
    decode_attempts_line,
    load_connector,
)
from schedulerstream.readmodel import open_read_model
from schedulerstream.runtime import Processor
from tests.connect.conftest import Stack
from tests.projector.kafka_helpers import drain, projector
from tests.projector.records import MINUTE, T0, Feed, attempt, run_id, triggered

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(600)]  # a clean machine fetches jars first
COLUMNS = (
    "run_id, tenant, job_id, trigger, status, scheduled_at_us, started_at_us, finished_at_us,"
    " attempts, last_error, updated_at_us"
)
KEEP = 2  # runs kept per job: the third run of a job prunes (tombstones) the first
R1, R2, R3 = (run_id("acme/backup", T0 + i * MINUTE) for i in range(3))
MISSED = run_id("beta/sync", T0)

Event = tuple[str, dict[str, Any]]


def _rows(url: str, table: str) -> dict[str, tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        try:
            rows = conn.execute(f"SELECT {COLUMNS} FROM {table}").fetchall()
        except psycopg.errors.UndefinedTable:
            return {}
    return {row[0]: tuple(row) for row in rows}


def _until(what: str, check: Callable[[], bool], stack: Stack, timeout: float = 45.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            tail = stack.connect.log_tail()
            raise AssertionError(f"{what} after {timeout:.0f}s; worker log:\n{tail}")
        time.sleep(0.2)


def _sink_matches(stack: Stack, statuses: dict[str, str]) -> None:
    """Wait until the sink table equals the projector's own runs table and has ``statuses``."""
    url = stack.settings.database_url
    seen: dict[str, tuple[Any, ...]] = {}

    def check() -> bool:
        nonlocal seen
        seen = _rows(url, "run_state")
        return seen == _rows(url, "runs") and {k: v[4] for k, v in seen.items()} == statuses

    try:
        _until(f"run_state is not {statuses}", check, stack)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nrun_state: {seen}\nruns: {_rows(url, 'runs')}") from None


def _publish(feed: Feed, events: list[Event], processor: Processor, stack: Stack) -> None:
    for event in events:
        feed.event(event)
    feed.flush()
    drain(processor, stack.settings)


def test_run_state_lands_in_postgres_and_attempts_in_a_file(connect_stack: Stack) -> None:
    stack = connect_stack
    variables = connector_variables(stack.settings, ATTEMPTS_FILE=str(stack.attempts_file))
    bodies = [load_connector(path, variables) for path in connector_files()]
    assert {Path(p).stem for p in connector_files()} == {"run-state-postgres", "attempts-file"}
    started = time.monotonic()
    lines = apply_connectors(stack.connect.client, bodies, timeout=90)
    assert len(lines) == 2, lines
    print(f"connectors running after {time.monotonic() - started:.1f}s: {lines}")

    feed = Feed(stack.settings)
    feed.schedule("acme", "backup", 1)
    feed.schedule("beta", "sync", 1)
    produced: list[Event] = []
    model = open_read_model(stack.settings)
    processor = projector(stack.settings, model, keep_per_job=KEEP)
    try:
        first = [
            triggered(R1, T0),
            attempt(R1, "started", 1, T0 + 10),
            attempt(MISSED, "missed", 0, T0 + 5, reason="2 instant(s) not run", count=2),
        ]
        _publish(feed, first, processor, stack)
        _sink_matches(stack, {R1: "running", MISSED: "skipped"})

        second = [  # R1 is updated in place (upsert); R2 fails twice and is dead-lettered
            attempt(R1, "succeeded", 1, T0 + 20, status_code=200),
            triggered(R2, T0 + MINUTE),
            attempt(R2, "failed", 1, T0 + MINUTE + 10, reason="HTTP 503"),
            attempt(R2, "retry_scheduled", 1, T0 + MINUTE + 11),
            attempt(R2, "failed", 2, T0 + MINUTE + 20, reason="HTTP 500"),
            attempt(R2, "dead_lettered", 2, T0 + MINUTE + 21, reason="HTTP 500"),
        ]
        _publish(feed, second, processor, stack)
        _sink_matches(stack, {R1: "succeeded", R2: "dead_lettered", MISSED: "skipped"})
        row = _rows(stack.settings.database_url, "run_state")[R1]
        assert row[6:9] == (T0 + 10, T0 + 20, 1), row  # started, finished, attempts

        third = [triggered(R3, T0 + 2 * MINUTE)]  # a third run of acme/backup: R1 is pruned
        _publish(feed, third, processor, stack)
        _sink_matches(stack, {R2: "dead_lettered", R3: "pending", MISSED: "skipped"})
        produced = first + second + third
    finally:
        processor.close()
        model.close()

    expected = sorted(json.dumps(r, sort_keys=True) for n, r in produced if n == "AttemptEvent")

    def file_complete() -> bool:
        try:
            text = stack.attempts_file.read_text()
        except FileNotFoundError:
            return False
        return text.endswith("\n") and len(text.splitlines()) >= len(expected)

    _until(f"{stack.attempts_file} has not {len(expected)} lines", file_complete, stack)
    decoded = [decode_attempts_line(line) for line in stack.attempts_file.read_text().splitlines()]
    assert {name for name, _ in decoded} == {"AttemptEvent"}
    assert sorted(json.dumps(record, sort_keys=True) for _, record in decoded) == expected
