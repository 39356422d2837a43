"""Connections that open one new SQLite read model at the same moment (the projector and the
API starting together) all open it: switching to WAL at once is retried, not refused as
"database is locked"."""

from __future__ import annotations

import threading
from pathlib import Path

from schedulerstream.readmodel.sqlite import SqliteReadModel

OPENERS = 4
ROUNDS = 100  # the race lost about one round in ten before the retry


def _open_together(path: Path) -> list[BaseException]:
    start = threading.Barrier(OPENERS)
    errors: list[BaseException] = []

    def open_once() -> None:
        start.wait()
        try:
            SqliteReadModel(path).close()
        except BaseException as exc:  # collected, asserted on below
            errors.append(exc)

    threads = [threading.Thread(target=open_once) for _ in range(OPENERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_connections_opening_a_new_read_model_at_once_all_open_it(tmp_path: Path) -> None:
    for n in range(ROUNDS):
        path = tmp_path / f"r{n}" / "readmodel.sqlite3"
        errors = _open_together(path)
        assert not errors, f"round {n}: {errors[0]}"
        model = SqliteReadModel(path)
        mode = model._query("PRAGMA journal_mode", [])
        assert mode[0][0] == "wal"
        model.close()
