"""The ACL table (schedulerstream/kafka/acls.py) agrees with what each topology reads and writes,
and ``acls plan`` prints it (no broker needed)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from schedulerstream.dispatcher.topology import DispatcherTopology
from schedulerstream.errors import ValidationError
from schedulerstream.kafka import acls
from schedulerstream.projector.topology import ProjectorTopology
from schedulerstream.readmodel import open_read_model
from schedulerstream.runtime.topology import Topology
from schedulerstream.scheduler.topology import SchedulerTopology
from schedulerstream.settings import Settings, load_settings
from schedulerstream.tenants import TenantPolicy


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(topic_prefix="acme.", data_dir=tmp_path, bootstrap_servers="127.0.0.1:1")


@pytest.fixture
def topologies(settings: Settings) -> Iterator[dict[str, Topology]]:
    dispatcher = DispatcherTopology(settings, tenants=TenantPolicy())
    with open_read_model(settings) as model:
        yield {
            "scheduler": SchedulerTopology(settings),
            "dispatcher": dispatcher,
            "projector": ProjectorTopology(settings, model),
        }
    dispatcher.close()


def _topics(needs: list[acls.Need], operation: str) -> set[str]:
    return {
        n.name
        for n in needs
        if n.resource == acls.TOPIC and n.pattern == acls.LITERAL and n.operation == operation
    }


@pytest.mark.parametrize("component", ["scheduler", "dispatcher", "projector"])
def test_a_processor_reads_its_inputs_and_writes_its_outputs_and_nothing_else(
    settings: Settings, topologies: dict[str, Topology], component: str
) -> None:
    topology = topologies[component]
    needs = acls.needs(component, settings)
    reads, writes = _topics(needs, "Read"), _topics(needs, "Write")
    extra_reads = {settings.topic("tenants")} if component == "dispatcher" else set()
    assert reads == {*topology.input_topics, topology.changelog_topic, *extra_reads}
    # the projector writes cron.run-state without declaring it among its owned topics
    extra_writes = {settings.topic("run-state")} if component == "projector" else set()
    assert writes == {
        *topology.owned_topics,
        topology.changelog_topic,
        settings.topic("rejected"),
        *extra_writes,
    }
    assert _topics(needs, "DescribeConfigs") == {topology.changelog_topic}  # its tombstones
    group = f"acme.{topology.name}"
    assert acls.Need(acls.GROUP, acls.LITERAL, group, "Read") in needs
    assert acls.Need(acls.TRANSACTIONAL_ID, acls.PREFIXED, f"{group}-", "Write") in needs


def test_the_dispatcher_may_create_work_topics_and_write_its_target_topics(
    settings: Settings,
) -> None:
    needs = acls.needs("dispatcher", settings, target_topics=["orders.events", "billing.*"])
    assert acls.Need(acls.TOPIC, acls.PREFIXED, "acme.work.", "Create") in needs
    assert acls.Need(acls.TOPIC, acls.LITERAL, "orders.events", "Write") in needs
    assert acls.Need(acls.TOPIC, acls.PREFIXED, "billing.", "Write") in needs


def test_a_worker_of_one_pool_gets_that_pool_only(settings: Settings) -> None:
    needs = acls.needs("worker", settings, pools=["email"])
    names = {n.name for n in needs}
    assert names == {"acme.work.email", "acme.work.email-cancels", "acme.worker-events"}
    assert all(n.pattern == acls.LITERAL for n in needs)
    assert "acme.schedules" not in names
    with pytest.raises(ValidationError, match="pool"):
        acls.needs("worker", settings, pools=["Bad Pool"])


def test_plan_names_each_principal_and_refuses_a_bare_name(settings: Settings) -> None:
    grants = acls.plan(settings, {"api": "User:web", "worker": "User:w"})
    assert {g.principal for g in grants} == {"User:web", "User:w"}
    table = acls.table(grants).splitlines()
    assert table[0].split() == [
        "COMPONENT",
        "PRINCIPAL",
        "RESOURCE",
        "PATTERN",
        "NAME",
        "OPERATION",
    ]
    assert len(table) == len(grants) + 1
    with pytest.raises(ValidationError, match="TYPE:NAME"):
        acls.plan(settings, {"api": "web"})


def test_acls_plan_prints_the_table(tmp_path: Path) -> None:
    env = {"SCHEDULERSTREAM_TOPIC_PREFIX": "acme.", "SCHEDULERSTREAM_DATA_DIR": str(tmp_path),
           "PATH": "/usr/bin:/bin"}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "schedulerstream.cli", "acls", "plan", "--component", "api",
         "--principal", "api=User:web"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()[1:]]
    assert ["api", "User:web", "Topic", "LITERAL", "acme.schedules", "Write"] in rows
    assert all(row[1] == "User:web" for row in rows)
    bad = subprocess.run(
        [sys.executable, "-m", "schedulerstream.cli", "acls", "plan", "--principal", "nope=User:x"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert bad.returncode == 2 and "COMPONENT=TYPE:NAME" in bad.stderr
