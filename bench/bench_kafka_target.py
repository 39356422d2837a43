"""Kafka-target runs against a Go peer (issue #11), on one broker.

The same one-shot jobs (key = job id, a small JSON payload, a Kafka topic as target) are fired
by the peer (bench/peer: a Go timer heap producing each record at its due time, acks=all,
idempotent, no transactions), by the same peer firing exactly once (``txn_peer``: each round
of due jobs one transaction with the records and a "fired" record per job on a state topic,
committed as soon as they are acknowledged: the like-for-like floor of an exactly-once
scheduler) and by ``schedulerstream scheduler`` + ``dispatcher`` (``at`` jobs put with the
Publisher as ``schedules put`` does; the dispatcher produces the record in its transaction).
Each side gets its own target topic and, for ours, a fresh stack.

- ``burst``: N jobs due at one instant (20,000 quick, 100,000 full) → drain seconds (last
  arrival − instant), drain rate, p50/p99 lateness.
- ``spread``: jobs due at a fixed rate (1,000/s for 20 s quick, 60 s full) → p50/p99/max.

Lateness = the bench consumer's receive time (read_committed: a transactional record counts
once its transaction commits, when a reader can see it) − the job's due time, both on this
machine's clock; a job that never arrives counts as infinitely late. The target topics use
LogAppendTime, so the detail also gives lateness by the broker's append time. CPU: the peer's
own getrusage between "ready" (loaded, connected) and "done" (every record acknowledged);
ours: scheduler + dispatcher from the instant − burst lead − 1 s to the last arrival.

    .venv/bin/python bench/bench_kafka_target.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_LOG_APPEND_TIME, Consumer, TopicPartition

# confluent_kafka.admin re-exports NewTopic implicitly
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.bench_scheduler import publish, wait_ingested
from bench.common import (
    RESULTS,
    bench_broker,
    broker_pid,
    cpu_seconds,
    drop_topics,
    fresh,
    machine_busy,
    percentile,
    progress,
)
from bench.stack import Stack
from schedulerstream.kafka import clients
from schedulerstream.model import JobDefinition
from schedulerstream.settings import Settings

PEER_SOURCE = Path(__file__).resolve().parent / "peer"
PEER_LEAD_S = 10.0  # the peer's jobs are due this long after they are written
STALL_S = 60.0  # give up once nothing new arrived for this long after the last due time


@dataclass(frozen=True)
class Load:
    """``count`` jobs from ``start_ms``: all at once (``per_s`` None) or one every 1/per_s s."""

    name: str
    count: int
    per_s: float | None = None

    def dues(self, start_ms: int) -> dict[str, int]:
        """Job id → due time (unix ms)."""
        step = 0.0 if self.per_s is None else 1000 / self.per_s
        return {f"k{i}": start_ms + round(i * step) for i in range(self.count)}


def build_peer(out_dir: Path) -> tuple[Path | None, str]:
    """``go build`` of bench/peer into ``out_dir``: (binary, "") or (None, why not)."""
    go = shutil.which("go") or "/usr/local/go/bin/go"
    if not Path(go).exists():
        return None, "Go is not installed (no go on PATH nor /usr/local/go/bin/go)"
    out_dir.mkdir(parents=True, exist_ok=True)
    binary = out_dir / "peer"
    try:
        done = subprocess.run(
            [go, "build", "-o", str(binary), "."], cwd=PEER_SOURCE, capture_output=True,
            text=True, timeout=600, env={**os.environ, "GOTOOLCHAIN": "local"}, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return None, "go build took over 600 s (is the module proxy reachable?)"
    if done.returncode != 0:
        return None, f"go build failed: {done.stderr.strip()[-400:]}"
    return binary, ""


def create_target(settings: Settings, topic: str) -> None:
    admin = AdminClient(clients.base_config(settings))
    spec = NewTopic(topic, settings.partitions, 1,
                    config={"message.timestamp.type": "LogAppendTime"})  # fmt: skip
    admin.create_topics([spec])[topic].result(30)


class TargetWatch:
    """A read_committed reader of every partition of the target topic from its start: the
    first arrival of each key, stamped with this machine's clock."""

    def __init__(self, settings: Settings, topic: str) -> None:
        config = clients.consumer_config(settings, f"{settings.topic_prefix}bench-target")
        config["fetch.wait.max.ms"] = 20  # the same for both sides; bounds an idle long poll
        self.consumer = Consumer(config)
        deadline = time.monotonic() + 30
        partitions: list[int] = []
        while not partitions and time.monotonic() < deadline:
            found = self.consumer.list_topics(topic, timeout=10).topics.get(topic)
            partitions = list(found.partitions) if found is not None else []
        if not partitions:
            raise RuntimeError(f"target topic {topic} has no partitions")
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        self.arrivals: dict[str, tuple[float, float | None]] = {}  # key → (receive, append) ms
        self.records = 0

    def collect(
        self, dues: dict[str, int], check: Callable[[], None], timeout_s: float
    ) -> dict[str, tuple[float, float | None]]:
        """Read until every key of ``dues`` arrived, ``timeout_s`` passed, or nothing new came
        for ``STALL_S`` after the last due time; ``check`` (about once a second) may raise."""
        last_due_s = max(dues.values()) / 1000
        deadline = time.monotonic() + timeout_s
        last_new, checked = time.time(), time.monotonic()
        while len(self.arrivals) < len(dues) and time.monotonic() < deadline:
            # poll returns at the first record (a batch consume would wait out its timeout
            # unless full); what is queued behind it is taken at once
            first = self.consumer.poll(0.05)
            batch = [] if first is None else [first, *self.consumer.consume(2000, 0)]
            now_ms = time.time() * 1000
            for msg in batch:
                if msg.error():
                    continue
                self.records += 1
                key = (msg.key() or b"").decode()
                if key in dues and key not in self.arrivals:
                    kind, stamp = msg.timestamp()
                    appended = float(stamp) if kind == TIMESTAMP_LOG_APPEND_TIME else None
                    self.arrivals[key] = (now_ms, appended)
                    last_new = now_ms / 1000
            if time.monotonic() - checked > 1.0:
                checked = time.monotonic()
                check()
                if time.time() > max(last_due_s, last_new) + STALL_S:
                    progress(f"  nothing new for {STALL_S:.0f} s: giving up")
                    break
        return self.arrivals

    def close(self) -> None:
        self.consumer.close()


def _ms(value: float) -> float | None:
    return None if math.isinf(value) or math.isnan(value) else round(value, 1)


def lateness(
    dues: dict[str, int], arrivals: dict[str, tuple[float, float | None]], burst: bool
) -> dict[str, Any]:
    """Percentiles of receive − due (a missing job is infinitely late), the burst's drain, and
    append-time lateness (broker LogAppendTime − due)."""
    late = sorted(arrivals[k][0] - due if k in arrivals else math.inf for k, due in dues.items())
    appended = sorted(a - dues[k] for k, (_, a) in arrivals.items() if a is not None)
    found: dict[str, Any] = {
        "jobs": len(dues),
        "arrived": len(arrivals),
        "missing": len(dues) - len(arrivals),
        "early": sum(1 for v in late if v < 0),
        "p50_ms": _ms(percentile(late, 50)),
        "p99_ms": _ms(percentile(late, 99)),
        "max_ms": _ms(late[-1]) if late else None,
        "append_p50_ms": _ms(percentile(appended, 50)),
        "append_p99_ms": _ms(percentile(appended, 99)),
    }
    if burst and arrivals:
        instant = min(dues.values())
        drain_s = (max(r for r, _ in arrivals.values()) - instant) / 1000
        found["drain_s"] = round(drain_s, 2)
        found["drain_per_s"] = round(len(arrivals) / drain_s) if drain_s > 0 else None
    return found


def _wait_until(unix_s: float) -> None:
    while time.time() < unix_s:
        time.sleep(min(0.2, max(0.0, unix_s - time.time())))


class CpuWindow:
    """CPU seconds of named pids and of the whole machine over a window."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.start = {name: cpu_seconds(pid) for name, pid in pids.items()}
        self.machine = machine_busy()

    def stop(self) -> dict[str, float]:
        used = {f"{name}_cpu_s": round(cpu_seconds(pid) - self.start[name], 2)
                for name, pid in self.pids.items()}  # fmt: skip
        busy, _ = machine_busy()
        used["machine_cpu_s"] = round(busy - self.machine[0], 2)
        return used


def _broker() -> dict[str, int]:
    pid = broker_pid()
    return {} if pid is None else {"broker": pid}


def _drain_timeout(load: Load) -> float:
    spread_s = 0.0 if load.per_s is None else load.count / load.per_s
    return spread_s + 120 + load.count / 200


def create_state(settings: Settings, topic: str) -> None:
    admin = AdminClient(clients.base_config(settings))
    spec = NewTopic(topic, settings.partitions, 1, config={"cleanup.policy": "compact"})
    admin.create_topics([spec])[topic].result(30)


def fire_peer(
    base: Settings, log_dir: Path, binary: Path, load: Load, transactional: bool = False
) -> dict[str, Any]:
    """The Go peer fires ``load`` to its own target topic (``transactional``: exactly once,
    with a state record per job); its lateness and CPU."""
    settings = fresh(base, apply=False)
    topic = settings.topic("target")
    command = [str(binary), "-brokers", settings.bootstrap_servers]
    proc: subprocess.Popen[bytes] | None = None
    watch: TargetWatch | None = None
    try:
        create_target(settings, topic)
        if transactional:
            create_state(settings, settings.topic("peer-state"))
            command += ["-state-topic", settings.topic("peer-state")]
        watch = TargetWatch(settings, topic)
        start_ms = math.ceil(time.time() + PEER_LEAD_S) * 1000
        dues = load.dues(start_ms)
        jobs_path = log_dir / f"peer-{load.name}-{settings.topic_prefix.rstrip('.')}.tsv"
        jobs_path.write_text("".join(f"{k}\t{d}\t{topic}\t{{\"n\":{k[1:]}}}\n"
                                     for k, d in dues.items()))  # fmt: skip
        log = (log_dir / f"peer-{load.name}.log").open("ab")
        proc = subprocess.Popen(
            [*command, "-jobs", str(jobs_path)],
            stdout=subprocess.PIPE, stderr=log, start_new_session=True,
        )  # fmt: skip
        log.close()
        ready = _peer_line(proc, 30)
        if ready.get("event") != "ready":
            raise RuntimeError(f"the peer did not start (said {ready})")
        if time.time() > start_ms / 1000 - 2:
            raise RuntimeError("the peer took too long to load: the jobs came due first")
        cpu = CpuWindow(_broker())

        def check() -> None:
            if proc is not None and proc.poll() not in (None, 0):
                raise RuntimeError(f"the peer exited with {proc.returncode} (see its log)")

        progress(f"  peer: {load.count} jobs from "
                 f"{time.strftime('%H:%M:%SZ', time.gmtime(start_ms // 1000))}")  # fmt: skip
        arrivals = watch.collect(dues, check, _drain_timeout(load))
        used = cpu.stop()
        done = _peer_line(proc, 60)
        proc.wait(30)
        found = lateness(dues, arrivals, load.per_s is None)
        found.update(used)
        found["cpu_s"] = round(float(done.get("cpu_s", math.nan)) - float(ready["cpu_s"]), 2)
        found["cpu_total_s"] = done.get("cpu_s")
        found["failed"] = done.get("failed")
        found["max_fire_lag_ms"] = done.get("max_fire_lag_ms")
        found["records_read"] = watch.records
        return found
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            proc.wait(10)
        if watch is not None:
            watch.close()
        drop_topics(settings)


def _peer_line(proc: subprocess.Popen[bytes], timeout: float) -> dict[str, Any]:
    """The peer's next JSON line on stdout ({} when none came in ``timeout`` s)."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    line = proc.stdout.readline().decode() if ready else ""
    try:
        found = json.loads(line) if line.strip() else {}
    except json.JSONDecodeError:
        return {"unreadable": line[:200]}
    return found if isinstance(found, dict) else {}


def kafka_job(job_id: str, due_ms: int, topic: str) -> JobDefinition:
    at = datetime.fromtimestamp(due_ms / 1000, UTC).isoformat()
    return JobDefinition.model_validate(
        {"tenant": "kt", "job_id": job_id, "schedule": {"at": at},
         "target": {"type": "kafka", "topic": topic, "key": job_id},
         "payload": {"n": int(job_id[1:])}}
    )  # fmt: skip


class IngestTooSlow(RuntimeError):
    """The jobs were not all ingested a burst lead before the first came due."""


def fire_ours(base: Settings, log_dir: Path, load: Load) -> dict[str, Any]:
    """``fire_ours_once``, and once more twice as far ahead if the ingest was too slow (a
    loaded machine)."""
    margin_s = max(30, load.count // 1000 + 25)
    try:
        return fire_ours_once(base, log_dir, load, margin_s)
    except IngestTooSlow as exc:
        progress(f"  {exc}: once more, due {2 * margin_s} s ahead")
        return fire_ours_once(base, log_dir, load, 2 * margin_s)


def fire_ours_once(base: Settings, log_dir: Path, load: Load, margin_s: int) -> dict[str, Any]:
    """A fresh scheduler + dispatcher fire ``load`` (due ``margin_s`` ahead) to a target topic;
    lateness and CPU."""
    settings = fresh(base)
    topic = settings.topic("target")
    stack = Stack(settings, log_dir)
    watch: TargetWatch | None = None
    try:
        create_target(settings, topic)
        stack.start()
        watch = TargetWatch(settings, topic)
        start_ms = math.ceil(time.time() + margin_s) * 1000
        dues = load.dues(start_ms)
        t0 = time.monotonic()
        publish(settings, [kafka_job(k, d, topic) for k, d in dues.items()])
        latest_s = start_ms / 1000 - settings.burst_lead_ms / 1000 - 2  # all ingested by then
        try:
            ingest_s = time.monotonic() - t0
            ingest_s += wait_ingested(settings, timeout=max(0.0, latest_s - time.time()))
        except RuntimeError:
            raise IngestTooSlow(f"not all {load.count} jobs ingested in {margin_s} s") from None
        lead_s = start_ms / 1000 - time.time()
        progress(f"  ours: {load.count} jobs from "
                 f"{time.strftime('%H:%M:%SZ', time.gmtime(start_ms // 1000))}, put and "
                 f"ingested in {ingest_s:.1f} s, {lead_s:.1f} s ahead")  # fmt: skip
        if time.time() > latest_s:
            raise IngestTooSlow(f"{load.count} jobs ingested {lead_s:.1f} s before due")
        _wait_until(start_ms / 1000 - settings.burst_lead_ms / 1000 - 1)
        pids = {name: p.process.pid for name, p in stack.procs.items() if p.process}
        cpu = CpuWindow({**pids, **_broker()})
        arrivals = watch.collect(dues, stack.check_alive, _drain_timeout(load))
        used = cpu.stop()
        found = lateness(dues, arrivals, load.per_s is None)
        found.update(used)
        found["cpu_s"] = round(sum(used[f"{name}_cpu_s"] for name in pids), 2)
        found["ingest_s"] = round(ingest_s, 1)
        found["due_ahead_s"] = margin_s
        found["records_read"] = watch.records
        return found
    finally:
        if watch is not None:
            watch.close()
        stack.stop()


def _line(side: str, r: dict[str, Any]) -> str:
    drain = f"drain {r['drain_s']} s ({r['drain_per_s']}/s), " if "drain_s" in r else ""
    return (f"  {side}: {drain}p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms, "
            f"missing {r['missing']}/{r['jobs']}, {r['cpu_s']} CPU s")  # fmt: skip


def measure(
    base: Settings, log_dir: Path, quick: bool, burst_jobs: int = 0
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(figures, detail): burst and spread, each through the peer and through ours."""
    loads = [Load("burst", burst_jobs or (20_000 if quick else 100_000)),
             Load("spread", 1000 * (20 if quick else 60), per_s=1000.0)]  # fmt: skip
    binary, why_not = build_peer(RESULTS / "peer")
    if binary is None:
        progress(f"kafka_target: no Go peer ({why_not}); measuring ours only")
    figures: dict[str, Any] = {
        "kafka_target_burst_jobs": loads[0].count,
        "kafka_target_spread_jobs": loads[1].count,
        "kafka_target_spread_per_s": loads[1].per_s,
        "kafka_target_lateness_clock": "bench consumer receive time (read_committed) - due",
    }
    if why_not:
        figures["kafka_target_peer_skipped"] = why_not
    detail: dict[str, Any] = {}
    for load in loads:
        for side in ("peer", "txn_peer", "ours") if binary is not None else ("ours",):
            progress(f"kafka_target {load.name} through {side}")
            if binary is not None and side != "ours":
                result = fire_peer(base, log_dir, binary, load, side == "txn_peer")
            else:
                result = fire_ours(base, log_dir, load)
            progress(_line(side, result))
            detail[f"{load.name}_{side}"] = result
            prefix = f"kafka_target_{load.name}"
            if load.per_s is None:
                figures[f"{prefix}_drain_s_{side}"] = result.get("drain_s")
                figures[f"{prefix}_per_s_{side}"] = result.get("drain_per_s")
            figures[f"{prefix}_p50_ms_{side}"] = result["p50_ms"]
            figures[f"{prefix}_p99_ms_{side}"] = result["p99_ms"]
            figures[f"{prefix}_cpu_s_{side}"] = result["cpu_s"]
            if result["missing"]:
                figures[f"{prefix}_missing_{side}"] = result["missing"]
    for peer_side in ("peer", "txn_peer"):
        for load_name, figure in (("burst", "burst_drain_s"), ("spread", "spread_p99_ms")):
            peer, ours = (
                figures.get(f"kafka_target_{figure}_{peer_side}"),
                figures.get(f"kafka_target_{figure}_ours"),
            )
            if peer and ours:  # peer / ours: 1 or more means ours is at least as fast or timely
                figures[f"kafka_target_{load_name}_vs_{peer_side}"] = round(peer / ours, 3)
    return figures, detail


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--burst-jobs", type=int, default=0)
    args = parser.parse_args()
    base = bench_broker()
    log_dir = RESULTS / "logs" / time.strftime("%Y%m%dT%H%M%S")
    log_dir.mkdir(parents=True, exist_ok=True)
    print(json.dumps(measure(base, log_dir, args.quick, args.burst_jobs)[0]))


if __name__ == "__main__":
    main()
