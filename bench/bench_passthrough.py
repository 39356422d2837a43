"""Raw transactional consume→produce passthrough: the ceiling the runtime is measured against.

confluent-kafka only: consume batches, produce each record to an output topic, and every
``commit_interval_ms`` send the offsets and commit the transaction (the runtime's protocol
without tasks, stores or changelog). ``measure_runtime`` runs the same passthrough as a
Topology on schedulerstream.runtime, so the two can be compared in one run.

    .venv/bin/python bench/bench_passthrough.py --records 200000 [--runtime]
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from schedulerstream.kafka import clients
from schedulerstream.runtime import Processor, TaskContext, Topology
from schedulerstream.settings import Settings, load_settings

VALUE = b"v" * 100


def prepare(settings: Settings, records: int) -> tuple[str, str]:
    """Create ``bench-in`` / ``bench-out`` (+ changelog) and pre-produce ``records``."""
    admin = AdminClient(clients.base_config(settings))
    names = ("bench-in", "bench-out", "bench-rejected")
    topics = [NewTopic(settings.topic(n), settings.partitions, 1) for n in names]
    topics.append(
        NewTopic(
            settings.topic("bench-changelog"),
            settings.partitions,
            1,
            config={"cleanup.policy": "compact"},
        )
    )
    for future in admin.create_topics(topics).values():
        future.result()
    producer = Producer(clients.producer_config(settings, **{"linger.ms": 20}))
    for i in range(records):
        while True:
            try:
                producer.produce(settings.topic("bench-in"), key=b"k%d" % (i % 10_000), value=VALUE)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(60)
    return settings.topic("bench-in"), settings.topic("bench-out")


def _result(kind: str, records: int, seconds: float, commits: int) -> dict[str, Any]:
    return {
        "kind": kind,
        "records": records,
        "seconds": round(seconds, 3),
        "records_per_s": round(records / seconds) if seconds > 0 else 0,
        "commits": commits,
    }


def measure(settings: Settings, records: int, prepared: bool = False) -> dict[str, Any]:
    """Pass ``records`` pre-produced records through a raw transactional loop; records/s."""
    source, sink = (
        (settings.topic("bench-in"), settings.topic("bench-out"))
        if prepared
        else prepare(settings, records)
    )
    group = f"{settings.topic_prefix}bench-raw"
    consumer = Consumer(clients.consumer_config(settings, group))
    producer = Producer(
        clients.transactional_producer_config(settings, f"{group}-{settings.instance_id}")
    )
    producer.init_transactions(30)
    consumer.subscribe([source])
    interval = settings.commit_interval_ms / 1000
    positions: dict[int, int] = {}
    done = commits = 0
    started: float | None = None
    next_commit = time.monotonic() + interval
    in_txn = False
    while done < records:
        for msg in consumer.consume(1000, settings.tick_ms / 1000):
            if msg.error():
                continue
            if started is None:
                started = time.monotonic()
            if not in_txn:
                producer.begin_transaction()
                in_txn = True
            while True:
                try:
                    producer.produce(
                        sink, key=msg.key(), value=msg.value(), partition=msg.partition()
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
            positions[msg.partition()] = msg.offset() + 1
            done += 1
        if in_txn and (time.monotonic() >= next_commit or done >= records):
            offsets = [TopicPartition(source, p, o) for p, o in positions.items()]
            producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
            in_txn = False
            commits += 1
            next_commit = time.monotonic() + interval
    elapsed = time.monotonic() - (started or time.monotonic())
    consumer.close()
    return _result("raw", records, elapsed, commits)


class Passthrough(Topology):
    """Each record to the output topic, same partition, no state."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.sink = settings.topic("bench-out")
        self.count = 0
        self.started: float | None = None

    @property
    def name(self) -> str:
        return "bench-runtime"

    @property
    def input_topics(self) -> list[str]:
        return [self.settings.topic("bench-in")]

    @property
    def changelog_topic(self) -> str:
        return self.settings.topic("bench-changelog")

    def process(self, ctx: TaskContext, message: Any) -> None:
        if self.started is None:
            self.started = time.monotonic()
        ctx.produce(self.sink, message.key(), message.value(), ctx.partition)
        self.count += 1


def measure_runtime(settings: Settings, records: int, prepared: bool = False) -> dict[str, Any]:
    """The same passthrough as a Topology on the runtime (tasks, overlay, commit protocol)."""
    if not prepared:
        prepare(settings, records)
    topology = Passthrough(settings)
    processor = Processor(settings, topology, rejected_topic=settings.topic("bench-rejected"))
    processor.start()
    while topology.count < records or processor.commit():
        processor.step()
    elapsed = time.monotonic() - (topology.started or time.monotonic())
    commits = int(processor.metrics["commits"])
    processor.close()
    return _result("runtime", records, elapsed, commits)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--runtime", action="store_true", help="also measure the runtime")
    args = parser.parse_args()
    base = load_settings()
    results = []
    for kind in ("raw", "runtime") if args.runtime else ("raw",):
        settings = base.model_copy(
            update={
                "topic_prefix": f"bench{uuid.uuid4().hex[:8]}.",
                "partitions": args.partitions,
                "instance_id": f"bench-{uuid.uuid4().hex[:6]}",
                "data_dir": base.data_dir / "bench" / uuid.uuid4().hex[:8],
            }
        )
        run = measure if kind == "raw" else measure_runtime
        results.append(run(settings, args.records))
    print(json.dumps(results if args.runtime else results[0]))


if __name__ == "__main__":
    main()
