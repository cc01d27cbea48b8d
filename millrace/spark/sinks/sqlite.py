"""SQLite sinks: one WAL-mode connection per sink writer, ``executemany`` upserts.

Writers of different sinks share the database file; each transaction starts with
``BEGIN IMMEDIATE`` (the write lock, waited for up to ``busy_timeout``), so the
batch-log check and the upsert see no concurrent writer.  ``synchronous=FULL``: a
committed batch survives a power cut, as the checkpoint's commit log that follows it
must not be ahead of the table.

Values: timestamps are stored as UTC text ``YYYY-MM-DD HH:MM:SS.ffffff`` (fixed width,
so text order is time order and an ``order_by`` timestamp compares correctly), dates as
``YYYY-MM-DD``, decimals as text in a NUMERIC column, booleans as 0/1.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from millrace.spark.sinks.database import Database
from millrace.spark.sinks.table import BATCHES_TABLE, TableSpec, quote

if TYPE_CHECKING:
    import pyarrow as pa

BUSY_TIMEOUT_S = 120.0


def sqlite_path(url: str) -> str:
    """``sqlite:///abs/x.db`` and ``sqlite:////abs/x.db`` -> ``/abs/x.db``;
    ``sqlite://rel.db`` and ``sqlite:rel.db`` -> ``rel.db``."""
    rest = url[len("sqlite:"):]
    if rest.startswith("//"):
        rest = rest[2:]
        if rest.startswith("/"):
            rest = "/" + rest.lstrip("/")
    return rest


class SQLiteDatabase(Database):
    dialect = "sqlite"
    placeholder = "?"
    now_sql = "strftime('%Y-%m-%d %H:%M:%f', 'now')"

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.path = sqlite_path(url)
        if self.path and self.path != ":memory:":
            parent = os.path.dirname(os.path.abspath(self.path))
            os.makedirs(parent, exist_ok=True)
        self._conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                     check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=FULL")

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            cur = self._conn.execute(sql, tuple(params))
            return [tuple(r) for r in cur.fetchall()] if cur.description else []

    def close(self) -> None:
        with self._lock:  # after a batch a Spark callback thread may still be committing
            self._conn.close()

    def batches_ddl(self) -> str:
        return (f"CREATE TABLE IF NOT EXISTS {BATCHES_TABLE} (pipeline TEXT NOT NULL, "
                "sink TEXT NOT NULL, batch_id INTEGER NOT NULL, query_id TEXT NOT NULL, "
                "rows_upserted INTEGER NOT NULL, committed_at TEXT NOT NULL, "
                "PRIMARY KEY (pipeline, sink, batch_id))")

    def _execute_script(self, statements: Sequence[str]) -> None:
        for statement in statements:
            self._conn.execute(statement)

    def _describe(self, table: str) -> tuple[list[str], list[str]] | None:
        info = self._conn.execute(f"PRAGMA table_info({quote(table)})").fetchall()
        if not info:
            return None
        columns = [row[1] for row in info]
        key = [row[1] for row in sorted((r for r in info if r[5]), key=lambda r: r[5])]
        return columns, key

    def _encode(self, spec: TableSpec, rows: pa.Table) -> list[tuple[Any, ...]]:
        import pyarrow as pa
        import pyarrow.compute as pc

        columns: list[list[Any]] = []
        for name in spec.column_names:
            column = rows[name]
            kind = column.type
            if pa.types.is_timestamp(kind):
                # UTC wall time as text, "YYYY-MM-DD HH:MM:SS" and the unit's fraction
                # (.ffffff for Spark's microseconds); a cast is ~25x faster than strftime
                column = pc.cast(pc.cast(column, pa.timestamp(kind.unit)), pa.string())
            elif pa.types.is_date(kind) or pa.types.is_decimal(kind):
                column = pc.cast(column, pa.string())
            columns.append(column.to_pylist())
        return list(zip(*columns)) if columns else []

    def _insert_sql(self, spec: TableSpec) -> str:
        cols = ", ".join(quote(c) for c in spec.column_names)
        marks = ", ".join("?" for _ in spec.columns)
        return (f"INSERT INTO {quote(spec.name)} ({cols}) VALUES ({marks}) "
                + self.upsert_clause(spec))

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _fetch_one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        row = self._conn.execute(sql, tuple(params)).fetchone()
        return None if row is None else tuple(row)

    def _run(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._conn.execute(sql, tuple(params))

    def _upsert(self, spec: TableSpec, payload: list[tuple[Any, ...]]) -> int:
        if not payload:
            return 0
        return max(self._conn.executemany(self._insert_sql(spec), payload).rowcount, 0)
