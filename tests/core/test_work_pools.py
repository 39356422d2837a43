"""The cap on worker pools (``contracts/work_pools.py``): a new pool's topic is made only
while the cluster holds fewer than SCHEDULERSTREAM_MAX_WORK_POOLS work topics; a pool that has
one is never refused."""

from __future__ import annotations

import pytest

from schedulerstream.contracts.work_pools import CAP_VARIABLE, cap_refusal, work_pools
from schedulerstream.errors import ConfigError
from schedulerstream.settings import load_settings


def test_the_pools_are_the_topics_under_the_work_prefix() -> None:
    topics = ["cron.work.etl", "cron.work.gpu-1", "cron.worker-events", "cron.work.",
              "cron.runs", "other.work.x", "cron.workx"]  # fmt: skip
    assert work_pools(topics, "cron.work.") == {"etl", "gpu-1"}
    assert work_pools([], "cron.work.") == frozenset()


def test_a_new_pool_is_made_below_the_cap_and_refused_at_it() -> None:
    assert cap_refusal("c", {"a", "b"}, 3) is None
    why = cap_refusal("c", {"a", "b"}, 2)
    assert why is not None
    assert "'c'" in why and "holds 2 work topics" in why and f"{CAP_VARIABLE}=2" in why


def test_a_pool_that_has_its_topic_is_never_refused_even_past_the_cap() -> None:
    assert cap_refusal("a", {"a", "b", "c"}, 2) is None  # a worker made one past it, say
    assert cap_refusal("d", {"a", "b", "c"}, 2) is not None


def test_the_setting_defaults_to_100_and_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CAP_VARIABLE, raising=False)
    assert load_settings().max_work_pools == 100
    monkeypatch.setenv(CAP_VARIABLE, "7")
    assert load_settings().max_work_pools == 7
    monkeypatch.setenv(CAP_VARIABLE, "0")
    with pytest.raises(ConfigError, match=CAP_VARIABLE):
        load_settings()
