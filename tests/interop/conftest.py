"""Fixtures for the interop tests: the jars the Java programs need, and scheduler processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from schedulerstream.codec import SCHEMA_DIR
from schedulerstream.kafka.broker import LocalBroker
from schedulerstream.settings import Settings
from tests.interop.jvm import JavaProducer, avro_jars_dir


@pytest.fixture(scope="session")
def java_classpath(broker_settings: Settings) -> list[Path]:
    """Apache Avro's jars, then the Kafka jars the session broker runs (kafka-clients included)."""
    kafka_jars = LocalBroker(broker_settings).jars_dir()
    return [avro_jars_dir(Path(broker_settings.cache_dir)), kafka_jars]


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
