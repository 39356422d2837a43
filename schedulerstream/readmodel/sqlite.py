"""The embedded read model: one SQLite file in WAL mode (readers never block the projector)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from schedulerstream.readmodel.base import ReadModelDataError, ReadModelUnavailable
from schedulerstream.readmodel.sql import SqlReadModel, Statement

FILE_NAME = "readmodel.sqlite3"
BUSY_TIMEOUT_MS = 5000
OPEN_RETRY_MS = 20


class SqliteReadModel(SqlReadModel):
    """The read model in the SQLite database at ``path`` (created with its tables)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            # autocommit mode: transactions are explicit (BEGIN IMMEDIATE ... COMMIT)
            self._conn = sqlite3.connect(
                str(path), isolation_level=None, check_same_thread=False, timeout=5.0
            )
            self._conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self._wal()
            # WAL + NORMAL: a commit survives a process crash (kill -9); only power loss
            # can drop the last commits.
            self._conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.Error as exc:
            raise ReadModelUnavailable(f"cannot open the read model {path}: {exc}") from exc
        self._create_schema("INTEGER", "TEXT")

    def _wal(self) -> None:
        """Switch to WAL. Two connections switching at once can get "locked" at once (SQLite
        skips the busy handler there to avoid a deadlock), e.g. the projector and the API
        starting together: wait for the other, within the busy timeout."""
        for _ in range(BUSY_TIMEOUT_MS // OPEN_RETRY_MS):
            try:
                self._conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
            time.sleep(OPEN_RETRY_MS / 1000)
        self._conn.execute("PRAGMA journal_mode = WAL")

    def _execute(self, statements: list[Statement]) -> None:
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                for sql, rows in statements:
                    self._conn.executemany(sql, rows)
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
        except (sqlite3.DataError, sqlite3.IntegrityError) as exc:
            raise ReadModelDataError(f"read model refused a write: {exc}") from exc
        except sqlite3.Error as exc:
            raise ReadModelUnavailable(f"read model {self.path}: {exc}") from exc

    def _query(self, sql: str, params: Sequence[Any]) -> list[Sequence[Any]]:
        try:
            return list(self._conn.execute(sql, tuple(params)).fetchall())
        except sqlite3.Error as exc:
            raise ReadModelUnavailable(f"read model {self.path}: {exc}") from exc

    def close(self) -> None:
        self._conn.close()
