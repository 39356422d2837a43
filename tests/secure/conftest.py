"""A secured broker of its own for these tests (SASL_SSL, SCRAM-SHA-512, ACLs), started and
stopped through ``schedulerstream kafka up --secure`` / ``kafka down`` on free ports, with its own
data dir: the shared plain test broker is never touched."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from schedulerstream.settings import Settings, load_settings
from tests.conftest import _delete_topics
from tests.support.ports import free_port_pair


def cli(
    env: dict[str, str], *args: str, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "schedulerstream.cli", *args],
        env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


@dataclass(frozen=True)
class SecureCluster:
    bootstrap: str
    data_dir: Path
    admin_file: Path
    env: dict[str, str]

    def client_file(self, user: str) -> Path:
        return self.admin_file.parent / f"{user}.properties"

    def settings(self, prefix: str, root: Path, user: str = "admin") -> Settings:
        """Settings of one test (its topic prefix) authenticating as ``user``."""
        return load_settings(
            bootstrap_servers=self.bootstrap,
            data_dir=root / user,
            topic_prefix=prefix,
            partitions=2,
            instance_id=f"{user}-{uuid.uuid4().hex[:6]}",
            kafka_config_file=self.client_file(user),
        )


@pytest.fixture(scope="session")
def secure_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    data_dir = tmp_path_factory.mktemp("secure-broker")
    bootstrap = f"127.0.0.1:{free_port_pair()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULERSTREAM_")}
    env.update(SCHEDULERSTREAM_BOOTSTRAP_SERVERS=bootstrap, SCHEDULERSTREAM_DATA_DIR=str(data_dir))
    up = cli(env, "kafka", "up", "--secure")
    assert up.returncode == 0, up.stderr
    admin_file = Path(up.stdout.strip())
    try:
        yield SecureCluster(bootstrap, data_dir, admin_file, env)
    finally:
        down = cli(env, "kafka", "down")
        assert down.returncode == 0, down.stderr


@pytest.fixture
def prefix(secure_cluster: SecureCluster, tmp_path: Path) -> Iterator[str]:
    """A fresh topic prefix (topics deleted afterwards, as the admin)."""
    name = f"s{uuid.uuid4().hex[:10]}."
    yield name
    _delete_topics(secure_cluster.settings(name, tmp_path), name)
