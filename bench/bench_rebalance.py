"""Partition handover time of the runtime: classic protocol vs KIP-848 (group.protocol=consumer).

Member A runs every partition while records flow into each of them; member B joins
(join: time until B processed a record on every partition moved to it, and the longest
processing gap on the partitions A kept); then A leaves cleanly (leave: time until B
processed a record on every partition A had). Each member is a Processor in a thread.

    .venv/bin/python bench/bench_rebalance.py [--rounds 3] [--partitions 8]
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from schedulerstream.kafka import clients
from schedulerstream.runtime import Processor, TaskContext, Topology
from schedulerstream.settings import Settings, load_settings


class Marker(Topology):
    """Counts per key (changelogged) and notes when each partition was last processed."""

    def __init__(self, settings: Settings, topics: int) -> None:
        self.settings = settings
        self.topics = [settings.topic("rb-in"), settings.topic("rb-in-b")][:topics]
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.max_gap: dict[int, float] = {}
        self.lock = threading.Lock()

    @property
    def name(self) -> str:
        return "rebalance"

    @property
    def input_topics(self) -> list[str]:
        return self.topics

    @property
    def changelog_topic(self) -> str:
        return self.settings.topic("rb-changelog")

    def mark(self) -> None:
        """Start a new observation window."""
        with self.lock:
            self.first.clear()
            self.max_gap.clear()

    def punctuate(self, ctx: TaskContext, now_us: int) -> None:
        return None

    def process(self, ctx: TaskContext, message: Any) -> None:
        now = time.monotonic()
        p = ctx.partition
        with self.lock:
            self.first.setdefault(p, now)
            if p in self.last:
                self.max_gap[p] = max(self.max_gap.get(p, 0.0), now - self.last[p])
            self.last[p] = now
        key = b"n/" + message.key()
        ctx.store.put(key, str(int(ctx.store.get(key) or b"0") + 1).encode())


class Member:
    def __init__(self, settings: Settings, topics: int, name: str, root: Path) -> None:
        member_settings = settings.model_copy(update={"instance_id": name, "data_dir": root / name})
        self.topology = Marker(member_settings, topics)
        self.processor = Processor(member_settings, self.topology)
        self.thread = threading.Thread(target=self.processor.run, daemon=True)
        self.thread.start()

    def leave(self) -> None:
        self.processor.stop()


def _feed(settings: Settings, topics: list[str], stop: threading.Event) -> None:
    producer = Producer(clients.producer_config(settings, **{"linger.ms": 1}))
    i = 0
    while not stop.is_set():
        for topic in topics:
            for p in range(settings.partitions):
                producer.produce(topic, key=b"k%d" % (i % 100), value=b"x", partition=p)
        i += 1
        producer.poll(0)
        time.sleep(0.005)
    producer.flush(10)


def _wait(condition: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("handover did not complete")
        time.sleep(0.005)


def one_round(base: Settings, topics: int) -> dict[str, float]:
    settings = base.model_copy(update={"topic_prefix": f"rb{uuid.uuid4().hex[:8]}."})
    admin = AdminClient(clients.base_config(settings))
    names = [*["rb-in", "rb-in-b"][:topics], "rejected"]
    new = [NewTopic(settings.topic(n), settings.partitions, 1) for n in names]
    compact = {"cleanup.policy": "compact"}
    new.append(NewTopic(settings.topic("rb-changelog"), settings.partitions, 1, config=compact))
    for future in admin.create_topics(new).values():
        future.result()
    time.sleep(1.0)
    stop = threading.Event()
    feeder = threading.Thread(
        target=_feed, args=(settings, [settings.topic(n) for n in names[:topics]], stop)
    )
    feeder.start()
    root = Path(settings.data_dir) / settings.topic_prefix
    everything = set(range(settings.partitions))
    a = Member(settings, topics, "a", root)
    _wait(lambda: set(a.topology.first) == everything, 60)
    time.sleep(1.0)
    a.topology.mark()
    joined = time.monotonic()
    b = Member(settings, topics, "b", root)
    _wait(
        lambda: (
            b.processor.running_partitions()
            and set(b.topology.first) == set(b.processor.running_partitions())
            and not set(a.processor.running_partitions()) & set(b.topology.first)
        ),
        60,
    )
    moved = sorted(b.topology.first)
    join_s = max(b.topology.first.values()) - joined
    kept = [p for p in everything if p not in moved]
    time.sleep(1.5)
    kept_gap = max((a.topology.max_gap.get(p, 0.0) for p in kept), default=0.0)
    b.topology.mark()
    left = time.monotonic()
    a.leave()
    _wait(lambda: set(b.topology.first) == everything, 60)
    leave_s = max(b.topology.first[p] for p in kept) - left
    b.leave()
    a.thread.join(30)
    b.thread.join(30)
    stop.set()
    feeder.join()
    return {"join_s": join_s, "kept_max_gap_s": kept_gap, "leave_s": leave_s}


def measure(base: Settings, protocol: str, topics: int, rounds: int) -> dict[str, Any]:
    settings = base.model_copy(update={"group_protocol": protocol})
    results = [one_round(settings, topics) for _ in range(rounds)]
    summary: dict[str, Any] = {"protocol": protocol, "input_topics": topics}
    probe = clients.consumer_config(settings, "x", copartitioned=topics > 1)
    summary["assignor"] = probe.get(
        "group.remote.assignor", probe.get("partition.assignment.strategy", "uniform")
    )
    for key in results[0]:
        values = [r[key] for r in results]
        summary[key] = {"median": round(statistics.median(values), 3), "max": round(max(values), 3)}
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=8)
    args = parser.parse_args()
    base = load_settings().model_copy(update={"partitions": args.partitions})
    for protocol, topics in (("consumer", 2), ("classic", 2), ("consumer", 1), ("classic", 1)):
        print(json.dumps(measure(base, protocol, topics, args.rounds)), flush=True)


if __name__ == "__main__":
    main()
