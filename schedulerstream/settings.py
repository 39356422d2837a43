"""The one frozen settings object, read from ``SCHEDULERSTREAM_*`` environment variables."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from schedulerstream import client_properties as kafka_properties
from schedulerstream.contracts.topic_names import TopicNames, topic_names
from schedulerstream.errors import ConfigError
from schedulerstream.limits import RecordLimits

ENV_PREFIX = "SCHEDULERSTREAM_"


class Settings(BaseSettings):
    """Process-wide configuration. Frozen: build a new one with ``model_copy(update=...)``."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, frozen=True, extra="forbid")

    bootstrap_servers: str = "127.0.0.1:9092"
    data_dir: Path = Path(".schedulerstream")
    instance_id: str = Field(default_factory=lambda: f"{os.uname().nodename}-{os.getpid()}")
    topic_prefix: str = "cron."
    partitions: int = Field(default=12, ge=1, le=10_000)
    replication_factor: int = Field(default=1, ge=1, le=16)
    allow_private_targets: bool = False
    # what one job may hold (schedulerstream/limits.py): every record derived from it must fit
    max_payload_bytes: int = Field(default=256 * 1024, ge=1, le=4 * 1024 * 1024)
    max_record_bytes: int = Field(default=1_000_000, ge=64 * 1024, le=100 * 1024 * 1024)
    kafka_version: str = "4.1.1"
    # Kafka client properties for every client (schedulerstream/client_properties.py): a Java
    # client.properties file, and SCHEDULERSTREAM_KAFKA_<PROPERTY> variables (read by
    # load_settings; never shown, not dumped: child processes read the same variables)
    kafka_config_file: Path | None = None
    kafka_properties: dict[str, str] = Field(default_factory=dict, repr=False, exclude=True)
    cache_dir: Path = Path.home() / ".cache" / "schedulerstream"
    # scheduler
    tick_ms: int = Field(default=50, ge=1, le=100)
    # emitted this early, runs wait in the dispatchers: longer than a scheduler takeover (2-3 s),
    # and half a second off a whole one: runs due at whole seconds (cron's) are emitted between
    # two instants, not during the dispatchers' sends of another (docs/performance-history.md,
    # session 24)
    lookahead_ms: int = Field(default=3500, ge=0, le=10_000)
    misfire_grace_ms: int = Field(default=60_000, ge=0)
    burst_lead_ms: int = Field(default=10_000, ge=0, le=60_000)
    burst_min_interval_ms: int = Field(default=60_000, ge=1000)
    due_batch: int = Field(default=5000, ge=1)
    commit_interval_ms: int = Field(default=100, ge=1, le=60_000)
    # each job's definition inside its job record, as schedulers before the def/ key wrote
    # it (they read no reference): set for the first rolling restart of an upgrade from them,
    # then unset for a second (README.md, "Upgrading")
    scheduler_inline_definitions: bool = False
    # catch_up's late runs emitted at once, as schedulers before session 37 did (they read a
    # queued catch-up as a Backfill command): set for the first rolling restart of an upgrade
    # from them, then unset for a second (README.md, "Upgrading")
    scheduler_inline_catch_up: bool = False
    backfill_chunk: int = Field(default=1000, ge=1, le=1_000_000)
    # backfill runs a second a partition, all tenants together, split evenly between them: a
    # backfill of millions of runs must not bury the runs due now (scheduler/backfills.py)
    backfill_rate: float = Field(default=50.0, gt=0, le=1_000_000)
    max_catch_up_instants: int = Field(default=10_000, ge=1)
    # failure detection: a member silent this long leaves the group (README.md, "Failover")
    session_timeout_ms: int = Field(default=2000, ge=1000)
    num_standby_replicas: int = Field(default=1, ge=0)  # warm copies of each partition
    group_protocol: str = "consumer"
    # dispatcher (defaults; per-tenant overrides come from tenant records)
    dispatch_concurrency: int = Field(default=200, ge=1)
    tenant_concurrency: int = Field(default=50, ge=1)
    tenant_rate_per_s: float = Field(default=1000.0, gt=0)
    host_concurrency: int = Field(default=100, ge=1)  # attempts in flight per target host
    # committed HTTP/SQS starts that may wait for a slot, per slot of each limit: a slot that
    # frees starts one at once, with no commit round trip (0: every start waits for a commit);
    # at most this many: a host gets as many as its mean attempt time lets start in time
    dispatch_prefetch: int = Field(default=32, ge=0, le=64)
    # an HTTP/SQS run due within this many ms starts (is committed) ahead and the delivery loop
    # sends it at its due time, so the due instant waits for no tick and no commit (0: at due;
    # at most a quarter of the session timeout)
    dispatch_arm_ms: int = Field(default=300, ge=0, le=1000)
    # where HTTP/SQS attempts are sent from: "thread" (an event loop beside the processor's,
    # sharing its GIL) or "process" (a child process of the dispatcher: a core of its own)
    dispatch_delivery: str = "process"
    worker_lease_ms: int = Field(default=30_000, ge=100, le=3_600_000)  # worker-pool lease
    # worker pools whose work topic (P partitions each, never deleted) a dispatcher makes: a
    # job naming a new pool past it fails, refused (contracts/work_pools.py)
    max_work_pools: int = Field(default=100, ge=1, le=100_000)
    database_url: str = ""
    # the scheduler's, dispatcher's and projector's /metrics endpoint (0: none)
    metrics_port: int = Field(default=0, ge=0, le=65535)
    metrics_host: str = "0.0.0.0"
    # net allocations between young-generation collections of Python's cyclic garbage collector
    # in the processors and the delivery child (gc_policy.py; 0: Python's 700)
    gc_young_threshold: int = Field(default=10_000, ge=0, le=10_000_000)
    # the web console (/ui): a key that reads every tenant's jobs and runs (empty: none)
    operator_key: str = Field(default="", repr=False)

    @field_validator("topic_prefix")
    @classmethod
    def _prefix_is_topic_safe(cls, value: str) -> str:
        if not all(c.isalnum() or c in "._-" for c in value):
            raise ValueError("may hold only letters, digits, '.', '_' and '-'")
        return value

    @field_validator("group_protocol")
    @classmethod
    def _known_protocol(cls, value: str) -> str:
        if value not in ("consumer", "classic"):
            raise ValueError("must be 'consumer' (KIP-848) or 'classic' (cooperative-sticky)")
        return value

    @field_validator("dispatch_delivery")
    @classmethod
    def _known_delivery(cls, value: str) -> str:
        if value not in ("thread", "process"):
            raise ValueError("must be 'thread' or 'process'")
        return value

    def record_limits(self) -> RecordLimits:
        return RecordLimits(self.max_payload_bytes, self.max_record_bytes)

    def client_properties(self) -> dict[str, str]:
        """The user's Kafka client properties: the file's, then the variables'."""
        return kafka_properties.client_properties(self.kafka_config_file, self.kafka_properties)

    @property
    def topics(self) -> TopicNames:
        """The full names of the topics declared in topologies/topics.toml."""
        return topic_names(self.topic_prefix)

    def topic(self, name: str) -> str:
        """The full name of a topic topics.toml does not declare (Connect's internal ones, a
        test topology's own); a declared topic's name is an attribute of ``topics``."""
        return f"{self.topic_prefix}{name}"


def _setting_variables() -> set[str]:
    return {f"{ENV_PREFIX}{name.upper()}" for name in Settings.model_fields}


def _unknown_variables() -> list[str]:
    known = _setting_variables()
    return sorted(
        k
        for k in os.environ
        if k.startswith(ENV_PREFIX)
        and k not in known
        and not k.startswith(kafka_properties.VARIABLE_PREFIX)
    )


def load_settings(**overrides: object) -> Settings:
    """Read settings from the environment; raise ConfigError naming the bad variable."""
    unknown = _unknown_variables()
    if unknown:
        raise ConfigError(f"unknown setting {unknown[0]} (known: see schedulerstream/settings.py)")
    if "kafka_properties" not in overrides:
        overrides["kafka_properties"] = kafka_properties.from_variables(
            os.environ, _setting_variables()
        )
    try:
        settings = Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors()[0]
        name = str(first["loc"][0]) if first["loc"] else "?"
        raise ConfigError(f"invalid {ENV_PREFIX}{name.upper()}: {first['msg']}") from exc
    settings.client_properties()  # a bad file or an owned property fails here, at start
    return settings


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Settings of this process, read once."""
    return load_settings()
