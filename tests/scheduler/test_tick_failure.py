"""A scheduler tick that raises is undone by the runtime (its store changes and records): the
due jobs it had read stay due, for the next tick to emit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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

    def emit_due(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug met in one job")

    h.logic._emit_due = emit_due  # type: ignore[method-assign]
    h.now = us("2025-01-06T10:00:59.5Z")  # 10:01 is within the 1 s lookahead
    h.store.savepoint()  # as Processor._invoke runs a punctuation
    try:
        h.logic.on_tick(h.store, h.out, 0, h.now)
    except RuntimeError:
        h.store.rollback()
    h.logic._emit_due = real  # type: ignore[method-assign]

    h.tick_until(us("2025-01-06T10:01:00Z"))

    assert sorted(h.run_ids()) == ["acme/j1@20250106T100100Z", "acme/j2@20250106T100100Z"]
    h.store.close()
