"""A Kafka Connect worker (distributed mode) and the sink connectors of ``topologies/connect/``.

The jars come from Maven Central, pinned by ``connect-pom.xml`` (package data beside this module):
the worker's class path in ``{cache_dir}/connect-{kafka_version}-{pom digest}/libs`` and one
directory per sink plugin under ``plugins/`` (the worker's ``plugin.path``). The worker runs
detached with its config, log and pid under ``{data_dir}/connect``; its group and internal
topics are named after the topic prefix, so several deployments can share a cluster. Connector
configs are the JSON bodies of ``POST /connectors`` with ``${NAME}`` placeholders (see
``connector_variables``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schedulerstream.client_properties import java_properties
from schedulerstream.codec import Codec, default_codec
from schedulerstream.errors import CodecError, ConnectError
from schedulerstream.kafka.javaproc import JavaProcess
from schedulerstream.resources import pom, topologies_dir
from schedulerstream.settings import Settings

CONNECT_POM = pom("connect")
CONNECTORS_DIR = topologies_dir() / "connect"
DEFAULT_PORT = 8083
# cache sub-directory -> profile of CONNECT_POM resolved into it
PROFILES = {"libs": "worker", "plugins/file-sink": "file-sink", "plugins/jdbc-sink": "jdbc-sink"}
_PLACEHOLDER = re.compile(r"\$\{([A-Z][A-Z0-9_]*)\}")

# XML: the worker's class path has no YAML parser for log4j2
LOG4J2_CONFIG = """\
<Configuration>
  <Appenders>
    <Console name="STDOUT"><PatternLayout pattern="[%d] %p %m (%c)%n"/></Console>
  </Appenders>
  <Loggers>
    <Root level="INFO"><AppenderRef ref="STDOUT"/></Root>
    <Logger name="org.apache.kafka.clients" level="WARN"/>
    <Logger name="org.apache.kafka.common.config.AbstractConfig" level="WARN"/>
    <Logger name="org.apache.kafka.connect.runtime.isolation" level="WARN"/>
    <Logger name="org.hibernate" level="WARN"/>
    <Logger name="org.eclipse.jetty" level="WARN"/>
  </Loggers>
</Configuration>
"""


# -- jars --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ConnectJars:
    """The worker's class path directory and its plugin.path."""

    libs: Path
    plugins: Path


def _pom_digest() -> str:
    return hashlib.sha256(CONNECT_POM.read_bytes()).hexdigest()[:10]


def fetch_jars(settings: Settings) -> ConnectJars:
    """The Connect worker and sink plugin jars, fetched with Maven on first use."""
    if not CONNECT_POM.exists():
        raise ConnectError(f"the Connect pom {CONNECT_POM} is missing (a broken install?)")
    root = Path(settings.cache_dir) / f"connect-{settings.kafka_version}-{_pom_digest()}"
    jars = ConnectJars(root / "libs", root / "plugins")
    if (root / "complete").exists():
        return jars
    if shutil.which("mvn") is None:
        raise ConnectError("Maven (mvn) is not on PATH: it fetches the Kafka Connect jars")
    partial = root.with_name(f"{root.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    for subdir, profile in PROFILES.items():
        command = [
            "mvn", "-q", "-B", "-f", str(CONNECT_POM), "-P", profile,
            f"-Dkafka.version={settings.kafka_version}",
            "dependency:copy-dependencies", "-DincludeScope=runtime",
            f"-DoutputDirectory={partial / subdir}",
        ]  # fmt: skip
        result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=900)
        if result.returncode != 0:
            shutil.rmtree(partial, ignore_errors=True)
            raise ConnectError(
                f"mvn could not fetch the Connect jars (profile {profile}):\n"
                f"{result.stdout}{result.stderr}"
            )
    (partial / "complete").write_text(CONNECT_POM.read_text())
    if not (root / "complete").exists():
        shutil.rmtree(root, ignore_errors=True)  # an interrupted fetch's leftovers
        try:
            partial.rename(root)
        except OSError as exc:
            if not (root / "complete").exists():
                raise ConnectError(f"could not move the Connect jars to {root}: {exc}") from exc
    shutil.rmtree(partial, ignore_errors=True)  # left only when another process won the race
    return jars


# -- connector configs -------------------------------------------------------------------------
def jdbc_variables(database_url: str) -> dict[str, str]:
    """``JDBC_URL``, ``JDBC_USER``, ``JDBC_PASSWORD`` of a ``postgresql://`` URL."""
    parts = urllib.parse.urlsplit(database_url)
    if parts.scheme not in ("postgresql", "postgres") or not parts.hostname:
        raise ConnectError(f"not a postgresql:// URL: {database_url!r}")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    url = f"jdbc:postgresql://{host}:{parts.port or 5432}{parts.path or '/'}"
    return {
        "JDBC_URL": f"{url}?{parts.query}" if parts.query else url,
        "JDBC_USER": urllib.parse.unquote(parts.username or ""),
        "JDBC_PASSWORD": urllib.parse.unquote(parts.password or ""),
    }


def connector_variables(settings: Settings, **overrides: str) -> dict[str, str]:
    """The placeholders connector configs may use.

    ``TOPIC_PREFIX``; ``ATTEMPTS_FILE`` (default ``{data_dir}/connect/attempts.log``);
    ``JDBC_URL``/``JDBC_USER``/``JDBC_PASSWORD`` from ``SCHEDULERSTREAM_DATABASE_URL`` when it
    is set. ``overrides`` win.
    """
    variables = {
        "TOPIC_PREFIX": settings.topic_prefix,
        "ATTEMPTS_FILE": str(Path(settings.data_dir).resolve() / "connect" / "attempts.log"),
    }
    if settings.database_url:
        variables.update(jdbc_variables(settings.database_url))
    variables.update(overrides)
    return variables


def render(value: Any, variables: Mapping[str, str], where: str) -> Any:
    """``value`` with every ``${NAME}`` replaced (``${provider:...}`` is Connect's, kept)."""
    if isinstance(value, dict):
        return {k: render(v, variables, where) for k, v in value.items()}
    if isinstance(value, list):
        return [render(v, variables, where) for v in value]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in variables:
            database = "set SCHEDULERSTREAM_DATABASE_URL, or " if name.startswith("JDBC_") else ""
            hint = f" ({database}--set {name}=...)"
            raise ConnectError(f"{where}: no value for ${{{name}}}{hint}")
        return variables[name]

    return _PLACEHOLDER.sub(substitute, value)


def connector_files(names: Iterable[str] = ()) -> list[Path]:
    """The config files of ``names`` (file stems), or every one in topologies/connect/."""
    wanted = list(names)
    if not wanted:
        return sorted(CONNECTORS_DIR.glob("*.json"))
    paths = [CONNECTORS_DIR / f"{name}.json" for name in wanted]
    missing = [p.stem for p in paths if not p.exists()]
    if missing:
        known = ", ".join(p.stem for p in sorted(CONNECTORS_DIR.glob("*.json")))
        raise ConnectError(f"no connector config {missing[0]!r} (known: {known})")
    return paths


def load_connector(path: Path, variables: Mapping[str, str]) -> dict[str, Any]:
    """One ``{"name": ..., "config": {...}}`` body, placeholders filled in."""
    body = render(json.loads(path.read_text()), variables, path.name)
    if not isinstance(body, dict) or not isinstance(body.get("config"), dict):
        raise ConnectError(f"{path.name}: expected {{'name': ..., 'config': {{...}}}}")
    return body


def decode_attempts_line(line: str, codec: Codec | None = None) -> tuple[str, dict[str, Any]]:
    """One line of the ``attempts-file`` sink (base64 of the record's Avro single-object
    bytes, as ``Cast$Value`` writes it) as ``(schema name, record)``."""
    try:
        data = base64.b64decode(line.strip(), validate=True)
    except binascii.Error as exc:
        raise CodecError(f"not a base64 line: {line[:40]!r}") from exc
    return (codec or default_codec()).decode(data)


# -- REST --------------------------------------------------------------------------------------
class ConnectClient:
    """The REST API of a Connect cluster at ``url``."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def request(self, method: str, path: str, body: Any = None, timeout: float = 10.0) -> Any:
        """The decoded JSON answer; ConnectError for an HTTP error or no answer."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")
            raise ConnectError(f"{method} {path}: HTTP {exc.code}: {detail}") from exc
        except (OSError, urllib.error.URLError) as exc:
            raise ConnectError(f"{method} {path}: no answer from {self.url} ({exc})") from exc
        return json.loads(raw) if raw else None

    def answers(self) -> bool:
        """True when the worker's herder serves requests (not only its HTTP port)."""
        try:
            self.request("GET", "/connectors", timeout=3.0)
        except ConnectError:
            return False
        return True

    def put_connector(self, body: Mapping[str, Any], timeout: float = 60.0) -> None:
        """Create or update a connector (PUT /connectors/NAME/config); retried while the
        worker is still joining its group (409) or forwarding to a leader it does not know."""
        name = urllib.parse.quote(str(body["name"]), safe="")
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.request("PUT", f"/connectors/{name}/config", body["config"], timeout=30.0)
                return
            except ConnectError as exc:
                transient = "HTTP 409" in str(exc) or "HTTP 5" in str(exc)
                if not transient or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def delete_connector(self, name: str) -> None:
        """Stop and remove a connector (its sink offsets stay in its consumer group)."""
        self.request("DELETE", f"/connectors/{urllib.parse.quote(name, safe='')}")

    def status(self, name: str) -> dict[str, Any]:
        """``GET /connectors/NAME/status``: the connector's and its tasks' states."""
        result: dict[str, Any] = self.request(
            "GET", f"/connectors/{urllib.parse.quote(name, safe='')}/status"
        )
        return result

    def statuses(self) -> dict[str, dict[str, Any]]:
        """Status of every connector, by name."""
        result = self.request("GET", "/connectors?expand=status")
        return {name: entry["status"] for name, entry in (result or {}).items()}

    def wait_running(self, name: str, timeout: float = 60.0) -> dict[str, Any]:
        """Block until the connector and at least one task are RUNNING and none FAILED."""
        deadline = time.monotonic() + timeout
        last: dict[str, Any] = {}
        while time.monotonic() < deadline:
            try:
                last = self.status(name)
            except ConnectError:
                time.sleep(0.3)
                continue
            states = [last["connector"]["state"]] + [t["state"] for t in last.get("tasks", [])]
            if "FAILED" in states:
                raise ConnectError(f"connector {name} failed: {_failure(last)}")
            if last.get("tasks") and set(states) == {"RUNNING"}:
                return last
            time.sleep(0.3)
        raise ConnectError(f"connector {name} not RUNNING after {timeout:.0f}s: {last}")


def _failure(status: Mapping[str, Any]) -> str:
    parts = [status["connector"], *status.get("tasks", [])]
    traces = [p.get("trace", "") for p in parts if p.get("state") == "FAILED"]
    return "\n".join(t for t in traces if t)[:4000] or json.dumps(status)


def apply_connectors(
    client: ConnectClient, bodies: Iterable[Mapping[str, Any]], timeout: float = 60.0
) -> list[str]:
    """Create or update each connector and wait until it runs; one line per connector."""
    lines = []
    for body in bodies:
        client.put_connector(body, timeout=timeout)
        status = client.wait_running(str(body["name"]), timeout=timeout)
        lines.append(f"{body['name']}: RUNNING ({len(status['tasks'])} task(s))")
    return lines


# -- the local worker --------------------------------------------------------------------------
def worker_properties(settings: Settings, jars: ConnectJars, port: int) -> dict[str, str]:
    """A distributed worker on ``settings``'s cluster, REST on 127.0.0.1:``port``."""
    prefix, replication = settings.topic_prefix, str(settings.replication_factor)
    client = java_properties(settings.client_properties())  # the user's, for each client
    return {
        **{
            f"{role}{k}": v
            for role in ("", "producer.", "consumer.", "admin.")
            for k, v in client.items()
        },
        "bootstrap.servers": settings.bootstrap_servers,
        "group.id": f"{prefix}connect",
        "config.storage.topic": f"{prefix}connect-configs",
        "offset.storage.topic": f"{prefix}connect-offsets",
        "status.storage.topic": f"{prefix}connect-status",
        "config.storage.replication.factor": replication,
        "offset.storage.replication.factor": replication,
        "status.storage.replication.factor": replication,
        "offset.storage.partitions": "5",
        "status.storage.partitions": "1",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "offset.flush.interval.ms": "1000",
        "listeners": f"http://127.0.0.1:{port}",
        "rest.advertised.host.name": "127.0.0.1",
        "rest.advertised.port": str(port),
        "plugin.path": str(jars.plugins),
        "plugin.discovery": "service_load",
    }


def _escape(value: str) -> str:
    """A value as Java .properties reads it back (backslashes, and a leading space kept)."""
    escaped = value.replace("\\", "\\\\").replace("\n", "\\n")
    return "\\" + escaped if escaped.startswith(" ") else escaped


@dataclass(frozen=True)
class ConnectPaths:
    """Where one local worker keeps its files."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / "worker.properties"

    @property
    def log4j(self) -> Path:
        return self.root / "log4j2.xml"

    @property
    def log(self) -> Path:
        return self.root / "connect.log"

    @property
    def pid(self) -> Path:
        return self.root / "connect.pid"


class LocalConnect:
    """Fetch, start, stop and query a worker on this machine (REST on 127.0.0.1:``port``)."""

    def __init__(self, settings: Settings, port: int = DEFAULT_PORT) -> None:
        self.settings = settings
        self.port = port
        self.paths = ConnectPaths(Path(settings.data_dir).resolve() / "connect")
        self.client = ConnectClient(f"http://127.0.0.1:{port}")
        self.process = JavaProcess("Connect worker", self.paths.pid, self.paths.log, ConnectError)

    def recorded_pid(self) -> int | None:
        """The pid of the worker this data dir started, if that process is alive."""
        return self.process.recorded_pid()

    def up(self, timeout: float = 120.0) -> str:
        """Start the worker unless one answers; return a line saying what happened."""
        if self.client.answers():
            owner = self.recorded_pid()
            started = f"pid {owner}" if owner else "not started by this data dir"
            return f"connect already running at {self.client.url} ({started})"
        if self.recorded_pid() is None:
            jars = fetch_jars(self.settings)
            self._write_config(jars)
            self._start(jars)
        self._wait_until_answering(timeout)
        return f"connect started at {self.client.url} (pid {self.recorded_pid()})"

    def _write_config(self, jars: ConnectJars) -> None:
        props = worker_properties(self.settings, jars, self.port)
        self.paths.root.mkdir(parents=True, exist_ok=True)
        self.paths.config.touch(mode=0o600)  # it may hold the user's SASL password
        self.paths.config.chmod(0o600)
        self.paths.config.write_text("".join(f"{k}={_escape(v)}\n" for k, v in props.items()))
        self.paths.log4j.write_text(LOG4J2_CONFIG)

    def _start(self, jars: ConnectJars) -> None:
        self.process.start(
            [
                "-Xms256m", "-Xmx1g", "-XX:+UseG1GC", "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={self.paths.log4j}",
                "-cp", f"{jars.libs}/*", "org.apache.kafka.connect.cli.ConnectDistributed",
                str(self.paths.config),
            ]
        )  # fmt: skip

    def _wait_until_answering(self, timeout: float) -> None:
        self.process.wait_until(self.client.answers, self.client.url, timeout)

    def log_tail(self, lines: int = 60) -> str:
        return self.process.log_tail(lines)

    def down(self, timeout: float = 30.0, kill: bool = False) -> str:
        """Stop the worker this data dir started (never someone else's)."""
        pid = self.process.stop(timeout, kill)
        if pid is None:
            return "no Connect worker started from this data dir is running"
        return f"connect stopped (pid {pid})"
