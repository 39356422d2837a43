"""The task manager calls ``on_revoking`` and ``on_stopped`` for exactly the tasks that ran.

A dispatcher marks a revoked partition as sending nothing (``on_revoking``) until it stops
(``on_stopped``); a task revoked while it was still restoring used to get the first and never
the second, so when its partition came back its committed starts were never sent and held
their host's slots: every run of the process stalled (seen in ``bench_failover``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from confluent_kafka import TopicPartition

from schedulerstream.clock import SystemClock
from schedulerstream.runtime.holds import Holds
from schedulerstream.runtime.quarantine import Quarantine
from schedulerstream.runtime.task import TaskState
from schedulerstream.runtime.tasks import Loop, TaskManager
from schedulerstream.settings import Settings

TOPICS = ("in", "other")


class Recording:
    name = "rec"
    input_topics = TOPICS
    changelog_topic = "rec-changelog"
    owned_topics = ()

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def on_revoking(self, partition: int) -> None:
        self.calls.append(("on_revoking", partition))

    def on_stopped(self, partition: int) -> None:
        self.calls.append(("on_stopped", partition))

    def on_rebuild(self, partition: int) -> None:
        self.calls.append(("on_rebuild", partition))


class Consumer:
    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None  # assign, pause, unassign: nothing to do here


class Restorer:
    def start(self, task: Any) -> None:
        task.transition(TaskState.RESTORING)

    def stop(self, task: Any) -> None:
        pass


class Committer:
    def __init__(self) -> None:
        self.quarantine = Quarantine()


def manager(tmp_path: Path) -> tuple[TaskManager, Recording, list[str]]:
    topology = Recording()
    clock = SystemClock()
    tasks = TaskManager(Settings(data_dir=tmp_path), topology, clock, Committer(),  # type: ignore[arg-type]
                        Holds(clock), {}, eager=False, timeout_s=1.0)  # fmt: skip
    commits: list[str] = []
    loop = Loop(commit=lambda: commits.append("commit") or True, recover=lambda exc: None,
                request_commit=lambda: None, invoke=lambda task, callback: None)  # fmt: skip
    tasks.start(Consumer(), Restorer(), loop)  # type: ignore[arg-type]
    return tasks, topology, commits


def tps(*partitions: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for topic in TOPICS for p in partitions]


def test_a_task_revoked_while_restoring_gets_neither_callback(tmp_path: Path) -> None:
    tasks, topology, commits = manager(tmp_path)
    tasks.on_assign(Consumer(), tps(0, 1))  # type: ignore[arg-type]
    assert {p: t.state for p, t in tasks.tasks.items()} == {
        0: TaskState.RESTORING, 1: TaskState.RESTORING,
    }  # fmt: skip
    tasks.tasks[1].state = TaskState.RUNNING  # partition 1 ran, partition 0 never did
    tasks.on_revoke(Consumer(), tps(0, 1))  # type: ignore[arg-type]
    assert topology.calls == [("on_revoking", 1), ("on_stopped", 1)]
    assert commits == ["commit"] and tasks.tasks == {}


def test_a_task_rebuilt_in_place_and_revoked_before_it_runs_again_gets_both(
    tmp_path: Path,
) -> None:
    tasks, topology, _ = manager(tmp_path)
    tasks.on_assign(Consumer(), tps(2))  # type: ignore[arg-type]
    task = tasks.tasks[2]
    task.state = TaskState.RUNNING
    tasks.rebuild([task])  # its attempts in flight go on: it must still be stopped
    assert task.state is TaskState.RESTORING
    tasks.on_revoke(Consumer(), tps(2))  # type: ignore[arg-type]
    assert topology.calls == [("on_rebuild", 2), ("on_revoking", 2), ("on_stopped", 2)]


def test_a_task_that_never_restored_is_closed_without_callbacks(tmp_path: Path) -> None:
    tasks, topology, commits = manager(tmp_path)
    tasks.on_assign(Consumer(), tps(3))  # type: ignore[arg-type]
    tasks.on_revoke(Consumer(), tps(3))  # type: ignore[arg-type]
    assert topology.calls == [] and commits == [] and tasks.tasks == {}
