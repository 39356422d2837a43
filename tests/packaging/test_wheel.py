"""The package installs like any other: sdist and wheel built with ``python -m build``, the wheel
installed into a fresh venv outside the checkout, every command run from an empty directory.

Nothing of the checkout is on the installed commands' path: schemas, topic declarations and the
Maven poms must come from the wheel (package data through importlib.resources).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from schedulerstream.kafka import topics
from schedulerstream.kafka.clients import base_config
from schedulerstream.settings import Settings
from tests.support.ports import free_port_pair

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Installed:
    """A venv holding the built wheel, and an empty directory to run its commands from."""

    venv: Path
    empty: Path
    dist: Path

    def env(self, **settings: str) -> dict[str, str]:
        """The environment of an installed command: the venv first, nothing of the checkout."""
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("SCHEDULERSTREAM_", "PYTHON", "VIRTUAL_ENV"))
        }
        env["PATH"] = f"{self.venv / 'bin'}:{env.get('PATH', '')}"
        env.update({f"SCHEDULERSTREAM_{k.upper()}": v for k, v in settings.items()})
        return env

    def spawn(self, component: str, **settings: str) -> subprocess.Popen[bytes]:
        """``schedulerstream COMPONENT`` in the background, logging to ``COMPONENT.log``."""
        with (self.empty / f"{component}.log").open("wb") as log:
            return subprocess.Popen(
                ["schedulerstream", component],
                cwd=self.empty,
                env=self.env(instance_id=f"wheel-{component}", **settings),
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def log(self, proc: subprocess.Popen[bytes]) -> str:
        component = proc.args[1] if isinstance(proc.args, list) else "?"
        return (self.empty / f"{component}.log").read_text(errors="replace")[-3000:]

    def run(self, *args: str, timeout: float = 120, **settings: str) -> str:
        """``schedulerstream ARGS`` from the empty directory; its stdout (stderr appended)."""
        result = subprocess.run(
            [*args],
            cwd=self.empty,
            env=self.env(**settings),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert result.returncode == 0, f"{args} failed:\n{result.stdout}\n{result.stderr}"
        return result.stdout + result.stderr


def _run(command: list[str], cwd: Path, timeout: float) -> None:
    result = subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert result.returncode == 0, f"{command} failed:\n{result.stdout[-3000:]}{result.stderr}"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    root = tmp_path_factory.mktemp("wheel")
    assert REPO not in root.parents
    dist, venv, empty = root / "dist", root / "venv", root / "empty"
    empty.mkdir()
    # sdist, then the wheel built from that sdist: both must carry the package data
    _run([sys.executable, "-m", "build", "--outdir", str(dist), str(REPO)], root, 300)
    _run([sys.executable, "-m", "venv", str(venv)], root, 120)
    (wheel,) = dist.glob("schedulerstream-*.whl")
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    _run([*pip, "--disable-pip-version-check", str(wheel)], root, 600)
    yield Installed(venv, empty, dist)


def test_sdist_carries_the_package_data(installed: Installed) -> None:
    (sdist,) = installed.dist.glob("schedulerstream-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {Path(*Path(n).parts[1:]).as_posix() for n in archive.getnames()}
    assert "schemas/io.schedulerstream.JobDefinition.avsc" in names
    assert "topologies/topics.toml" in names
    assert "schedulerstream/kafka/kafka-pom.xml" in names


def test_help_and_cron_next_from_an_empty_directory(installed: Installed) -> None:
    assert "topics" in installed.run("schedulerstream", "--help")
    out = installed.run(
        "schedulerstream", "cron", "next", "0 9 * * *", "--tz", "Europe/Paris", "--count", "2"
    )
    assert out.count("T09:00:00+0") == 2, out


def test_package_data_comes_from_the_installed_package(installed: Installed) -> None:
    probe = (
        "import json; from schedulerstream import codec; "
        "from schedulerstream.kafka import broker, connect, topics; "
        "codec.default_codec(); topics.load_declarations(); "
        "print(json.dumps([str(p) for p in (codec.SCHEMA_DIR, topics.TOPOLOGY_PATH, "
        "broker.POM_PATH, connect.CONNECT_POM, connect.CONNECTORS_DIR)]))"
    )
    out = installed.run("python", "-c", probe)
    paths = [Path(p) for p in json.loads(out.splitlines()[-1])]
    site = installed.venv / "lib"
    for path in paths:
        assert path.exists() and site in path.parents, path
    assert sorted(p.name for p in paths[4].glob("*.json")), "no Connect sink configs"


@pytest.mark.kafka
def test_kafka_jars_fetched_with_the_packaged_pom(installed: Installed) -> None:
    """`kafka up`'s first step on a machine without jars: Maven with the pom from the wheel."""
    cache = installed.empty.parent / "cache"
    probe = (
        "from schedulerstream.kafka.broker import LocalBroker; "
        "from schedulerstream.settings import load_settings; "
        "print(LocalBroker(load_settings()).jars_dir())"
    )
    out = installed.run("python", "-c", probe, timeout=300, cache_dir=str(cache))
    jars = Path(out.splitlines()[-1])
    assert cache in jars.parents
    assert (jars / "kafka_2.13-4.1.1.jar").exists() or any(jars.glob("kafka_2.13-*.jar"))


@pytest.mark.kafka
def test_kafka_up_and_topics_apply_against_the_broker(
    installed: Installed, kafka_settings: Settings
) -> None:
    env = {
        "bootstrap_servers": kafka_settings.bootstrap_servers,
        "topic_prefix": kafka_settings.topic_prefix,
        "partitions": "2",
        "data_dir": str(installed.empty.parent / "state"),
    }
    out = installed.run("schedulerstream", "kafka", "up", **env)
    assert f"a broker already answers at {kafka_settings.bootstrap_servers}" in out
    installed.run("schedulerstream", "topics", "apply", **env)
    described = installed.run("schedulerstream", "topics", "describe", "--check", **env)
    wanted = {s.name for s in topics.specs(kafka_settings.model_copy(update={"partitions": 2}))}
    for name in wanted:
        assert name in described
    admin = AdminClient(base_config(kafka_settings))
    existing = set(admin.list_topics(timeout=10).topics)
    assert wanted <= existing, wanted - existing


@pytest.mark.kafka
def test_a_broker_of_its_own_up_and_down_from_the_wheel(installed: Installed) -> None:
    """`kafka up` starts a broker from the wheel (jars through the packaged pom, cached) and
    `kafka down` stops it."""
    env = {
        "bootstrap_servers": f"127.0.0.1:{free_port_pair()}",
        "data_dir": str(installed.empty.parent / "own-broker"),
    }
    up = installed.run("schedulerstream", "kafka", "up", timeout=240, **env)
    assert "broker started at" in up, up
    status = installed.run("schedulerstream", "kafka", "status", **env)
    assert status.startswith("up: "), status
    down = installed.run("schedulerstream", "kafka", "down", timeout=120, **env)
    assert "stopped" in down.lower(), down


@pytest.mark.kafka
def test_a_job_fires_end_to_end_from_the_wheel(
    installed: Installed, kafka_settings: Settings
) -> None:
    """Topics applied, a job put, and the installed scheduler and dispatcher deliver its runs
    to a Kafka target topic: every command and process from the wheel's venv."""
    env = {
        "bootstrap_servers": kafka_settings.bootstrap_servers,
        "topic_prefix": kafka_settings.topic_prefix,
        "partitions": "2",
        "data_dir": str(installed.empty.parent / "e2e-state"),
    }
    installed.run("schedulerstream", "topics", "apply", **env)
    target = f"{kafka_settings.topic_prefix}wheel-out"
    admin = AdminClient(base_config(kafka_settings))
    admin.create_topics([NewTopic(target, 1, 1)])[target].result(30)
    job = {"tenant": "wheel", "job_id": "tick", "schedule": {"every": 1},
           "target": {"type": "kafka", "topic": target}}  # fmt: skip
    (installed.empty / "job.json").write_text(json.dumps(job))
    installed.run("schedulerstream", "schedules", "put", "job.json", **env)
    procs = [installed.spawn(component, **env) for component in ("scheduler", "dispatcher")]
    try:
        consumer = Consumer(
            {**base_config(kafka_settings), "group.id": f"wheel-{os.getpid()}",
             "auto.offset.reset": "earliest", "isolation.level": "read_committed"}
        )  # fmt: skip
        consumer.subscribe([target])
        delivered: list[dict[str, object]] = []
        deadline = time.monotonic() + 90
        while len(delivered) < 2 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                delivered.append(json.loads(message.value()))
            for proc in procs:
                assert proc.poll() is None, installed.log(proc)
        consumer.close()
        assert len(delivered) >= 2, [installed.log(p) for p in procs]
        assert all(d["job_id"] == "tick" and d["tenant"] == "wheel" for d in delivered)
    finally:
        for proc in procs:
            proc.terminate()
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
