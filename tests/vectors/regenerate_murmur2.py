"""Regenerate ``murmur2_java.json``: Kafka's Java client placing ~300 keys.

Run from the checkout: ``.venv/bin/python tests/vectors/regenerate_murmur2.py``.
It runs ``Murmur2Vectors.java`` with the Kafka jars of ``LocalBroker(settings).jars_dir()``
(fetched with Maven if missing) on the class path. ``tests/test_partitioner.py`` imports
``run_java`` from here to check the committed file against a live JVM.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
JAVA_SOURCE = HERE / "Murmur2Vectors.java"
VECTORS_PATH = HERE / "murmur2_java.json"
PARTITION_COUNTS = (1, 3, 12, 64, 100)


def vector_keys() -> list[tuple[bytes, str | None]]:
    """The keys, as (bytes, text or None for raw bytes); deterministic."""
    rng = random.Random(20240601)
    texts: list[str] = []
    tenants = ["acme", "globex", "initech", "t0", "a.b-c_d", "umbrella-corp", "x"]
    for i in range(200):
        tenant = tenants[i % len(tenants)]
        texts.append(f"{tenant}/job-{i}")
    for n in range(21):  # every tail length, several times over
        texts.append("abcdefghijklmnopqrstu"[:n])
        texts.append(
            "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789._-/") for _ in range(n))
        )
    texts += [
        "acme/nightly-report",
        "acme/" + "j" * 63,
        "z" * 63 + "/" + "9" * 63,
        "tenant/jöb",
        "租户/作业",
        "émoji/🙂🚀",
        "ключ/значение",
        "mixed/ä€𝄞",
        " ",
        "\x00",
        "\x7f\x00\x01",
        "a" * 1000,
        "long/" + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(4091)),
    ]
    keys: list[tuple[bytes, str | None]] = [(text.encode("utf-8"), text) for text in texts]
    # Raw bytes with the high bit set (Java bytes are signed) for every tail length.
    for n in range(21):
        keys.append((bytes(rng.randrange(128, 256) for _ in range(n)), None))
        keys.append((bytes(rng.randrange(256) for _ in range(n)), None))
    keys.append((b"\xff" * 20, None))
    keys.append((b"\x80" * 17, None))
    return keys


def jars_dir() -> Path:
    """The Kafka jars the local broker runs."""
    from schedulerstream.kafka.broker import LocalBroker
    from schedulerstream.settings import load_settings

    return LocalBroker(load_settings()).jars_dir()


def java_executable() -> str:
    """``$JAVA_HOME/bin/java`` or ``java`` from PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise RuntimeError("java is not on PATH and JAVA_HOME is not set")
    return java


def run_java(keys: list[bytes], counts: tuple[int, ...] = PARTITION_COUNTS) -> list[dict[str, Any]]:
    """Ask Kafka's Java client for murmur2, toPositive and the partition of each key."""
    command = [
        java_executable(), "-cp", f"{jars_dir()}/*", str(JAVA_SOURCE), *map(str, counts),
    ]  # fmt: skip
    stdin = "".join((key.hex() or ".") + "\n" for key in keys)
    result = subprocess.run(
        command, input=stdin, capture_output=True, text=True, check=False, timeout=120
    )
    if result.returncode != 0:
        raise RuntimeError(f"java failed ({result.returncode}):\n{result.stderr}")
    rows = []
    for line in result.stdout.splitlines():
        key_hex, hash_, positive, *partitions = line.split("\t")
        rows.append(
            {
                "key_hex": key_hex,
                "murmur2": int(hash_),
                "positive": int(positive),
                "partitions": [int(p) for p in partitions],
            }
        )
    if len(rows) != len(keys):
        raise RuntimeError(f"java printed {len(rows)} rows for {len(keys)} keys")
    return rows


def main() -> None:
    """Write ``murmur2_java.json``."""
    from schedulerstream.settings import load_settings

    keys = vector_keys()
    rows = run_java([key for key, _ in keys])
    for row, (_, text) in zip(rows, keys, strict=True):
        row["key"] = text
    document = {
        "about": "Kafka's Java Utils.murmur2, toPositive, BuiltInPartitioner.partitionForKey",
        "kafka_version": load_settings().kafka_version,
        "regenerate": ".venv/bin/python tests/vectors/regenerate_murmur2.py",
        "partition_counts": list(PARTITION_COUNTS),
        "vectors": [
            {k: row[k] for k in ("key", "key_hex", "murmur2", "positive", "partitions")}
            for row in rows
        ],
    }
    # One vector a line, so a regeneration diffs readably.
    text = json.dumps(document, ensure_ascii=False, indent=1)
    lines = [json.dumps(v, ensure_ascii=False) for v in document["vectors"]]
    head = text[: text.index('"vectors": [') + len('"vectors": [')]
    text = head + "\n  " + ",\n  ".join(lines) + "\n ]\n}\n"
    assert json.loads(text) == document
    VECTORS_PATH.write_text(text)
    print(f"wrote {len(rows)} vectors to {VECTORS_PATH}", file=sys.stderr)


if __name__ == "__main__":
    main()
