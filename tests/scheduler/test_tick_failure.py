"""A scheduler tick that raises is undone by the runtime (its store changes and records): the
due jobs it had read stay due, for the next tick to emit. A job whose own tick raises is
quarantined, and the tick goes on with the others."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from schedulerstream.errors import StateError
from schedulerstream.runtime.store import RocksStore

from .harness import Harness, definition, us


def test_a_tick_that_raises_leaves_every_due_job_to_the_next_tick(tmp_path: Path) -> None:
    h = Harness()
    h.store = RocksStore.open(tmp_path / "store")  # type: ignore[assignment]
    h.now = us("2025-01-06T10:00:30Z")
    for job in ("j1", "j2"):
        h.put(definition(1, job_id=job), key=f"acme/{job}".encode())
    h.tick_until(us("2025-01-06T10:00:58Z"))
    assert h.out.runs() == []
    real = h.logic._emit_due

    def emit_due(*args: Any, **kwargs: Any) -> Any:  # not one job's fault: the tick raises
        raise StateError("the store failed a read")

    h.logic._emit_due = emit_due  # type: ignore[method-assign]
    h.now = us("2025-01-06T10:00:59.5Z")  # 10:01 is within the 1 s lookahead
    h.store.savepoint()  # as Processor._invoke runs a punctuation
    try:
        h.logic.on_tick(h.store, h.out, 0, h.now)
    except StateError:
        h.store.rollback()
    h.logic._emit_due = real  # type: ignore[method-assign]

    h.tick_until(us("2025-01-06T10:01:00Z"))

    assert sorted(h.run_ids()) == ["acme/j1@20250106T100100Z", "acme/j2@20250106T100100Z"]
    h.store.close()


def test_a_job_whose_tick_raises_is_quarantined_and_the_others_fire_on(tmp_path: Path) -> None:
    h = Harness()
    h.now = us("2025-01-06T10:00:30Z")
    for job in ("j1", "j2"):
        h.put(definition(1, job_id=job), key=f"acme/{job}".encode())
    real = h.logic._emit_due

    def emit_due(store: Any, out: Any, partition: int, job_key: str, *rest: Any) -> Any:
        if job_key == "acme/j1":
            raise ValueError("a bug met in this job's input")
        return real(store, out, partition, job_key, *rest)

    h.logic._emit_due = emit_due  # type: ignore[method-assign]

    h.tick_until(us("2025-01-06T10:03:00Z"))

    assert h.run_ids() == [f"acme/j2@20250106T10{m:02d}00Z" for m in (1, 2, 3)]
    [paused] = [r for topic, _, r, name, _ in h.out.records if name == "JobDefinition"]
    assert (paused["job_id"], paused["paused"], paused["version"]) == ("j1", True, 2)
    assert "the scheduler failed on it (ValueError: a bug met" in paused["paused_reason"]
    assert h.logic.counters.failed_ticks == 1  # paused at once: its tick is not tried again
