"""Kafka's default key partitioner in pure Python (no Kafka import).

``murmur2`` is bit-for-bit Java's ``org.apache.kafka.common.utils.Utils.murmur2`` and
``partition_for_key`` is ``BuiltInPartitioner.partitionForKey``:
``toPositive(murmur2(keyBytes)) % numPartitions``. librdkafka's ``murmur2_random`` partitioner
computes the same, so Java producers, Connect and our explicit partitions all agree.
``tests/vectors/murmur2_java.json`` (made by the real Java client) pins the equality.
"""

from __future__ import annotations

import struct
from functools import lru_cache

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_WORDS = struct.Struct("<I")


def _murmur2_u32(data: bytes) -> int:
    """Java's murmur2 as an unsigned 32-bit value."""
    length = len(data)
    m = _M
    mask = _MASK
    h = _SEED ^ length
    words = length >> 2
    if words:
        for (k,) in _WORDS.iter_unpack(data[: words << 2]):
            k = (k * m) & mask
            k ^= k >> 24
            h = ((h * m) & mask) ^ ((k * m) & mask)
    tail = length & 3
    if tail:
        i = length - tail
        if tail == 3:
            h ^= data[i + 2] << 16
        if tail >= 2:
            h ^= data[i + 1] << 8
        h = ((h ^ data[i]) * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    return h ^ (h >> 15)


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 of ``data`` as a signed 32-bit int, exactly as Java returns it."""
    h = _murmur2_u32(data)
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


def to_positive(number: int) -> int:
    """Java's ``Utils.toPositive``: clear the sign bit (not ``abs``)."""
    return number & 0x7FFF_FFFF


def partition_for_key(key: str | bytes, partitions: int) -> int:
    """The partition the Java client (and ``murmur2_random``) puts a keyed record on.

    A ``str`` key is encoded as UTF-8, as Kafka's ``StringSerializer`` does.
    """
    if partitions < 1:
        raise ValueError(f"partitions must be at least 1, got {partitions}")
    data = key.encode("utf-8") if isinstance(key, str) else key
    return (_murmur2_u32(data) & 0x7FFF_FFFF) % partitions


@lru_cache(maxsize=65_536)
def partition_for_job_key(job_key: str, partitions: int) -> int:
    """``partition_for_key`` memoised for job keys (``{tenant}/{job_id}``), called per run."""
    return partition_for_key(job_key, partitions)
