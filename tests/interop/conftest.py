"""Fixtures for the interop tests: the jars the Java programs need, and scheduler processes."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from schedulerstream.codec import SCHEMA_DIR
from schedulerstream.kafka import topics
from schedulerstream.kafka.broker import LocalBroker
from schedulerstream.settings import Settings
from tests.interop.jvm import JavaProducer, avro_jars_dir
from tests.support.procs import ProcessorProcess

Spawn = Callable[..., ProcessorProcess]


@pytest.fixture(scope="session")
def java_classpath(broker_settings: Settings) -> list[Path]:
    """Apache Avro's jars, then the Kafka jars the session broker runs (kafka-clients included)."""
    kafka_jars = LocalBroker(broker_settings).jars_dir()
    return [avro_jars_dir(Path(broker_settings.cache_dir)), kafka_jars]


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


@pytest.fixture
def java_producer(
    topo: Settings, java_classpath: list[Path], tmp_path: Path
) -> Iterator[JavaProducer]:
    """The Java producer, started (not yet ready) for ``topo``'s schedule topic."""
    producer = JavaProducer(
        java_classpath,
        topo.bootstrap_servers,
        topo.topic("schedules"),
        SCHEMA_DIR,
        log=tmp_path / "java-producer.log",
    )
    yield producer
    producer.close()
