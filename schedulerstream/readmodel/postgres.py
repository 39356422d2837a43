"""The production read model: PostgreSQL through psycopg 3 (one connection, reconnecting)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from schedulerstream.readmodel.base import ReadModelDataError, ReadModelUnavailable
from schedulerstream.readmodel.sql import SqlReadModel, Statement

# Serialises CREATE TABLE IF NOT EXISTS of instances starting together (it is not atomic).
_SCHEMA_LOCK = "SELECT pg_advisory_xact_lock(7318461027)"


def _pg(sql: str) -> str:
    return sql.replace("?", "%s")


class PostgresReadModel(SqlReadModel):
    """The read model in the database at ``url`` (``postgresql://...``), tables created."""

    json_param = "?::json"

    def __init__(self, url: str, connect_timeout_s: int = 10) -> None:
        super().__init__()
        self._url = url
        self._timeout = connect_timeout_s
        self._conn: psycopg.Connection[Any] | None = None
        self._create_schema("BOOLEAN", "JSON", prelude=(_SCHEMA_LOCK,))

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed:
            try:
                self._conn = psycopg.connect(self._url, connect_timeout=self._timeout)
            except psycopg.Error as exc:
                raise ReadModelUnavailable(f"cannot connect to the read model: {exc}") from exc
        return self._conn

    def _fail(self, exc: psycopg.Error) -> Exception:
        if isinstance(exc, psycopg.DataError):
            return ReadModelDataError(f"read model refused a write: {exc}")
        if self._conn is not None:  # the session may be broken: reconnect next time
            self._conn.close()
            self._conn = None
        return ReadModelUnavailable(f"read model: {exc}")

    def _execute(self, statements: list[Statement]) -> None:
        conn = self._connection()
        try:
            # one round trip: the statements are pipelined and synced once, at COMMIT
            with conn.pipeline(), conn.transaction(), conn.cursor() as cursor:
                for sql, rows in statements:
                    cursor.executemany(_pg(sql), rows)
        except psycopg.Error as exc:
            raise self._fail(exc) from exc

    def _query(self, sql: str, params: Sequence[Any]) -> list[Sequence[Any]]:
        conn = self._connection()
        try:
            with conn.transaction(), conn.cursor() as cursor:
                cursor.execute(_pg(sql), tuple(params))
                return list(cursor.fetchall())
        except psycopg.Error as exc:
            raise self._fail(exc) from exc

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
