"""A commit's changelog write: one ``produce`` per record against ``produce_many`` (one
``produce_batch`` call), on the real bench broker. Process CPU per record of the produce call
alone, and of the call with its flush and commit (librdkafka's threads included).

    .venv/bin/python bench/bench_capture.py [--records 3000] [--repeat 20]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.common import bench_broker, drop_topics, fresh
from schedulerstream.kafka import clients
from schedulerstream.runtime.context import OutRecord
from schedulerstream.runtime.transaction import TransactionalProducer

PARTITION = 2


def one_by_one(txn: TransactionalProducer, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    """How ``changelog.capture`` wrote before session 28."""
    for key, value in records[:-1]:
        txn.produce(OutRecord(topic, key, value, PARTITION))
    key, value = records[-1]
    txn.produce(OutRecord(topic, key, value, PARTITION), lambda err, msg: None)


def batched(txn: TransactionalProducer, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    txn.produce_many(topic, PARTITION, records, lambda err, msg: None)


def measure(count: int, repeat: int) -> dict[str, float]:
    settings = fresh(bench_broker())
    topic = settings.topics.runs  # any topic of the fresh set: a record is a record
    txn = TransactionalProducer(
        clients.transactional_producer_config(settings, f"{settings.topic_prefix}capture")
    )
    txn.start()
    value = os.urandom(200).hex().encode()  # a run record's size, incompressible
    records = [(b"run/t%d/job-%d" % (i % 8, i), value) for i in range(count)]
    found: dict[str, list[float]] = {}
    try:
        for _ in range(repeat):
            for name, write in (("one_by_one", one_by_one), ("batched", batched)):
                cpu = time.process_time()
                write(txn, topic, records)
                call = time.process_time() - cpu
                txn.flush()
                txn.commit()
                found.setdefault(f"{name}_call_us", []).append(call)
                found.setdefault(f"{name}_us", []).append(time.process_time() - cpu)
    finally:
        txn.close()
        drop_topics(settings)
    return {k: round(sorted(v)[len(v) // 2] / count * 1e6, 2) for k, v in found.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=3000, help="per commit")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    print(json.dumps(measure(args.records, args.repeat)))


if __name__ == "__main__":
    main()
