"""Connector configs of topologies/connect/ and their placeholders, without a worker."""

from __future__ import annotations

from pathlib import Path

import pytest

from schedulerstream.errors import ConnectError
from schedulerstream.kafka.connect import (
    ConnectJars,
    connector_files,
    connector_variables,
    jdbc_variables,
    load_connector,
    render,
    worker_properties,
)
from schedulerstream.settings import Settings

SETTINGS = Settings(
    topic_prefix="prod.", data_dir=Path("/srv/ss"), database_url="postgresql://u:p%40ss@db:6543/ss"
)


def test_jdbc_variables_from_a_libpq_url() -> None:
    assert jdbc_variables("postgresql://u:p%40ss@db:6543/ss?sslmode=require") == {
        "JDBC_URL": "jdbc:postgresql://db:6543/ss?sslmode=require",
        "JDBC_USER": "u",
        "JDBC_PASSWORD": "p@ss",
    }
    assert jdbc_variables("postgres://[::1]/x")["JDBC_URL"] == "jdbc:postgresql://[::1]:5432/x"
    with pytest.raises(ConnectError, match="postgresql://"):
        jdbc_variables("mysql://db/x")


def test_placeholders_are_filled_and_connect_references_kept() -> None:
    variables = {"TOPIC_PREFIX": "cron."}
    value = {"a": "${TOPIC_PREFIX}run-state", "b": ["${file:/etc/s.properties:pw}", "${topic}"]}
    assert render(value, variables, "x.json") == {
        "a": "cron.run-state",
        "b": ["${file:/etc/s.properties:pw}", "${topic}"],
    }
    with pytest.raises(ConnectError, match=r"no value for \$\{JDBC_URL\}.*DATABASE_URL"):
        render("${JDBC_URL}", variables, "x.json")


def test_every_config_renders_under_the_prefix() -> None:
    variables = connector_variables(SETTINGS)
    assert variables["ATTEMPTS_FILE"] == "/srv/ss/connect/attempts.log"
    paths = connector_files()
    assert {p.stem for p in paths} == {"attempts-file", "run-state-postgres"}
    for path in paths:
        body = load_connector(path, variables)
        assert body["name"] == f"prod.{path.stem}"
        config = body["config"]
        assert all(isinstance(v, str) for v in config.values()), path
        assert config["topics"] in ("prod.attempts", "prod.run-state")
        assert config["consumer.override.isolation.level"] == "read_committed"
        assert "${" not in str(config).replace("${topic}", "")
    jdbc = load_connector(connector_files(["run-state-postgres"])[0], variables)["config"]
    assert jdbc["connection.url"] == "jdbc:postgresql://db:6543/ss"
    assert jdbc["connection.password"] == "p@ss"


def test_unknown_connector_and_missing_database_url() -> None:
    with pytest.raises(ConnectError, match="no connector config 'nope'"):
        connector_files(["nope"])
    no_db = connector_variables(SETTINGS.model_copy(update={"database_url": ""}))
    with pytest.raises(ConnectError, match=r"run-state-postgres\.json"):
        load_connector(connector_files(["run-state-postgres"])[0], no_db)


def test_worker_group_and_internal_topics_follow_the_prefix() -> None:
    props = worker_properties(SETTINGS, ConnectJars(Path("/l"), Path("/p")), 18083)
    assert props["group.id"] == "prod.connect"
    assert {props[f"{k}.storage.topic"] for k in ("config", "offset", "status")} == {
        "prod.connect-configs",
        "prod.connect-offsets",
        "prod.connect-status",
    }
    assert props["listeners"] == "http://127.0.0.1:18083"
    assert props["plugin.path"] == "/p"
