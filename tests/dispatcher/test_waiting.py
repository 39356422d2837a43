"""The executor's waiting room: first come first served among the starts the gate admits, and
the starts behind a full host or tenant passed over without being looked at one by one."""

from __future__ import annotations

from typing import Any

from schedulerstream.dispatcher.waiting import Submission, WaitingRoom
from schedulerstream.targets.base import Delivery


def start(n: int, tenant: str = "a", host: str | None = "h:80", partition: int = 0,
          arrived: float = 0.0) -> Submission:  # fmt: skip
    run_id = f"{tenant}/j@{n}"
    delivery = Delivery(run_id, tenant, "j", 0, 1, "scheduled", None, 30.0)
    target: Any = None
    return Submission((partition, run_id, 1), tenant, host, delivery, target, None, arrived)


def ids(items: list[Submission]) -> list[str]:
    return [i.key[1] for i in items]


def anyone(_: str | None) -> bool:
    return True


def drain(room: WaitingRoom) -> list[str]:
    found = []
    while (item := room.next_admitted(anyone, anyone)) is not None:
        found.append(item.key[1])
    return found


def test_the_oldest_admitted_start_goes_first_across_hosts_and_tenants() -> None:
    room = WaitingRoom()
    for item in [start(1, "a", "x:80"), start(2, "b", "y:80"), start(3, "a", "y:80"),
                 start(4, "b", "x:80"), start(5, "a", "x:80")]:  # fmt: skip
        room.add(item)
    assert len(room) == 5
    assert drain(room) == ["a/j@1", "b/j@2", "a/j@3", "b/j@4", "a/j@5"]
    assert len(room) == 0


def test_a_full_host_or_tenant_is_passed_over_once_not_start_by_start() -> None:
    room = WaitingRoom()
    for n in range(500):
        room.add(start(n, "a", "busy:80"))
    room.add(start(1, "b", "busy:80"))
    room.add(start(2, "b", "free:80"))
    asked: list[str | None] = []

    def host_has_room(host: str | None) -> bool:
        asked.append(host)
        return host != "busy:80"

    item = room.next_admitted(host_has_room, anyone)
    assert item is not None and item.key[1] == "b/j@2"
    assert asked == ["busy:80", "free:80"]  # one question per host, not per start
    assert room.next_admitted(host_has_room, anyone) is None
    assert len(room) == 501
    full = {"a"}
    item = room.next_admitted(anyone, lambda tenant: tenant not in full)
    assert item is not None and item.key[1] == "b/j@1"  # a's 500 older starts passed over


def test_a_held_partitions_starts_are_parked_and_come_back_first() -> None:
    room = WaitingRoom()
    room.add(start(1, partition=1))
    room.add(start(2, partition=0))
    first = room.next_admitted(anyone, anyone)
    assert first is not None and first.key[1] == "a/j@1"
    room.park(first)  # its partition is held: set aside, still waiting
    assert len(room) == 2
    assert drain(room) == ["a/j@2"]
    assert len(room) == 1 and ids(list(room)) == ["a/j@1"]
    room.add(start(3, partition=0))
    room.unpark(1)
    assert drain(room) == ["a/j@1", "a/j@3"]


def test_remove_finds_a_waiting_or_parked_start() -> None:
    room = WaitingRoom()
    for n in range(3):
        room.add(start(n))
    assert room.next_admitted(anyone, anyone) is not None  # a/j@0 leaves
    assert room.remove((0, "a/j@1", 1)) is not None
    assert room.remove((0, "a/j@1", 1)) is None
    held = start(9, partition=4)
    other = WaitingRoom()
    other.add(held)
    assert other.next_admitted(anyone, anyone) is held
    other.park(held)  # as the executor does with a start of a held partition
    assert other.remove((4, "a/j@9", 1)) is held
    assert len(other) == 0
    assert len(room) == 1 and ids(list(room)) == ["a/j@2"]


def test_the_expired_are_taken_out_wherever_they_wait_and_take_all_keeps_the_order() -> None:
    room = WaitingRoom()
    room.add(start(1, "a", "x:80", arrived=0.0))
    room.add(start(2, "b", "y:80", arrived=5.0))
    room.add(start(3, "a", "x:80", arrived=9.5))
    room.add(start(4, "b", None, arrived=1.0))
    assert ids(room.take_expired(now=10.0, ttl_s=1.0)) == ["a/j@1", "b/j@2", "b/j@4"]
    assert len(room) == 1
    room.add(start(5, "c", "z:80"))
    assert ids(room.take_all()) == ["a/j@3", "c/j@5"]
    assert len(room) == 0 and not list(room)
