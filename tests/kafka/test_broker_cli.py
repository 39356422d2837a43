"""``schedulerstream kafka up|status|down`` as real processes against a broker of its own.

The session broker of ``tests/conftest.py`` is not used: this file starts (and stops) a second
broker on its own port pair and data dir, only through the CLI, so it can watch the whole life
cycle: nothing answers, ``up`` starts one, a second ``up`` reuses it, another data dir pointing at
the same address uses it but cannot stop it, ``down`` from the owner stops it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

from schedulerstream.kafka.broker import LocalBroker
from schedulerstream.settings import load_settings

pytestmark = pytest.mark.kafka

FIRST_PORT = int(os.environ.get("SS_TEST_CLI_BROKER_PORT", "39192"))
CLI = [sys.executable, "-m", "schedulerstream.cli", "kafka"]
RecordProperty = Callable[[str, object], None]


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port_pair(start: int = FIRST_PORT) -> int:
    """The first port from ``start`` (stepping by 2) where it and the controller port are free."""
    for port in range(start, start + 200, 2):
        if _port_free(port) and _port_free(port + 1):
            return port
    raise AssertionError(f"no free port pair in [{start}, {start + 200})")


def cli_env(**settings: str) -> dict[str, str]:
    """This process's environment without any SCHEDULERSTREAM_* but the ones given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULERSTREAM_")}
    env.update({f"SCHEDULERSTREAM_{name.upper()}": value for name, value in settings.items()})
    return env


def kafka_cli(
    env: dict[str, str], *args: str, timeout: float = 150
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def broker_jvms(data_dir: Path) -> list[int]:
    """Pids of ``kafka.Kafka`` JVMs running the config of ``data_dir``."""
    config = str(LocalBroker(load_settings(data_dir=data_dir)).paths.config)
    listing = subprocess.run(
        ["ps", "-ww", "-eo", "pid=,args="], capture_output=True, text=True, check=True
    ).stdout
    pids = []
    for line in listing.splitlines():
        pid, _, args = line.strip().partition(" ")
        if "kafka.Kafka" in args and args.rstrip().endswith(config):
            pids.append(int(pid))
    return pids


def pid_alive(pid: int) -> bool:
    """Alive and not a zombie (the broker is not our child, so it is not ours to reap)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # no procfs: fall back to a signal probe
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rpartition(")")[2].split()[0] != "Z"


@dataclass(frozen=True)
class CliBroker:
    """One address, two data dirs: ``owner`` starts the broker, ``other`` only points at it."""

    address: str
    owner_dir: Path
    other_dir: Path

    def env(self, data_dir: Path) -> dict[str, str]:
        return cli_env(bootstrap_servers=self.address, data_dir=str(data_dir))

    def recorded_pid(self) -> int | None:
        settings = load_settings(bootstrap_servers=self.address, data_dir=self.owner_dir)
        return LocalBroker(settings).recorded_pid()


@pytest.fixture
def cli_broker(tmp_path: Path) -> Iterator[CliBroker]:
    """Where the CLI may start a broker; whatever it started is killed at the end."""
    port = free_port_pair()
    broker = CliBroker(f"127.0.0.1:{port}", tmp_path / "owner", tmp_path / "other")
    yield broker
    leftovers = set(broker_jvms(broker.owner_dir)) | set(broker_jvms(broker.other_dir))
    for pid in leftovers:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)


def server_start_seconds(log: Path) -> float | None:
    """From the broker log's first line to "Kafka Server started" (the JVM's own start time)."""
    stamps: list[datetime] = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("[") and (not stamps or "Kafka Server started" in line):
            stamps.append(datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f"))
    return (stamps[-1] - stamps[0]).total_seconds() if len(stamps) > 1 else None


def test_up_status_down_lifecycle_with_a_second_data_dir(
    cli_broker: CliBroker, record_property: RecordProperty
) -> None:
    owner = cli_broker.env(cli_broker.owner_dir)
    other = cli_broker.env(cli_broker.other_dir)
    address = cli_broker.address

    before = kafka_cli(owner, "status")
    assert before.returncode == 1, before
    assert before.stdout.strip() == f"down: nothing answers at {address}"

    started = time.monotonic()
    up = kafka_cli(owner, "up")
    start_seconds = time.monotonic() - started
    assert up.returncode == 0, up.stderr
    assert up.stdout == f"{address}\n"  # stdout is only the address, for `$(... kafka up)`
    pid = cli_broker.recorded_pid()
    assert pid is not None
    assert f"broker started at {address} (pid {pid})" in up.stderr
    assert broker_jvms(cli_broker.owner_dir) == [pid]
    jvm_seconds = server_start_seconds(cli_broker.owner_dir / "kafka" / "broker.log")
    record_property("broker_start_seconds", round(start_seconds, 2))
    record_property("broker_jvm_start_seconds", jvm_seconds)
    print(
        f"\n`kafka up` started a broker in {start_seconds:.2f} s (CLI wall time: storage format,"
        f" JVM start, first metadata answer; pid {pid}); the broker log says {jvm_seconds} s"
        " from its first line to 'Kafka Server started'"
    )

    again = kafka_cli(owner, "up")
    assert again.returncode == 0, again.stderr
    assert again.stdout == f"{address}\n"
    assert f"broker already running at {address} (pid {pid})" in again.stderr
    assert cli_broker.recorded_pid() == pid
    assert broker_jvms(cli_broker.owner_dir) == [pid]

    status = kafka_cli(owner, "status")
    assert status.returncode == 0, status
    assert status.stdout.strip() == f"up: {address} (started here, pid {pid})"

    # A second data dir at the same address uses the broker and cannot stop it.
    borrowed = kafka_cli(other, "up")
    assert borrowed.returncode == 0, borrowed.stderr
    assert borrowed.stdout == f"{address}\n"
    assert f"a broker already answers at {address}; using it" in borrowed.stderr
    assert not (cli_broker.other_dir / "kafka" / "broker.pid").exists()
    assert broker_jvms(cli_broker.other_dir) == []
    other_status = kafka_cli(other, "status")
    assert other_status.returncode == 0, other_status
    assert other_status.stdout.strip() == f"up: {address} (not started by this data dir)"
    refused = kafka_cli(other, "down")
    assert refused.returncode == 0, refused.stderr
    assert refused.stdout.strip() == "no broker started from this data dir is running"
    assert pid_alive(pid)
    assert kafka_cli(owner, "status").returncode == 0

    stopped = time.monotonic()
    down = kafka_cli(owner, "down", timeout=90)
    stop_seconds = time.monotonic() - stopped
    assert down.returncode == 0, down.stderr
    assert down.stdout.strip() == f"broker stopped (pid {pid})"
    assert not pid_alive(pid)
    assert broker_jvms(cli_broker.owner_dir) == []
    assert not (cli_broker.owner_dir / "kafka" / "broker.pid").exists()
    record_property("broker_stop_seconds", round(stop_seconds, 2))
    print(f"`kafka down` stopped it in {stop_seconds:.2f} s")

    after = kafka_cli(owner, "status")
    assert after.returncode == 1, after
    assert after.stdout.strip() == f"down: nothing answers at {address}"


@pytest.mark.parametrize(
    ("command", "variable", "value", "message"),
    [
        ("up", "BOOTSTRAP_SERVERS", "no-port-here", "is not host:port"),
        ("status", "BOOTSTRAP_SERVERS", "127.0.0.1:http", "is not host:port"),
        ("down", "BOOTSTRAP_SERVERS", "no-port-here", "is not host:port"),
        ("up", "BOOTSTRAP_SERVRES", "127.0.0.1:9092", "unknown setting"),
        ("status", "PARTITIONS", "zero", "invalid"),
    ],
)
def test_bad_setting_is_a_clear_error_naming_the_variable(
    tmp_path: Path, command: str, variable: str, value: str, message: str
) -> None:
    data_dir = tmp_path / "data"
    env = cli_env(data_dir=str(data_dir), **{variable: value})
    result = kafka_cli(env, command, timeout=60)
    assert result.returncode != 0, result
    assert f"SCHEDULERSTREAM_{variable}" in result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr, f"a traceback, not a clear error:\n{result.stderr}"
    assert result.stdout == ""
    assert not data_dir.exists(), "nothing is started or written on a bad setting"
