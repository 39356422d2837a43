"""Fixtures of the fault matrix: processor processes (scheduler or dispatcher) that are always
stopped at the end, whatever the case did to them (SIGSTOP included)."""

from __future__ import annotations

import contextlib
import signal
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from schedulerstream.kafka import topics
from schedulerstream.settings import Settings
from tests.faults.broker import ProxiedBroker, start_proxied_broker
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


@pytest.fixture(scope="session")
def own_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxiedBroker]:
    """A broker of the fault matrix's own (tests/faults/broker.py), for the cases that stop,
    kill or cut it off: started once, on free ports from 39400, never the session broker."""
    broker, _ = start_proxied_broker(tmp_path_factory.mktemp("own-broker"))
    yield broker
    broker.down(kill=True)


@pytest.fixture
def own_topo(own_broker: ProxiedBroker, tmp_path: Path) -> Settings:
    """Settings with a fresh topic prefix on ``own_broker`` (restarted if a case left it
    down), topics applied."""
    if not own_broker.answers():
        own_broker.up(timeout=180)
    settings = own_broker.settings.model_copy(
        update={
            "topic_prefix": f"f{uuid.uuid4().hex[:10]}.",
            "data_dir": tmp_path / "state",
            "partitions": 4,
            "instance_id": f"test-{uuid.uuid4().hex[:6]}",
        }
    )
    topics.apply(settings)
    return settings
