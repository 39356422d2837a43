"""A partition's staged batch writes exactly what its records written one by one write, into a
real SQLite read model (deletes, re-adds of deleted runs and several partitions included)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from schedulerstream.projector.batch import Batch, combine
from schedulerstream.readmodel import AttemptRow, Changes, JobRow, RunRow
from schedulerstream.readmodel.sqlite import SqliteReadModel


def _run(run_id: str, version: int) -> RunRow:
    return RunRow(run_id, "acme", run_id.split("@")[0], "scheduled", "running", 1, version,
                  None, version, None, version)  # fmt: skip


def _job(job_id: str, version: int) -> JobRow:
    return JobRow("acme", job_id, version, {"v": version}, False, False, [version], None, None,
                  None, 1, version)  # fmt: skip


def _attempt(run_id: str, n: int, at: int) -> AttemptRow:
    return AttemptRow(run_id, n, "started", at % 5, None, None, None, None, 1, at)


def _random_changes(rng: random.Random, partition: int, step: int) -> Changes:
    changes = Changes()
    for _ in range(rng.randint(0, 3)):
        run_id = f"p{partition}j{rng.randint(0, 2)}@{rng.randint(0, 5)}"
        op = rng.random()
        if op < 0.45:
            changes.put_run(_run(run_id, step))
        elif op < 0.75:
            changes.attempts.append(_attempt(run_id, rng.randint(1, 2), step))
        elif op < 0.9:
            changes.delete_run(run_id)
        else:
            job_id = f"p{partition}j{rng.randint(0, 2)}"
            changes.jobs[("acme", job_id)] = _job(job_id, step)
    return changes


@pytest.mark.parametrize("seed", range(40))
def test_a_batch_converges_to_the_records_applied_one_by_one(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    one_by_one = SqliteReadModel(tmp_path / "a.sqlite3")
    batched = SqliteReadModel(tmp_path / "b.sqlite3")
    for _ in range(3):  # three commits
        batches = {p: Batch() for p in range(3)}
        for step in range(rng.randint(1, 40)):
            partition = rng.randrange(3)
            changes = _random_changes(rng, partition, step)
            batches[partition].add(None, changes)
            if not changes.empty():
                one_by_one.apply(changes)
        for changes in combine(batches.values()):
            batched.apply(changes)
        assert batched.snapshot() == one_by_one.snapshot()
    one_by_one.close()
    batched.close()


def test_re_adding_a_deleted_run_opens_a_second_segment() -> None:
    batch = Batch()
    first, gone, back = Changes(), Changes(), Changes()
    first.put_run(_run("j@1", 1))
    gone.delete_run("j@1")
    back.put_run(_run("j@1", 2))
    for changes in (first, gone, back):
        batch.add(None, changes)
    assert len(batch.segments) == 2 and len(batch) == 3
    written = combine([batch])
    assert [c.deleted_runs for c in written] == [{"j@1"}, set()]
    assert list(written[1].runs) == ["j@1"]
