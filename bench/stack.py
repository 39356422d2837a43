"""The processes of an end-to-end bench: the recording receiver (bench/receiver.py), and
``schedulerstream scheduler`` / ``schedulerstream dispatcher`` launched by their CLI on one
fresh topic set, so a bench measures whatever the package on disk does."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from schedulerstream.kafka.clients import producer_config
from schedulerstream.model import JobDefinition
from schedulerstream.settings import Settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.common import broker_pid, children, drop_topics, progress
from harness.procs import ProcessorProcess, listening_port, stop_process

RECEIVER = Path(__file__).resolve().parent / "receiver.py"
# The dispatcher's per-tenant rate limit (default 1000/s) is policy, not capacity: the benches
# lift it so they measure the machine; the per-tenant and total concurrency stay as configured.
BENCH_TENANT_RATE = 1_000_000.0


@dataclass(frozen=True, slots=True)
class Arrival:
    arrival_us: int
    run_id: str
    tenant: str
    scheduled_us: int
    attempt: int


class Receiver:
    """``bench/receiver.py`` on 127.0.0.1, any free port, in its own session."""

    def __init__(self, log_dir: Path) -> None:
        self.log_path = log_dir / "receiver.log"
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._read = 0
        self.first: dict[str, Arrival] = {}  # run id → its first arrival
        self.requests = 0

    def start(self, timeout: float = 30.0) -> Receiver:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, str(RECEIVER), "--port", "0"],
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,
            )
        self.port = listening_port(self.process, timeout)
        return self

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _get(self, path: str, method: str = "GET") -> Any:
        request = urllib.request.Request(self.url(path), method=method)
        with urllib.request.urlopen(request, timeout=60) as answer:
            return json.load(answer)

    def count(self) -> int:
        return int(self._get("/_count")["total"])

    def poll(self) -> list[Arrival]:
        """Fetch the records since the last poll; returns first arrivals of new run ids."""
        answer = self._get(f"/_records?from={self._read}")
        self._read += len(answer["records"])
        self.requests += len(answer["records"])
        new = []
        for row in answer["records"]:
            arrival = Arrival(*row)
            if arrival.run_id not in self.first:
                self.first[arrival.run_id] = arrival
                new.append(arrival)
        return new

    def clear(self) -> None:
        self._get("/_records", method="DELETE")
        self._read = 0
        self.requests = 0
        self.first.clear()

    def stop(self) -> None:
        stop_process(self.process)


def http_job(tenant: str, job_id: str, url: str, schedule: dict[str, Any]) -> JobDefinition:
    return JobDefinition.model_validate(
        {"tenant": tenant, "job_id": job_id, "schedule": schedule,
         "target": {"type": "http", "url": url}, "payload": {"bench": job_id}}
    )  # fmt: skip


def delete_jobs(settings: Settings, job_keys: Iterable[str], timeout: float = 120.0) -> None:
    """Tombstones for ``job_keys`` on cron.schedules (murmur2 partitioner, acks=all)."""
    producer = Producer(producer_config(settings, **{"linger.ms": 5}))
    for key in job_keys:
        while True:
            try:
                producer.produce(settings.topic("schedules"), key=key.encode(), value=None)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    if producer.flush(timeout):
        raise RuntimeError("tombstones were not acknowledged")


@dataclass
class Stack:
    """A fresh topic set with a receiver, and scheduler and/or dispatcher processes."""

    settings: Settings
    log_dir: Path
    components: tuple[str, ...] = ("scheduler", "dispatcher")
    overrides: dict[str, object] = field(default_factory=dict)
    receiver: Receiver | None = None
    procs: dict[str, ProcessorProcess] = field(default_factory=dict)

    def start_receiver(self) -> Receiver:
        self.receiver = Receiver(self.log_dir).start()
        return self.receiver

    def start(self, *components: str, timeout: float = 180.0) -> None:
        """Start ``components`` (default: all of this stack's) and wait until each runs a
        task for every partition."""
        env: dict[str, Any] = {
            "allow_private_targets": True,
            "tenant_rate_per_s": BENCH_TENANT_RATE,
            **self.overrides,
        }
        started = []
        for component in components or self.components:
            proc = ProcessorProcess(
                self.settings, component, component, self.log_dir,
                data_dir=self.settings.data_dir / component, **env,
            )  # fmt: skip
            self.procs[component] = proc.start()
            started.append(proc)
        for proc in started:
            proc.wait_for_log(" running: restored", timeout=timeout, count=self.settings.partitions)
        names = ", ".join(p.component for p in started)
        progress(f"{names} running on {self.settings.topic_prefix}*")

    def stop(self, drop: bool = True) -> None:
        for proc in self.procs.values():
            if proc.alive():
                try:
                    proc.stop(30)
                except AssertionError as exc:
                    progress(str(exc).splitlines()[0])
        if self.receiver is not None:
            self.receiver.stop()
        if drop:
            drop_topics(self.settings)

    def pids(self) -> dict[str, int]:
        """Pids of the broker (when the bench started it), the receiver and the processors."""
        found = {name: proc.process.pid for name, proc in self.procs.items() if proc.process}
        for name, pid in list(found.items()):  # a dispatcher's delivery process
            for k, child in enumerate(children(pid)):
                found[f"{name}-child{k}"] = child
        if self.receiver is not None and self.receiver.process is not None:
            found["receiver"] = self.receiver.process.pid
        broker = broker_pid()
        if broker is not None:
            found["broker"] = broker
        return found

    def check_alive(self) -> None:
        for proc in self.procs.values():
            if not proc.alive():
                raise RuntimeError(f"{proc.component} exited:\n{proc.log()[-3000:]}")


def wait_until(condition: Any, timeout: float, step: float = 0.5, what: str = "") -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step)
    if what:
        progress(f"timed out waiting for {what}")
    return False
