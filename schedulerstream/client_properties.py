"""Kafka client properties given by the user: a Java ``client.properties`` file
(``SCHEDULERSTREAM_KAFKA_CONFIG_FILE``) and ``SCHEDULERSTREAM_KAFKA_<PROPERTY>`` variables.

They reach every client the project creates (schedulerstream/kafka/clients.py), except the
properties the runtime owns, which are refused with an error naming them. Values are never
logged nor put in an error message: they may be passwords. Pure parsing, no Kafka client:
settings reads it, so it sits in the core rather than in ``kafka/`` (DESIGN.md §7).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from schedulerstream.errors import ConfigError

VARIABLE_PREFIX = "SCHEDULERSTREAM_KAFKA_"

# property -> why the user may not set it (what to use instead)
OWNED: Mapping[str, str] = {
    "bootstrap.servers": "set SCHEDULERSTREAM_BOOTSTRAP_SERVERS",
    "transactional.id": "exactly-once processing names its producers",
    "transaction.timeout.ms": "the runtime sizes its transactions and watchdog",
    "enable.idempotence": "exactly-once processing needs the idempotent producer",
    "acks": "exactly-once processing needs acks=all",
    "partitioner": "keys are placed like the Java client (murmur2) for co-partitioning",
    "isolation.level": "consumers read committed records only",
    "enable.auto.commit": "offsets are committed in transactions",
    "enable.auto.offset.store": "offsets are committed in transactions",
    "auto.offset.reset": "the runtime restores state from the earliest offset",
    "enable.partition.eof": "the runtime detects the end of changelogs itself",
    "group.id": "group ids are derived from SCHEDULERSTREAM_TOPIC_PREFIX",
    "group.instance.id": "members are identified by SCHEDULERSTREAM_INSTANCE_ID",
    "group.protocol": "set SCHEDULERSTREAM_GROUP_PROTOCOL",
    "group.remote.assignor": "co-partitioned inputs need the range assignor",
    "partition.assignment.strategy": "co-partitioned inputs need the range assignor",
    "session.timeout.ms": "set SCHEDULERSTREAM_SESSION_TIMEOUT_MS",
    "heartbeat.interval.ms": "derived from SCHEDULERSTREAM_SESSION_TIMEOUT_MS",
}

# the properties whose values are secrets (redacted wherever a config is shown)
SECRET = re.compile(r"password|secret|jaas|\.pem$|key$|token", re.IGNORECASE)
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def property_name(variable_suffix: str) -> str:
    """``SECURITY_PROTOCOL`` -> ``security.protocol``; ``__`` stands for ``_`` (``LOG__LEVEL``)."""
    return variable_suffix.lower().replace("__", "\0").replace("_", ".").replace("\0", "_")


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2 : i + 6]):
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(char)
        i += 1
    return "".join(out)


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) with comments and blanks dropped and continuations joined."""
    lines: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.lstrip()
        if pending is None and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        continued = trailing % 2 == 1
        body = line[:-1] if continued else line
        pending = (pending[0], pending[1] + body) if pending else (number, body)
        if not continued:
            lines.append(pending)
            pending = None
    if pending is not None:
        lines.append(pending)
    return lines


def parse_properties(text: str, source: str = "properties") -> dict[str, tuple[int, str]]:
    """Java ``.properties`` syntax: ``key=value``, ``key: value`` or ``key value``, ``#``/``!``
    comments, backslash continuations and escapes. Returns key -> (line number, value)."""
    parsed: dict[str, tuple[int, str]] = {}
    for number, line in _logical_lines(text):
        match = re.match(r"((?:\\.|[^\s:=\\])+)\s*[:=]?\s*(.*)$", line, re.DOTALL)
        if match is None:
            raise ConfigError(f"{source}:{number}: not a 'key=value' line")
        parsed[_unescape(match.group(1))] = (number, _unescape(match.group(2)))
    return parsed


def _refuse_owned(name: str, where: str) -> None:
    if name in OWNED:
        raise ConfigError(
            f"{where}: the Kafka client property {name!r} is set by schedulerstream "
            f"({OWNED[name]}); remove it"
        )


def read_file(path: Path) -> dict[str, str]:
    """The properties of a ``client.properties`` file, owned ones refused."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"SCHEDULERSTREAM_KAFKA_CONFIG_FILE {path}: cannot read it ({exc.strerror})"
        ) from exc
    properties = {}
    for name, (number, value) in parse_properties(text, str(path)).items():
        _refuse_owned(name, f"{path}:{number}")
        properties[name] = value
    return properties


def from_variables(environ: Mapping[str, str], reserved: set[str]) -> dict[str, str]:
    """``SCHEDULERSTREAM_KAFKA_<PROPERTY>`` variables (but the ``reserved`` settings)."""
    properties = {}
    for variable, value in sorted(environ.items()):
        if variable.startswith(VARIABLE_PREFIX) and variable not in reserved:
            name = property_name(variable[len(VARIABLE_PREFIX) :])
            _refuse_owned(name, variable)
            properties[name] = value
    return properties


def client_properties(config_file: Path | None, variables: Mapping[str, str]) -> dict[str, str]:
    """The user's client properties: the file's, then the variables' (a variable wins)."""
    properties = read_file(config_file) if config_file is not None else {}
    for name, value in variables.items():
        _refuse_owned(name, f"Kafka client property {name!r}")
        properties[name] = value
    return properties


def redacted(config: Mapping[str, object]) -> dict[str, object]:
    """``config`` with secret values replaced, for showing a client configuration."""
    return {k: "[redacted]" if SECRET.search(k) else v for k, v in config.items()}


def java_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """The user's librdkafka properties as the Java client (the Connect worker) names them:
    ``sasl.username``/``sasl.password`` become ``sasl.jaas.config``, a PEM ``ssl.ca.location``
    becomes a PEM trust store; the rest pass as they are (Java ignores names it does not know).
    """
    java = {k: v for k, v in properties.items() if k not in _LIBRDKAFKA_ONLY}
    if "sasl.mechanisms" in properties:
        java["sasl.mechanism"] = java.pop("sasl.mechanisms")
    mechanism = java.get("sasl.mechanism", "GSSAPI").upper()
    username, password = java.pop("sasl.username", None), java.pop("sasl.password", None)
    if username is not None and password is not None:
        module = (
            "org.apache.kafka.common.security.plain.PlainLoginModule"
            if mechanism == "PLAIN"
            else "org.apache.kafka.common.security.scram.ScramLoginModule"
        )
        java["sasl.jaas.config"] = (
            f'{module} required username="{_jaas_escape(username)}" '
            f'password="{_jaas_escape(password)}";'
        )
    if "ssl.ca.location" in properties:
        java.pop("ssl.ca.location")
        java["ssl.truststore.type"] = "PEM"
        java["ssl.truststore.location"] = properties["ssl.ca.location"]
    if java.get("ssl.endpoint.identification.algorithm") == "none":
        java["ssl.endpoint.identification.algorithm"] = ""
    return java


_LIBRDKAFKA_ONLY = frozenset({"log_level", "debug", "enable.ssl.certificate.verification"})


def _jaas_escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')
