"""Small builders shared by the target tests."""

from __future__ import annotations

import base64
import hashlib
import hmac
import socket
import uuid
from typing import Any

from aiohttp.abc import AbstractResolver, ResolveResult

from schedulerstream.jsontext import compact
from schedulerstream.model import HttpTarget as HttpTargetConfig
from schedulerstream.targets import Delivery

SECRET = "whsec_" + base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()
SCHEDULED_US = 1_735_689_600_000_000  # 2025-01-01T00:00:00Z


def delivery(attempt: int = 1, deadline: float = 5.0, run_id: str | None = None) -> Delivery:
    """A delivery with a run id no other test uses."""
    job = f"job-{uuid.uuid4().hex[:10]}"
    return Delivery(
        run_id=run_id or f"acme/{job}@20250101T000000Z",
        tenant="acme",
        job_id=job,
        scheduled_at_us=SCHEDULED_US,
        attempt=attempt,
        trigger="scheduled",
        payload_json=compact({"report": "daily", "n": [1, 2, 3], "name": "Zoë"}),
        deadline=deadline,
    )


def http_config(url: str, **fields: Any) -> HttpTargetConfig:
    return HttpTargetConfig(url=url, **fields)


def expected_signature(secret: str, msg_id: str, timestamp: str, body: bytes) -> str:
    """Standard Webhooks v1 signature, computed here independently of the code under test."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = msg_id.encode() + b"." + timestamp.encode() + b"." + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


class FakeResolver(AbstractResolver):
    """Answers name lookups from a table (no DNS traffic)."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.asked: list[str] = []

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.asked.append(host)
        return [
            {
                "hostname": host,
                "host": address,
                "port": port,
                "family": socket.AF_INET6 if ":" in address else socket.AF_INET,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
            for address in self.table[host]
        ]

    async def close(self) -> None:
        return None
