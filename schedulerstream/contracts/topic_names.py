"""The full names of the topics declared in ``topologies/topics.toml``, for one prefix.

``settings.topics.runs`` is ``"cron.runs"`` under the default prefix. Every ``[topics.*]`` of
topics.toml has one attribute here and every attribute one declaration: ``load_declarations``
refuses a file that disagrees, and ``tests/kafka/test_topic_names.py`` checks the shipped one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import lru_cache
from typing import Any

WORK_TEMPLATE = "work.{pool}"  # [templates.work]: one topic per worker pool, made on demand


def _declared(logical: str) -> Any:
    return field(init=False, metadata={"logical": logical})


@dataclass(frozen=True)
class TopicNames:
    """Each declared topic's full name: ``prefix`` + its name in topics.toml."""

    prefix: str
    schedules: str = _declared("schedules")
    commands: str = _declared("commands")
    tenants: str = _declared("tenants")
    scheduler_state: str = _declared("scheduler-state")
    runs: str = _declared("runs")
    retry_5s: str = _declared("retry.5s")
    retry_30s: str = _declared("retry.30s")
    retry_2m: str = _declared("retry.2m")
    retry_10m: str = _declared("retry.10m")
    retry_1h: str = _declared("retry.1h")
    dispatcher_state: str = _declared("dispatcher-state")
    worker_events: str = _declared("worker-events")
    attempts: str = _declared("attempts")
    rejected: str = _declared("rejected")
    run_state: str = _declared("run-state")
    projector_state: str = _declared("projector-state")

    def __post_init__(self) -> None:
        for f in fields(self):
            if "logical" in f.metadata:
                object.__setattr__(self, f.name, self.prefix + f.metadata["logical"])

    @property
    def work_prefix(self) -> str:
        """What every worker pool's topic name starts with."""
        return self.prefix + WORK_TEMPLATE.removesuffix("{pool}")

    def work(self, pool: str) -> str:
        """The topic of worker pool ``pool`` (the caller checks the pool name)."""
        return self.prefix + WORK_TEMPLATE.format(pool=pool)


DECLARED: tuple[str, ...] = tuple(
    f.metadata["logical"] for f in fields(TopicNames) if "logical" in f.metadata
)
"""The logical name of every declared topic, in attribute order."""


@lru_cache(maxsize=64)
def topic_names(prefix: str) -> TopicNames:
    """The names under ``prefix`` (one object per prefix)."""
    return TopicNames(prefix)


KAFKA_INTERNAL = "__"  # __consumer_offsets, __transaction_state, ...
CONNECT_PREFIX = "connect-"  # Kafka Connect's internal topics: {prefix}connect-configs, ...


@lru_cache(maxsize=4096)
def reserved_topic(topic: str, prefix: str) -> str | None:
    """Why a job may not name ``topic`` as a Kafka target in the deployment under ``prefix``
    (None when it may): it is Kafka's own (``__*``), one of the deployment's declared topics,
    or under its worker pools' or Kafka Connect's prefix. Other topics under ``prefix`` are
    the user's (tests put theirs there)."""
    if topic.startswith(KAFKA_INTERNAL):
        return f"topic {topic!r} is reserved: names starting with '__' are Kafka's own topics"
    names = topic_names(prefix)
    if topic in _declared_names(prefix):
        return f"topic {topic!r} is reserved: it is one of this deployment's topics"
    for start, what in ((names.work_prefix, "worker pools'"),
                        (prefix + CONNECT_PREFIX, "Kafka Connect's")):  # fmt: skip
        if topic.startswith(start):
            return f"topic {topic!r} is reserved: names starting with {start!r} are {what} topics"
    return None


@lru_cache(maxsize=64)
def _declared_names(prefix: str) -> frozenset[str]:
    names = topic_names(prefix)
    return frozenset(getattr(names, f.name) for f in fields(names) if "logical" in f.metadata)
