"""What the dispatcher logic asks the outside to do: start a delivery, abort one."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

from schedulerstream.dispatch_spec import TargetConfig
from schedulerstream.dispatcher.records import RunRecord
from schedulerstream.model import HttpTarget, KafkaTarget, SqsTarget, WorkerTarget
from schedulerstream.targets.base import Delivery


@dataclass(frozen=True, slots=True)
class Start:
    """Begin ``delivery`` (attempt ``delivery.attempt``) to ``target``; a Limits slot is held
    unless the attempt ends in the transaction that starts it (``in_transaction``)."""

    partition: int
    tenant: str
    delivery: Delivery
    target: TargetConfig
    host: str | None = None  # the Limits lane of the target's host (None: no host limit)
    at_us: int = 0  # armed: sent at this time (0: once committed)
    # a record's run, started in memory only: its outcome, in this same tick, saves it
    run: RunRecord | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Cancel:
    """Abort the in-flight ``attempt`` of ``run_id``."""

    partition: int
    run_id: str
    attempt: int


Action = Start | Cancel


def target_host(target: TargetConfig) -> str | None:
    """The host (with port) a delivery connects to, for the per-host limit; None when the
    attempt is produced in the dispatcher's own transaction (Kafka) or pulled (workers)."""
    if isinstance(target, HttpTarget):
        url = target.url
    elif isinstance(target, SqsTarget):
        url = target.queue_url
    else:
        return None
    return urlsplit(url).netloc.lower() or None


def waits_for_ready(target: TargetConfig) -> bool:
    """Does a start to ``target`` wait until the dispatcher knows where it goes (a Kafka
    record: its topic's metadata; a worker offer: its pool's work topic)?"""
    return isinstance(target, KafkaTarget | WorkerTarget)


def in_transaction(target: TargetConfig) -> bool:
    """Does an attempt to ``target`` end in the transaction that starts it (a Kafka record)?
    It holds no Limits slot: nothing of it is in flight once the tick is over."""
    return isinstance(target, KafkaTarget)
