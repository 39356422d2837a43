"""Lease expiry skips the scan while no lease is due; every lease still expires on time."""

from __future__ import annotations

from schedulerstream.dispatcher.leases import WorkerLeases
from tests.dispatcher.harness import run_triggered
from tests.worker.test_leases import LEASE_MS, Pool


def test_a_lease_offered_after_an_empty_scan_still_expires_on_time() -> None:
    pool = Pool(retry={"max_attempts": 3, "initial_backoff": 1, "max_backoff": 1})
    assert pool.expire(1) == []  # no lease: the next scans are skipped
    assert pool.expire(1) == []
    rid = pool.trigger()
    assert pool.expire(LEASE_MS / 1000 - 0.5) == []
    assert pool.expire(0.5) == [rid]


def test_a_heartbeat_moves_the_expiry_later_and_it_is_still_found() -> None:
    pool = Pool()
    rid = pool.trigger()
    pool.event("claimed", rid, 1)
    assert pool.expire(2) == []
    pool.event("heartbeat", rid, 1)  # now due at 2 + 3 s
    assert pool.expire(1.5) == []  # past the first expiry: a scan finds nothing due yet
    assert pool.expire(1) == []
    assert pool.expire(0.5) == [rid]


def test_leases_restored_while_the_partition_was_away_are_scanned_again() -> None:
    pool = Pool()
    assert pool.expire(1) == []  # nothing here: no scan until something changes
    pool.h.run(run_triggered(0, **pool.job))
    [start] = pool.h.advance(0)
    run = pool.h.logic.load(pool.h.store, start.delivery.run_id)
    assert run is not None
    # the lease as a changelog restore brings it: not written through ``pool.leases``
    WorkerLeases(pool.h.logic, pool.h.limits, LEASE_MS).offer(pool.h.store, 0, run, "p",
                                                              pool.h.now)  # fmt: skip
    pool.leases.stopped(0)  # the partition comes back (moved, or rebuilt in place)
    assert pool.leases.adopt(pool.h.store, 0, run, pool.h.now)
    assert pool.expire(LEASE_MS / 1000) == [run.run_id]
