"""Fixtures for the runtime tests: the per-test topics of the counter topology."""

from __future__ import annotations

import pytest

from schedulerstream.settings import Settings
from tests.runtime.rt_helpers import create_topics


@pytest.fixture
def counter_settings(kafka_settings: Settings) -> Settings:
    """kafka_settings with the counter app's topics created (4 partitions)."""
    create_topics(kafka_settings)
    return kafka_settings
