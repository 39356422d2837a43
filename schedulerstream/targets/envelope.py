"""The JSON body every target sends: one run's attempt, serialized once to bytes."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import orjson

from schedulerstream.jsontext import compact
from schedulerstream.model import from_us
from schedulerstream.targets.base import Delivery


@lru_cache(maxsize=8192)
def iso_utc(instant_us: int) -> str:
    """ISO 8601 in UTC with a ``Z`` (microseconds only when there are some)."""
    return from_us(instant_us).isoformat().replace("+00:00", "Z")


def envelope(delivery: Delivery) -> dict[str, Any]:
    """``{run_id, tenant, job_id, scheduled_at, attempt, trigger, payload}``."""
    return {**_head(delivery), "payload": delivery.payload}


def envelope_bytes(delivery: Delivery) -> bytes:
    """The envelope as compact ASCII JSON (non-ASCII escaped, so any payload encodes); the
    payload's text is spliced in as it is when it is ASCII (it nearly always is)."""
    return envelope_text(delivery).encode("ascii")


def envelope_text(delivery: Delivery, extra: str = "") -> str:
    """``envelope_bytes`` as text, with ``extra`` (``,"key":value`` members) after the
    payload."""
    head = _head_text(_head(delivery))
    text = delivery.payload_json
    if text is None:
        text = "null"
    elif not text.isascii():
        text = compact(json.loads(text))
    return f'{head[:-1]},"payload":{text}{extra}}}'


def _head_text(head: dict[str, Any]) -> str:
    """``compact(head)``: orjson's text when it is the same (ASCII without DEL, which json
    escapes; a lone surrogate, which orjson refuses), 0.13 µs against 1.56."""
    try:
        raw = orjson.dumps(head)
    except TypeError:
        return compact(head)
    if raw.isascii() and b"\x7f" not in raw:
        return raw.decode("ascii")
    return compact(head)


def _head(delivery: Delivery) -> dict[str, Any]:
    return {
        "run_id": delivery.run_id,
        "tenant": delivery.tenant,
        "job_id": delivery.job_id,
        "scheduled_at": iso_utc(delivery.scheduled_at_us),
        "attempt": delivery.attempt,
        "trigger": delivery.trigger,
    }
