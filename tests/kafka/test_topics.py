"""``topics apply|describe`` against the real broker: creation, verification, refusal, races."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from schedulerstream.cli.topics_cmd import topics as topics_group
from schedulerstream.contracts.work_pools import cap_refusal
from schedulerstream.errors import TooManyWorkPools, TopologyError, ValidationError
from schedulerstream.kafka import topics
from schedulerstream.kafka.clients import base_config
from schedulerstream.settings import Settings, get_settings


def _admin(settings: Settings) -> AdminClient:
    return AdminClient(base_config(settings))


def _cluster(settings: Settings) -> dict[str, int]:
    """Our prefix's topics on the cluster → partition count."""
    metadata = _admin(settings).list_topics(timeout=10)
    return {
        name: len(t.partitions)
        for name, t in metadata.topics.items()
        if name.startswith(settings.topic_prefix)
    }


def _configs(settings: Settings, name: str) -> dict[str, str]:
    resource = ConfigResource(ResourceType.TOPIC, name)
    admin = _admin(settings)  # keep the handle alive until the future resolves
    entries = admin.describe_configs([resource])[resource].result(10)
    return {k: e.value for k, e in entries.items()}


def _create(settings: Settings, logical: str, partitions: int, **config: str) -> str:
    name = settings.topic(logical)
    new = NewTopic(name, num_partitions=partitions, replication_factor=1, config=config)
    admin = _admin(settings)
    admin.create_topics([new])[name].result(30)
    topics.wait_for_topics(settings, [name])
    return name


@pytest.mark.kafka
def test_apply_creates_every_declared_topic(kafka_settings: Settings) -> None:
    lines = topics.apply(kafka_settings)
    declared = topics.specs(kafka_settings)
    assert len(lines) == len(declared) == 16
    assert all(" created (" in line for line in lines), lines
    cluster = _cluster(kafka_settings)
    assert set(cluster) == {s.name for s in declared}
    for s in declared:
        expected = 1 if s.logical == "tenants" else 4
        assert s.partitions == expected
        assert cluster[s.name] == expected, s.name
        actual = _configs(kafka_settings, s.name)
        for key, value in s.configs.items():
            assert actual[key] == value, (s.name, key)
    assert (
        _configs(kafka_settings, kafka_settings.topic("schedules"))["cleanup.policy"] == "compact"
    )
    runs = _configs(kafka_settings, kafka_settings.topic("runs"))
    assert (runs["cleanup.policy"], runs["retention.ms"]) == ("delete", "604800000")


@pytest.mark.kafka
def test_apply_twice_is_idempotent(kafka_settings: Settings) -> None:
    topics.apply(kafka_settings)
    before = _cluster(kafka_settings)
    again = topics.apply(kafka_settings)
    assert [line.split()[-1] for line in again] == ["ok"] * len(again), again
    assert _cluster(kafka_settings) == before


@pytest.mark.kafka
def test_concurrent_applies_both_succeed(kafka_settings: Settings) -> None:
    results: list[list[str]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(topics.apply(kafka_settings))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors
    assert len(results) == 3
    assert len(_cluster(kafka_settings)) == 16
    assert all(line.split()[-1] == "ok" for line in topics.apply(kafka_settings))


@pytest.mark.kafka
def test_refuses_co_partitioned_count_mismatch_and_touches_nothing(
    kafka_settings: Settings,
) -> None:
    runs = _create(kafka_settings, "runs", 3)
    with pytest.raises(TopologyError) as refused:
        topics.apply(kafka_settings)
    message = str(refused.value)
    assert runs in message and "3 partitions" in message and "P=4" in message
    assert _cluster(kafka_settings) == {runs: 3}


@pytest.mark.kafka
def test_refuses_when_partition_setting_changes(kafka_settings: Settings) -> None:
    topics.apply(kafka_settings)
    wider = kafka_settings.model_copy(update={"partitions": 6})
    with pytest.raises(TopologyError) as refused:
        topics.apply(wider)
    message = str(refused.value)
    assert all(s.name in message for s in topics.co_partitioned_specs(wider))
    assert kafka_settings.topic("tenants") + " " not in message
    assert set(_cluster(kafka_settings).values()) == {1, 4}


@pytest.mark.kafka
def test_refuses_compacted_topic_that_is_not_compacted(kafka_settings: Settings) -> None:
    state = _create(kafka_settings, "scheduler-state", 4, **{"cleanup.policy": "delete"})
    with pytest.raises(TopologyError) as refused:
        topics.apply(kafka_settings)
    message = str(refused.value)
    assert state in message and "not compacted" in message
    assert _cluster(kafka_settings) == {state: 4}


@pytest.mark.kafka
def test_refuses_compact_delete_changelog(kafka_settings: Settings) -> None:
    state = _create(kafka_settings, "dispatcher-state", 4, **{"cleanup.policy": "compact,delete"})
    with pytest.raises(TopologyError, match="dispatcher-state"):
        topics.apply(kafka_settings)
    assert _cluster(kafka_settings) == {state: 4}


@pytest.mark.kafka
def test_config_drift_is_set_to_declared(kafka_settings: Settings) -> None:
    commands = _create(kafka_settings, "commands", 4, **{"retention.ms": "1000"})
    lines = topics.apply(kafka_settings)
    line = next(line for line in lines if line.startswith(commands + " "))
    assert "updated (" in line and "retention.ms: 1000 -> 604800000" in line
    assert _configs(kafka_settings, commands)["retention.ms"] == "604800000"
    assert all(line.split()[-1] == "ok" for line in topics.apply(kafka_settings))


@pytest.mark.kafka
def test_tenants_with_more_partitions_is_noted_not_refused(kafka_settings: Settings) -> None:
    tenants = _create(kafka_settings, "tenants", 2, **{"cleanup.policy": "compact"})
    lines = topics.apply(kafka_settings)
    line = next(line for line in lines if line.startswith(tenants + " "))
    assert "has 2 partitions, declared 1" in line


@pytest.mark.kafka
def test_describe_declared_vs_actual(kafka_settings: Settings) -> None:
    rows = topics.describe(kafka_settings)
    assert len(rows) == 16
    assert {r.status for r in rows} == {"missing"}
    assert all(r.actual_partitions is None for r in rows)
    topics.apply(kafka_settings)
    by_name = {r.logical: r for r in topics.describe(kafka_settings)}
    assert {r.status for r in by_name.values()} == {"present"}
    assert (by_name["runs"].partitions, by_name["runs"].actual_partitions) == (4, 4)
    assert (by_name["tenants"].actual_partitions, by_name["tenants"].co_partitioned) == (1, False)
    assert by_name["schedules"].actual_cleanup == "compact"
    assert by_name["attempts"].actual_retention_ms == 30 * 86_400_000


@pytest.mark.kafka
def test_describe_reports_mismatch(kafka_settings: Settings) -> None:
    _create(kafka_settings, "attempts", 2)
    rows = {r.logical: r for r in topics.describe(kafka_settings)}
    assert rows["attempts"].status == "mismatch"
    assert "2 partitions" in rows["attempts"].problems[0]
    assert rows["runs"].status == "missing"


@pytest.mark.kafka
def test_work_topics_on_demand(kafka_settings: Settings) -> None:
    created = topics.ensure_work_topic(kafka_settings, "gpu")
    assert created.name == kafka_settings.topic("work.gpu")
    assert topics.ensure_work_topic(kafka_settings, "gpu") == created
    assert _cluster(kafka_settings) == {created.name: 4}
    assert _configs(kafka_settings, created.name)["cleanup.policy"] == "delete"
    rows = {r.logical: r for r in topics.describe(kafka_settings)}
    assert rows["work.gpu"].status == "present"
    with pytest.raises(ValidationError):
        topics.ensure_work_topic(kafka_settings, "Bad Pool")


@pytest.mark.kafka
def test_a_capped_ensure_makes_no_work_topic_past_the_cap(kafka_settings: Settings) -> None:
    answers: dict[str, str | TooManyWorkPools] = {}

    def ensure(pool: str) -> None:  # as the dispatcher's threads ask, all at once
        try:
            answers[pool] = topics.ensure_work_topic(kafka_settings, pool, cap=2).name
        except TooManyWorkPools as exc:
            answers[pool] = exc

    threads = [threading.Thread(target=ensure, args=(f"p{n}",)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    made = sorted(p for p, a in answers.items() if isinstance(a, str))
    assert len(made) == 2 and len(answers) == 6, answers
    work = kafka_settings.topics.work_prefix
    assert sorted(n for n in _cluster(kafka_settings) if n.startswith(work)) == [
        kafka_settings.topics.work(p) for p in made
    ]
    for pool, refused in answers.items():
        if isinstance(refused, TooManyWorkPools):
            assert str(refused) == cap_refusal(pool, set(made), 2)
            assert refused.pools == set(made) and refused.cap == 2
    # a pool that has its topic keeps working; a worker (uncapped) may make one past the cap
    assert topics.ensure_work_topic(kafka_settings, made[0], cap=2).name.endswith(made[0])
    assert topics.ensure_work_topic(kafka_settings, "by-a-worker").name.endswith("by-a-worker")
    assert topics.ensure_work_topic(kafka_settings, "by-a-worker", cap=2)
    with pytest.raises(TooManyWorkPools, match="holds 3 work topics"):
        topics.ensure_work_topic(kafka_settings, "another", cap=2)


@pytest.mark.kafka
def test_work_topic_refused_when_compacted(kafka_settings: Settings) -> None:
    _create(kafka_settings, "work.etl", 2, **{"cleanup.policy": "compact"})
    with pytest.raises(TopologyError, match="compacted"):
        topics.ensure_work_topic(kafka_settings, "etl")


@pytest.mark.kafka
def test_race_with_another_apply_is_verified(
    kafka_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Topics created between our check and our create (TOPIC_ALREADY_EXISTS) are verified."""
    topics.apply(kafka_settings)
    real = topics._partition_counts
    calls: list[int] = []

    def first_call_sees_nothing(*args: object, **kwargs: object) -> dict[str, int]:
        calls.append(1)
        return {} if len(calls) == 1 else real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(topics, "_partition_counts", first_call_sees_nothing)
    lines = topics.apply(kafka_settings)
    assert len(calls) == 2
    assert all(line.split()[-1] == "ok" for line in lines), lines


@pytest.mark.kafka
def test_race_with_a_bad_topic_is_refused(
    kafka_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = _create(kafka_settings, "runs", 3)
    real = topics._partition_counts
    calls: list[int] = []

    def first_call_sees_nothing(*args: object, **kwargs: object) -> dict[str, int]:
        calls.append(1)
        return {} if len(calls) == 1 else real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(topics, "_partition_counts", first_call_sees_nothing)
    with pytest.raises(TopologyError, match=f"{runs} has 3 partitions"):
        topics.apply(kafka_settings)


# -- declarations (no broker) ---------------------------------------------------------------------


def test_declarations_resolve_against_settings() -> None:
    settings = Settings(topic_prefix="cron.", partitions=12)
    names = topics.topic_names(settings)
    assert names["schedules"] == "cron.schedules"
    assert names["retry.1h"] == "cron.retry.1h"
    assert len(names) == 16
    assert topics.spec("runs", settings).name == "cron.runs"
    assert topics.spec("runs", settings).partitions == 12
    assert topics.spec("tenants", settings).partitions == 1
    assert not topics.spec("tenants", settings).co_partitioned
    assert len(topics.co_partitioned_specs(settings)) == 15
    compacted = {s.logical for s in topics.specs(settings) if s.compacted}
    assert compacted == {
        "schedules", "scheduler-state", "dispatcher-state", "projector-state", "run-state",
        "tenants",
    }  # fmt: skip
    for s in topics.specs(settings):
        assert "retention.ms" in s.configs
        if s.compacted:
            for key in ("min.cleanable.dirty.ratio", "segment.ms", "delete.retention.ms"):
                assert key in s.configs, (s.logical, key)
    assert [t.delay_ms for t in topics.retry_tiers(settings)] == [
        5_000, 30_000, 120_000, 600_000, 3_600_000,
    ]  # fmt: skip
    assert topics.spec("attempts", settings).retention_ms == 30 * 86_400_000
    work = topics.work_topic_spec(settings, "gpu-pool")
    assert (work.name, work.co_partitioned, work.cleanup_policy) == (
        "cron.work.gpu-pool",
        False,
        "delete",
    )
    with pytest.raises(TopologyError, match="nope"):
        topics.spec("nope", settings)
    with pytest.raises(ValidationError):
        topics.work_topic_spec(settings, "-bad")


BASE = """
version = 1
[templates.work]
name = "work.{pool}"
partitions = "P"
co_partitioned = false
config = { "cleanup.policy" = "delete" }
"""


DELETE = 'config = { "cleanup.policy" = "delete" }'


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (f"[topics.a]\npartitions = 3\nco_partitioned = true\n{DELETE}", 'partitions = "P"'),
        (f'[topics.a]\npartitions = "Q"\nco_partitioned = true\n{DELETE}', "partitions must be"),
        ('[topics.a]\npartitions = "P"\nco_partitioned = true\nconfig = { "cleanup.policy" = "x" }',
         "cleanup.policy"),
        (f'[topics.a]\npartitions = "P"\nco_partitioned = true\nspeed = 1\n{DELETE}',
         "unknown field"),
        (f'[topics.a]\npartitions = "P"\n{DELETE}', "co_partitioned"),
        ("", "no [topics.*]"),
    ],
)  # fmt: skip
def test_bad_declarations_are_refused(tmp_path: Path, body: str, problem: str) -> None:
    path = tmp_path / "topics.toml"
    path.write_text(BASE + body + "\n")
    with pytest.raises(TopologyError, match=re.escape(problem)):
        topics.load_declarations(path)


def test_missing_declarations_file(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match="missing"):
        topics.load_declarations(tmp_path / "absent.toml")


# -- CLI ----------------------------------------------------------------------------------------


@pytest.fixture
def cli_env(kafka_settings: Settings) -> Iterator[dict[str, str]]:
    """Environment for the CLI pointing at this test's broker and prefix."""
    get_settings.cache_clear()
    yield {
        "SCHEDULERSTREAM_BOOTSTRAP_SERVERS": kafka_settings.bootstrap_servers,
        "SCHEDULERSTREAM_TOPIC_PREFIX": kafka_settings.topic_prefix,
        "SCHEDULERSTREAM_PARTITIONS": str(kafka_settings.partitions),
    }
    get_settings.cache_clear()


def _invoke(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    get_settings.cache_clear()
    result = CliRunner(env=env).invoke(topics_group, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.kafka
def test_cli_apply_and_describe(kafka_settings: Settings, cli_env: dict[str, str]) -> None:
    code, out, _ = _invoke(cli_env, "describe")
    assert code == 0
    assert out.splitlines()[0].split() == [
        "TOPIC", "PARTITIONS", "CLEANUP", "RETENTION", "CO-PARTITIONED", "STATUS",
    ]  # fmt: skip
    assert out.count("missing") == 16
    assert _invoke(cli_env, "describe", "--check")[0] == 1

    code, out, _ = _invoke(cli_env, "apply")
    assert code == 0, out
    assert out.count("created") == 16
    code, out, _ = _invoke(cli_env, "apply")
    assert code == 0
    assert [line.split() for line in out.splitlines()] == [
        [s.name, "ok"] for s in topics.specs(kafka_settings)
    ]

    code, out, _ = _invoke(cli_env, "describe", "--check")
    assert code == 0
    lines = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    runs_row = ["4", "delete", "7d", "yes", "present"]
    assert lines[kafka_settings.topic("runs")][1:] == runs_row
    tenants_row = ["1", "compact", "forever", "no", "present"]
    assert lines[kafka_settings.topic("tenants")][1:] == tenants_row
    assert lines[kafka_settings.topic("retry.1h")][3] == "2d"


@pytest.mark.kafka
def test_cli_apply_refusal_exits_1(kafka_settings: Settings, cli_env: dict[str, str]) -> None:
    runs = _create(kafka_settings, "runs", 2)
    code, out, err = _invoke(cli_env, "apply")
    assert code == 1
    assert out == ""
    assert runs in err and "2 partitions" in err
    assert _cluster(kafka_settings) == {runs: 2}
    code, out, err = _invoke(cli_env, "describe", "--check")
    assert code == 1
    assert "mismatch" in out and "problem:" in err


@pytest.mark.kafka
def test_cli_describe_notes_a_cap_reached(
    kafka_settings: Settings, cli_env: dict[str, str]
) -> None:
    topics.apply(kafka_settings)
    topics.ensure_work_topic(kafka_settings, "etl")
    code, out, err = _invoke({**cli_env, "SCHEDULERSTREAM_MAX_WORK_POOLS": "2"}, "describe")
    assert code == 0 and kafka_settings.topics.work("etl") in out and "note:" not in err
    env = {**cli_env, "SCHEDULERSTREAM_MAX_WORK_POOLS": "1"}
    code, out, err = _invoke(env, "describe", "--check")
    assert code == 0  # a cap reached is no problem of the layout
    assert "note: 1 worker pools' topics, SCHEDULERSTREAM_MAX_WORK_POOLS=1" in err
