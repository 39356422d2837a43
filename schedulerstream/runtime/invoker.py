"""Runs one input record (``process``) or one callback (``invoke``: punctuate, on_running) of a
task all or nothing: a store savepoint, the topology, then its outputs to the committer; a
failure rolls the savepoint back and drops the outputs."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer

from schedulerstream.errors import DependencyDown
from schedulerstream.runtime.committer import Committer
from schedulerstream.runtime.context import TaskContext
from schedulerstream.runtime.holds import Holds
from schedulerstream.runtime.store import StoreCorrupted, StoreUnavailable
from schedulerstream.runtime.task import Task
from schedulerstream.runtime.tasks import TaskManager
from schedulerstream.runtime.topology import Topology

log = logging.getLogger(__name__)


class Invoker:
    """Applies a record or callback to a RUNNING task's store and context, atomically."""

    def __init__(
        self, topology: Topology, task_manager: TaskManager, committer: Committer, holds: Holds,
        metrics: dict[str, float], max_record: int, require_consumer: Callable[[], Consumer],
    ) -> None:  # fmt: skip
        self.topology = topology
        self.task_manager = task_manager
        self.committer = committer
        self.metrics = metrics
        self._contexts = task_manager.contexts
        self._holds = holds
        self._max_record = max_record
        self._require_consumer = require_consumer

    def process(self, task: Task, msg: Any) -> None:
        ctx = self._contexts[task.partition]
        store = task.require_store()
        origin = f"{msg.topic()}[{msg.partition()}]@{msg.offset()}"  # for untagged outputs
        for replay in (False, True):
            store.savepoint()
            try:
                self.topology.process(ctx, msg)
                until_us, ctx.held_until_us = ctx.held_until_us, None
                if until_us is not None:
                    store.rollback()
                    ctx.outputs.clear()
                    self._holds.hold(self._require_consumer(), msg, until_us)
                    return
            except (StoreCorrupted, StoreUnavailable) as exc:  # the record is fine, the
                store.rollback()  # local store is not
                ctx.outputs.clear()
                ctx.held_until_us = None
                self.task_manager.store_failed(task, exc)
                return
            except DependencyDown:  # the processor stops (errors.py)
                raise
            except Exception as exc:
                store.rollback()
                ctx.outputs.clear()
                ctx.held_until_us = None
                self.committer.reject(msg, f"{type(exc).__name__}: {exc}")
                break
            outputs = ctx.take_outputs()
            oversized = [o for o in outputs if o.size() > self._max_record]
            if not oversized:
                store.release()
                self.committer.produce(task.partition, outputs, origin, sized=True)
                break
            store.rollback()  # told of its refused records, the topology processes it again
            for output in oversized:
                self.committer.quarantine.add(task.partition, output.origin or origin,
                                              self.committer.too_large(output),
                                              "record_too_large")  # fmt: skip
            if replay:
                self.committer.reject(msg, self.committer.too_large(oversized[0]))
        task.input_offsets[msg.topic()] = msg.offset() + 1
        self.metrics["records_processed"] += 1
        self.committer.dirty = True

    def invoke(self, task: Task, callback: Callable[[TaskContext], None]) -> None:
        """Run a task callback (punctuate, on_running) atomically: on error, undo it."""
        ctx = self._contexts[task.partition]
        store = task.require_store()
        store.savepoint()
        try:
            callback(ctx)
        except (StoreCorrupted, StoreUnavailable) as exc:
            store.rollback()
            ctx.outputs.clear()
            self.task_manager.store_failed(task, exc)
            return
        except DependencyDown:  # the processor stops (errors.py)
            raise
        except Exception:
            store.rollback()
            ctx.outputs.clear()
            self.metrics["punctuate_errors"] += 1
            log.exception("task %d: callback failed; its changes were dropped", task.partition)
            return
        store.release()
        outputs = ctx.take_outputs()
        self.committer.produce(task.partition, outputs)
        if outputs or store.has_pending():
            self.committer.dirty = True
