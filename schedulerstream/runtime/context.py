"""TaskContext: what a topology callback may do for one task."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from schedulerstream.clock import Clock
from schedulerstream.runtime.store import StateStore

Headers = list[tuple[str, str | bytes | None]]


class Output(NamedTuple):
    """One record to produce inside the current transaction."""

    topic: str
    key: bytes | None
    value: bytes | None
    partition: int | None = None
    headers: Headers | None = None


class TaskContext:
    """The task's partition, its store (read-your-writes), the clock, and produce/reject.

    Records produced from a callback are handed to the transactional producer only when
    the callback returns; if it raises, they are dropped together with its store writes.
    """

    def __init__(
        self,
        partition: int,
        store: StateStore,
        clock: Clock,
        rejected_topic: str | None,
        processor: str,
        request_commit: Callable[[], None] | None = None,
    ) -> None:
        self.partition = partition
        self._request_commit = request_commit
        self.store = store
        self._clock = clock
        self._rejected_topic = rejected_topic
        self._processor = processor
        self.outputs: list[Output] = []
        self.held_until_us: int | None = None

    def now_us(self) -> int:
        """Wall-clock microseconds since the epoch from the injected clock."""
        return self._clock.now_us()

    def produce(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int | None = None,
        headers: Headers | None = None,
    ) -> None:
        """Produce a record in the current transaction (``partition=None``: partitioner)."""
        self.outputs.append(Output(topic, key, value, partition, headers))

    def request_commit(self) -> None:
        """Commit at the end of this loop step rather than at the next commit interval (work
        waits for the commit: ``Topology.after_commit``)."""
        if self._request_commit is not None:
            self._request_commit()

    def hold(self, until_us: int) -> None:
        """From ``process``: leave the current record unprocessed. Its input partition is
        paused and the record is delivered again once the clock reaches ``until_us`` (delay
        topics: no sleeping in the loop). The callback's writes and outputs are dropped."""
        self.held_until_us = until_us

    def reject(self, message: Any, reason: str) -> None:
        """Send ``message`` to the rejected topic with ``reason`` (a poison record)."""
        if self._rejected_topic is None:
            return
        self.outputs.append(rejected_output(self._rejected_topic, message, reason, self._processor))

    def take_outputs(self) -> list[Output]:
        outputs, self.outputs = self.outputs, []
        return outputs


def rejected_output(topic: str, message: Any, reason: str, processor: str) -> Output:
    """The rejected-topic record for ``message``: same key, value, partition and headers,
    plus ``rejected.*`` headers saying where it came from and why."""
    headers: Headers = list(message.headers() or [])
    headers += [
        ("rejected.reason", reason.encode("utf-8", "replace")[:4096]),
        ("rejected.processor", processor.encode()),
        ("rejected.topic", message.topic().encode()),
        ("rejected.partition", str(message.partition()).encode()),
        ("rejected.offset", str(message.offset()).encode()),
    ]
    return Output(topic, message.key(), message.value(), message.partition(), headers)
