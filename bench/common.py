"""Shared bench plumbing: a dedicated local broker, fresh topic sets, percentiles."""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

from schedulerstream.kafka import topics
from schedulerstream.kafka.broker import LocalBroker
from schedulerstream.settings import Settings, load_settings

BENCH_BOOTSTRAP = "127.0.0.1:39292"
RESULTS = Path(__file__).resolve().parent / "results"


def progress(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def bench_broker() -> Settings:
    """Settings for the bench broker (started here if nothing answers)."""
    settings = load_settings(bootstrap_servers=BENCH_BOOTSTRAP, data_dir=RESULTS / "broker")
    progress(LocalBroker(settings).up(timeout=120))
    return settings


def fresh(
    base: Settings, partitions: int = 12, apply: bool = True, **overrides: object
) -> Settings:
    """A new topic prefix (and data dir) on the same broker, topics applied."""
    tag = uuid.uuid4().hex[:8]
    settings = base.model_copy(
        update={
            "topic_prefix": f"b{tag}.",
            "partitions": partitions,
            "instance_id": f"bench-{tag}",
            "data_dir": RESULTS / "state" / tag,
            **overrides,
        }
    )
    if apply:
        topics.apply(settings)
    return settings


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def log_bytes(path: Path) -> int:
    """Bytes of a Kafka partition directory's segment files (indexes are preallocated)."""
    return sum(p.stat().st_size for p in path.glob("*.log"))
