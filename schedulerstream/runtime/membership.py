"""Who is in the group and owns what: the view behind standby choice and fast takeover.

``GroupView`` describes the consumer group in the background (AdminClient futures polled
from the loop, never blocking it) and keeps the members by ``client.id``, which a processor
sets to its transactional id. From the view:

- ``choose_standbys`` picks, for every partition, ``replicas`` members other than its owner
  (a rendezvous ranking over stable client ids, so a restarted member keeps its copies);
- ``departed_owners`` names the transactional ids of members that owned partitions just
  assigned here and have left the group: fencing them (``transaction.fence``) aborts their
  open transaction at once instead of after ``transaction.timeout.ms``.

The group's session timeout and heartbeat (KIP-848 group configs) are set by
``apply_group_timeouts``: the detection half of a takeover.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import AlterConfigOpType, ConfigEntry, ConfigResource
from confluent_kafka.admin._resource import ResourceType

from schedulerstream.clock import Clock

log = logging.getLogger(__name__)

Owners = dict[str, frozenset[int]]  # client id → partitions of the first input topic
DEPARTED_TTL_S = 60.0  # how long a departed member's partitions are remembered


def rank(client_id: str, partition: int) -> int:
    """Rendezvous weight of ``client_id`` for ``partition`` (stable across processes)."""
    return zlib.crc32(f"{partition}/{client_id}".encode())


def choose_standbys(me: str, owners: Mapping[str, frozenset[int]], replicas: int) -> set[int]:
    """The partitions ``me`` keeps a standby of: those whose ``replicas`` highest-ranked
    non-owning members include ``me``."""
    if replicas <= 0 or me not in owners:
        return set()
    chosen: set[int] = set()
    for owner, partitions in owners.items():
        if owner == me:
            continue
        others = [c for c in owners if c != owner]
        for partition in partitions:
            ranked = sorted(others, key=lambda c, p=partition: (-rank(c, p), c))  # type: ignore[misc]
            if me in ranked[:replicas]:
                chosen.add(partition)
    return chosen


def departed_owners(departed: Mapping[str, frozenset[int]], taken: set[int]) -> set[str]:
    """Client ids of departed members that owned a partition of ``taken``."""
    return {owner for owner, partitions in departed.items() if partitions & taken}


@dataclass
class GroupView:
    """The group's members and their partitions, refreshed every ``refresh_s`` and on
    request; ``poll`` returns True when a new view arrived."""

    admin: AdminClient
    group_id: str
    topic: str
    clock: Clock
    refresh_s: float = 2.0
    timeout_s: float = 5.0
    owners: Owners = field(default_factory=dict)
    # members seen before and missing now: what they owned, and until when to remember
    departed: dict[str, tuple[frozenset[int], float]] = field(default_factory=dict)
    _pending: Future[Any] | None = None
    _next: float = 0.0

    def request(self) -> None:
        """Describe the group again as soon as the running request (if any) ends."""
        self._next = 0.0

    def poll(self) -> bool:
        now = self.clock.monotonic()
        if self._pending is None:
            if now < self._next:
                return False
            self._pending = self.admin.describe_consumer_groups(
                [self.group_id], request_timeout=self.timeout_s
            )[self.group_id]
            self._next = now + self.refresh_s
            return False
        if not self._pending.done():
            return False
        future, self._pending = self._pending, None
        try:
            description = future.result()
        except Exception as exc:  # a refresh that failed is tried again at the next
            log.debug("describing group %s: %s", self.group_id, exc)
            return False
        owners: Owners = {}
        for member in description.members:
            assignment = member.assignment.topic_partitions if member.assignment else []
            partitions = frozenset(tp.partition for tp in assignment if tp.topic == self.topic)
            owners[member.client_id] = owners.get(member.client_id, frozenset()) | partitions
        for client, partitions in self.owners.items():
            if client not in owners:
                self.departed[client] = (partitions, now + DEPARTED_TTL_S)
        self.departed = {
            c: entry for c, entry in self.departed.items() if c not in owners and entry[1] > now
        }
        self.owners = owners
        return True

    def departed_owners(self, taken: set[int]) -> set[str]:
        """Departed members that owned a partition of ``taken`` (see ``forget``)."""
        return departed_owners({c: p for c, (p, _) in self.departed.items()}, taken)

    def forget(self, client_id: str) -> None:
        """``client_id`` was fenced: do not name it again."""
        self.departed.pop(client_id, None)


def apply_group_timeouts(
    admin: AdminClient, group_id: str, session_ms: int, timeout_s: float = 10.0
) -> bool:
    """Set the group's session timeout and heartbeat interval (KIP-848 group configs).

    A broker whose ``group.consumer.min.session.timeout.ms`` (45 s by default) or
    ``group.consumer.min.heartbeat.interval.ms`` is above these refuses them: the group
    then keeps the broker's defaults, and the refusal is logged with what to change."""
    heartbeat_ms = max(250, session_ms // 4)
    resource = ConfigResource(
        ResourceType.GROUP,
        group_id,
        incremental_configs=[
            ConfigEntry("consumer.session.timeout.ms", str(session_ms),
                        incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("consumer.heartbeat.interval.ms", str(heartbeat_ms),
                        incremental_operation=AlterConfigOpType.SET),
        ],
    )  # fmt: skip
    try:
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(timeout_s)
    except Exception as exc:
        log.warning(
            "group %s keeps the broker's session timeout: setting %d ms (heartbeat %d ms) was "
            "refused: %s; lower the broker's group.consumer.min.session.timeout.ms and "
            "group.consumer.min.heartbeat.interval.ms, or grant ALTER_CONFIGS on the group",
            group_id, session_ms, heartbeat_ms, exc,
        )  # fmt: skip
        return False
    return True
