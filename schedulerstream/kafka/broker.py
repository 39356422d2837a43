"""A real single-node KRaft Apache Kafka broker for development and tests.

The jars come from Maven Central (pinned by ``kafka-pom.xml``, package data beside this module)
or from ``KAFKA_HOME``; the broker runs detached with its data, log and pid under
``{data_dir}/kafka``. ``secure=True``: a SASL_SSL listener with SCRAM users and ACLs instead of
PLAINTEXT (its files: schedulerstream/kafka/secure.py); a data dir made secure stays secure.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schedulerstream.errors import BrokerError
from schedulerstream.kafka import secure as secured
from schedulerstream.kafka.javaproc import JavaProcess, java_executable
from schedulerstream.resources import pom
from schedulerstream.settings import Settings

POM_PATH = pom("kafka")

BROKER_SETTINGS = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "inter.broker.listener.name": "PLAINTEXT",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "12",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "12",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.heartbeat.interval.ms": "250",
    "group.consumer.heartbeat.interval.ms": "500",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "5000",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "60000",
    "num.partitions": "1",
    "auto.create.topics.enable": "false",
    "log.cleaner.backoff.ms": "1000",
    "num.network.threads": "3",
    "num.io.threads": "4",
}

LOG4J2_CONFIG = """\
Configuration:
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: INFO
      AppenderRef:
        - ref: STDOUT
    Logger:
      - name: kafka.request.logger
        level: WARN
      - name: org.apache.kafka.controller
        level: WARN
      - name: kafka.log.LogCleaner
        level: WARN
"""


@dataclass(frozen=True)
class BrokerPaths:
    """Where one local broker keeps its files."""

    root: Path

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def config(self) -> Path:
        return self.root / "server.properties"

    @property
    def log4j(self) -> Path:
        return self.root / "log4j2.yaml"

    @property
    def log(self) -> Path:
        return self.root / "broker.log"

    @property
    def pid(self) -> Path:
        return self.root / "broker.pid"


def parse_address(bootstrap: str) -> tuple[str, int]:
    """The first host:port of a bootstrap list."""
    first = bootstrap.split(",")[0].strip()
    host, sep, port = first.rpartition(":")
    if not sep or not port.isdigit():
        raise BrokerError(f"SCHEDULERSTREAM_BOOTSTRAP_SERVERS {bootstrap!r} is not host:port")
    return host.strip("[]"), int(port)


def broker_answers(
    bootstrap: str, timeout: float = 2.0, config: Mapping[str, Any] | None = None
) -> bool:
    """True when a Kafka broker answers a metadata request at ``bootstrap`` (a client of
    ``config``: the one of clients.base_config, for a secured listener)."""
    host, port = parse_address(bootstrap)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError:
        return False
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({**(config or {}), "bootstrap.servers": bootstrap, "log_level": 0})
    try:
        metadata = admin.list_topics(timeout=timeout)
    except Exception:
        return False
    return bool(metadata.brokers)


class LocalBroker:
    """Fetch, format, start, stop and query the local broker described by ``settings``."""

    def __init__(self, settings: Settings, secure: bool = False) -> None:
        self.settings = settings
        self.host, self.port = parse_address(settings.bootstrap_servers)
        self.paths = BrokerPaths(Path(settings.data_dir).resolve() / "kafka")
        self.secure_files = secured.SecureFiles(self.paths.root / "secure")
        self.secure = secure or self.secure_files.exists()
        self.process = JavaProcess("broker", self.paths.pid, self.paths.log, BrokerError)

    # -- jars -------------------------------------------------------------------------------
    def jars_dir(self) -> Path:
        """A directory holding the Kafka jars, fetching them with Maven if needed."""
        cached = Path(self.settings.cache_dir) / f"kafka-{self.settings.kafka_version}" / "libs"
        if (cached / f"kafka_2.13-{self.settings.kafka_version}.jar").exists():
            return cached
        if shutil.which("mvn") is None:
            kafka_home = os.environ.get("KAFKA_HOME")
            if kafka_home and (Path(kafka_home) / "libs").is_dir():
                return Path(kafka_home) / "libs"
            raise BrokerError("Maven (mvn) is not on PATH and KAFKA_HOME is not set")
        if not POM_PATH.exists():
            raise BrokerError(f"the Kafka pom {POM_PATH} is missing (a broken install?)")
        partial = cached.with_name("libs.partial")
        shutil.rmtree(partial, ignore_errors=True)
        command = [
            "mvn", "-q", "-B", "-f", str(POM_PATH),
            f"-Dkafka.version={self.settings.kafka_version}",
            "dependency:copy-dependencies", f"-DoutputDirectory={partial}",
        ]  # fmt: skip
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise BrokerError(f"mvn could not fetch Kafka jars:\n{result.stdout}{result.stderr}")
        shutil.rmtree(cached, ignore_errors=True)
        partial.rename(cached)
        return cached

    # -- config and storage ------------------------------------------------------------------
    def _write_config(self) -> None:
        controller = f"{self.host}:{self.port + 1}"
        props = dict(BROKER_SETTINGS)
        props.update(
            {
                "controller.quorum.voters": f"1@{controller}",
                "listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{controller}",
                "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
                "log.dirs": str(self.paths.data),
            }
        )
        self.paths.root.mkdir(parents=True, exist_ok=True)
        if self.secure:
            secured.prepare(self.secure_files, self.host)
            props.update(secured.broker_properties(self.secure_files, self.host, self.port))
        self.paths.config.touch(mode=0o600)  # the secured broker's holds its own password
        self.paths.config.chmod(0o600)
        self.paths.config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.paths.log4j.write_text(LOG4J2_CONFIG)

    def _check_mode(self) -> None:
        """Refuse to start a data dir formatted for the other mode (plain or secure)."""
        if not (self.paths.data / "meta.properties").exists():
            return
        formatted_secure = self.secure_files.exists()
        if formatted_secure != self.secure:
            held = "a secured" if formatted_secure else "a plain"
            raise BrokerError(
                f"{self.paths.root} holds {held} broker; use another SCHEDULERSTREAM_DATA_DIR "
                f"(or remove that one) to start a {'secured' if self.secure else 'plain'} one"
            )

    def admin_properties(self) -> Path:
        """The admin super user's client properties file (secure mode)."""
        return self.secure_files.client_properties(secured.ADMIN).resolve()

    def _format(self, jars: Path) -> None:
        if (self.paths.data / "meta.properties").exists():
            return
        command = [
            java_executable(BrokerError), "-cp", f"{jars}/*", "kafka.tools.StorageTool", "format",
            "-t", uuid.uuid4().hex[:22], "-c", str(self.paths.config), "--ignore-formatted",
        ]  # fmt: skip
        if self.secure:
            command += secured.format_arguments(self.secure_files)
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:  # (the output never echoes the --add-scram passwords)
            raise BrokerError(f"kafka storage format failed:\n{result.stdout}{result.stderr}")

    # -- process -----------------------------------------------------------------------------
    def recorded_pid(self) -> int | None:
        """The pid of the broker this data dir started, if that process is alive."""
        return self.process.recorded_pid()

    def answers(self) -> bool:
        from schedulerstream.kafka.clients import base_config

        config = base_config(self.settings)
        if self.secure and self.secure_files.exists():  # asked as the admin, whoever the user is
            config.update(secured.client_config(self.secure_files, secured.ADMIN))
        return broker_answers(self.settings.bootstrap_servers, config=config)

    def up(self, timeout: float = 90.0) -> str:
        """Start the broker unless one answers; return a line saying what happened."""
        address = self.settings.bootstrap_servers
        if self.secure and self.recorded_pid() is None and _port_taken(self.host, self.port):
            raise BrokerError(
                f"something already listens at {address}: not a secured broker this data dir "
                "started; choose another SCHEDULERSTREAM_BOOTSTRAP_SERVERS"
            )
        if self.answers():
            if self.recorded_pid() is not None:
                return f"broker already running at {address} (pid {self.recorded_pid()})"
            return f"a broker already answers at {address}; using it"
        if self.recorded_pid() is not None:
            # Started but not answering yet (or wedged): wait for it rather than start a second.
            self._wait_until_answering(timeout)
            return f"broker running at {address} (pid {self.recorded_pid()})"
        jars = self.jars_dir()
        self._check_mode()
        self._write_config()
        self._format(jars)
        self.start_process(jars)
        self._wait_until_answering(timeout)
        return f"broker started at {address} (pid {self.recorded_pid()})"

    def start_process(self, jars: Path | None = None) -> int:
        """Launch the broker JVM detached and record its pid (no waiting)."""
        jars = jars or self.jars_dir()
        return self.process.start(
            [
                "-Xms256m", "-Xmx1g", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={self.paths.log4j}",
                "-cp", f"{jars}/*", "kafka.Kafka", str(self.paths.config),
            ]
        )  # fmt: skip

    def _wait_until_answering(self, timeout: float) -> None:
        self.process.wait_until(self.answers, self.settings.bootstrap_servers, timeout)

    def down(self, timeout: float = 30.0, kill: bool = False) -> str:
        """Stop the broker this data dir started (never someone else's)."""
        pid = self.process.stop(timeout, kill)
        if pid is None:
            return "no broker started from this data dir is running"
        return f"broker stopped (pid {pid})"


def _port_taken(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False
