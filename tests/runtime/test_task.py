"""Task lifecycle and transaction error classification, without Kafka."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException

from schedulerstream.errors import StateError
from schedulerstream.runtime import Task, TaskState
from schedulerstream.runtime.transaction import Failure, classify


def test_lifecycle_and_listener(tmp_path: Path) -> None:
    seen: list[tuple[int, TaskState]] = []
    task = Task(3, ("in",), tmp_path / "3", lambda p, s: seen.append((p, s)))
    assert task.state is TaskState.CREATED
    task.transition(TaskState.RESTORING)
    task.transition(TaskState.SETTLING)
    task.transition(TaskState.RUNNING)
    task.open_store().put(b"k", b"v")
    task.suspend()  # an abort: the overlay is dropped
    assert not task.require_store().has_pending()
    task.transition(TaskState.RESTORING)
    task.close()
    assert task.state is TaskState.CLOSED and task.store is None
    assert [s for _, s in seen] == [
        TaskState.RESTORING, TaskState.SETTLING, TaskState.RUNNING, TaskState.SUSPENDED,
        TaskState.RESTORING, TaskState.SUSPENDED, TaskState.CLOSED,
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("start", "target"),
    [
        (TaskState.CREATED, TaskState.RUNNING),
        (TaskState.RESTORING, TaskState.RUNNING),  # only once settled
        (TaskState.WAITING, TaskState.RUNNING),
        (TaskState.RUNNING, TaskState.RESTORING),
        (TaskState.RUNNING, TaskState.CLOSED),
        (TaskState.CLOSED, TaskState.RESTORING),
    ],
)
def test_illegal_transitions_raise(tmp_path: Path, start: TaskState, target: TaskState) -> None:
    task = Task(0, ("in",), tmp_path / "0")
    task.state = start
    with pytest.raises(StateError):
        task.transition(target)


def test_classify() -> None:
    fenced = KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True))
    assert classify(fenced).failure is Failure.FATAL
    epoch = KafkaException(KafkaError(KafkaError.INVALID_PRODUCER_EPOCH, "epoch"))
    assert classify(epoch).failure is Failure.FATAL
    member = KafkaException(
        KafkaError(KafkaError.UNKNOWN_MEMBER_ID, "member", txn_requires_abort=True)
    )
    assert classify(member).failure is Failure.ABORTABLE and classify(member).group_fenced
    stale = KafkaException(KafkaError(KafkaError.STALE_MEMBER_EPOCH, "stale"))
    assert classify(stale).failure is Failure.ABORTABLE and classify(stale).group_fenced
    timeout = KafkaException(KafkaError(KafkaError._TIMED_OUT, "t", retriable=True))
    assert classify(timeout).failure is Failure.ABORTABLE
    assert classify(RuntimeError("bug")).failure is Failure.FATAL
