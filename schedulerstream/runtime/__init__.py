"""The stream-processing runtime shared by the scheduler, dispatcher and projector: tasks,
state stores, changelog, restore, and the exactly-once commit loop. It knows nothing of
schedules or targets."""

from schedulerstream.runtime.context import OutRecord, TaskContext
from schedulerstream.runtime.processor import Processor
from schedulerstream.runtime.shutdown import install_signal_handlers
from schedulerstream.runtime.store import RocksStore, StateStore, prefix_end
from schedulerstream.runtime.task import RestoreStats, Task, TaskState
from schedulerstream.runtime.topology import Topology

__all__ = [
    "OutRecord",
    "Processor",
    "RestoreStats",
    "RocksStore",
    "StateStore",
    "Task",
    "TaskContext",
    "TaskState",
    "Topology",
    "install_signal_handlers",
    "prefix_end",
]
