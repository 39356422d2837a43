"""A tiny topology for the runtime tests: a changelogged counter per key.

Inputs ``in`` and ``in-b`` (co-partitioned); each record increments ``count/<key>``
(changelogged) and outputs ``<count>`` to ``out`` on the same partition. ``idx/<key>`` is an
unlogged derived entry rebuilt by ``restore_record``. A value ``poison`` raises, ``reject``
is rejected by the topology itself, and ``later`` parks the key under ``pending/`` for the
next punctuate to emit.

Run as ``python -m tests.runtime.runtime_counter_app`` from the repository root: settings
from SCHEDULERSTREAM_* variables, an optional per-record delay RT_DELAY_MS, and
RT_STATUS_FILE receiving the running partitions as JSON.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from schedulerstream.runtime import (
    Processor,
    StateStore,
    TaskContext,
    TaskState,
    Topology,
    install_signal_handlers,
)
from schedulerstream.settings import Settings, load_settings


class CounterTopology(Topology):
    """Counts records per key; see the module docstring."""

    def __init__(self, settings: Settings, delay_ms: float = 0.0) -> None:
        self.settings = settings
        self.out = settings.topic("out")
        self.instance = settings.instance_id.encode()
        self.delay_s = delay_ms / 1000
        self.punctuations = 0
        self.punctuated: list[int] = []  # the partition of each punctuate call, in order
        self.running: list[int] = []
        self.stopped: list[int] = []
        self.metrics: dict[str, float] = {}  # the processor's, for the "life" header

    @property
    def name(self) -> str:
        return "counter"

    @property
    def input_topics(self) -> list[str]:
        return [self.settings.topic("in"), self.settings.topic("in-b")]

    @property
    def changelog_topic(self) -> str:
        return self.settings.topic("counter-changelog")

    def restore_record(self, store: StateStore, key: bytes, value: bytes | None) -> None:
        super().restore_record(store, key, value)
        if key.startswith(b"count/"):
            index = b"idx/" + key[len(b"count/") :]
            if value is None:
                store.delete(index, logged=False)
            else:
                store.put(index, value, logged=False)

    def process(self, ctx: TaskContext, message: Any) -> None:
        key: bytes = message.key()
        if message.value() == b"poison":
            raise ValueError("poison record")
        if message.value() == b"reject":
            ctx.reject(message, "explicitly rejected")
            return
        if message.value() == b"later":
            ctx.store.put(b"pending/" + key, b"")
            return
        count = int(ctx.store.get(b"count/" + key) or b"0") + 1
        ctx.store.put(b"count/" + key, str(count).encode())
        ctx.store.put(b"idx/" + key, str(count).encode(), logged=False)
        ctx.produce(self.out, key, str(count).encode(), ctx.partition, self._headers())
        if self.delay_s:
            time.sleep(self.delay_s)

    def punctuate(self, ctx: TaskContext, now_us: int) -> None:
        self.punctuations += 1
        self.punctuated.append(ctx.partition)
        for key, _ in ctx.store.prefix(b"pending/"):
            job = key[len(b"pending/") :]
            ctx.produce(self.out, job, b"later", ctx.partition, self._headers())
            ctx.store.delete(key)

    def _headers(self) -> list[tuple[str, bytes]]:
        """Who produced it, and how many times that member had lost its partitions."""
        return [("by", self.instance), ("life", str(int(self.metrics.get("lost", 0))).encode())]

    def on_running(self, ctx: TaskContext) -> None:
        self.running.append(ctx.partition)

    def on_stopped(self, partition: int) -> None:
        self.stopped.append(partition)


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    settings = load_settings()
    topology = CounterTopology(settings, float(os.environ.get("RT_DELAY_MS", "0")))
    status = Path(os.environ["RT_STATUS_FILE"]) if "RT_STATUS_FILE" in os.environ else None
    running: set[int] = set()

    def on_state(partition: int, state: TaskState) -> None:
        if state is TaskState.RUNNING:
            running.add(partition)
        else:
            running.discard(partition)
        if status is not None:
            tmp = status.with_suffix(".tmp")
            tmp.write_text(json.dumps({"running": sorted(running), "pid": os.getpid()}))
            tmp.replace(status)

    processor = Processor(settings, topology, on_state_change=on_state)
    topology.metrics = processor.metrics
    install_signal_handlers(processor)
    processor.run()
    print(json.dumps({"exit": "clean", "metrics": processor.metrics}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
