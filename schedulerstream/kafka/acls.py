"""The minimal ACLs of each component, from the topics its topology reads and writes, its group
and its transactional ids (DESIGN.md §2, schedulerstream/runtime/processor.py), all under
``SCHEDULERSTREAM_TOPIC_PREFIX``. One table, used by ``acls plan|apply`` and by the startup
access probe (schedulerstream/kafka/access.py).

Kafka implies Describe from Read, Write, Delete and Alter, so it is not listed; the idempotent
producer needs no cluster ACL since Kafka 3.0 (KIP-679, Write on a topic is enough).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from schedulerstream.errors import ValidationError
from schedulerstream.kafka.topics import POOL_NAME, retry_tiers
from schedulerstream.settings import Settings

COMPONENTS = ("scheduler", "dispatcher", "projector", "api", "worker", "connect")
LITERAL, PREFIXED = "LITERAL", "PREFIXED"
TOPIC, GROUP, TRANSACTIONAL_ID = "Topic", "Group", "TransactionalId"


@dataclass(frozen=True, order=True)
class Need:
    """One operation a component needs on a resource (a literal name or a name prefix)."""

    resource: str  # Topic | Group | TransactionalId
    pattern: str  # LITERAL | PREFIXED
    name: str
    operation: str  # Read | Write | Create | DescribeConfigs | Describe

    def describe(self) -> str:
        kind = "names starting with " if self.pattern == PREFIXED else ""
        return f"{self.operation} on {self.resource} {kind}{self.name}"


@dataclass(frozen=True, order=True)
class Grant:
    """A Need given to a principal: one ACL (ALLOW, any host)."""

    component: str
    principal: str
    need: Need


def _topics(names: Iterable[str], *operations: str, pattern: str = LITERAL) -> list[Need]:
    return [Need(TOPIC, pattern, name, op) for name in names for op in operations]


def _processor(
    settings: Settings, name: str, inputs: Sequence[str], outputs: Sequence[str], changelog: str
) -> list[Need]:
    """A runtime Processor: group ``{prefix}{name}``, transactional ids
    ``{prefix}{name}-{instance}``, its changelog, and the rejected topic. Its restore consumers
    (group id ``{prefix}{name}-restore``) only assign partitions at explicit offsets and never
    reach the group coordinator: they need no group ACL (tests/secure restores with none).
    AlterConfigs on the group sets its session timeout (runtime/membership.py); Write on the
    transactional-id prefix also lets a member fence a departed member's id."""
    group = f"{settings.topic_prefix}{name}"
    return [
        *_topics(inputs, "Read"),
        # DescribeConfigs: a restore reads the changelog's delete.retention.ms (a store older
        # than its tombstones is rebuilt cold, runtime/changelog.py)
        *_topics([changelog], "Read", "Write", "DescribeConfigs"),
        *_topics([*outputs, settings.topics.rejected], "Write"),
        Need(GROUP, LITERAL, group, "Read"),
        Need(GROUP, LITERAL, group, "AlterConfigs"),
        Need(TRANSACTIONAL_ID, PREFIXED, f"{group}-", "Write"),
    ]


def _tenants_reader(settings: Settings) -> list[Need]:
    """Following cron.tenants (schedulerstream/tenants/follower.py): a group-less consumer whose
    throwaway group id ``schedulerstream-tenants-<random>`` is not under the topic prefix; the
    client still looks up its coordinator, which takes Describe on the group."""
    return [
        *_topics([settings.topics.tenants], "Read"),
        Need(GROUP, PREFIXED, "schedulerstream-tenants-", "Describe"),
    ]


def needs(
    component: str,
    settings: Settings,
    pools: Sequence[str] = (),
    target_topics: Sequence[str] = (),
) -> list[Need]:
    """What ``component`` needs. ``pools``: the worker pools (none: every pool, by prefix);
    ``target_topics``: the dispatcher's Kafka target topics (``name*`` for a prefix)."""
    t = settings.topics
    tiers = [tier.name for tier in retry_tiers(settings)]
    work = t.work_prefix
    if component == "scheduler":
        found = _processor(settings, "scheduler", (t.schedules, t.commands),
                           (t.runs, t.attempts, t.schedules), t.scheduler_state)  # fmt: skip
    elif component == "dispatcher":
        found = _processor(settings, "dispatcher", (t.runs, t.commands, t.worker_events, *tiers),
                           (t.attempts, t.commands, *tiers), t.dispatcher_state)  # fmt: skip
        found += _tenants_reader(settings)
        # work.<pool> topics are created on a pool's first job (kafka/topics.ensure_work_topic)
        found += _topics([work], "Create", "DescribeConfigs", "Write", pattern=PREFIXED)
        for topic in target_topics:
            prefix = topic.endswith("*")
            found += _topics([topic.rstrip("*")], "Write", pattern=PREFIXED if prefix else LITERAL)
    elif component == "projector":
        found = _processor(settings, "projector", (t.schedules, t.runs, t.attempts),
                           (t.run_state,), t.projector_state)  # fmt: skip
    elif component == "api":
        found = [
            *_topics([t.schedules, t.commands], "Write"),
            *_tenants_reader(settings),
            # the worker pools' topics in metadata: a job naming a new pool past the cap is
            # refused at once (api/pools.py)
            *_topics([work], "Describe", pattern=PREFIXED),
        ]
    elif component == "worker":
        found = _topics([t.worker_events], "Write")
        for pool in pools:
            if not POOL_NAME.fullmatch(pool):
                raise ValidationError("pool", f"{pool!r} must match [a-z0-9][a-z0-9._-]{{0,62}}")
        if pools:
            found += _topics([f"{work}{p}" for p in pools], "Read", "Create", "DescribeConfigs")
            found += [Need(GROUP, LITERAL, f"{work}{p}{s}", "Read")
                      for p in pools for s in ("", "-cancels")]  # fmt: skip
        else:
            found += _topics([work], "Read", "Create", "DescribeConfigs", pattern=PREFIXED)
            found.append(Need(GROUP, PREFIXED, work, "Read"))
    elif component == "connect":
        internal = settings.topic("connect-")
        found = [
            Need(GROUP, LITERAL, settings.topic("connect"), "Read"),
            *_topics([internal], "Read", "Write", "Create", "DescribeConfigs", pattern=PREFIXED),
            *_topics([t.attempts, t.run_state], "Read"),  # the sinks of topologies/connect
            Need(GROUP, PREFIXED, f"connect-{settings.topic_prefix}", "Read"),  # sink groups
        ]
    else:
        raise ValidationError("component", f"{component!r} is not one of {', '.join(COMPONENTS)}")
    return sorted(set(found))


def plan(
    settings: Settings,
    principals: Mapping[str, str],
    pools: Sequence[str] = (),
    target_topics: Sequence[str] = (),
) -> list[Grant]:
    """Every ACL of the components in ``principals`` (component -> ``User:name``)."""
    grants = []
    for component, principal in principals.items():
        if ":" not in principal:
            raise ValidationError("principal", f"{principal!r} must be TYPE:NAME, as User:alice")
        for need in needs(component, settings, pools, target_topics):
            grants.append(Grant(component, principal, need))
    return grants


def table(grants: Sequence[Grant]) -> str:
    """The plan as an aligned text table."""
    header = ("COMPONENT", "PRINCIPAL", "RESOURCE", "PATTERN", "NAME", "OPERATION")
    rows = [header] + [
        (g.component, g.principal, g.need.resource, g.need.pattern, g.need.name, g.need.operation)
        for g in grants
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def apply(settings: Settings, grants: Sequence[Grant], timeout: float = 30.0) -> int:
    """Create the ACLs of ``grants`` (existing ones are kept as they are); return how many.
    The client must be allowed to Alter the cluster (an admin)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    from schedulerstream.errors import BrokerError
    from schedulerstream.kafka.clients import base_config

    resource = {TOPIC: ResourceType.TOPIC, GROUP: ResourceType.GROUP,
                TRANSACTIONAL_ID: ResourceType.TRANSACTIONAL_ID}  # fmt: skip
    operation = {"Read": AclOperation.READ, "Write": AclOperation.WRITE,
                 "Create": AclOperation.CREATE, "Describe": AclOperation.DESCRIBE,
                 "DescribeConfigs": AclOperation.DESCRIBE_CONFIGS,
                 "AlterConfigs": AclOperation.ALTER_CONFIGS}  # fmt: skip
    bindings = [
        AclBinding(
            resource[g.need.resource],
            g.need.name,
            ResourcePatternType[g.need.pattern],
            g.principal,
            "*",
            operation[g.need.operation],
            AclPermissionType.ALLOW,
        )
        for g in grants
    ]
    if not bindings:
        return 0
    admin = AdminClient(base_config(settings))
    try:
        for binding, future in admin.create_acls(bindings, request_timeout=timeout).items():
            try:
                future.result()
            except KafkaException as exc:
                raise BrokerError(
                    f"the broker refused the ACL {binding}: {exc.args[0].str()}"
                ) from exc
    except KafkaException as exc:
        raise BrokerError(f"no broker answered at {settings.bootstrap_servers}: {exc}") from exc
    return len(bindings)
