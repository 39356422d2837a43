"""The delivery loop's CPU per attempt with the processor thread idle and busy, in the same run.

The dispatcher sends its HTTP attempts from the ``Executor``'s event loop, a second thread of
the processor's process: the two share one GIL. Here a thread plays the processor: it submits
attempts (``HttpSender`` to the bench receiver, ``CONCURRENCY`` at once, admitted by the
dispatcher's ``Limits``) and drains their completions, in two phases that alternate:

- ``idle``: between drains it waits 1 ms, as the processor waits in ``consume``;
- ``busy``: for every completion it also spends ``--work-us`` of CPU in Python, holding the
  GIL (default 250: the dispatcher's main-thread CPU per run in ``bench_dispatch.py``);
- ``backlog`` (the delivery process, idle): the dispatcher's default limits (200 in all, 50 per
  tenant, 100 per host) over 8 tenants, with the host timed so that the Limits admit a prefetch
  of 3 (depth 4): up to 300 committed starts wait in the child behind the full host, as
  prefetched starts do in a dispatcher.

Figures: attempts per second and the loop thread's own CPU per attempt (from /proc) in each
phase; ``executor_contention``: the busy loop CPU over the idle one (1.0: sharing the GIL
costs the loop nothing); ``executor_backlog_cost``: the backlog's loop CPU over the idle
process's (1.0: waiting starts cost the loop nothing). ``executor_others_cores``: what other
processes (not this one, its delivery children, the receiver) took meanwhile; above 0.2
cores, ``executor_warning``.

    .venv/bin/python bench/bench_executor.py [--attempts 20000] [--work-us 250]

The last stdout line is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.common import cpu_seconds, machine_busy, noise_warning, progress
from bench.stack import Receiver
from schedulerstream.dispatcher.deliveries import Deliveries
from schedulerstream.dispatcher.delivery_process import DeliveryProcess
from schedulerstream.dispatcher.executor import Executor
from schedulerstream.dispatcher.limits import Limits
from schedulerstream.model import HttpTarget
from schedulerstream.targets.base import Delivery
from schedulerstream.targets.http import HttpSender

CONCURRENCY = 100  # as bench_dispatch.py: host and total concurrency
BACKLOG_TENANTS, BACKLOG_DEPTH, TIMED_S = 8, 4, 0.005
ROUNDS = 2
TENANT, HOST = "bench", "receiver"
SCHEDULED_US = 1_735_689_600_000_000


def thread_cpu_s(native_id: int) -> float:
    """CPU seconds (user + system) of one thread of this process."""
    stat = Path(f"/proc/{os.getpid()}/task/{native_id}/stat").read_text()
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def spend(seconds: float) -> None:
    """Hold the GIL for ``seconds`` of this thread's CPU (Python bytecode, no I/O)."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def phase(
    url: str, attempts: int, work_s: float, where: str, backlog: bool = False
) -> dict[str, float]:
    """``attempts`` deliveries through a fresh Executor (``where``: "thread") or
    DeliveryProcess ("process"); rate and the loop's CPU per attempt. ``backlog``: the
    default limits, 8 tenants and a prefetch (see the module)."""
    if backlog:
        limits = Limits(2 * CONCURRENCY, CONCURRENCY // 2, 1e9, CONCURRENCY,
                        depth=BACKLOG_DEPTH, wait_budget_s=0.5)  # fmt: skip
    else:
        limits = Limits(CONCURRENCY, CONCURRENCY, 1e9, CONCURRENCY, depth=2)
    tenants = [f"{TENANT}{k}" for k in range(BACKLOG_TENANTS)] if backlog else [TENANT]
    executor: Deliveries
    if where == "process":
        process = DeliveryProcess(allow_private=True)
        executor = process

        def loop_cpu_s() -> float:
            return cpu_seconds(process.pid)
    else:
        executor = Executor()
        loop_thread = next(t for t in threading.enumerate() if t.name == "dispatch-loop")
        native_id = loop_thread.native_id
        assert native_id is not None

        def loop_cpu_s() -> float:
            return thread_cpu_s(native_id)

    executor.set_gate(limits, 60.0)
    sender = HttpSender(allow_private=True)
    config = HttpTarget(url=url)
    if where == "process":  # the child has started and sends before the clock runs
        warm(executor, limits, sender, config)
    if backlog:  # a timed host gets the prefetch; real attempt times then keep it timed
        limits.timed(HOST, TIMED_S)
    try:
        loop_cpu = loop_cpu_s()
        main_cpu = time.thread_time()
        started = time.perf_counter()
        sent = done = 0
        while done < attempts:
            while sent < attempts:
                tenant = tenants[sent % len(tenants)]
                if not limits.acquire(tenant, 0, HOST):
                    break
                delivery = Delivery(f"{tenant}/j{sent}@1", tenant, f"j{sent}", SCHEDULED_US, 1,
                                    "scheduled", '{"report":"daily"}', 30.0)  # fmt: skip
                executor.submit(0, tenant, delivery, sender, config, HOST)
                sent += 1
            executor.flush()
            completions = executor.drain()
            for completion in completions:
                limits.release(completion.tenant, completion.host)
                if completion.outcome is None or not completion.outcome.succeeded:
                    raise RuntimeError(f"an attempt failed: {completion}")
                if backlog:
                    limits.timed(HOST, completion.outcome.duration_us / 1e6)
            done += len(completions)
            if work_s:
                spend(work_s * len(completions))
            if not completions:
                time.sleep(0.001)  # the processor waiting in consume
        elapsed = time.perf_counter() - started
        loop_us = (loop_cpu_s() - loop_cpu) / attempts * 1e6
        main_us = (time.thread_time() - main_cpu) / attempts * 1e6 - work_s * 1e6
        # the child's CPU (startup included) is ours, not other processes'
        child_s = loop_cpu_s() if where == "process" else 0.0
        return {"per_s": attempts / elapsed, "loop_cpu_us": loop_us, "main_cpu_us": main_us,
                "child_cpu_s": child_s}  # fmt: skip
    finally:
        executor.call(sender.close)
        executor.close()


def warm(executor: Deliveries, limits: Limits, sender: HttpSender, config: HttpTarget) -> None:
    """One attempt through ``executor``, waited for."""
    assert limits.acquire(TENANT, 0, HOST)
    delivery = Delivery(f"{TENANT}/warm@1", TENANT, "warm", SCHEDULED_US, 1, "scheduled", None, 30)
    executor.submit(0, TENANT, delivery, sender, config, HOST)
    executor.flush()
    deadline = time.monotonic() + 60
    while not (found := executor.drain()):
        if time.monotonic() > deadline:
            raise RuntimeError("the delivery process did not answer within 60 s")
        time.sleep(0.01)
    limits.release(TENANT, HOST)
    if found[0].outcome is None or not found[0].outcome.succeeded:
        raise RuntimeError(f"the first attempt failed: {found[0]}")


def measure(attempts: int, work_us: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as log_dir:
        receiver = Receiver(Path(log_dir)).start()
        assert receiver.process is not None
        ours = (os.getpid(), receiver.process.pid)
        ours_at = sum(cpu_seconds(pid) for pid in ours)
        machine_at, started = machine_busy()[0], time.monotonic()
        runs: dict[str, list[dict[str, float]]] = {}
        try:
            for _ in range(ROUNDS):
                for where in ("thread", "process"):
                    for load, work_s in (("idle", 0.0), ("busy", work_us / 1e6)):
                        name = f"{where}_{load}"
                        result = phase(receiver.url(), attempts, work_s, where)
                        runs.setdefault(name, []).append(result)
                        progress(f"{name}: {result}")
                        receiver.clear()
                queued = phase(receiver.url(), attempts, 0.0, "process", backlog=True)
                runs.setdefault("process_backlog", []).append(queued)
                progress(f"process_backlog: {queued}")
                receiver.clear()
        finally:
            elapsed = time.monotonic() - started
            machine_s = machine_busy()[0] - machine_at
            ours_s = sum(cpu_seconds(pid) for pid in ours) - ours_at
            receiver.stop()
    found: dict[str, Any] = {"executor_attempts": attempts, "executor_work_us": work_us}
    for name, results in runs.items():
        for figure in ("per_s", "loop_cpu_us", "main_cpu_us"):
            found[f"executor_{name}_{figure}"] = round(sum(r[figure] for r in results) / ROUNDS, 1)
    for where in ("thread", "process"):
        found[f"executor_{where}_contention"] = round(
            found[f"executor_{where}_busy_loop_cpu_us"]
            / found[f"executor_{where}_idle_loop_cpu_us"],
            2,
        )
    found["executor_backlog_cost"] = round(
        found["executor_process_backlog_loop_cpu_us"] / found["executor_process_idle_loop_cpu_us"],
        2,
    )
    found["executor_process_vs_thread_busy"] = round(
        found["executor_process_busy_per_s"] / found["executor_thread_busy_per_s"], 2
    )
    children_s = sum(r["child_cpu_s"] for results in runs.values() for r in results)
    others = round(max(0.0, machine_s - ours_s - children_s) / elapsed, 3)
    found["executor_others_cores"] = others
    warning = noise_warning("executor", others)
    if warning:
        found["executor_warning"] = warning
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--attempts", type=int, default=20_000)
    parser.add_argument("--work-us", type=float, default=250.0)
    args = parser.parse_args()
    print(json.dumps(measure(args.attempts, args.work_us)))


if __name__ == "__main__":
    main()
