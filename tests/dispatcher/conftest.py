"""Fixtures of the dispatcher process tests: a receiver and dispatcher processes."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.procs import ProcessorProcess, ReceiverProcess
from schedulerstream.settings import Settings
from tests.dispatcher.support import Runs

SpawnDispatcher = Callable[..., ProcessorProcess]


@pytest.fixture
def receiver() -> Iterator[ReceiverProcess]:
    process = ReceiverProcess().start()
    yield process
    process.stop()


@pytest.fixture
def runs(topo: Settings) -> Runs:
    return Runs(topo)


@pytest.fixture
def dispatcher(topo: Settings, tmp_path: Path) -> Iterator[SpawnDispatcher]:
    """Start dispatcher processes (private targets allowed: the receiver is on loopback)."""
    started: list[ProcessorProcess] = []

    def start(instance: str = "d1", **overrides: object) -> ProcessorProcess:
        proc = ProcessorProcess(
            topo, "dispatcher", instance, tmp_path,
            data_dir=tmp_path / "state-dispatcher", allow_private_targets=True, **overrides,
        )  # fmt: skip
        before = proc.log().count(" running: restored")  # a restart appends to the same log
        started.append(proc.start())
        proc.wait_for_log(" running: restored", timeout=90, count=before + topo.partitions)
        return proc

    yield start
    for proc in started:
        if proc.alive():
            proc.signal(signal.SIGCONT)
            proc.stop()
