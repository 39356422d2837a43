"""Fixtures for scheduler tests against the real broker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from schedulerstream.kafka import topics
from schedulerstream.settings import Settings
from tests.support.procs import ProcessorProcess


@pytest.fixture
def topo(kafka_settings: Settings) -> Settings:
    """Settings whose topics exist (fast timers: 1 s session floor, short grace)."""
    settings = kafka_settings.model_copy(update={"misfire_grace_ms": 60_000})
    topics.apply(settings)
    return settings


@pytest.fixture
def spawn(topo: Settings, tmp_path: Path) -> Iterator[object]:
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
            proc.signal(__import__("signal").SIGCONT)
            proc.stop()
