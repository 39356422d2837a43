"""Shared fixtures: topics applied for a test, processor processes that are always stopped, and
an AWS configuration without endpoints."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.procs import ProcessorProcess
from schedulerstream import sqs_regions
from schedulerstream.kafka import topics
from schedulerstream.settings import Settings

Spawn = Callable[..., ProcessorProcess]


@pytest.fixture
def real_aws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """No SQS endpoint from the environment or a config file (real AWS, not an emulator); the
    shared config file is the returned path, read afresh by the default session."""
    unset = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_DATA_PATH")
    for name in (*sqs_regions.ENDPOINT_VARIABLES, sqs_regions.IGNORE_VARIABLE, *unset):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "aws-config"
    config.write_text("[default]\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    credentials = tmp_path / "aws-credentials"
    credentials.write_text("")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    caches = (sqs_regions._session, sqs_regions.known_regions)
    for cache in caches:  # the default session reads its config file once
        cache.cache_clear()
    yield config
    for cache in caches:
        cache.cache_clear()


@pytest.fixture
def topo(kafka_settings: Settings) -> Settings:
    """Settings whose topics exist."""
    topics.apply(kafka_settings)
    return kafka_settings


@pytest.fixture
def spawn(topo: Settings, tmp_path: Path) -> Iterator[Spawn]:
    """Start scheduler processes; every one still alive is stopped at the end."""
    started: list[ProcessorProcess] = []

    def start(instance: str, **overrides: object) -> ProcessorProcess:
        data_dir = tmp_path / f"state-{instance}"
        proc = ProcessorProcess(
            topo, "scheduler", instance, tmp_path, data_dir=data_dir, **overrides
        )
        started.append(proc.start())
        return proc

    yield start
    for proc in started:
        if proc.alive():
            proc.signal(signal.SIGCONT)
            proc.stop()
