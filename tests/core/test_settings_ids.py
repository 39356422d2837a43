"""Settings fail naming the variable; ids and run ids are deterministic."""

from __future__ import annotations

import pytest

from schedulerstream.errors import ConfigError, ValidationError
from schedulerstream.ids import (
    job_key,
    job_key_of_run,
    manual_run_id,
    rerun_run_id,
    scheduled_run_id,
    split_job_key,
)
from schedulerstream.settings import load_settings


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("BOOTSTRAP_SERVERS", "TOPIC_PREFIX", "PARTITIONS", "ALLOW_PRIVATE_TARGETS"):
        monkeypatch.delenv(f"SCHEDULERSTREAM_{name}", raising=False)
    settings = load_settings()
    assert settings.bootstrap_servers == "127.0.0.1:9092"
    assert settings.topic("runs") == "cron.runs"
    assert settings.partitions == 12
    assert settings.allow_private_targets is False
    with pytest.raises(Exception, match="frozen"):
        settings.partitions = 3  # type: ignore[misc]


def test_environment_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCHEDULERSTREAM_PARTITIONS", "24")
    monkeypatch.setenv("SCHEDULERSTREAM_ALLOW_PRIVATE_TARGETS", "true")
    settings = load_settings()
    assert settings.partitions == 24 and settings.allow_private_targets


@pytest.mark.parametrize(
    ("name", "value", "needle"),
    [
        ("SCHEDULERSTREAM_PARTITIONS", "many", "SCHEDULERSTREAM_PARTITIONS"),
        ("SCHEDULERSTREAM_PARTITIONS", "0", "SCHEDULERSTREAM_PARTITIONS"),
        (
            "SCHEDULERSTREAM_ALLOW_PRIVATE_TARGETS",
            "perhaps",
            "SCHEDULERSTREAM_ALLOW_PRIVATE_TARGETS",
        ),
        ("SCHEDULERSTREAM_TOPIC_PREFIX", "a b", "SCHEDULERSTREAM_TOPIC_PREFIX"),
        ("SCHEDULERSTREAM_PARTITONS", "3", "unknown setting SCHEDULERSTREAM_PARTITONS"),
    ],
)
def test_bad_settings_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, needle: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=needle):
        load_settings()


def test_run_ids() -> None:
    key = job_key("acme", "backup")
    t = 1_710_054_000_000_000  # 2024-03-10T07:00:00Z
    assert scheduled_run_id(key, t) == "acme/backup@20240310T070000Z"
    assert scheduled_run_id(key, t + 999_999) == scheduled_run_id(key, t)
    assert manual_run_id(key, "req-1") == "acme/backup@manual-req-1"
    assert rerun_run_id(key, t, "r2") == "acme/backup@20240310T070000Z~r2"
    assert job_key_of_run("acme/backup@manual-req-1") == key
    assert split_job_key(key) == ("acme", "backup")


@pytest.mark.parametrize("bad", ["acme", "Acme/x", "acme/", "/x", "a/b/c"])
def test_bad_job_keys(bad: str) -> None:
    with pytest.raises(ValidationError):
        split_job_key(bad)


def test_bad_request_id() -> None:
    with pytest.raises(ValidationError, match="request_id"):
        manual_run_id("acme/x", "has space")
