"""What a member does so that a failover is short: keep standby tasks of the partitions it
may inherit, and fence a departed owner's transactional id as soon as its partitions arrive.

A takeover after a kill -9 costs: the session timeout (detection; ``apply_group_timeouts``),
the assignment, the restore of the changelog's tail (a standby's store is warm) and the
settling of the inputs, which waits for the departed member's open transaction to end.
Fencing it ends it now, instead of after ``transaction.timeout.ms``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from schedulerstream.clock import Clock
from schedulerstream.kafka import clients
from schedulerstream.runtime.changelog import Restorer, describe
from schedulerstream.runtime.membership import GroupView, apply_group_timeouts, choose_standbys
from schedulerstream.runtime.standby import Standbys
from schedulerstream.runtime.topology import Topology
from schedulerstream.runtime.transaction import fence
from schedulerstream.settings import Settings

log = logging.getLogger(__name__)


@dataclass
class Takeover:
    """Standbys and predecessor fencing for one member (client id ``me``)."""

    me: str
    view: GroupView
    standbys: Standbys | None
    replicas: int
    fence: Callable[[str], None]
    metrics: dict[str, float]
    taken: set[int] = field(default_factory=set)  # assigned here, predecessors not checked

    def assigned(self, partitions: set[int]) -> None:
        """Partitions about to get tasks here: their standbys close (the task opens the
        warm store), and the next view tells whether their previous owner departed."""
        if self.standbys is not None:
            for partition in partitions:
                self.standbys.release(partition)
        self.taken |= partitions
        self.view.request()

    def released(self) -> None:
        """Partitions left this member: the standby choice changes."""
        self.view.request()

    def maintain(self, owned: set[int]) -> None:
        """From the loop: take a new view into account, then apply standby records."""
        if self.view.poll():
            self._fence_departed()
            if self.standbys is not None:
                chosen = choose_standbys(self.me, self.view.owners, self.replicas)
                self.standbys.want(chosen - owned)
                self.metrics["standby_tasks"] = len(self.standbys.tasks)
        if self.standbys is not None:
            self.standbys.poll()

    def _fence_departed(self) -> None:
        mine = self.view.owners.get(self.me, frozenset())
        for client in sorted(self.view.departed_owners(self.taken)):
            try:
                self.fence(client)
            except KafkaException as exc:  # its transaction still ends at its timeout
                log.warning("fencing departed member %s failed: %s", client, exc)
                continue
            self.view.forget(client)
            self.metrics["fenced_predecessors"] += 1
            log.info("fenced departed member %s: its open transaction is aborted", client)
        self.taken -= mine  # the view shows the assignment: its predecessors are known

    def close(self) -> None:
        if self.standbys is not None:
            self.standbys.close()


def build_takeover(
    settings: Settings, topology: Topology, group_id: str, transactional_id: str,
    clock: Clock, metrics: dict[str, float], restore_chunk: int, timeout_s: float,
) -> Takeover:  # fmt: skip
    """A member's Takeover: the group's session timeout set (KIP-848 groups; a classic
    group's is the consumer's own), ``num_standby_replicas`` standbys, fencing by
    transactional id (a member's ``client.id``)."""
    admin = AdminClient(clients.base_config(settings))
    if settings.group_protocol == "consumer":
        apply_group_timeouts(admin, group_id, settings.session_timeout_ms)
    standbys = None
    if settings.num_standby_replicas > 0:
        name = f"{group_id}-standby"
        changelog = topology.changelog_topic
        restorer = Restorer(
            clients.restore_consumer_config(settings, name),
            clients.restore_consumer_config(settings, name, committed=False),
            describe(clients.base_config(settings), changelog, timeout_s),
            topology.restore_record,
            clock,
            restore_chunk,
            timeout_s,
            metrics,
        )
        standbys = Standbys(settings, topology.name, restorer, clock)

    def fence_member(member_transactional_id: str) -> None:
        config = clients.transactional_producer_config(settings, member_transactional_id)
        fence(config, min(timeout_s, 5.0))

    view = GroupView(admin, group_id, topology.input_topics[0], clock)
    return Takeover(
        transactional_id, view, standbys, settings.num_standby_replicas, fence_member, metrics
    )
