"""Fixtures for the projector tests: a real PostgreSQL server, a fresh read model of either
backend, and settings whose topics exist."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.pg import PostgresServer, create_database, drop_database
from schedulerstream.kafka import topics
from schedulerstream.readmodel import SqlReadModel, open_read_model
from schedulerstream.settings import Settings

BACKENDS = ["sqlite", "postgres"]


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
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


DatabaseUrl = Callable[[str], str]


@pytest.fixture
def database_url(request: pytest.FixtureRequest) -> Iterator[DatabaseUrl]:
    """``database_url(backend)``: "" for SQLite, a new PostgreSQL database's URL otherwise."""
    created: list[tuple[str, str]] = []

    def make(backend: str) -> str:
        if backend == "sqlite":
            return ""
        admin: str = request.getfixturevalue("pg_admin_url")
        url = create_database(admin)
        created.append((admin, url))
        return url

    yield make
    for admin, url in created:
        drop_database(admin, url)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def model_settings(backend: str, database_url: DatabaseUrl, tmp_path: Path) -> Settings:
    """Settings (no broker needed) whose read model is a fresh database of ``backend``."""
    return Settings(data_dir=tmp_path / "state", database_url=database_url(backend))


@pytest.fixture
def read_model(model_settings: Settings) -> Iterator[SqlReadModel]:
    model = open_read_model(model_settings)
    yield model
    model.close()


@pytest.fixture
def topo(kafka_settings: Settings, backend: str, database_url: DatabaseUrl) -> Settings:
    """Broker settings whose topics exist, with a fresh read model of ``backend``."""
    settings = kafka_settings.model_copy(update={"database_url": database_url(backend)})
    topics.apply(settings)
    return settings
