"""Fixtures of the fault matrix: processor processes (scheduler or dispatcher) that are always
stopped at the end, whatever the case did to them (SIGSTOP included)."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from schedulerstream.settings import Settings
from tests.faults.helpers import FaultProcess

SpawnFault = Callable[..., FaultProcess]


@pytest.fixture
def procs(topo: Settings, tmp_path: Path) -> Iterator[SpawnFault]:
    """``procs(component, instance, env=..., start=True, **settings overrides)``.

    One instance keeps one data dir and one log across restarts (a restarted pod keeps its
    identity and disk); dispatchers may reach loopback targets.
    """
    made: list[FaultProcess] = []

    def make(
        component: str, instance: str, *, start: bool = True, settings: Settings | None = None,
        **kwargs: object,
    ) -> FaultProcess:  # fmt: skip
        overrides: dict[str, object] = {"data_dir": tmp_path / f"state-{component}-{instance}"}
        if component == "dispatcher":
            overrides["allow_private_targets"] = True
        overrides.update(kwargs)
        proc = FaultProcess(settings or topo, component, instance, tmp_path, **overrides)
        made.append(proc)
        return proc.start() if start else proc

    yield make
    for proc in made:
        if proc.alive():
            proc.signal(signal.SIGCONT)
            with contextlib.suppress(AssertionError):  # killed after ignoring SIGTERM
                proc.stop(timeout=30)
