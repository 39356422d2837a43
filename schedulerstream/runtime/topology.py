"""The Topology contract: what the scheduler, dispatcher and projector implement.

A topology names its consumer group, its co-partitioned input topics and its compacted
changelog topic, and handles callbacks for one task (one partition) at a time. Subclass it
explicitly to inherit the default ``restore_record``, ``punctuate``, ``on_running``,
``on_stopped`` and ``pre_commit``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from schedulerstream.runtime.context import TaskContext
from schedulerstream.runtime.store import StateStore


class Topology(Protocol):
    """One stream processor on the runtime.

    - ``name``: group id is ``{topic_prefix}{name}``, transactional id
      ``{topic_prefix}{name}-{instance_id}``, state under ``{data_dir}/{name}/{partition}``.
    - ``input_topics``: full topic names, all with the same partition count (co-partitioned).
    - ``changelog_topic``: full name of the compacted changelog, same partition count.
    """

    @property
    def name(self) -> str: ...

    @property
    def input_topics(self) -> Sequence[str]: ...

    @property
    def changelog_topic(self) -> str: ...

    @property
    def owned_topics(self) -> Sequence[str]:
        """Topics of the pipeline this topology writes (beside its changelog and the rejected
        topic): a missing or forbidden one is an outage, not one run's failure. Records for
        any other topic (a job's target) that the broker refuses fail only their origin."""
        return ()

    def restore_record(self, store: StateStore, key: bytes, value: bytes | None) -> None:
        """Apply one changelog record while restoring; rebuild derived (unlogged) data here.

        The default stores the record as it is (a tombstone deletes the key).
        """
        if value is None:
            store.delete(key)
        else:
            store.put(key, value)

    def process(self, ctx: TaskContext, message: Any) -> None:
        """Handle one input record (a confluent_kafka.Message) of the task's partition.

        Raising rejects the record: its writes and outputs are dropped, it is sent to the
        rejected topic, and processing goes on.
        """
        ...

    def punctuate(self, ctx: TaskContext, now_us: int) -> None:
        """Called every tick for each RUNNING task with the clock's time."""

    def on_running(self, ctx: TaskContext) -> None:
        """Called once the task has restored and before its first record."""
        return None

    def pre_commit(self, contexts: Sequence[TaskContext]) -> None:
        """Called once per commit, before the Kafka transaction commits, with the context of
        every RUNNING task: write what ``process`` staged outside Kafka (one batch) here.

        It may produce (``ctx.produce``, ``ctx.reject``); its records join the transaction.
        Raising aborts the transaction: every record since the last commit is processed
        again, so what is written here must be an idempotent function of those records.
        """
        return None

    def after_commit(self, validated: float) -> None:
        """Called after every successful commit (step 6): start side effects outside Kafka
        that must happen only once the state recording them is committed. A fenced zombie's
        commit fails, so what it prepared is never started (drop it in ``on_stopped``).
        ``validated``: ``time.monotonic()`` just before the commit sent its offsets, when the
        group still counted this member in; a side effect's time to live counts from there
        (the process may have been stopped since)."""
        return None

    def on_rebuild(self, partition: int) -> None:
        """The task of ``partition`` stays here but is rebuilt from its changelog (a
        transaction was aborted): drop what it staged (its records will be processed again);
        what it started after a commit may go on, since that state is committed. The default
        treats it as ``on_stopped``."""
        self.on_stopped(partition)

    def on_revoking(self, partition: int) -> None:
        """``partition`` is being revoked: the commit that closes it comes next, then
        ``on_stopped``. Start nothing new for it outside Kafka in between (the next owner
        takes over what its committed state says)."""
        return None

    def on_stopped(self, partition: int) -> None:
        """The task of ``partition`` stopped running (revoked, lost, closed, or suspended to
        rebuild from its changelog): stop anything it started outside the runtime and drop
        what it staged for ``pre_commit`` (those records will be processed again)."""
        return None
