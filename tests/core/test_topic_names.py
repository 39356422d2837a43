"""Topic names are defined once: ``TopicNames`` and ``topologies/topics.toml`` agree."""

from __future__ import annotations

import tomllib
from dataclasses import fields
from pathlib import Path

import pytest

from schedulerstream.contracts.topic_names import DECLARED, WORK_TEMPLATE, TopicNames
from schedulerstream.errors import TopologyError
from schedulerstream.kafka import topics
from schedulerstream.settings import Settings


def _toml() -> dict[str, object]:
    with topics.TOPOLOGY_PATH.open("rb") as file:
        return tomllib.load(file)


def test_every_declared_topic_has_an_attribute_and_every_attribute_a_declaration() -> None:
    declared = list(_toml()["topics"])  # type: ignore[call-overload]
    assert sorted(DECLARED) == sorted(declared)
    names = TopicNames("p.")
    attributes = [f.name for f in fields(TopicNames) if f.name != "prefix"]
    assert len(attributes) == len(declared)
    assert sorted(getattr(names, a) for a in attributes) == sorted(f"p.{d}" for d in declared)


def test_the_work_template_is_the_declared_one() -> None:
    assert _toml()["templates"]["work"]["name"] == WORK_TEMPLATE  # type: ignore[index]
    assert TopicNames("p.").work("gpu") == "p.work.gpu"
    assert "p.work.gpu".startswith(TopicNames("p.").work_prefix)


def test_settings_names_follow_the_prefix() -> None:
    settings = Settings(topic_prefix="a.")
    assert settings.topics.runs == "a.runs"
    assert settings.topics.retry_5s == "a.retry.5s"
    assert settings.topics.scheduler_state == "a.scheduler-state"
    copied = settings.model_copy(update={"topic_prefix": "b."})
    assert copied.topics.runs == "b.runs"
    names = topics.topic_names(settings)
    assert {getattr(settings.topics, f.name) for f in fields(TopicNames)} - {"a."} == set(
        names.values()
    )


def test_a_declarations_file_that_disagrees_with_the_names_is_refused(tmp_path: Path) -> None:
    text = topics.TOPOLOGY_PATH.read_text()
    path = tmp_path / "topics.toml"
    path.write_text(text.replace("[topics.rejected", "[topics.refused"))
    disagreement = r"not named \['refused'\].*not declared \['rejected'\]"
    with pytest.raises(TopologyError, match=disagreement):
        topics.load_declarations(path)
