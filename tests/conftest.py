"""Session fixtures: one real Kafka broker (started through `schedulerstream kafka up`'s code
path) and per-test settings with a fresh topic prefix so tests never see each other's data."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from schedulerstream.kafka.broker import LocalBroker
from schedulerstream.kafka.clients import base_config
from schedulerstream.settings import Settings, load_settings

pytest_plugins = ["tests.support.fixtures"]

TEST_BOOTSTRAP = os.environ.get("SS_TEST_BOOTSTRAP", "127.0.0.1:39092")


@pytest.fixture(scope="session")
def broker_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """Settings pointing at a broker started for this test session (stopped at the end)."""
    configured = os.environ.get("SS_TEST_DATA_DIR")
    data_dir = Path(configured) if configured else tmp_path_factory.mktemp("broker")
    settings = load_settings(bootstrap_servers=TEST_BOOTSTRAP, data_dir=data_dir)
    broker = LocalBroker(settings)
    started_here = not broker.answers()
    broker.up(timeout=120)
    yield settings
    if started_here:
        broker.down()


@pytest.fixture
def kafka_settings(broker_settings: Settings, tmp_path: Path) -> Iterator[Settings]:
    """Settings for one test: the session broker, a unique topic prefix, a private data dir.

    The test's topics are deleted afterwards so a long suite does not pile up partitions (and
    open files) on the one broker.
    """
    prefix = f"t{uuid.uuid4().hex[:10]}."
    yield broker_settings.model_copy(
        update={
            "topic_prefix": prefix,
            "data_dir": tmp_path / "state",
            "partitions": 4,
            "instance_id": f"test-{uuid.uuid4().hex[:6]}",
        }
    )
    _delete_topics(broker_settings, prefix)


def _delete_topics(settings: Settings, prefix: str) -> None:
    admin = AdminClient(base_config(settings))
    try:
        names = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix)]
        if names:
            for future in admin.delete_topics(names, operation_timeout=30).values():
                future.result()
    except KafkaException:
        pass  # best effort: a broker the test itself stopped, for instance
