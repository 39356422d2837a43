"""One tenant's record on ``cron.tenants``: JSON, so the dispatcher and operators' tools read it
without the Avro codec; ``format`` is bumped on an incompatible change, unknown fields are kept
out (ignored) so older readers survive additions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from schedulerstream.model import Identifier

FORMAT = 1


class TenantRecord(BaseModel):
    """Key hash (None: no key can authenticate) and the dispatcher's fair-share settings
    (None: the process defaults ``tenant_concurrency`` / ``tenant_rate_per_s``)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    format: int = FORMAT
    tenant: Identifier
    key_hash: str | None
    weight: Annotated[float, Field(gt=0, le=1_000_000)] = 1.0
    concurrency: Annotated[int, Field(ge=1)] | None = None
    rate_per_s: Annotated[float, Field(gt=0)] | None = None
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
