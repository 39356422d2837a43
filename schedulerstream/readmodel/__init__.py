"""The read model the API queries: jobs, runs and attempts (DESIGN.md §6).

One interface (``ReadModel``), two backends: SQLite in ``{data_dir}/readmodel.sqlite3`` (the
embedded default) and PostgreSQL when ``SCHEDULERSTREAM_DATABASE_URL`` is a
``postgresql://`` URL. The projector writes it; nothing else does.
"""

from __future__ import annotations

from schedulerstream.errors import ConfigError
from schedulerstream.readmodel.base import (
    RUN_STATUSES,
    AttemptRow,
    Changes,
    JobRow,
    Page,
    ReadModel,
    ReadModelDataError,
    ReadModelUnavailable,
    RunDetail,
    RunRow,
)
from schedulerstream.readmodel.sql import SqlReadModel
from schedulerstream.readmodel.sqlite import FILE_NAME, SqliteReadModel
from schedulerstream.settings import Settings

__all__ = [
    "RUN_STATUSES",
    "AttemptRow",
    "Changes",
    "JobRow",
    "Page",
    "ReadModel",
    "ReadModelDataError",
    "ReadModelUnavailable",
    "RunDetail",
    "RunRow",
    "SqlReadModel",
    "open_read_model",
]

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def open_read_model(settings: Settings) -> SqlReadModel:
    """The read model ``settings`` name: PostgreSQL for a postgresql:// database_url, else
    the SQLite file in data_dir."""
    url = settings.database_url
    if url.startswith(POSTGRES_SCHEMES):
        from schedulerstream.readmodel.postgres import PostgresReadModel

        return PostgresReadModel(url)
    if url:
        raise ConfigError(
            "invalid SCHEDULERSTREAM_DATABASE_URL: expected postgresql://... (or empty for SQLite)"
        )
    return SqliteReadModel(settings.data_dir / FILE_NAME)
