"""The pure-Python partitioner places keys exactly like Kafka's Java client and librdkafka."""

from __future__ import annotations

import importlib.util
import json
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from hypothesis import given
from hypothesis import strategies as st

from schedulerstream.kafka.clients import base_config, producer_config
from schedulerstream.partitioner import (
    murmur2,
    partition_for_job_key,
    partition_for_key,
    to_positive,
)
from schedulerstream.settings import Settings

VECTORS_DIR = Path(__file__).parent / "vectors"
VECTORS = json.loads((VECTORS_DIR / "murmur2_java.json").read_text(encoding="utf-8"))
COUNTS: list[int] = VECTORS["partition_counts"]


def _regenerator() -> ModuleType:
    """``tests/vectors/regenerate_murmur2.py`` (not a package: load it by path)."""
    path = VECTORS_DIR / "regenerate_murmur2.py"
    module_spec = importlib.util.spec_from_file_location("regenerate_murmur2", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def _check(vector: dict[str, Any]) -> None:
    key = bytes.fromhex(vector["key_hex"])
    assert murmur2(key) == vector["murmur2"], vector
    assert to_positive(murmur2(key)) == vector["positive"], vector
    assert [partition_for_key(key, n) for n in COUNTS] == vector["partitions"], vector
    if vector["key"] is not None:
        assert key == vector["key"].encode("utf-8")
        assert [partition_for_key(vector["key"], n) for n in COUNTS] == vector["partitions"]


def test_vector_file_covers_what_it_claims() -> None:
    vectors = VECTORS["vectors"]
    assert len(vectors) >= 250
    assert COUNTS == [1, 3, 12, 64, 100]
    lengths = {len(v["key_hex"]) // 2 for v in vectors}
    assert set(range(21)) <= lengths
    assert max(lengths) >= 4096
    assert any(v["key"] is not None and not v["key"].isascii() for v in vectors)
    assert any(
        v["key"] is None and any(b >= 0x80 for b in bytes.fromhex(v["key_hex"])) for v in vectors
    )
    assert any(v["murmur2"] < 0 for v in vectors) and any(v["murmur2"] > 0 for v in vectors)


@pytest.mark.parametrize("vector", VECTORS["vectors"], ids=lambda v: v["key_hex"][:24] or "empty")
def test_matches_java_vectors(vector: dict[str, Any]) -> None:
    _check(vector)


def test_matches_java_live() -> None:
    """Run Kafka's Java Utils.murmur2 now, so the committed vectors cannot go stale."""
    regenerate = _regenerator()
    keys = [bytes.fromhex(v["key_hex"]) for v in VECTORS["vectors"]]
    rows = regenerate.run_java(keys, tuple(COUNTS))
    committed = {k: VECTORS["vectors"][i] for i, k in enumerate(keys)}
    for key, row in zip(keys, rows, strict=True):
        assert row["key_hex"] == key.hex()
        expected = committed[key]
        assert (row["murmur2"], row["positive"], row["partitions"]) == (
            expected["murmur2"],
            expected["positive"],
            expected["partitions"],
        ), f"vector file is stale for {key.hex()}: regenerate it"
        _check({**row, "key": None})
    # The generator's key list is the one committed.
    assert [k.hex() for k, _ in regenerate.vector_keys()] == [k.hex() for k in keys]


@given(st.binary(max_size=200), st.integers(min_value=1, max_value=10_000))
def test_matches_librdkafka(key: bytes, partitions: int) -> None:
    assert partition_for_key(key, partitions) == confluent_kafka.murmur2(key, partitions)


@given(st.text(max_size=80), st.integers(min_value=1, max_value=512))
def test_str_is_utf8(key: str, partitions: int) -> None:
    try:
        data = key.encode("utf-8")
    except UnicodeEncodeError:
        return  # lone surrogates are not valid keys
    placed = partition_for_key(key, partitions)
    assert placed == partition_for_key(data, partitions)
    assert 0 <= placed < partitions
    assert -(2**31) <= murmur2(data) < 2**31


def test_known_values() -> None:
    # From Kafka's own UtilsTest.testMurmur2 (signed Java ints).
    cases = {
        "21": -973932308,
        "foobar": -790332482,
        "a-little-bit-long-string": -985981536,
        "a-little-bit-longer-string": -1486304829,
        "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        "abc": 479470107,
    }
    for text, expected in cases.items():
        assert murmur2(text.encode()) == expected, text


def test_job_key_helper_and_bad_counts() -> None:
    partition_for_job_key.cache_clear()
    assert partition_for_job_key("acme/nightly", 12) == partition_for_key("acme/nightly", 12)
    assert partition_for_job_key("acme/nightly", 12) == partition_for_key(b"acme/nightly", 12)
    assert partition_for_job_key.cache_info().hits == 1
    for bad in (0, -3):
        with pytest.raises(ValueError):
            partition_for_key("k", bad)
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0


@pytest.mark.kafka
def test_librdkafka_producer_lands_where_we_compute(kafka_settings: Settings) -> None:
    """Keyed records produced with murmur2_random land on partition_for_key(key, 12)."""
    topic = kafka_settings.topic(f"partitioner-{uuid.uuid4().hex[:6]}")
    admin = AdminClient(base_config(kafka_settings))
    admin.create_topics([NewTopic(topic, num_partitions=12, replication_factor=1)])[topic].result(
        30
    )
    keys = [bytes.fromhex(v["key_hex"]) for v in VECTORS["vectors"]]
    landed: dict[bytes, int] = {}
    errors: list[str] = []

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            landed[msg.key()] = msg.partition()

    producer = Producer(producer_config(kafka_settings))
    deadline = 30.0
    for key in keys:
        while True:
            try:
                producer.produce(topic, key=key, value=b"x", on_delivery=report)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(deadline) == 0
    assert not errors
    assert set(landed) == set(keys)
    assert len(set(landed.values())) == 12
    wrong = {k: p for k, p in landed.items() if p != partition_for_key(k, 12)}
    assert not wrong
    admin.delete_topics([topic])
