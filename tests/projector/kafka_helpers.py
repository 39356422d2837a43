"""Running the projector against the broker in tests: in-process (driven by ``step()``) or as
a ``projector`` process, and reading what it committed to cron.run-state."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic

from harness.procs import ProcessorProcess, settings_env
from schedulerstream.kafka import clients
from schedulerstream.projector.topology import ProjectorTopology
from schedulerstream.readmodel import ReadModel
from schedulerstream.runtime import Processor, TaskState
from schedulerstream.settings import Settings
from tests.runtime.rt_helpers import end_offsets, read_all

INPUTS = ("schedules", "runs", "attempts")


def projector(settings: Settings, model: ReadModel, **options: Any) -> Processor:
    processor = Processor(settings, ProjectorTopology(settings, model, **options))
    processor.start()
    return processor


def drain(processor: Processor, settings: Settings, timeout: float = 60.0) -> None:
    """Step until every partition runs and has processed every input record; then commit."""
    ends = {topic: end_offsets(settings, topic) for topic in INPUTS}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        processor.step()
        tasks = processor.tasks
        if len(tasks) == settings.partitions and all(
            task.state is TaskState.RUNNING
            and all(task.input_offsets.get(settings.topic(t), -1) >= ends[t][p] for t in INPUTS)
            for p, task in tasks.items()
        ):
            processor.commit()
            return
    raise AssertionError(f"projector did not catch up: {processor.tasks} {ends}")


def create_changelog(settings: Settings, logical: str) -> str:
    """An extra compacted changelog (a second projector group replaying the same inputs)."""
    name = settings.topic(logical)
    topic = NewTopic(name, settings.partitions, 1, config={"cleanup.policy": "compact"})
    admin = AdminClient(clients.base_config(settings))
    admin.create_topics([topic])[name].result(30)
    deadline = time.monotonic() + 30
    while True:  # until every broker's metadata has it (the processor describes it first)
        try:
            admin.describe_topics(TopicCollection([name]))[name].result(10)
            return name
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def run_state(settings: Settings) -> tuple[dict[str, dict[str, Any]], int]:
    """The latest cron.run-state payload per run id (compaction's view) and the tombstones."""
    latest: dict[str, dict[str, Any]] = {}
    tombstones = 0
    for message in read_all(settings, "run-state"):
        key = message.key().decode()
        if message.value() is None:
            tombstones += 1
            latest.pop(key, None)
            continue
        envelope = json.loads(message.value())
        assert set(envelope) == {"schema", "payload"}
        assert envelope["schema"]["type"] == "struct"
        latest[key] = envelope["payload"]
    return latest, tombstones


class ProjectorProcess(ProcessorProcess):
    """``projector`` (schedulerstream.cli.projector_cmd) in its own process."""

    def __init__(self, settings: Settings, instance: str, log_dir: Any, *args: str) -> None:
        super().__init__(settings, "projector", instance, log_dir, data_dir=log_dir / instance)
        self.args = args

    def start(self) -> ProjectorProcess:
        env = settings_env(self.settings, instance_id=self.instance, **self.overrides)
        code = "from schedulerstream.cli.projector_cmd import projector; projector()"
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-c", code, *self.args],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self
