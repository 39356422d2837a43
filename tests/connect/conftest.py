"""Fixtures for the Kafka Connect tests: the Connect jars (fetched through the code path of
``schedulerstream connect up``), a real PostgreSQL server, and a worker per test whose log is
printed when the test fails."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.pg import PostgresServer, create_database, drop_database
from schedulerstream.kafka.connect import ConnectJars, LocalConnect, fetch_jars
from schedulerstream.settings import Settings


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture(scope="session")
def connect_jars(broker_settings: Settings) -> ConnectJars:
    """The worker and plugin jars (Maven Central on a clean machine, the cache afterwards)."""
    return fetch_jars(broker_settings)


@pytest.fixture(scope="session")
def connect_pg_admin_url() -> Iterator[str]:
    """A PostgreSQL server for this session (``SS_TEST_DATABASE_URL`` to use another)."""
    configured = os.environ.get("SS_TEST_DATABASE_URL")
    if configured:
        yield configured
        return
    server = PostgresServer().start()
    try:
        yield server.url
    finally:
        server.stop()


@dataclass(frozen=True)
class Stack:
    """Settings (topics applied, read model in a fresh PostgreSQL database) and a worker."""

    settings: Settings
    connect: LocalConnect
    attempts_file: Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def connect_stack(
    topo: Settings,
    connect_jars: ConnectJars,
    connect_pg_admin_url: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[Stack]:
    url = create_database(connect_pg_admin_url)
    settings = topo.model_copy(update={"database_url": url})
    connect = LocalConnect(settings, port=free_port())
    try:
        connect.up(timeout=90)
        yield Stack(settings, connect, tmp_path / "attempts.log")
    finally:
        report = getattr(request.node, "rep_call", None)
        if report is None or report.failed:
            print(f"--- Connect worker log ({connect.paths.log}), last lines:")
            print(connect.log_tail(200))
        connect.down()
        drop_database(connect_pg_admin_url, url)
