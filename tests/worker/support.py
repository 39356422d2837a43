"""Worker-pool test helpers: an in-process dispatcher and worker, worker processes, runs."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from harness.procs import settings_env
from schedulerstream.contracts.worker import WorkerEvent
from schedulerstream.dispatcher.topology import DispatcherTopology
from schedulerstream.kafka.clients import producer_config
from schedulerstream.model import JobDefinition
from schedulerstream.partitioner import partition_for_job_key
from schedulerstream.runtime import Processor
from schedulerstream.settings import Settings
from schedulerstream.worker import WorkerRunner
from tests.dispatcher.support import CODEC, attempt_events, kinds, wait_for
from tests.support.runs import read_events
from tests.worker.apps import app

SECOND = 1_000_000
FAST_RETRY = {"max_attempts": 5, "initial_backoff": 0.2, "multiplier": 2, "max_backoff": 0.5}


def now_us() -> int:
    return time.time_ns() // 1000


def worker_job(job_id: str, pool: str = "p", tenant: str = "acme", **extra: Any) -> JobDefinition:
    return JobDefinition.model_validate(
        {
            "tenant": tenant,
            "job_id": job_id,
            "version": 1,
            "schedule": {"every": 60},
            "target": {"type": "worker", "pool": pool},
            **extra,
        }
    )


class Runs:
    """RunTriggered records and commands as the scheduler and the CLI would produce them."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.producer = Producer(producer_config(settings))

    def trigger(self, definition: JobDefinition, payload: dict[str, Any]) -> str:
        instant = now_us()
        rid = f"{definition.key}@{instant}"
        value = CODEC.encode(
            "RunTriggered",
            {
                "run_id": rid, "tenant": definition.tenant, "job_id": definition.job_id,
                "scheduled_at_us": instant, "not_before_us": instant, "emitted_at_us": instant,
                "trigger": "scheduled", "payload_json": json.dumps(payload),
                "job_version": definition.version or 0,
                "job_definition": CODEC.encode("JobDefinition", definition.to_avro()),
            },
        )  # fmt: skip
        self.produce("runs", rid.encode(), value, definition.key)
        return rid

    def cancel(self, definition: JobDefinition, rid: str) -> None:
        value = CODEC.encode(
            "Command",
            {
                "tenant": definition.tenant, "job_id": definition.job_id,
                "issued_at_us": now_us(),
                "command": ("io.schedulerstream.CancelRun", {"run_id": rid, "reason": "by test"}),
            },
        )  # fmt: skip
        self.produce("commands", definition.key.encode(), value, definition.key)

    def worker_event(self, event: WorkerEvent) -> None:
        self.produce("worker-events", event.run_id.encode(), event.to_bytes(), event.job_key)

    def produce(self, topic: str, key: bytes, value: bytes, job_key: str,
                partition: int | None = None) -> None:  # fmt: skip
        if partition is None:
            partition = partition_for_job_key(job_key, self.settings.partitions)
        self.producer.produce(self.settings.topic(topic), key=key, value=value,
                              partition=partition)  # fmt: skip
        assert self.producer.flush(30) == 0


@contextmanager
def dispatcher_thread(settings: Settings) -> Iterator[DispatcherTopology]:
    """The dispatcher topology on the runtime, in this process, until the block ends."""
    topology = DispatcherTopology(settings)
    processor = Processor(settings, topology)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            processor.run()
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run, name="dispatcher", daemon=True)
    thread.start()
    try:
        wait_for(lambda: failure or len(processor.running_partitions()) == settings.partitions,
                 60, "the dispatcher's tasks to run", every=0.1)  # fmt: skip
        assert not failure, failure
        yield topology
    finally:
        processor.stop()
        thread.join(60)
        topology.close()


@contextmanager
def worker_thread(settings: Settings, pool: str = "p", worker_id: str = "w1",
                  concurrency: int = 1,
                  tenants: frozenset[str] | None = None) -> Iterator[WorkerRunner]:  # fmt: skip
    """A WorkerRunner of ``tests.worker.apps:app`` in this process."""
    runner = WorkerRunner(settings, app, pool, concurrency=concurrency, worker_id=worker_id,
                          drain_s=0, tenants=tenants)  # fmt: skip
    runner.start()
    thread = threading.Thread(target=runner.run, name=f"worker {worker_id}", daemon=True)
    thread.start()
    try:
        yield runner
    finally:
        runner.stop()
        thread.join(30)


class WorkerProcess:
    """``schedulerstream worker --pool P --app tests.worker.apps:app`` in its own session."""

    def __init__(self, settings: Settings, worker_id: str, log_dir: Path, pool: str = "p",
                 **overrides: object) -> None:  # fmt: skip
        self.env = settings_env(settings, instance_id=worker_id, **overrides)
        self.args = [sys.executable, "-m", "schedulerstream.cli", "worker", "--pool", pool,
                     "--app", "tests.worker.apps:app", "--drain", "1"]  # fmt: skip
        self.log_path = log_dir / f"worker-{worker_id}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> WorkerProcess:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(self.args, env=self.env, stdout=log,
                                            stderr=subprocess.STDOUT,
                                            start_new_session=True)  # fmt: skip
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_for_log(self, needle: str, timeout: float = 60) -> None:
        def seen() -> bool:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"worker exited early:\n{self.log()[-3000:]}")
            return needle in self.log()

        wait_for(seen, timeout, f"{needle!r} in {self.log_path}", every=0.1)

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait(30)

    def stop(self) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.terminate()
        return self.process.wait(30)


def events_of(settings: Settings, rid: str, last: str, timeout: float = 30) -> list[Any]:
    """(kind, attempt) of the run's committed AttemptEvents once one of kind ``last`` is in."""

    def seen() -> list[tuple[str, int]] | None:
        found = kinds(attempt_events(settings, idle_timeout=0.5).get(rid, []))
        return found if any(k == last for k, _ in found) else None

    return list(wait_for(seen, timeout, f"{last} of {rid}", every=0.2))


def records(settings: Settings, logical_topic: str, rid: str | None = None) -> list[Any]:
    """Committed JSON records of a topic (for one run id), as dicts with their partition."""
    found = []
    for message in read_events(settings, logical_topic, 0.5):
        if rid is None or message.key() == rid.encode():
            try:
                value = json.loads(message.value())
            except ValueError:
                value = {"raw": message.value()}
            found.append({**value, "_partition": message.partition(),
                          "_headers": dict(message.headers() or [])})  # fmt: skip
    return found
