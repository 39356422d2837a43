"""SpecReader: a run's carried spec read once per distinct spec, a definition snapshot once per
job version; both kept within a byte budget, never by the snapshot's bytes."""

from __future__ import annotations

from typing import Any

import pytest

from schedulerstream.codec import default_codec
from schedulerstream.dispatch_spec import DispatchSpec
from schedulerstream.dispatcher import spec as spec_module
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


def carried(job_id: str, url: str) -> str:
    return DispatchSpec.of(job(job_id, 1, url)).to_json()


def test_runs_of_jobs_with_one_spec_share_its_entry_and_validate_it_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checked: list[str] = []
    real = spec_module.spec_of_json
    monkeypatch.setattr(spec_module, "spec_of_json", lambda t: checked.append(t) or real(t))
    reader = SpecReader(CODEC, 1 << 20)
    shared = [reader.read_json(carried(f"j{n}", "https://hooks.test/a")) for n in range(50)]
    assert all(spec is shared[0] for spec in shared) and len(checked) == 1
    other = reader.read_json(carried("j0", "https://hooks.test/b"))
    assert "hooks.test/b" in other.target_json and len(checked) == 2 and len(reader) == 2
    assert reader.cached_bytes == sum(
        ENTRY_BYTES + len(spec.to_json()) + len(spec.target_json) for spec in (shared[0], other)
    )


def test_a_bad_carried_spec_raises_every_time_and_is_not_kept() -> None:
    reader = SpecReader(CODEC, 1 << 20)
    bad = carried("j", "https://hooks.test/a").replace("https://hooks.test/a", "ftp://x")
    for _ in range(2):
        with pytest.raises(ValidationError, match=r"http\.url"):
            reader.read_json(bad)
    assert len(reader) == 0 and reader.cached_bytes == 0


def test_carried_specs_are_kept_within_the_bytes_too() -> None:
    specs = [carried(f"j{n}", f"https://hooks.test/{n}") for n in range(10)]
    reader = SpecReader(CODEC, 3 * (ENTRY_BYTES + 2 * len(specs[0])))
    for text in specs:
        reader.read_json(text)
    assert len(reader) == 3 and reader.cached_bytes <= reader.cache_bytes
