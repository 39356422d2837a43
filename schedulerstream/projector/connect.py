"""cron.run-state values: Kafka Connect JSON with schema, so a stock ``JsonConverter`` with
``schemas.enable=true`` reads them (``{"schema": {struct}, "payload": {...}}``).

The Connect struct is derived from ``schemas/io.schedulerstream.RunState.avsc``, so the topic
and the Avro contract cannot drift apart.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from schedulerstream.codec import NAMESPACE, default_codec
from schedulerstream.errors import CodecError
from schedulerstream.jsontext import compact, compact_utf8
from schedulerstream.readmodel import RunRow

_CONNECT_TYPES = {
    "string": "string",
    "long": "int64",
    "int": "int32",
    "boolean": "boolean",
    "double": "float64",
    "float": "float32",
    "bytes": "bytes",
}


def _connect_field(field: dict[str, Any]) -> dict[str, Any]:
    avro = field["type"]
    optional = isinstance(avro, list)
    if optional:
        others = [t for t in avro if t != "null"]
        if len(others) != 1 or "null" not in avro:
            raise CodecError(f"RunState.{field['name']}: only [null, T] unions map to Connect")
        avro = others[0]
    if not isinstance(avro, str) or avro not in _CONNECT_TYPES:
        raise CodecError(f"RunState.{field['name']}: no Connect type for {avro!r}")
    return {"type": _CONNECT_TYPES[avro], "optional": optional, "field": field["name"]}


@cache
def run_state_schema() -> dict[str, Any]:
    """The Connect struct schema of RunState."""
    parsed = default_codec().expanded_schema("RunState")
    return {
        "type": "struct",
        "name": f"{NAMESPACE}.RunState",
        "optional": False,
        "fields": [_connect_field(f) for f in parsed["fields"]],
    }


@cache
def _envelope_head() -> bytes:
    return b'{"schema":' + compact(run_state_schema()).encode()


def encode_run_state(row: RunRow) -> bytes:
    """The Connect JSON value of one run's latest state."""
    payload = {f["field"]: getattr(row, f["field"]) for f in run_state_schema()["fields"]}
    body = compact_utf8(payload).encode()
    return _envelope_head() + b',"payload":' + body + b"}"
