"""Shared fixtures: topics applied for a test, and processor processes that are always stopped."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.procs import ProcessorProcess
from schedulerstream.kafka import topics
from schedulerstream.settings import Settings

Spawn = Callable[..., ProcessorProcess]


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
