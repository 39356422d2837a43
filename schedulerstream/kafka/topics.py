"""The topic layout: declared in ``topologies/topics.toml``, created and verified on a cluster.

A topic's full name is ``settings.topics.runs`` (contracts/topic_names.py, checked against the
declarations here); ``spec("runs", settings)`` adds its partitions and configs. ``apply(settings)``
makes the cluster match the declarations or refuses (``TopologyError``) before changing
anything when co-partitioning or compaction would be broken.
"""

from __future__ import annotations

import re
import threading
import time
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from confluent_kafka import KafkaError, KafkaException

# confluent_kafka.admin documents these names but re-exports them implicitly (mypy strict).
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from schedulerstream.contracts.topic_names import DECLARED, WORK_TEMPLATE
from schedulerstream.contracts.work_pools import cap_refusal, work_pools
from schedulerstream.errors import BrokerError, TooManyWorkPools, TopologyError, ValidationError
from schedulerstream.kafka.clients import base_config
from schedulerstream.resources import topologies_dir
from schedulerstream.settings import Settings

TOPOLOGY_PATH = topologies_dir() / "topics.toml"
POOL_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")
P = "P"
COMPACT = "compact"
DELETE = "delete"
_MAKING_WORK_TOPICS = threading.Lock()  # a capped ensure_work_topic's count and create
_MADE_WORK_TOPICS: set[str] = set()  # work topics this process made, not shown yet


@dataclass(frozen=True)
class TopicDeclaration:
    """One entry of ``topics.toml``, independent of settings (``partitions=None`` means P)."""

    logical: str
    key: str
    partitions: int | None
    co_partitioned: bool
    configs: Mapping[str, str] = field(hash=False)
    delay_ms: int | None = None


@dataclass(frozen=True)
class TopicDeclarations:
    """All declarations: the fixed topics in file order and the worker-pool template."""

    topics: tuple[TopicDeclaration, ...]
    work: TopicDeclaration
    source: Path


@dataclass(frozen=True)
class TopicSpec:
    """A declared topic resolved against settings: full name and partition count."""

    logical: str
    name: str
    partitions: int
    co_partitioned: bool
    configs: Mapping[str, str] = field(hash=False)
    key: str = ""
    delay_ms: int | None = None

    @property
    def cleanup_policy(self) -> str:
        return self.configs.get("cleanup.policy", DELETE)

    @property
    def compacted(self) -> bool:
        return COMPACT in _policy_set(self.cleanup_policy)

    @property
    def retention_ms(self) -> int:
        return int(self.configs.get("retention.ms", "604800000"))


@dataclass(frozen=True)
class TopicRow:
    """One line of ``describe``: declared vs actual (``actual_*`` is None when missing)."""

    name: str
    logical: str
    partitions: int
    actual_partitions: int | None
    cleanup: str
    actual_cleanup: str | None
    retention_ms: int
    actual_retention_ms: int | None
    co_partitioned: bool
    status: str  # "present", "missing" or "mismatch"
    problems: tuple[str, ...] = ()


# -- declarations ----------------------------------------------------------------------------


def _config_value(value: object, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)
    raise TopologyError(f"{where}: config values must be strings or numbers, got {value!r}")


def _declaration(
    logical: str, raw: Mapping[str, Any], defaults: Mapping[str, str], source: Path
) -> TopicDeclaration:
    where = f"{source.name}: {logical}"
    unknown = set(raw) - {"key", "partitions", "co_partitioned", "config", "delay_ms", "name"}
    if unknown:
        raise TopologyError(f"{where}: unknown field(s) {sorted(unknown)}")
    partitions = raw.get("partitions")
    if partitions == P:
        count = None
    elif isinstance(partitions, int) and not isinstance(partitions, bool) and partitions >= 1:
        count = partitions
    else:
        raise TopologyError(f'{where}: partitions must be "P" or a positive integer')
    co_partitioned = raw.get("co_partitioned")
    if not isinstance(co_partitioned, bool):
        raise TopologyError(f"{where}: co_partitioned must be true or false")
    if co_partitioned and count is not None:
        raise TopologyError(f'{where}: a co-partitioned topic must have partitions = "P"')
    config_raw = raw.get("config", {})
    if not isinstance(config_raw, dict):
        raise TopologyError(f"{where}: config must be a table")
    configs = dict(defaults)
    configs.update({str(k): _config_value(v, where) for k, v in config_raw.items()})
    policy = _policy_set(configs.get("cleanup.policy", ""))
    if not policy or not policy <= {COMPACT, DELETE}:
        raise TopologyError(f"{where}: cleanup.policy must be compact and/or delete")
    delay = raw.get("delay_ms")
    if delay is not None and (not isinstance(delay, int) or delay <= 0):
        raise TopologyError(f"{where}: delay_ms must be a positive integer")
    return TopicDeclaration(
        logical=logical,
        key=str(raw.get("key", "")),
        partitions=count,
        co_partitioned=co_partitioned,
        configs=MappingProxyType(configs),
        delay_ms=delay,
    )


def _check_names(declared: set[str], path: Path) -> None:
    """The declarations must be exactly the topics the code names (contracts/topic_names.py)."""
    unnamed, undeclared = sorted(declared - set(DECLARED)), sorted(set(DECLARED) - declared)
    if unnamed or undeclared:
        raise TopologyError(
            f"{path.name} disagrees with TopicNames: declared but not named {unnamed}, "
            f"named but not declared {undeclared}"
        )


@lru_cache(maxsize=4)
def load_declarations(path: Path = TOPOLOGY_PATH) -> TopicDeclarations:
    """Parse and check ``topics.toml`` (cached per path)."""
    try:
        with path.open("rb") as file:
            document = tomllib.load(file)
    except FileNotFoundError as exc:
        raise TopologyError(f"topic declarations {path} are missing (run from a checkout)") from exc
    except tomllib.TOMLDecodeError as exc:
        raise TopologyError(f"{path}: {exc}") from exc
    if document.get("version") != 1:
        raise TopologyError(f"{path.name}: expected version = 1")
    defaults_raw = document.get("defaults", {}).get("config", {})
    defaults = {str(k): _config_value(v, f"{path.name}: defaults") for k, v in defaults_raw.items()}
    topics = tuple(
        _declaration(logical, raw, defaults, path)
        for logical, raw in document.get("topics", {}).items()
    )
    if not topics:
        raise TopologyError(f"{path.name}: no [topics.*] declared")
    _check_names({t.logical for t in topics}, path)
    template = document.get("templates", {}).get("work")
    if not isinstance(template, dict) or template.get("name") != WORK_TEMPLATE:
        raise TopologyError(
            f'{path.name}: [templates.work] with name = "{WORK_TEMPLATE}" is required'
        )
    work = _declaration(WORK_TEMPLATE, template, defaults, path)
    return TopicDeclarations(topics=topics, work=work, source=path)


def _resolve(declaration: TopicDeclaration, logical: str, prefix: str, p: int) -> TopicSpec:
    return TopicSpec(
        logical=logical,
        name=f"{prefix}{logical}",
        partitions=declaration.partitions or p,
        co_partitioned=declaration.co_partitioned,
        configs=declaration.configs,
        key=declaration.key,
        delay_ms=declaration.delay_ms,
    )


@lru_cache(maxsize=64)
def _resolved(prefix: str, p: int, path: Path) -> dict[str, TopicSpec]:
    declared = load_declarations(path)
    return {d.logical: _resolve(d, d.logical, prefix, p) for d in declared.topics}


def _specs(settings: Settings, path: Path) -> dict[str, TopicSpec]:
    return _resolved(settings.topic_prefix, settings.partitions, path)


def specs(settings: Settings, path: Path = TOPOLOGY_PATH) -> tuple[TopicSpec, ...]:
    """Every declared (fixed) topic, in declaration order."""
    return tuple(_specs(settings, path).values())


def spec(logical: str, settings: Settings, path: Path = TOPOLOGY_PATH) -> TopicSpec:
    """The declared topic ``logical`` (e.g. ``"runs"``) resolved against ``settings``."""
    try:
        return _specs(settings, path)[logical]
    except KeyError:
        raise TopologyError(f"no topic {logical!r} is declared in {path.name}") from None


def topic_names(settings: Settings, path: Path = TOPOLOGY_PATH) -> dict[str, str]:
    """Logical name → full topic name, for every declared topic."""
    return {logical: s.name for logical, s in _specs(settings, path).items()}


def co_partitioned_specs(settings: Settings, path: Path = TOPOLOGY_PATH) -> tuple[TopicSpec, ...]:
    """The topics that share P partitions and murmur2(job key) placement."""
    return tuple(s for s in specs(settings, path) if s.co_partitioned)


def retry_tiers(settings: Settings, path: Path = TOPOLOGY_PATH) -> tuple[TopicSpec, ...]:
    """The retry delay topics, shortest ``delay_ms`` first."""
    tiers = [s for s in specs(settings, path) if s.delay_ms is not None]
    return tuple(sorted(tiers, key=lambda s: s.delay_ms or 0))


def work_topic_spec(settings: Settings, pool: str, path: Path = TOPOLOGY_PATH) -> TopicSpec:
    """The ``work.<pool>`` topic of a worker pool, from ``[templates.work]``."""
    if not POOL_NAME.fullmatch(pool):
        raise ValidationError("pool", f"{pool!r} must match [a-z0-9][a-z0-9._-]{{0,62}}")
    work = load_declarations(path).work
    logical = WORK_TEMPLATE.format(pool=pool)
    return _resolve(work, logical, settings.topic_prefix, settings.partitions)


# -- cluster inspection ----------------------------------------------------------------------


def _policy_set(policy: str) -> frozenset[str]:
    return frozenset(p.strip() for p in policy.split(",") if p.strip())


def _admin(settings: Settings) -> AdminClient:
    return AdminClient(base_config(settings))


def _kafka_error(exc: BaseException) -> KafkaError | None:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def _partition_counts(admin: AdminClient, settings: Settings, timeout: float) -> dict[str, int]:
    """Topic name → partition count for every topic on the cluster."""
    try:
        metadata = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise BrokerError(f"no broker answered at {settings.bootstrap_servers}: {exc}") from exc
    return {
        name: len(topic.partitions)
        for name, topic in metadata.topics.items()
        if topic.error is None or topic.error.code() == KafkaError.NO_ERROR
    }


def _topic_configs(
    admin: AdminClient, names: Iterable[str], timeout: float
) -> dict[str, dict[str, str]]:
    """Topic name → its effective configs."""
    resources = [ConfigResource(ResourceType.TOPIC, name) for name in names]
    if not resources:
        return {}
    futures = admin.describe_configs(resources, request_timeout=timeout)
    result: dict[str, dict[str, str]] = {}
    for resource, future in futures.items():
        try:
            entries: dict[str, ConfigEntry] = future.result(timeout=timeout)
        except KafkaException as exc:
            raise TopologyError(
                f"could not describe the configs of {resource.name}: {exc}"
            ) from exc
        result[resource.name] = {k: e.value for k, e in entries.items() if e.value is not None}
    return result


@dataclass(frozen=True)
class _Verdict:
    problems: tuple[str, ...]
    drift: Mapping[str, tuple[str, str]]  # config → (actual, declared)
    notes: tuple[str, ...]


def _verdict(
    topic: TopicSpec, actual_partitions: int, actual_configs: Mapping[str, str], settings: Settings
) -> _Verdict:
    problems: list[str] = []
    notes: list[str] = []
    if topic.co_partitioned and actual_partitions != settings.partitions:
        problems.append(
            f"{topic.name} has {actual_partitions} partitions, not P={settings.partitions}"
        )
    elif actual_partitions != topic.partitions:
        notes.append(f"has {actual_partitions} partitions, declared {topic.partitions}")
    actual_policy = actual_configs.get("cleanup.policy", DELETE)
    if _policy_set(actual_policy) != _policy_set(topic.cleanup_policy):
        what = "is not compacted" if topic.compacted else "has a different cleanup.policy"
        problems.append(
            f"{topic.name} {what}: cleanup.policy={actual_policy}, declared {topic.cleanup_policy}"
        )
    drift = {
        key: (actual_configs.get(key, "(unset)"), value)
        for key, value in topic.configs.items()
        if key != "cleanup.policy" and actual_configs.get(key) != value
    }
    return _Verdict(tuple(problems), MappingProxyType(drift), tuple(notes))


def wait_for_topics(settings: Settings, names: Iterable[str], timeout: float = 30.0) -> None:
    """Block until every topic in ``names`` has a leader for each partition in metadata."""
    wanted = set(names)
    if not wanted:
        return
    admin = _admin(settings)
    deadline = time.monotonic() + timeout
    while True:
        try:
            metadata = admin.list_topics(timeout=max(0.5, min(5.0, deadline - time.monotonic())))
        except KafkaException:
            metadata = None
        if metadata is not None:
            ready = {
                name
                for name in wanted
                if (topic := metadata.topics.get(name)) is not None
                and topic.error is None
                and topic.partitions
                and all(p.leader >= 0 and p.error is None for p in topic.partitions.values())
            }
            wanted -= ready
            if not wanted:
                return
        if time.monotonic() >= deadline:
            raise TopologyError(
                f"topics not ready after {timeout:.0f}s: {', '.join(sorted(wanted))}"
            )
        time.sleep(0.1)


def _create(
    admin: AdminClient, settings: Settings, topics: list[TopicSpec], timeout: float
) -> set[str]:
    """Create ``topics``; return the names another client created first (a race)."""
    if not topics:
        return set()
    new = [
        NewTopic(
            t.name,
            num_partitions=t.partitions,
            replication_factor=settings.replication_factor,
            config=dict(t.configs),
        )
        for t in topics
    ]
    futures = admin.create_topics(new, operation_timeout=timeout, request_timeout=timeout)
    raced: set[str] = set()
    failures: list[str] = []
    for name, future in futures.items():
        try:
            future.result(timeout=timeout + 5)
        except KafkaException as exc:
            error = _kafka_error(exc)
            if error is not None and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                raced.add(name)
            else:
                failures.append(f"{name}: {error.str() if error else exc}")
    if failures:
        raise TopologyError("could not create topics: " + "; ".join(failures))
    return raced


def _alter(
    admin: AdminClient, drifts: Mapping[str, Mapping[str, tuple[str, str]]], timeout: float
) -> None:
    resources = [
        ConfigResource(
            ResourceType.TOPIC,
            name,
            incremental_configs=[
                ConfigEntry(key, declared, incremental_operation=AlterConfigOpType.SET)
                for key, (_, declared) in drift.items()
            ],
        )
        for name, drift in drifts.items()
        if drift
    ]
    if not resources:
        return
    futures = admin.incremental_alter_configs(resources, request_timeout=timeout)
    for resource, future in futures.items():
        try:
            future.result(timeout=timeout)
        except KafkaException as exc:
            raise TopologyError(f"could not update the configs of {resource.name}: {exc}") from exc
    # The controller accepted the change; wait until the broker serves it, so what follows
    # (describe, another apply, a processor starting) sees the declared values.
    deadline = time.monotonic() + timeout
    while True:
        actual = _topic_configs(admin, [r.name for r in resources], timeout)
        stale = sorted(
            name
            for name, drift in drifts.items()
            if any(
                actual.get(name, {}).get(key) != declared for key, (_, declared) in drift.items()
            )
        )
        if not stale:
            return
        if time.monotonic() >= deadline:
            raise TopologyError(f"config changes not visible after {timeout:.0f}s: {stale}")
        time.sleep(0.1)


def _check_existing(
    admin: AdminClient,
    settings: Settings,
    declared: list[TopicSpec],
    cluster: Mapping[str, int],
    timeout: float,
) -> dict[str, _Verdict]:
    present = [t for t in declared if t.name in cluster]
    configs = _topic_configs(admin, (t.name for t in present), timeout)
    return {
        t.name: _verdict(t, cluster[t.name], configs.get(t.name, {}), settings) for t in present
    }


def _refuse(
    verdicts: Mapping[str, _Verdict],
    settings: Settings,
    declared: Iterable[TopicSpec],
    cluster: Mapping[str, int],
    untouched: bool = True,
) -> None:
    """Raise one TopologyError listing every problem, with a hint for partition mismatches."""
    problems = [p for v in verdicts.values() for p in v.problems]
    if not problems:
        return
    lines = [
        "refusing to change the cluster" + (" (nothing was changed):" if untouched else ":"),
        *(f"  - {p}" for p in problems),
    ]
    counts = sorted({cluster[t.name] for t in declared if t.co_partitioned and t.name in cluster})
    if counts != [settings.partitions] and counts:
        lines.append(
            f"co-partitioned topics must all have P={settings.partitions} partitions "
            f"(SCHEDULERSTREAM_PARTITIONS); on the cluster they have {', '.join(map(str, counts))}"
        )
        if len(counts) == 1:
            lines.append(
                f"to use these topics as they are, set SCHEDULERSTREAM_PARTITIONS={counts[0]}"
            )
    raise TopologyError("\n".join(lines))


# -- commands ---------------------------------------------------------------------------------


def apply(settings: Settings, timeout: float = 30.0, path: Path = TOPOLOGY_PATH) -> list[str]:
    """Create missing topics and align configs; refuse before any change if layout is broken.

    Returns one report line per topic: ``created``, ``ok`` or ``updated (...)``.
    """
    declared = list(specs(settings, path))
    admin = _admin(settings)
    cluster = _partition_counts(admin, settings, timeout)
    verdicts = _check_existing(admin, settings, declared, cluster, timeout)
    _refuse(verdicts, settings, declared, cluster)

    missing = [t for t in declared if t.name not in cluster]
    raced = _create(admin, settings, missing, timeout)
    wait_for_topics(settings, [t.name for t in missing], timeout)
    if raced:
        # Another apply created these between our check and our create: verify them too.
        cluster = _partition_counts(admin, settings, timeout)
        raced_specs = [t for t in declared if t.name in raced]
        raced_verdicts = _check_existing(admin, settings, raced_specs, cluster, timeout)
        _refuse(
            raced_verdicts,
            settings,
            declared,
            cluster,
            untouched=raced == {t.name for t in missing},
        )
        verdicts = {**verdicts, **raced_verdicts}
    _alter(admin, {name: v.drift for name, v in verdicts.items()}, timeout)

    width = max(len(t.name) for t in declared)
    lines = []
    for t in declared:
        verdict = verdicts.get(t.name)
        if verdict is None:
            noun = "partition" if t.partitions == 1 else "partitions"
            status = f"created ({t.partitions} {noun}, {t.cleanup_policy})"
        elif verdict.drift:
            changes = ", ".join(f"{k}: {a} -> {d}" for k, (a, d) in verdict.drift.items())
            status = f"updated ({changes})"
        else:
            status = "ok"
        if verdict is not None and verdict.notes:
            status += f" [{'; '.join(verdict.notes)}]"
        lines.append(f"{t.name:<{width}}  {status}")
    return lines


def ensure_work_topic(
    settings: Settings,
    pool: str,
    timeout: float = 30.0,
    path: Path = TOPOLOGY_PATH,
    *,
    cap: int | None = None,
) -> TopicSpec:
    """Create the ``work.<pool>`` topic if missing (any partition count is accepted).

    With ``cap`` (the dispatcher's ``max_work_pools``) a missing topic is made only while the
    cluster holds fewer work topics; past it, TooManyWorkPools. This process makes one at a
    time, so its threads do not pass the cap together (dispatcher processes making new pools
    at the same moment may, by one each)."""
    topic = work_topic_spec(settings, pool, path)
    admin = _admin(settings)
    try:
        metadata = admin.list_topics(topic=topic.name, timeout=timeout)
    except KafkaException as exc:
        raise BrokerError(f"no broker answered at {settings.bootstrap_servers}: {exc}") from exc
    existing = metadata.topics.get(topic.name)
    if existing is not None and existing.error is None and existing.partitions:
        configs = _topic_configs(admin, [topic.name], timeout).get(topic.name, {})
        if COMPACT in _policy_set(configs.get("cleanup.policy", DELETE)):
            raise TopologyError(
                f"{topic.name} is compacted; work topics must be cleanup.policy=delete"
            )
        return topic
    if cap is None:
        _create(admin, settings, [topic], timeout)
        wait_for_topics(settings, [topic.name], timeout)
        return topic
    with _MAKING_WORK_TOPICS:  # counted and made before another is counted
        cluster = set(_partition_counts(admin, settings, timeout)) | _MADE_WORK_TOPICS
        pools = work_pools(cluster, settings.topics.work_prefix)
        refused = cap_refusal(pool, pools, cap)
        if refused is not None:
            raise TooManyWorkPools(refused, pools, cap)
        _create(admin, settings, [topic], timeout)
        _MADE_WORK_TOPICS.add(topic.name)  # counted even before the metadata shows it
    wait_for_topics(settings, [topic.name], timeout)  # not under the lock: other pools go on
    with _MAKING_WORK_TOPICS:
        _MADE_WORK_TOPICS.discard(topic.name)  # the metadata shows it now
    return topic


def describe(
    settings: Settings, timeout: float = 10.0, path: Path = TOPOLOGY_PATH
) -> list[TopicRow]:
    """Declared vs actual for every declared topic, then any ``work.*`` topics on the cluster."""
    declared = list(specs(settings, path))
    admin = _admin(settings)
    cluster = _partition_counts(admin, settings, timeout)
    work_prefix = settings.topics.work_prefix
    for name in sorted(cluster):
        if name.startswith(work_prefix):
            pool = name[len(work_prefix) :]
            if POOL_NAME.fullmatch(pool):
                declared.append(work_topic_spec(settings, pool, path))
    present = [t for t in declared if t.name in cluster]
    configs = _topic_configs(admin, (t.name for t in present), timeout)
    rows = []
    for t in declared:
        actual = configs.get(t.name, {})
        count = cluster.get(t.name)
        problems: tuple[str, ...] = ()
        if count is not None and t.name.startswith(work_prefix):
            # Any partition count is fine for a worker pool; only compaction is wrong.
            if COMPACT in _policy_set(actual.get("cleanup.policy", DELETE)):
                problems = (f"{t.name} is compacted",)
        elif count is not None:
            problems = _verdict(t, count, actual, settings).problems
        retention = actual.get("retention.ms")
        status = "missing" if count is None else "mismatch" if problems else "present"
        rows.append(
            TopicRow(
                name=t.name,
                logical=t.logical,
                partitions=t.partitions,
                actual_partitions=count,
                cleanup=t.cleanup_policy,
                actual_cleanup=actual.get("cleanup.policy"),
                retention_ms=t.retention_ms,
                actual_retention_ms=int(retention) if retention is not None else None,
                co_partitioned=t.co_partitioned,
                status=status,
                problems=problems,
            )
        )
    return rows
