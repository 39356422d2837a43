"""SpecReader: a run's definition snapshot read into a DispatchSpec once per job version, kept
within a byte budget and never by the snapshot's bytes."""

from __future__ import annotations

from typing import Any

import pytest

from schedulerstream.codec import default_codec
from schedulerstream.dispatcher.spec import ENTRY_BYTES, SpecReader
from schedulerstream.errors import ValidationError
from schedulerstream.model import JobDefinition

CODEC = default_codec()


def job(job_id: str, version: int, url: str, **extra: Any) -> JobDefinition:
    fields = {"tenant": "acme", "job_id": job_id, "version": version, "schedule": {"every": 60},
              "target": {"type": "http", "url": url}, **extra}  # fmt: skip
    return JobDefinition.model_validate(fields)


def snapshot(job_id: str, url: str = "https://hooks.test/a", **extra: Any) -> bytes:
    return CODEC.encode("JobDefinition", job(job_id, 1, url, **extra).to_avro())


class Counting(SpecReader):
    def __init__(self, cache_bytes: int) -> None:
        super().__init__(CODEC, cache_bytes)
        self.decoded = 0

    def _read(self, raw: bytes) -> Any:
        self.decoded += 1
        return super()._read(raw)


def test_a_job_version_is_decoded_once_and_another_snapshot_is_not_mistaken_for_it() -> None:
    reader = Counting(1 << 20)
    first = snapshot("j", url="https://hooks.test/a")
    key, spec = reader.read(first, "acme/j", 1)
    assert key == "acme/j" and '"url":"https://hooks.test/a"' in spec.target_json
    assert reader.read(bytes(first), "acme/j", 1) == (key, spec) and reader.decoded == 1
    other = snapshot("j", url="https://hooks.test/b")  # the same version, other bytes
    assert "hooks.test/b" in reader.read(other, "acme/j", 1)[1].target_json
    assert reader.decoded == 2
    assert reader.read(first, "acme/j", 2)[1] == spec and reader.decoded == 3  # a new version


def test_the_cache_keeps_within_its_bytes_and_not_the_payload() -> None:
    big = {"payload": {"blob": "x" * 100_000}}
    raws = [snapshot(f"j{n}", **big) for n in range(10)]
    reader = Counting(3 * (ENTRY_BYTES + 100))  # room for three webhook specs
    for n, raw in enumerate(raws):
        reader.read(raw, f"acme/j{n}", 1)
    assert len(reader) == 3 and reader.cached_bytes <= reader.cache_bytes
    reader.read(raws[9], "acme/j9", 1)  # the most recent are kept
    assert reader.decoded == 10
    reader.read(raws[0], "acme/j0", 1)  # the oldest went first
    assert reader.decoded == 11


def test_a_bad_snapshot_raises_every_time_and_is_not_kept() -> None:
    reader = Counting(1 << 20)
    record = job("j", 1, "https://hooks.test/a").to_avro()
    record["timeout_us"] = 0
    raw = CODEC.encode("JobDefinition", record)
    for _ in range(2):
        with pytest.raises(ValidationError, match="timeout"):
            reader.read(raw, "acme/j", 1)
    assert reader.decoded == 2 and len(reader) == 0 and reader.cached_bytes == 0
