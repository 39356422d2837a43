"""Writers compiled from a schema write fastavro's bytes, refuse what they cannot write, and
``JobEncoder`` falls back to the codec when its writer is wrong."""

from __future__ import annotations

import io
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_writer

from schedulerstream.avro_writer import compile_writer
from schedulerstream.codec import EVENT_TYPES, MARKER, default_codec
from schedulerstream.publish import JobEncoder
from schedulerstream.settings import Settings

from .samples import JOB, sample_records

CODEC = default_codec()


def _written(name: str, record: dict[str, Any]) -> bytes:
    schema = CODEC.current[name]
    write = compile_writer(schema.parsed)
    assert write is not None, name
    return MARKER + schema.fingerprint + write(record)


@pytest.mark.parametrize("name", EVENT_TYPES)
def test_every_event_schema_compiles_to_the_codecs_bytes(name: str) -> None:
    records = sample_records(name)
    assert records
    for record in records:
        assert _written(name, record) == CODEC.encode(name, record)


def test_edge_values_are_written_alike() -> None:
    record = JOB.to_avro(-(1 << 63))
    record["payload_json"] = "naïve ✓ " + "x" * 300  # a length past one varint byte
    record["schedule"]["cron"] = []  # an empty array between two branches
    record["schedule"]["every_us"] = (1 << 63) - 1
    record["target"] = (
        "io.schedulerstream.HttpTarget",
        {"url": "https://e.com", "method": "GET", "headers": {}, "secret": None},
    )
    assert _written("JobDefinition", record) == CODEC.encode("JobDefinition", record)


@pytest.mark.parametrize(
    ("field", "value"),
    [("version", "7"), ("version", 1 << 63), ("paused_reason", 5), ("tenant", None)],
)
def test_a_value_the_schema_does_not_take_is_refused(field: str, value: Any) -> None:
    record = JOB.to_avro()
    record[field] = value
    write = compile_writer(CODEC.current["JobDefinition"].parsed)
    assert write is not None
    with pytest.raises((TypeError, ValueError, AttributeError)):
        write(record)


def test_a_missing_field_takes_its_default_or_is_refused() -> None:
    record = JOB.to_avro()
    del record["notify"]  # default null
    assert _written("JobDefinition", record) == CODEC.encode("JobDefinition", record)
    del record["tenant"]  # no default
    write = compile_writer(CODEC.current["JobDefinition"].parsed)
    assert write is not None
    with pytest.raises(KeyError, match="tenant"):
        write(record)


def test_a_schema_with_a_logical_type_or_fixed_is_not_compiled() -> None:
    assert compile_writer({"type": "long", "logicalType": "timestamp-micros"}) is None
    assert compile_writer({"type": "fixed", "name": "F", "size": 4}) is None


def test_the_job_encoder_checks_its_writer_and_falls_back_to_the_codec() -> None:
    encoder = JobEncoder(CODEC, Settings().record_limits(), 1)
    assert encoder._write is not None
    encoder._write = lambda record: b"wrong"  # a writer that disagrees with the codec
    _, (_, first) = encoder.encode(JOB)
    assert first == CODEC.encode("JobDefinition", JOB.to_avro())  # checked: the codec's
    assert encoder._write is None  # and the codec writes every later one
    _, (_, second) = encoder.encode(JOB)
    assert second == first


def test_a_recursive_record_and_a_record_named_again_later_are_written_alike() -> None:
    node = {
        "type": "record",
        "name": "Node",
        "fields": [
            {"name": "n", "type": "long"},
            {"name": "inner", "type": {"type": "record", "name": "Inner",
                                       "fields": [{"name": "s", "type": "string"}]}},
            {"name": "again", "type": ["null", "Inner"], "default": None},
            {"name": "next", "type": ["null", "Node"], "default": None},
        ],
    }  # fmt: skip
    parsed = parse_schema(node)
    value = {"n": 1 << 40, "inner": {"s": "a"}, "again": {"s": "é"},
             "next": {"n": -3, "inner": {"s": ""}, "next": None}}  # fmt: skip
    expected = io.BytesIO()
    schemaless_writer(expected, parsed, value)
    write = compile_writer(parsed)
    assert write is not None
    assert write(value) == expected.getvalue()
