"""Exactly-once database sinks for the pipeline's ``foreachBatch`` writers.

``open_database(url)`` opens SQLite (``sqlite:///abs/path.db``) or PostgreSQL
(``postgresql://user:pw@host:port/db``, psycopg 3) behind one ``Database`` interface:
``query(sql, params)`` / ``close()`` for plain access, ``ensure_table(spec)`` and
``commit_batch(...)`` for the sink writers (see ``database.py`` for the transaction that
makes a replayed micro-batch a no-op, ``table.py`` for type mapping and write modes).
"""

from __future__ import annotations

from millrace.common.errors import ConfigError
from millrace.spark.sinks.database import Database, SinkBatch
from millrace.spark.sinks.table import (
    BATCHES_TABLE,
    Column,
    TableSpec,
    WriteMode,
    columns_from_spark,
    latest_per_key,
    sql_type,
)

SCHEMES = ("sqlite", "postgresql", "postgres")

__all__ = ["BATCHES_TABLE", "SCHEMES", "Column", "Database", "SinkBatch", "TableSpec",
           "WriteMode", "check_database_url", "columns_from_spark", "latest_per_key", "open_database",
           "sql_type"]


def check_database_url(url: str) -> str:
    """The scheme of ``url`` ("sqlite" or "postgresql"); ConfigError for anything else."""
    scheme, sep, rest = url.partition(":")
    scheme = scheme.split("+", 1)[0].lower()
    if not sep or scheme not in SCHEMES:
        raise ConfigError(f"database URL {url!r}: unknown scheme {scheme!r} (expected "
                          "sqlite:///path/to.db or postgresql://user:pw@host:port/db)")
    if scheme == "sqlite":
        from millrace.spark.sinks.sqlite import sqlite_path

        if not sqlite_path(url):
            raise ConfigError(f"database URL {url!r}: no file path (sqlite:///abs/path.db)")
        return "sqlite"
    if not rest.startswith("//"):
        raise ConfigError(f"database URL {url!r}: expected postgresql://user:pw@host:port/db")
    return "postgresql"


def open_database(url: str) -> Database:
    """A connection to the database at ``url`` (SQLite file created if missing)."""
    if check_database_url(url) == "sqlite":
        from millrace.spark.sinks.sqlite import SQLiteDatabase

        return SQLiteDatabase(url)
    from millrace.spark.sinks.postgres import PostgresDatabase, postgres_url

    return PostgresDatabase(postgres_url(url))
