"""TaskContext: what a topology callback may do for one task."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from schedulerstream.clock import Clock
from schedulerstream.runtime.quarantine import Quarantine
from schedulerstream.runtime.store import StateStore

Headers = list[tuple[str, str | bytes | None]]


class OutRecord(NamedTuple):
    """One record to produce inside the current transaction; ``origin`` names the run,
    attempt or job it belongs to, so a refusal of this record is charged to that alone."""

    topic: str
    key: bytes | None
    value: bytes | None
    partition: int | None = None
    headers: Headers | None = None
    origin: str | None = None
    alone: bool = False  # in a batch of its own (``TransactionalProducer.produce_alone``)

    def size(self) -> int:
        """Bytes of key, value and headers (what the broker's record size counts)."""
        size = len(self.key or b"") + len(self.value or b"")
        for name, value in self.headers or ():
            size += len(name) + (len(value) if value is not None else 0)
        return size


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
        quarantine: Quarantine | None = None,
        max_record_bytes: int = 1_000_000,
        request_tick: Callable[[int | None], None] | None = None,
    ) -> None:
        self.partition = partition
        self.max_record_bytes = max_record_bytes
        self._quarantine = quarantine or Quarantine()
        self._request_commit = request_commit
        self._request_tick = request_tick
        self.store = store
        self._clock = clock
        self._rejected_topic = rejected_topic
        self._processor = processor
        self.outputs: list[OutRecord] = []
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
        origin: str | None = None,
        alone: bool = False,
    ) -> None:
        """Produce a record in the current transaction (``partition=None``: partitioner;
        ``alone``: in a batch of its own, so a refusal for size is its own)."""
        self.outputs.append(OutRecord(topic, key, value, partition, headers, origin, alone))

    def failed(self, origin: str) -> str | None:
        """Why a record of ``origin`` was refused by the broker in a transaction that was
        then aborted (None: it was not). This is the replay: take that origin out now (fail
        its attempt, quarantine its job) and the rest of the transaction commits."""
        return self._quarantine.reason(self.partition, origin)

    def refused_for_size(self, origin: str, alone: bool = True) -> bool:
        """Was the refusal ``failed`` reports for size: the record's own (``alone``), or its
        batch's (it may fit on its own)?"""
        return self._quarantine.refused_for_size(self.partition, origin, alone)

    def mark(self) -> tuple[int, int]:
        """A point of this callback's work (store writes and records) that ``undo_to``
        returns to: one run's share of a callback that serves many."""
        return self.store.mark(), len(self.outputs)

    def undo_to(self, mark: tuple[int, int]) -> None:
        """Drop the store writes and records made since ``mark``."""
        self.store.rollback_to(mark[0])
        del self.outputs[mark[1] :]

    def isolated(self, kind: str, detail: str) -> None:
        """Report a failure kept to one run or job (logged, counted by ``kind``)."""
        self._quarantine.count(kind, detail)

    def request_commit(self) -> None:
        """Commit at the end of this loop step rather than at the next commit interval (work
        waits for the commit: ``Topology.after_commit``)."""
        if self._request_commit is not None:
            self._request_commit()

    def request_tick(self, at_us: int | None = None) -> None:
        """From ``punctuate``: due work was left for want of a per-tick budget; punctuate
        again at once rather than a tick later (never ask when only a limit holds it back).
        With ``at_us`` (wall clock): work falls due then, before the next tick on the grid;
        punctuate then rather than up to a tick later."""
        if self._request_tick is not None:
            self._request_tick(at_us)

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

    def take_outputs(self) -> list[OutRecord]:
        outputs, self.outputs = self.outputs, []
        return outputs


REJECTED_ROOM = 16 * 1024  # the rejected.* headers and the key, at most


def rejected_output(
    topic: str, message: Any, reason: str, processor: str, max_bytes: int = 1_000_000
) -> OutRecord:
    """The rejected-topic record for ``message``: same key, value, partition and headers,
    plus ``rejected.*`` headers saying where it came from and why. A value too large to
    copy within ``max_bytes`` is left out (``rejected.value-bytes`` says how large it was)."""
    headers: Headers = list(message.headers() or [])
    headers += [
        ("rejected.reason", reason.encode("utf-8", "replace")[:4096]),
        ("rejected.processor", processor.encode()),
        ("rejected.topic", message.topic().encode()),
        ("rejected.partition", str(message.partition()).encode()),
        ("rejected.offset", str(message.offset()).encode()),
    ]
    value: bytes | None = message.value()
    output = OutRecord(topic, message.key(), value, message.partition(), headers)
    if value is not None and output.size() + REJECTED_ROOM > max_bytes:
        headers = [*headers[-5:], ("rejected.value-bytes", str(len(value)).encode())]
        output = OutRecord(topic, (message.key() or b"")[:1024], None, message.partition(), headers)
    return output


def refused_output(topic: str, output: OutRecord, reason: str, processor: str) -> OutRecord:
    """A rejected-topic record for an ``output`` the runtime would not produce (too large):
    its key and where it was going, without its value."""
    headers: Headers = [
        ("rejected.reason", reason.encode("utf-8", "replace")[:4096]),
        ("rejected.processor", processor.encode()),
        ("rejected.output-topic", output.topic.encode()),
        ("rejected.origin", (output.origin or "").encode()),
        ("rejected.value-bytes", str(len(output.value or b"")).encode()),
    ]
    return OutRecord(topic, (output.key or b"")[:1024], None, output.partition, headers)
