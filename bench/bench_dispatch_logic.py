"""The dispatcher's own logic per run, without Kafka or HTTP, against the store work it needs.

``DispatchLogic`` over a real RocksStore (a temporary directory): ``runs`` RunTriggered records
of distinct jobs of ``tenants`` tenants are ingested (a WriteBatch every 500, as commits do),
then started in fair-share rounds and finished with a success outcome.

- ``logic_us_per_run``: ingest + select + start + outcome, per run (``--targets kafka``: the
  runs are Kafka records, each ended in the tick that starts it, as the dispatcher does);
- ``store_us_per_run``: the baseline, in the same run: the raw store operations a run needs at
  the least (5 puts and 3 gets of run-record-sized values, one WriteBatch per 500 runs);
- ``logic_vs_store``: how many times the bare store work the logic costs;
- ``state_bytes_per_finished_run`` (RocksDB, compacted) and ``changelog_bytes_per_finished_run``
  (the compacted changelog's run records, uncompressed): what each finished run keeps for the
  dedupe retention (``dispatcher/retention.py``: 8 days);
- with ``--steady SECONDS``: ``steady_us_per_run``, the logic per run in a steady state like the
  end-to-end bench's: each simulated second ``--rate`` runs of ``--jobs`` recurring jobs are
  ingested ``LOOKAHEAD_S`` ahead of their time (so a job's definition repeats every
  jobs / rate seconds), the due ones are started and finished, and the store grows as it does
  in a long run; measured over the second half.

    .venv/bin/python bench/bench_dispatch_logic.py [--runs 20000] [--tenants 8] [--targets kafka]
    .venv/bin/python bench/bench_dispatch_logic.py --steady 120 --rate 1200 --jobs 12000

The last stdout line is JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from schedulerstream.codec import default_codec
from schedulerstream.dispatcher.context import Topics
from schedulerstream.dispatcher.limits import Limits
from schedulerstream.dispatcher.logic import DispatchLogic, Start
from schedulerstream.ids import scheduled_run_id
from schedulerstream.model import JobDefinition
from schedulerstream.runtime.store import RocksStore
from schedulerstream.scheduler.plan import dispatch_spec_json
from schedulerstream.targets.base import Outcome

T0 = 1_700_000_000_000_000
OK = Outcome("succeeded", "HTTP 200", False, 10, 200)
PRODUCED = Outcome("succeeded", "produced to out", False, 0)


class Discard:
    """An Output that counts records."""

    def __init__(self) -> None:
        self.records = 0

    def produce(self, topic: str, key: bytes, value: bytes | None, partition: int) -> None:
        self.records += 1


LOOKAHEAD_S = 3


def run_values(
    runs: int, tenants: int, jobs: int = 0, rate: int = 1, distinct: bool = False,
    carried: bool = True, kafka: bool = False,
) -> list[bytes]:  # fmt: skip
    """``runs`` RunTriggered records of distinct jobs, or (``jobs``) of ``jobs`` recurring jobs,
    ``rate`` due each second: run i, of job i % jobs, is due at T0 + i // rate seconds. Every
    job's webhook has its own URL when ``distinct`` (a Kafka topic instead when ``kafka``); the
    records carry their dispatch spec as the scheduler writes it unless not ``carried``."""
    codec = default_codec()
    values = []
    for i in range(runs):
        n = i % jobs if jobs else i
        url = f"http://127.0.0.1:1/hook{n if distinct else ''}"
        at = T0 + (i // rate) * 1_000_000 if jobs else T0
        job = JobDefinition.model_validate(
            {
                "tenant": f"t{n % tenants}",
                "job_id": f"d{n}",
                "version": 1,
                "schedule": {"every": 3600},
                "target": {"type": "kafka", "topic": "out"}
                if kafka
                else {"type": "http", "url": url},
            }
        )
        definition = job.to_avro()
        record: dict[str, Any] = {
            "run_id": scheduled_run_id(job.key, at), "tenant": job.tenant,
            "job_id": job.job_id, "scheduled_at_us": at, "not_before_us": at,
            "emitted_at_us": at, "trigger": "scheduled", "payload_json": json.dumps({"i": n}),
            "job_version": 1,
            "job_definition": b"" if carried else codec.encode("JobDefinition", definition),
            "dispatch_spec_json": dispatch_spec_json(definition) if carried else None,
        }  # fmt: skip
        values.append(codec.encode("RunTriggered", record))
    return values


def logic_seconds(values: list[bytes], workdir: Path) -> tuple[float, int, dict[str, int]]:
    """The logic's seconds, the records it produced, and what its finished runs leave in the
    state (``finished_state``)."""
    store = RocksStore.open(workdir / "logic")
    limits = Limits(200, 50, 1e9, 100)
    logic = DispatchLogic(default_codec(), Topics("attempts", "commands"), limits, "bench")
    out = Discard()
    now = T0 + 1
    started = time.perf_counter()
    for i, value in enumerate(values, 1):
        logic.on_run(store, out, 0, value, now)
        if i % 500 == 0:
            store.flush(i)
    store.flush(len(values))
    done = 0
    while done < len(values):
        now += 1000
        for action in logic.on_tick(store, out, 0, now):
            assert isinstance(action, Start)
            d = action.delivery
            if action.run is not None:  # a record: no slot, ended in the tick that starts it
                logic.on_record_outcome(store, out, 0, action, PRODUCED, now)
            else:
                limits.release(action.tenant, action.host)
                logic.on_outcome(store, out, 0, d.run_id, d.attempt, OK, now)
            done += 1
        store.flush(done)
    elapsed = time.perf_counter() - started
    state = finished_state(store)
    store.close()
    return elapsed, out.records, state


def finished_state(store: RocksStore) -> dict[str, int]:
    """Bytes the finished runs keep for the dedupe retention (8 days): the store's SST files
    after a full compaction, and the run records (with their keys, uncompressed) that the
    compacted changelog keeps."""
    store.compact()
    sst = sum(f.stat().st_size for f in store.path.glob("*.sst"))
    logged = sum(len(k) + len(v) for k, v in store.prefix(b"run/"))
    return {"sst_bytes": sst, "changelog_bytes": logged}


def steady_seconds(
    rate: int, jobs: int, seconds: int, tenants: int, workdir: Path, **shape: bool
) -> float:
    """Logic seconds per run over the second half of ``seconds`` simulated seconds."""
    if jobs % rate:
        raise SystemExit("--jobs must be a multiple of --rate (whole seconds between runs)")
    values = run_values(rate * (seconds + LOOKAHEAD_S), tenants, jobs, rate, **shape)
    store = RocksStore.open(workdir / "steady")
    limits = Limits(200, 50, 1e9, 100)
    logic = DispatchLogic(default_codec(), Topics("attempts", "commands"), limits, "bench")
    out = Discard()
    for value in values[: rate * LOOKAHEAD_S]:
        logic.on_run(store, out, 0, value, T0)
    store.flush(0)
    measured = 0.0
    for second in range(seconds):
        began = time.perf_counter()
        now = T0 + second * 1_000_000
        ahead = second + LOOKAHEAD_S
        for i, value in enumerate(values[ahead * rate : (ahead + 1) * rate], 1):
            logic.on_run(store, out, 0, value, now)
            if i % 100 == 0:
                store.flush(0)
        done = 0
        while done < rate:
            now += 1000
            for action in logic.on_tick(store, out, 0, now):
                assert isinstance(action, Start)
                limits.release(action.tenant, action.host)
                d = action.delivery
                logic.on_outcome(store, out, 0, d.run_id, d.attempt, OK, now)
                done += 1
            store.flush(0)
        if second >= seconds // 2:
            measured += time.perf_counter() - began
    store.close()
    return measured / (rate * (seconds - seconds // 2))


def store_seconds(runs: int, workdir: Path) -> float:
    store = RocksStore.open(workdir / "store")
    value = b"x" * 220  # about a run record
    started = time.perf_counter()
    for i in range(runs):
        key = b"run/%d" % i
        for n in range(5):
            store.put(key + b"/%d" % n, value)
        for n in range(3):
            store.get(key + b"/%d" % n)
        if i % 500 == 499:
            store.flush(i)
    store.flush(runs)
    elapsed = time.perf_counter() - started
    store.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--tenants", type=int, default=8)
    parser.add_argument("--steady", type=int, default=0, help="simulated seconds (0: off)")
    parser.add_argument("--rate", type=int, default=1200, help="runs per simulated second")
    parser.add_argument("--jobs", type=int, default=12_000, help="recurring jobs (steady)")
    parser.add_argument("--targets", choices=("shared", "distinct", "kafka"), default="shared",
                        help="one webhook URL for all, one per job, or Kafka records")  # fmt: skip
    parser.add_argument("--spec", choices=("carried", "none"), default="carried",
                        help="runs carry their dispatch spec, or only the definition")  # fmt: skip
    args = parser.parse_args()
    shape = {"distinct": args.targets == "distinct", "carried": args.spec == "carried",
             "kafka": args.targets == "kafka"}  # fmt: skip
    if args.steady:
        with tempfile.TemporaryDirectory() as tmp:
            per_run = steady_seconds(args.rate, args.jobs, args.steady, args.tenants, Path(tmp),
                                     **shape)  # fmt: skip
        print(json.dumps({"steady_us_per_run": round(per_run * 1e6, 1), "rate": args.rate,
                          "jobs": args.jobs, "seconds": args.steady}))  # fmt: skip
        return
    values = run_values(args.runs, args.tenants, **shape)
    with tempfile.TemporaryDirectory() as tmp:
        logic_s, records, state = logic_seconds(values, Path(tmp))
        store_s = store_seconds(args.runs, Path(tmp))
    result = {
        "runs": args.runs,
        "logic_us_per_run": round(logic_s / args.runs * 1e6, 1),
        "store_us_per_run": round(store_s / args.runs * 1e6, 1),
        "logic_vs_store": round(logic_s / store_s, 2),
        "records_per_run": round(records / args.runs, 2),
        # kept per finished run for the dedupe retention (the changelog's before compression)
        "state_bytes_per_finished_run": round(state["sst_bytes"] / args.runs),
        "changelog_bytes_per_finished_run": round(state["changelog_bytes"] / args.runs),
        "targets": args.targets,
        "spec": args.spec,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
