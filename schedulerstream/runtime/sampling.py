"""Every ``SAMPLE_INTERVAL_S`` on the loop thread: the consumer lag of the RUNNING tasks' inputs,
then the samplers observability registered (the dispatcher's queue depths)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaException, TopicPartition

from schedulerstream.runtime.context import TaskContext
from schedulerstream.runtime.task import TaskState
from schedulerstream.runtime.tasks import TaskManager

log = logging.getLogger(__name__)

Sampler = Callable[[list[TaskContext]], None]
SAMPLE_INTERVAL_S = 5.0


class Sampling:
    """The last ``lag`` sampled, and the ``samplers`` to call with the RUNNING tasks' contexts."""

    def __init__(self, task_manager: TaskManager) -> None:
        self.task_manager = task_manager
        self.lag: dict[tuple[str, int], int] = {}  # owned input partition → records behind
        # called on the loop thread every SAMPLE_INTERVAL_S with the RUNNING tasks' contexts
        self.samplers: list[Sampler] = []
        self._tasks = task_manager.tasks
        self._contexts = task_manager.contexts

    def sample(self, consumer: Consumer) -> None:
        """Consumer lag of the RUNNING tasks' inputs (high watermark from the last fetch minus
        the position: local, no request), then the samplers."""
        running = [t for t in self._tasks.values() if t.state is TaskState.RUNNING]
        lag: dict[tuple[str, int], int] = {}
        try:
            tps = [tp for task in running for tp in self.task_manager.input_tps(task.partition)]
            positions = {(tp.topic, tp.partition): tp.offset for tp in consumer.position(tps)}
            for task in running:
                for topic, offset in task.input_offsets.items():
                    _, high = consumer.get_watermark_offsets(
                        TopicPartition(topic, task.partition), cached=True
                    )
                    if high >= 0:
                        position = max(offset, positions.get((topic, task.partition), -1))
                        lag[(topic, task.partition)] = max(0, high - position)
        except KafkaException as exc:
            log.debug("lag sample failed: %s", exc)
        self.lag = lag
        contexts = [self._contexts[t.partition] for t in running if t.partition in self._contexts]
        for sampler in self.samplers:
            try:
                sampler(contexts)
            except Exception:
                log.exception("sampler failed")
