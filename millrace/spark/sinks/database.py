"""``Database``: the transaction that makes a sink exactly-once, shared by both dialects.

``commit_batch(spec, pipeline, sink, query_id, batch_id, rows)`` runs one transaction:

1. look up ``(pipeline, sink, batch_id)`` in ``millrace_batches``; if it is recorded for
   this ``query_id`` the batch was committed before a crash and is skipped (``None``);
2. otherwise upsert the rows (latest mode: only over rows with smaller order columns;
   replace mode: unconditionally) and record the batch id with its query id;
3. commit.

Spark writes a batch's offsets to the checkpoint before running it and re-runs the same
batch id over the same offsets after a crash, so "recorded" means "already applied".
The query id (Spark's id of a checkpoint, stable across restarts) tells a batch id of
this checkpoint from the same number left by a deleted one: a record from another query
id is overwritten, not trusted.

Subclasses provide the dialect: how rows reach the database (``executemany`` for SQLite,
``COPY`` into a staging table for PostgreSQL) and how an existing table is inspected.
A ``Database`` is used by one sink writer; its methods hold a lock, so calls from Spark's
callback threads are serialised.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from millrace.common.errors import ConfigError
from millrace.spark.sinks.table import (
    BATCHES_TABLE,
    Dialect,
    TableSpec,
    conform,
    latest_per_key,
    quote,
    sql_type,
)

if TYPE_CHECKING:
    import pyarrow as pa


class Database(ABC):
    dialect: Dialect
    placeholder: str

    def __init__(self, url: str) -> None:
        self.url = url
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ plain access
    @abstractmethod
    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement in its own transaction; the rows it returns (or [])."""

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Database:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # ------------------------------------------------------------------ tables
    @abstractmethod
    def _describe(self, table: str) -> tuple[list[str], list[str]] | None:
        """(column names, primary key columns) of an existing table, None if absent."""

    def ensure_table(self, spec: TableSpec) -> None:
        """Create the batch log and ``spec``'s table if missing; an existing table must have
        every column and the same primary key."""
        with self._lock:
            self._execute_script([self.batches_ddl()])
            found = self._describe(spec.name)
            if found is None:
                self._execute_script([self.create_table_sql(spec)])
                return
        columns, key = found
        missing = [c for c in spec.column_names if c not in columns]
        if missing:
            raise ConfigError(f"table {spec.name} exists without column(s) "
                              f"{', '.join(missing)}; drop it or write to another table")
        if list(key) != list(spec.key):
            raise ConfigError(f"table {spec.name} exists with primary key "
                              f"({', '.join(key) or 'none'}), the sink needs "
                              f"({', '.join(spec.key)}); drop it or write to another table")

    def create_table_sql(self, spec: TableSpec) -> str:
        cols = [f"{quote(c.name)} {sql_type(c.type, self.dialect)}"
                + (" NOT NULL" if c.name in spec.key else "") for c in spec.columns]
        cols.append(f"PRIMARY KEY ({', '.join(quote(k) for k in spec.key)})")
        return f"CREATE TABLE IF NOT EXISTS {quote(spec.name)} ({', '.join(cols)})"

    @abstractmethod
    def batches_ddl(self) -> str: ...

    @abstractmethod
    def _execute_script(self, statements: Sequence[str]) -> None: ...

    def upsert_clause(self, spec: TableSpec) -> str:
        """``ON CONFLICT ...`` for ``spec``'s mode (identical in SQLite and PostgreSQL)."""
        key = ", ".join(quote(k) for k in spec.key)
        values = spec.value_columns
        if not values:
            return f"ON CONFLICT ({key}) DO NOTHING"
        sets = ", ".join(f"{quote(c)} = excluded.{quote(c)}" for c in values)
        clause = f"ON CONFLICT ({key}) DO UPDATE SET {sets}"
        if spec.mode == "latest":
            new = ", ".join(f"excluded.{quote(c)}" for c in spec.order)
            old = ", ".join(f"{quote(spec.name)}.{quote(c)}" for c in spec.order)
            clause += f" WHERE ({new}) > ({old})"
        return clause

    # ------------------------------------------------------------------ batches
    def prepare(self, spec: TableSpec, rows: pa.Table) -> pa.Table:
        """The rows to upsert: the spec's columns, and in latest mode one row per key."""
        rows = conform(rows, spec)
        if spec.mode == "latest":
            rows = latest_per_key(rows, spec.key, spec.order)
        return rows

    def commit_batch(self, spec: TableSpec, pipeline: str, sink: str, query_id: str,
                     batch_id: int, rows: pa.Table) -> int | None:
        """Apply one micro-batch exactly once: the number of rows inserted or changed, or
        None when this batch id was already committed for ``query_id``."""
        payload = self._encode(spec, self.prepare(spec, rows))
        with self._lock:
            return self._commit(spec, pipeline, sink, query_id, batch_id, payload)

    @abstractmethod
    def _encode(self, spec: TableSpec, rows: pa.Table) -> Any:
        """Rows in the form ``_commit`` sends (done outside the lock)."""

    @abstractmethod
    def _commit(self, spec: TableSpec, pipeline: str, sink: str, query_id: str,
                batch_id: int, payload: Any) -> int | None: ...

    def committed_batches(self, pipeline: str, sink: str | None = None) -> int:
        """How many batch ids are recorded for ``pipeline`` (and ``sink``)."""
        p = self.placeholder
        sql = f"SELECT COUNT(*) FROM {BATCHES_TABLE} WHERE pipeline = {p}"
        params: list[Any] = [pipeline]
        if sink is not None:
            sql += f" AND sink = {p}"
            params.append(sink)
        try:
            return int(self.query(sql, params)[0][0])
        except Exception:
            with self._lock:
                absent = self._describe(BATCHES_TABLE) is None
            if absent:
                return 0
            raise
