"""One tenant's record on ``cron.tenants``: JSON, so the dispatcher and operators' tools read it
without the Avro codec; ``format`` is bumped on an incompatible change, unknown fields are kept
out (ignored) so older readers survive additions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from schedulerstream.model import Identifier, KafkaTarget, WorkerTarget

FORMAT = 1
MAX_GRANTS = 1000
# a Kafka topic name, or a prefix of one followed by "*" (every topic it begins)
TopicGrant = Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]{1,249}\*?$|^\*$")]


class TenantRecord(BaseModel):
    """Key hash (None: no key can authenticate), the dispatcher's fair-share settings
    (None: the process defaults ``tenant_concurrency`` / ``tenant_rate_per_s``) and the worker
    pools and Kafka topics its runs may reach (None: any, as before grants existed)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    format: int = FORMAT
    tenant: Identifier
    key_hash: str | None
    weight: Annotated[float, Field(gt=0, le=1_000_000)] = 1.0
    concurrency: Annotated[int, Field(ge=1)] | None = None
    rate_per_s: Annotated[float, Field(gt=0)] | None = None
    pools: Annotated[list[Identifier], Field(max_length=MAX_GRANTS)] | None = None
    topics: Annotated[list[TopicGrant], Field(max_length=MAX_GRANTS)] | None = None
    created_at_us: int
    updated_at_us: int

    def encode(self) -> bytes:
        return self.model_dump_json().encode()

    @classmethod
    def decode(cls, data: bytes) -> TenantRecord:
        """Raises pydantic's ValidationError on a malformed value."""
        return cls.model_validate_json(data)


@dataclass(frozen=True, slots=True)
class TenantLimits:
    """One tenant's overrides of the dispatcher's process defaults (None: the default), as
    ``TenantPolicy.limits`` holds them and the dispatcher's ``Limits`` reads them."""

    concurrency: int | None = None
    rate_per_s: float | None = None


@dataclass(frozen=True, slots=True)
class TenantGrants:
    """The worker pools and Kafka topics one tenant's runs may reach (None: any)."""

    pools: frozenset[str] | None = None
    topics: frozenset[str] | None = None  # exact names
    prefixes: tuple[str, ...] = ()  # of the topic grants that end in "*"

    @classmethod
    def of(cls, record: TenantRecord) -> TenantGrants | None:
        """The record's grants; None when it grants everything."""
        if record.pools is None and record.topics is None:
            return None
        pools = None if record.pools is None else frozenset(record.pools)
        if record.topics is None:
            return cls(pools)
        exact = frozenset(t for t in record.topics if not t.endswith("*"))
        return cls(pools, exact, tuple(t[:-1] for t in record.topics if t.endswith("*")))

    def refusal(self, tenant: str, target: Any) -> str | None:
        """Why ``tenant`` may not send to ``target``; None when it may."""
        if isinstance(target, WorkerTarget) and self.pools is not None:
            if target.pool not in self.pools:
                return (f"worker pool {target.pool!r} is not granted to tenant {tenant} "
                        f"(schedulerstream tenants update {tenant} --pool ...)")  # fmt: skip
        elif isinstance(target, KafkaTarget) and self.topics is not None:
            topic = target.topic
            if topic not in self.topics and not topic.startswith(self.prefixes):
                return (f"Kafka topic {topic!r} is not granted to tenant {tenant} "
                        f"(schedulerstream tenants update {tenant} --topic ...)")  # fmt: skip
        return None
