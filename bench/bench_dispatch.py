"""The dispatcher draining pre-produced runs to a real receiver (one process, then N of its
group), against a raw aiohttp client driving the same receiver, in the same run.

Fair on both sides:

- concurrency: CONCURRENCY requests in flight. The raw client runs CONCURRENCY workers; the
  dispatcher runs with ``host_concurrency`` = ``dispatch_concurrency`` = CONCURRENCY (every
  target is the one receiver; ``tenants`` x ``tenant_concurrency`` is above it). With N
  processes each has CONCURRENCY // N, the same in all. Reported as ``dispatch_concurrency``.
- the clock runs from the moment the work is available to the last response. Raw client: the
  bodies are in memory; from its start to its last response. Dispatcher: ``runs`` RunTriggered
  records (the scheduler's encoding: distinct jobs of ``tenants`` tenants, HTTP targets at the
  receiver, all already due) are produced to cron.runs in one transaction left open while
  ``schedulerstream dispatcher [--processes N]`` starts, restores and joins; once the group's
  tasks run on every partition (its /metrics say so) the transaction is committed, and the
  clock runs from that commit to the last run's first arrival at the receiver.

Figures: ``dispatch_per_s`` (one process, = ``dispatch_per_s_1proc``), ``dispatch_per_s_Nproc``,
``dispatch_scaling`` (N processes / one), ``raw_http_per_s`` (the mean of a raw run before and
one after the dispatchers), their ratio, CPU per run (``dispatch_cpu_us_per_run``: the
processor and its delivery process, of which ``dispatch_delivery_cpu_us_per_run`` the latter;
beside it the receiver's and the broker's per run, and the receiver's per raw request: on two
cores the rates are set by the sum), commits and changelog records per run (the members'
counters), the broker's and the dispatcher's cores while idle for ``IDLE_S`` just before the
commit (``dispatch_idle_*_cores``: the broker's share of a run is what it takes above that),
and each measurement's ``*_others_cores``:
the CPU the rest of the machine took meanwhile (beside the dispatcher, the receiver, the bench's
broker and this process). Above 0.2 cores a warning goes to stderr and ``dispatch_warnings``.

    .venv/bin/python bench/bench_dispatch.py [--runs 10000] [--tenants 8] [--processes 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from confluent_kafka import Producer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.common import (
    RESULTS,
    CpuMeter,
    bench_broker,
    broker_pid,
    children,
    drop_topics,
    free_ports,
    fresh,
    progress,
    start_profile,
    summarize_profile,
)
from bench.stack import BENCH_TENANT_RATE, Receiver, http_job, wait_until
from harness.procs import settings_env
from schedulerstream.codec import default_codec
from schedulerstream.ids import scheduled_run_id
from schedulerstream.kafka.clients import producer_config
from schedulerstream.partitioner import partition_for_job_key
from schedulerstream.scheduler.plan import dispatch_spec_json
from schedulerstream.settings import Settings

SECOND = 1_000_000
CONCURRENCY = 100  # requests in flight, raw client and dispatcher(s) alike
HOLD_MS = 600_000  # the held transaction outlives the dispatcher's start on a busy machine


@dataclass(frozen=True, slots=True)
class DueRun:
    """One due run: its cron.runs record and the envelope-sized body a raw request sends."""

    key: bytes
    value: bytes
    job_key: str
    body: bytes


def due_runs(url: str, runs: int, tenants: int) -> list[DueRun]:
    """``runs`` due runs of distinct jobs of ``tenants`` tenants (the scheduler's encoding)."""
    codec = default_codec()
    instant = (time.time_ns() // 1000 // SECOND - 5) * SECOND
    iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(instant // SECOND))
    found = []
    for i in range(runs):
        job = http_job(f"t{i % tenants}", f"d{i}", url, {"every": 3600}).with_version(1)
        run_id = scheduled_run_id(job.key, instant)
        definition = job.to_avro()
        value = codec.encode(
            "RunTriggered",
            {
                "run_id": run_id, "tenant": job.tenant, "job_id": job.job_id,
                "scheduled_at_us": instant, "not_before_us": instant, "emitted_at_us": instant,
                "trigger": "scheduled", "payload_json": json.dumps(job.payload),
                "job_version": 1, "job_definition": b"",
                "dispatch_spec_json": dispatch_spec_json(definition),
            },
        )  # fmt: skip
        body = json.dumps(
            {"run_id": run_id, "tenant": job.tenant, "job_id": job.job_id, "scheduled_at": iso,
             "attempt": 1, "trigger": "scheduled", "payload": job.payload},
            separators=(",", ":"),
        ).encode()  # fmt: skip
        found.append(DueRun(run_id.encode(), value, job.key, body))
    return found


class HeldRuns:
    """Due runs produced to cron.runs in one open transaction: invisible to the dispatcher
    (read_committed) until ``commit``."""

    def __init__(self, settings: Settings, runs: list[DueRun]) -> None:
        self.producer = Producer(
            producer_config(
                settings,
                **{"linger.ms": 20, "transactional.id": f"{settings.topic_prefix}bench-runs",
                   "transaction.timeout.ms": HOLD_MS},
            )
        )  # fmt: skip
        self.producer.init_transactions(30)
        self.producer.begin_transaction()
        for run in runs:
            partition = partition_for_job_key(run.job_key, settings.partitions)
            while True:
                try:
                    self.producer.produce(
                        settings.topics.runs, key=run.key, value=run.value, partition=partition
                    )
                    break
                except BufferError:
                    self.producer.poll(0.05)
            self.producer.poll(0)
        if self.producer.flush(120):
            raise RuntimeError("the runs were not all acknowledged")

    def commit(self) -> int:
        """Let the dispatcher see the runs; the wall-clock µs just before the commit."""
        at_us = time.time_ns() // 1000
        self.producer.commit_transaction(60)
        return at_us


async def _raw(url: str, bodies: list[bytes], concurrency: int) -> float:
    """POST every body with ``concurrency`` workers; requests per second."""
    connector = aiohttp.TCPConnector(limit=concurrency * 2)
    async with aiohttp.ClientSession(connector=connector) as session:
        queue = iter(range(len(bodies)))

        async def worker() -> None:
            for i in queue:
                headers = {"content-type": "application/json", "webhook-id": f"raw-{i}",
                           "webhook-timestamp": str(int(time.time()))}  # fmt: skip
                async with session.post(
                    url, data=bodies[i], headers=headers, allow_redirects=False
                ) as response:
                    await response.read()
                    if response.status != 200:
                        raise RuntimeError(f"raw request answered {response.status}")

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return len(bodies) / (time.perf_counter() - started)


def raw_http(receiver: Receiver, bodies: list[bytes], what: str) -> dict[str, Any]:
    """The raw client's requests/s, its CPU µs per request and the others' cores."""
    assert receiver.process is not None
    meter = CpuMeter(_ours(receiver.process.pid), what).start()
    cpu = time.process_time()
    try:
        rate = asyncio.run(_raw(receiver.url(), bodies, CONCURRENCY))
        used = meter.stop()
        return {
            "per_s": rate,
            "cpu_us": (time.process_time() - cpu) / len(bodies) * 1e6,
            "receiver_cpu_us": used[f"p{receiver.process.pid}"] * meter.elapsed / len(bodies) * 1e6,
            "others_cores": used["others_cores"],
            "warning": meter.warning,
        }
    finally:
        receiver.clear()


def _ours(*pids: int) -> dict[str, int]:
    """The processes of the measured system: ``pids``, this process and the bench's broker."""
    found = {f"p{pid}": pid for pid in pids}
    found["bench"] = os.getpid()
    broker = broker_pid()
    if broker is not None:
        found["broker"] = broker
    return found


IDLE_S = 3.0  # the idle dispatcher and broker are measured this long before the commit
COUNTED = ("commits", "changelog_records")  # the members' counters reported per run


class Dispatchers:
    """``schedulerstream dispatcher --processes N`` on one topic set, its log in ``log_dir``;
    member k's /metrics on ``metrics_port + k - 1``."""

    def __init__(self, settings: Settings, log_dir: Path, processes: int) -> None:
        self.settings = settings
        self.processes = processes
        self.metrics_port = free_ports(processes)
        self.log_path = log_dir / f"dispatcher-x{processes}.log"
        env = settings_env(
            settings, instance_id=f"{settings.instance_id}-x{processes}",
            allow_private_targets=True, tenant_rate_per_s=BENCH_TENANT_RATE,
            dispatch_concurrency=CONCURRENCY // processes,
            host_concurrency=CONCURRENCY // processes, metrics_port=self.metrics_port,
        )  # fmt: skip
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "schedulerstream.cli", "dispatcher",
                 "--processes", str(processes)],
                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip

    def _metrics(self, k: int) -> str | None:
        """Member k's /metrics text (None: not answering yet)."""
        url = f"http://127.0.0.1:{self.metrics_port + k}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                return str(answer.read().decode())
        except OSError:
            return None

    def running_tasks(self) -> list[int]:
        """Tasks running in each member (0 for a member not answering yet)."""
        counts = []
        for k in range(self.processes):
            text = self._metrics(k)
            found = text and re.search(
                r'^schedulerstream_tasks\{[^}]*state="running"[^}]*\} (\S+)$', text, re.M
            )
            counts.append(round(float(found.group(1))) if found else 0)
        return counts

    def counter(self, name: str) -> float:
        """``schedulerstream_<name>_total`` summed over the members that answer."""
        total = 0.0
        for k in range(self.processes):
            text = self._metrics(k) or ""
            found = re.search(rf"^schedulerstream_{name}_total\{{[^}}]*\}} (\S+)$", text, re.M)
            total += float(found.group(1)) if found else 0.0
        return total

    def wait_ready(self, timeout: float = 180.0) -> None:
        """Until every member runs tasks and together they run every partition."""

        def ready() -> bool:
            self.check_alive()
            counts = self.running_tasks()
            return all(counts) and sum(counts) == self.settings.partitions

        if not wait_until(ready, timeout, step=0.25, what="the dispatchers' tasks"):
            raise RuntimeError(f"the dispatchers did not start:\n{self.log()[-3000:]}")

    def member_pids(self) -> list[int]:
        """The processes that dispatch: this one, or the supervisor's members."""
        return [self.process.pid] if self.processes == 1 else children(self.process.pid)

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            raise RuntimeError(f"the dispatcher exited:\n{self.log()[-3000:]}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            code = self.process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
            raise RuntimeError(f"the dispatcher ignored SIGTERM:\n{self.log()[-3000:]}") from None
        if code != 0:
            progress(f"the dispatcher exited with {code} on SIGTERM (see {self.log_path})")


def drain(
    base: Settings,
    log_dir: Path,
    receiver: Receiver,
    runs: list[DueRun],
    processes: int,
    profile: float = 0.0,
    profile_child: bool = False,
) -> dict[str, Any]:
    """Pre-produced runs drained by ``processes`` dispatcher processes of one group: the rate
    from the commit that makes them visible to the last first arrival, CPU per run, noise."""
    settings = fresh(base)
    dispatchers = None
    try:
        progress(f"dispatch x{processes}: producing {len(runs)} due runs (held in a transaction)")
        held = HeldRuns(settings, runs)
        dispatchers = Dispatchers(settings, log_dir, processes)
        dispatchers.wait_ready()
        members = dispatchers.member_pids()
        delivery = [child for pid in members for child in children(pid)]
        pids = members + delivery
        assert receiver.process is not None
        meter = CpuMeter(_ours(*pids, receiver.process.pid), f"dispatch x{processes}")
        spy = spy_out = None
        if profile and processes == 1:
            spy_out = RESULTS / "profiles" / f"dispatcher-{time.strftime('%Y%m%dT%H%M%S')}.txt"
            spy = start_profile(delivery[0] if profile_child else members[0], profile, spy_out)
        counted = {name: dispatchers.counter(name) for name in COUNTED}
        idle = CpuMeter(_ours(*pids), "the idle dispatcher").start()
        time.sleep(IDLE_S)  # a fixed span measured, not a wait for a condition
        idle_cores = idle.stop()
        meter.start()
        committed_us = held.commit()
        total = len(runs)
        done = wait_until(lambda: receiver.count() >= total, max(120, total / 50), step=0.1)
        used = meter.stop()
        counted = {name: dispatchers.counter(name) - n for name, n in counted.items()}
        receiver.poll()
        dispatchers.check_alive()
        arrivals = sorted(a.arrival_us for a in receiver.first.values())
        span_s = (arrivals[-1] - committed_us) / 1e6 if arrivals else float("nan")
        rate = len(arrivals) / span_s if span_s > 0 else 0.0
        cpu_s = sum(used[f"p{pid}"] for pid in pids) * meter.elapsed
        delivery_s = sum(used[f"p{pid}"] for pid in delivery) * meter.elapsed
        progress(f"  {len(arrivals)} runs at {rate:.0f}/s in {span_s:.2f} s after the commit")
        found: dict[str, Any] = {
            "per_s": rate,
            "delivered": len(arrivals),
            "complete": done and len(arrivals) >= total,
            "duplicates": receiver.requests - len(receiver.first),
            "drain_s": round(span_s, 2),
            "cpu_us_per_run": round(cpu_s / total * 1e6),
            "delivery_cpu_us_per_run": round(delivery_s / total * 1e6),  # of cpu_us_per_run
            "receiver_cpu_us_per_run": round(
                used[f"p{receiver.process.pid}"] * meter.elapsed / total * 1e6
            ),
            "broker_cpu_us_per_run": round(used.get("broker", 0.0) * meter.elapsed / total * 1e6),
            # what the broker and the dispatcher take with nothing to do, just before
            "idle_broker_cores": idle_cores.get("broker"),
            "idle_dispatcher_cores": round(sum(idle_cores[f"p{pid}"] for pid in pids), 3),
            "others_cores": used["others_cores"],
            "warning": meter.warning,
            # per run, from the members' counters (scraped before the commit and after the
            # last arrival: outcomes committed later are left out)
            **{f"{name}_per_run": round(n / total, 4) for name, n in counted.items()},
        }
        if spy is not None and spy_out is not None:
            spy.wait(60)
            found["profile"] = summarize_profile(spy_out)
            found["profile_file"] = str(spy_out)
        return found
    finally:
        if dispatchers is not None:
            dispatchers.stop()
        receiver.clear()
        drop_topics(settings)


def measure(
    base: Settings, log_dir: Path, runs: int, tenants: int = 8, profile: float = 0.0,
    processes: int = 2, profile_child: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """The figures; with ``profile`` > 0, py-spy records the single dispatcher (its delivery
    process with ``profile_child``) for that many seconds from its start
    (bench/results/profiles/, summarized under ``dispatch_profile``); ``processes`` > 1
    measures a group of that many processes too."""
    receiver = Receiver(log_dir).start()
    try:
        due = due_runs(receiver.url(), runs, tenants)
        bodies = [run.body for run in due]
        progress(f"raw aiohttp client: {runs} POSTs, concurrency {CONCURRENCY}")
        before = raw_http(receiver, bodies, "raw client (before)")
        progress(f"  {before['per_s']:.0f} requests/s")
        one = drain(base, log_dir, receiver, due, 1, profile, profile_child)
        group = drain(base, log_dir, receiver, due, processes) if processes > 1 else None
        after = raw_http(receiver, bodies, "raw client (after)")
        progress(f"raw again: {after['per_s']:.0f} requests/s")
    finally:
        receiver.stop()
    raw = (before["per_s"] + after["per_s"]) / 2
    found: dict[str, Any] = {
        "dispatch_per_s": round(one["per_s"]),
        "dispatch_per_s_1proc": round(one["per_s"]),
        "raw_http_per_s": round(raw),
        "dispatch_vs_raw_http": round(one["per_s"] / raw, 3) if raw else None,
        "dispatch_concurrency": CONCURRENCY,
        "dispatch_runs": runs,
        "dispatch_delivered": one["delivered"],
        "dispatch_complete": one["complete"],
        "dispatch_duplicates": one["duplicates"],
        "dispatch_drain_s": one["drain_s"],
        "dispatch_cpu_us_per_run": one["cpu_us_per_run"],
        "dispatch_delivery_cpu_us_per_run": one["delivery_cpu_us_per_run"],
        "dispatch_receiver_cpu_us_per_run": one["receiver_cpu_us_per_run"],
        "dispatch_broker_cpu_us_per_run": one["broker_cpu_us_per_run"],
        "dispatch_others_cores": one["others_cores"],
        **{f"dispatch_{name}_per_run": one[f"{name}_per_run"] for name in COUNTED},
        "dispatch_idle_broker_cores": one["idle_broker_cores"],
        "dispatch_idle_dispatcher_cores": one["idle_dispatcher_cores"],
        "raw_http_before_per_s": round(before["per_s"]),
        "raw_http_after_per_s": round(after["per_s"]),
        "raw_http_cpu_us_per_request": round((before["cpu_us"] + after["cpu_us"]) / 2),
        "raw_http_receiver_cpu_us_per_request": round(
            (before["receiver_cpu_us"] + after["receiver_cpu_us"]) / 2
        ),
        "raw_http_others_cores": max(before["others_cores"], after["others_cores"]),
    }
    if group is not None:
        n = f"{processes}proc"
        found[f"dispatch_per_s_{n}"] = round(group["per_s"])
        found["dispatch_scaling"] = (
            round(group["per_s"] / one["per_s"], 3) if one["per_s"] else None
        )
        found["dispatch_scaling_processes"] = processes
        found[f"dispatch_complete_{n}"] = group["complete"]
        found[f"dispatch_duplicates_{n}"] = group["duplicates"]
        found[f"dispatch_cpu_us_per_run_{n}"] = group["cpu_us_per_run"]
        found[f"dispatch_others_cores_{n}"] = group["others_cores"]
    warnings = [m["warning"] for m in (before, one, group, after) if m and m["warning"]]
    if warnings:
        found["dispatch_warnings"] = warnings
    if "profile" in one:
        found["dispatch_profile"] = one["profile"]
        found["dispatch_profile_file"] = one["profile_file"]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--tenants", type=int, default=8)
    parser.add_argument("--profile", type=float, default=0.0, help="py-spy seconds (0: none)")
    parser.add_argument("--profile-child", action="store_true",
                        help="profile the delivery process instead of the processor")  # fmt: skip
    parser.add_argument(
        "--processes", type=int, default=2, help="the group's drain too (1: one process only)"
    )
    parser.add_argument(
        "--delivery", choices=("thread", "process"), default=None,
        help="DISPATCH_DELIVERY of the dispatchers (default: the setting's default)",
    )  # fmt: skip
    args = parser.parse_args()
    base = bench_broker()
    if args.delivery is not None:
        base = base.model_copy(update={"dispatch_delivery": args.delivery})
    log_dir = RESULTS / "logs" / time.strftime("%Y%m%dT%H%M%S")
    log_dir.mkdir(parents=True, exist_ok=True)
    found = measure(base, log_dir, args.runs, args.tenants, args.profile, args.processes,
                    args.profile_child)  # fmt: skip
    print(json.dumps(found))


if __name__ == "__main__":
    main()
