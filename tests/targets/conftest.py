"""Fixtures of the target tests: a receiver process, an ElasticMQ process, AWS test env."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.procs import ReceiverProcess
from tests.targets.procs import ElasticMQ


@pytest.fixture(scope="session")
def receiver() -> Iterator[ReceiverProcess]:
    process = ReceiverProcess().start()
    yield process
    process.stop()


@pytest.fixture(scope="session")
def elasticmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ElasticMQ]:
    why = ElasticMQ.available()
    if why is not None:  # java and mvn are required by the whole suite (the broker needs them)
        pytest.fail(f"ElasticMQ {why}")
    server = ElasticMQ(tmp_path_factory.mktemp("elasticmq")).start()
    yield server
    server.stop()


@pytest.fixture
def aws_env(
    monkeypatch: pytest.MonkeyPatch, elasticmq: ElasticMQ, tmp_path_factory: pytest.TempPathFactory
) -> ElasticMQ:
    """Standard AWS SDK variables pointing at ElasticMQ; nothing else the SDK could read."""
    empty = tmp_path_factory.mktemp("aws")
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    for name in ("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(empty / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(empty / "credentials"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", elasticmq.endpoint)
    return elasticmq
