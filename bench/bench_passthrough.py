"""Like-for-like baseline for the scheduler's burst: a raw transactional loop doing, per record,
the scheduler's kind of work with none of its logic.

Per record, the baseline (``measure``, confluent-kafka and rocksdict only):

- consumes one input record: key = a job key, value = that job's SchedulerJob state bytes
  (what the scheduler's timer scan and job load read from its store);
- writes one state entry (``job/<job key>`` → the job's next SchedulerJob bytes) into a
  transaction overlay, written to a rocksdict store in one WriteBatch (with the changelog
  offset) after the commit, like ``RocksStore.flush``;
- produces one changelog record (that key and value, compacted topic, same partition) at
  commit time, like the runtime's ``capture``;
- produces one run record (key = the run id, value = the job's RunTriggered bytes) to the
  output topic, same partition;
- every ``commit_interval_ms``: send the offsets and commit the transaction.

The record bytes are the scheduler's own: SchedulerJob and RunTriggered records encoded with
the codec for jobs shaped like bench_scheduler's burst jobs (``big/j<i>``, hourly, a Kafka
target), encoded before the clock starts (same sizes and compressibility, no encoding cost).
The scheduler side (bench_scheduler.burst) is one scheduler process emitting a burst: it
scans its ``due/`` index, loads each job, encodes and produces one RunTriggered, writes the
job record (changelogged) and moves its due key (two unlogged index writes), in the same
commit-interval transactions. Both figures are the throughput of one process in records (runs)
per second of wall time: from the first record consumed to the last one committed here, from
the first run to the last run seen by a read_committed consumer there.

``measure_runtime`` runs the same per-record work as a Topology on schedulerstream.runtime.

    .venv/bin/python bench/bench_passthrough.py --records 100000 [--runtime]
"""

from __future__ import annotations

import argparse
import json
import struct
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from rocksdict import Options, Rdict, WriteBatch

from schedulerstream.codec import Codec, default_codec
from schedulerstream.ids import scheduled_run_id
from schedulerstream.kafka import clients
from schedulerstream.model import JobDefinition
from schedulerstream.runtime import Processor, TaskContext, Topology
from schedulerstream.scheduler.keys import job_store_key
from schedulerstream.scheduler.plan import dispatch_spec_json
from schedulerstream.scheduler.state import JobState, definition_ref
from schedulerstream.settings import Settings, load_settings

HOUR_US = 3_600_000_000
PASSES = 3  # the baseline is the fastest of this many passes
OFFSET_KEY = b"meta/changelog-offset"  # what the runtime writes beside a flushed overlay
_OFFSET = struct.Struct(">q")

BASELINE = (
    "per record: consume one record (job key, SchedulerJob bytes), one state write (job/<key> "
    "-> next SchedulerJob bytes) into a rocksdict store (WriteBatch after each commit) plus "
    "one changelog record of that key and value, one produce of a RunTriggered-sized run "
    "record (the scheduler's own bytes, pre-encoded); commit every commit_interval_ms; "
    "records/s of wall time of one process. Scheduler side: one process scanning its due "
    "index, encoding and emitting each run with its job-state write, changelog record and due "
    "key move in the same transactions; runs/s of commit span at a read_committed consumer"
)


@dataclass(frozen=True, slots=True)
class Workload:
    """One burst job's bytes: what is read, written to state and emitted for it."""

    key: bytes  # the job key (input key, partitioning)
    state_in: bytes  # SchedulerJob before its run
    state_out: bytes  # SchedulerJob after it
    run_id: bytes
    run: bytes  # RunTriggered


def workload(codec: Codec, records: int, instant_us: int) -> list[Workload]:
    """The scheduler's records for ``records`` hourly jobs due at ``instant_us``."""
    phase = instant_us // 1_000_000 % 3600
    version = time.time_ns() // 1000
    found = []
    for i in range(records):
        job = JobDefinition.model_validate(
            {"tenant": "big", "job_id": f"j{i}", "schedule": {"every": 3600, "phase": phase},
             "target": {"type": "kafka", "topic": "bench.out"}}
        ).with_version(version + i)  # fmt: skip
        record = job.to_avro()
        definition = codec.encode("JobDefinition", record)
        # as the scheduler keeps it: the definition under its own key, a reference here
        before = JobState(job.version or 0, definition_ref(definition), False,
                          instant_us - HOUR_US)  # fmt: skip
        before.next_fire_us = before.next_not_before_us = before.next_emit_us = instant_us
        after = before.copy()
        after.fired_through_us, after.runs_emitted = instant_us, 1
        after.next_fire_us = after.next_not_before_us = after.next_emit_us = instant_us + HOUR_US
        run_id = scheduled_run_id(job.key, instant_us)
        run = codec.encode(
            "RunTriggered",
            {"run_id": run_id, "tenant": "big", "job_id": f"j{i}", "scheduled_at_us": instant_us,
             "not_before_us": instant_us, "emitted_at_us": instant_us, "trigger": "scheduled",
             "payload_json": None, "job_version": job.version, "job_definition": b"",
             "dispatch_spec_json": dispatch_spec_json(record)},
        )  # fmt: skip
        found.append(Workload(job.key.encode(), before.encode(codec), after.encode(codec),
                              run_id.encode(), run))  # fmt: skip
    return found


def sizes(jobs: list[Workload]) -> dict[str, float]:
    """Mean bytes per record of each kind (for the JSON)."""
    n = max(1, len(jobs))
    state = sum(len(job_store_key(j.key.decode())) + len(j.state_out) for j in jobs)
    return {
        "input_bytes": round(sum(len(j.key) + len(j.state_in) for j in jobs) / n, 1),
        "state_bytes": round(state / n, 1),
        "run_bytes": round(sum(len(j.run_id) + len(j.run) for j in jobs) / n, 1),
    }


def prepare(settings: Settings, records: int) -> list[Workload]:
    """Create ``bench-in`` / ``bench-out`` / the changelog, pre-produce one input per job."""
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
    now = time.time_ns() // 1000
    jobs = workload(default_codec(), records, (now // 1_000_000 + 60) * 1_000_000)
    producer = Producer(clients.producer_config(settings, **{"linger.ms": 20}))
    for job in jobs:  # keyed by job key: the scheduler's partition for that job
        while True:
            try:
                producer.produce(settings.topic("bench-in"), key=job.key, value=job.state_in)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(60)
    return jobs


def _result(
    kind: str, records: int, seconds: float, commits: int, jobs: list[Workload]
) -> dict[str, Any]:
    return {
        "kind": kind,
        "records": records,
        "seconds": round(seconds, 3),
        "records_per_s": round(records / seconds) if seconds > 0 else 0,
        "commits": commits,
        "baseline": BASELINE,
        **sizes(jobs[:1000]),
    }


def _produce(producer: Producer, topic: str, key: bytes, value: bytes, partition: int) -> None:
    while True:
        try:
            producer.produce(topic, key=key, value=value, partition=partition)
            return
        except BufferError:
            producer.poll(0.05)


def measure(settings: Settings, records: int) -> dict[str, Any]:
    """Run ``records`` jobs' worth of the scheduler's per-run work through a raw transactional
    loop (see the module docstring); records/s."""
    jobs = prepare(settings, records)
    by_key = {j.key: j for j in jobs}
    source, sink = settings.topic("bench-in"), settings.topic("bench-out")
    changelog = settings.topic("bench-changelog")
    group = f"{settings.topic_prefix}bench-raw"
    path = settings.data_dir / "baseline"
    path.mkdir(parents=True, exist_ok=True)
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    db = Rdict(str(path), options)
    consumer = Consumer(clients.consumer_config(settings, group))
    producer = Producer(
        clients.transactional_producer_config(settings, f"{group}-{settings.instance_id}")
    )
    producer.init_transactions(30)
    consumer.subscribe([source])
    interval = settings.commit_interval_ms / 1000
    positions: dict[int, int] = {}
    overlay: dict[bytes, tuple[bytes, int]] = {}  # state key -> (value, partition)
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
            job = by_key[msg.key() or b""]
            partition, offset = msg.partition(), msg.offset()
            assert partition is not None and offset is not None
            overlay[b"job/" + job.key] = (job.state_out, partition)
            _produce(producer, sink, job.run_id, job.run, partition)
            positions[partition] = offset + 1
            done += 1
        if in_txn and (time.monotonic() >= next_commit or done >= records):
            for key, (value, partition) in overlay.items():
                _produce(producer, changelog, key, value, partition)
            producer.flush(30)
            offsets = [TopicPartition(source, p, o) for p, o in positions.items()]
            producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
            batch = WriteBatch(raw_mode=True)
            for key, (value, _) in overlay.items():
                batch.put(key, value)
            batch.put(OFFSET_KEY, _OFFSET.pack(commits))
            db.write(batch)
            overlay.clear()
            in_txn = False
            commits += 1
            next_commit = time.monotonic() + interval
    elapsed = time.monotonic() - (started or time.monotonic())
    consumer.close()
    db.close()
    return _result("raw", records, elapsed, commits, jobs)


def measure_best(fresh_settings: Callable[[], Settings], records: int,
                 times: int = PASSES) -> dict[str, Any]:  # fmt: skip
    """``measure`` ``times`` times, each on fresh topics from ``fresh_settings``: the fastest
    pass, with every pass's rate in ``passes_per_s``. A pass is bound by the broker taking its
    transactions' records (its CPU work is ~1 µs a record; a flush waits 0.5-1 s), and passes
    minutes apart on a quiet machine fell at ~70,000 or ~145,000 records/s. The scheduler's
    burst is bound by its own CPU (30,000-33,000 runs/s in the same minutes), so the
    baseline is what the broker takes at best: the ratio never flatters the scheduler."""
    found = [measure(fresh_settings(), records) for _ in range(times)]
    best = max(found, key=lambda r: int(r["records_per_s"]))
    return {**best, "passes_per_s": [r["records_per_s"] for r in found]}


class Passthrough(Topology):
    """The baseline's per-record work on the runtime: one logged state write, one run record."""

    def __init__(self, settings: Settings, jobs: list[Workload]) -> None:
        self.settings = settings
        self.jobs = {j.key: j for j in jobs}
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

    def punctuate(self, ctx: TaskContext, now_us: int) -> None:
        return None

    def process(self, ctx: TaskContext, message: Any) -> None:
        if self.started is None:
            self.started = time.monotonic()
        job = self.jobs[message.key()]
        ctx.store.put(b"job/" + job.key, job.state_out)
        ctx.produce(self.sink, job.run_id, job.run, ctx.partition)
        self.count += 1


def measure_runtime(settings: Settings, records: int) -> dict[str, Any]:
    """The same per-record work as a Topology on the runtime (tasks, overlay, changelog)."""
    jobs = prepare(settings, records)
    topology = Passthrough(settings, jobs)
    processor = Processor(settings, topology, rejected_topic=settings.topic("bench-rejected"))
    processor.start()
    while topology.count < records or processor.commit():
        processor.step()
    elapsed = time.monotonic() - (topology.started or time.monotonic())
    commits = int(processor.metrics["commits"])
    processor.close()
    return _result("runtime", records, elapsed, commits, jobs)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=12)
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
