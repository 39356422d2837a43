"""Instructions per attempt of the delivery loop against a raw aiohttp loop (valgrind).

On a machine whose speed moves within minutes, CPU time cannot show a few per cent, but an
instruction count can: each mode runs ``--attempts`` deliveries to one receiver process with
100 in flight, under ``valgrind --tool=cachegrind``, at two sizes, and the difference divided
by the difference of sizes is the work per attempt without the start-up.

- ``raw``: 100 coroutines posting the same JSON body shape with ``session.post``;
- ``sender``: 100 coroutines calling ``HttpSender.deliver`` (envelope, headers, outcome);
- ``executor``: every attempt submitted to an ``Executor`` with a gate of 100 (its loop run
  on this thread, as in the delivery process), ``HttpSender`` its target.

    .venv/bin/python bench/bench_delivery_loop.py [--attempts 1000,3000] [--modes raw,executor]
    .venv/bin/python bench/bench_delivery_loop.py --run executor --attempts 2000 --port P  (one run)

The last stdout line is JSON: ``<mode>_instructions_per_attempt`` and, for sender and
executor, their ratio to raw. Needs valgrind on the PATH.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness.procs import ReceiverProcess
from schedulerstream.dispatcher.deliveries import Completion
from schedulerstream.dispatcher.executor import Executor
from schedulerstream.jsontext import compact
from schedulerstream.model import HttpTarget
from schedulerstream.targets.base import Delivery
from schedulerstream.targets.http import HttpSender

IN_FLIGHT = 100
MODES = ("raw", "sender", "executor")
SCHEDULED_US = 1_764_929_410_000_000


def _delivery(i: int) -> Delivery:
    return Delivery(f"t/j{i}@20261205T101010Z", "t", f"j{i}", SCHEDULED_US, 1, "scheduled",
                    None, 30.0)  # fmt: skip


async def _raw(url: str, attempts: int) -> None:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=2 * IN_FLIGHT)) as s:
        numbers = iter(range(attempts))

        async def worker() -> None:
            for i in numbers:
                body = compact({"run_id": f"t/j{i}@20261205T101010Z", "tenant": "t",
                                "job_id": f"j{i}", "scheduled_at": "2026-12-05T10:10:10Z",
                                "attempt": 1, "trigger": "scheduled",
                                "payload": None}).encode()  # fmt: skip
                headers = {"content-type": "application/json", "webhook-id": f"raw-{i}",
                           "webhook-timestamp": str(int(time.time()))}  # fmt: skip
                async with s.post(url, data=body, headers=headers, allow_redirects=False) as r:
                    await r.read()

        await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))


async def _sender(url: str, attempts: int) -> None:
    sender, config = HttpSender(allow_private=True), HttpTarget(url=url)
    numbers = iter(range(attempts))

    async def worker() -> None:
        for i in numbers:
            await sender.deliver(_delivery(i), config)

    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    await sender.close()


class _Gate:
    concurrency = IN_FLIGHT
    host_concurrency = IN_FLIGHT

    def tenant_concurrency_of(self, tenant: str) -> int:
        return IN_FLIGHT


def _executor(url: str, attempts: int, host: str) -> None:
    done = [0]

    def completed(completion: Completion) -> None:
        done[0] += 1
        if done[0] == attempts:
            executor.loop.stop()

    executor = Executor(thread=False, on_complete=completed)
    sender, config = HttpSender(allow_private=True), HttpTarget(url=url)
    executor.set_gate(_Gate(), 60.0)
    for i in range(attempts):
        executor.submit(0, "t", _delivery(i), sender, config, host)
    executor.run()
    executor.loop.run_until_complete(sender.close())


def run_one(mode: str, attempts: int, port: int) -> None:
    url = f"http://127.0.0.1:{port}/ok"
    if mode == "raw":
        asyncio.run(_raw(url, attempts))
    elif mode == "sender":
        asyncio.run(_sender(url, attempts))
    else:
        _executor(url, attempts, f"127.0.0.1:{port}")


def instructions(mode: str, attempts: int, port: int) -> int:
    """Instructions of one run of ``mode`` under cachegrind (the whole process)."""
    command = ["valgrind", "--tool=cachegrind", "--cache-sim=no",
               "--cachegrind-out-file=/dev/null", sys.executable, __file__, "--run", mode,
               "--attempts", str(attempts), "--port", str(port)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count from valgrind:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--attempts", default="1000,3000", help="two sizes (or one with --run)")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--run", choices=MODES, help="one run of this mode (no valgrind)")
    parser.add_argument("--port", type=int, default=0, help="the receiver's (with --run)")
    args = parser.parse_args()
    if args.run:
        run_one(args.run, int(args.attempts), args.port)
        return 0
    if shutil.which("valgrind") is None:
        parser.error("valgrind is not installed")
    small, large = (int(n) for n in args.attempts.split(","))
    receiver = ReceiverProcess(record=False).start()
    found: dict[str, Any] = {"attempts": [small, large]}
    try:
        for mode in args.modes.split(","):
            counts = [instructions(mode, n, receiver.port) for n in (small, large)]
            per = round((counts[1] - counts[0]) / (large - small))
            found[f"{mode}_instructions_per_attempt"] = per
            print(f"{mode}: {per:,} instructions per attempt", file=sys.stderr)
    finally:
        receiver.stop()
    raw = found.get("raw_instructions_per_attempt")
    for mode in ("sender", "executor"):
        if raw and f"{mode}_instructions_per_attempt" in found:
            found[f"{mode}_vs_raw"] = round(found[f"{mode}_instructions_per_attempt"] / raw, 3)
    print(json.dumps(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
