"""``Database``: the transaction that makes a sink exactly-once, shared by both dialects.

``commit(pipeline, query_id, batch_id, parts)`` runs one transaction over one micro-batch
of one Spark query, whatever number of sink tables it feeds (``SinkBatch`` each):

1. per sink, look up ``(pipeline, sink, batch_id)`` in ``millrace_batches``; if it is
   recorded for this ``query_id`` the batch was committed before a crash and that sink
   is skipped (``None``);
2. otherwise upsert the sink's rows (latest mode: only over rows with smaller order
   columns; replace mode: unconditionally; merge mode: combined with the stored
   aggregate, after dropping late windows -- see below) and record the batch id with its
   query id;
3. commit.  ``commit_batch(spec, pipeline, sink, ...)`` is the one-sink form.

Spark writes a batch's offsets to the checkpoint before running it and re-runs the same
batch id over the same offsets after a crash, so "recorded" means "already applied".
The query id (Spark's id of a checkpoint, stable across restarts) tells a batch id of
this checkpoint from the same number left by a deleted one: a record from another query
id is overwritten, not trusted.  A merge-mode table cannot be rebuilt that way (adding a
new checkpoint's batches to the old sums counts events twice), so merging into a table
that holds rows merged under another query id is refused with an error.

Merge mode and lateness, as Spark's stateful aggregation does it (``withWatermark`` +
update mode, measured against Spark 4): the watermark W(k) of batch k is the greatest
event time seen in batches before k minus the delay (0 at first, never moving back);
batch k drops the windows ending at or before W(k-1).  ``millrace_watermarks`` keeps,
per sink, W(k-1)'s successor state -- the greatest event time so far and the current
watermark -- updated in the same transaction as the rows.

Subclasses provide the dialect: the transaction, how rows reach the database
(``executemany`` for SQLite, ``COPY`` into a staging table for PostgreSQL) and how an
existing table is inspected.  A ``Database`` is used by one sink writer; its methods hold
a lock, so calls from Spark's callback threads are serialised.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

from millrace.common.errors import ConfigError
from millrace.spark.sinks.staged import StagedRows
from millrace.spark.sinks.table import (
    BATCHES_TABLE,
    WATERMARKS_TABLE,
    Column,
    Dialect,
    TableSpec,
    conform,
    latest_per_key,
    quote,
    sql_type,
)

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass
class SinkBatch:
    """One sink's share of a micro-batch."""

    sink: str
    spec: TableSpec
    rows: pa.Table | StagedRows  # the rows, or where executors staged them (staged.py)
    # merge mode: the greatest event time among the batch's input rows (microseconds since
    # the epoch; None without rows) and the watermark delay; rows carry ``window_end``
    max_event_time_us: int | None = None
    watermark_delay_ms: int = 0


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

    def ensure_table(self, spec: TableSpec, add_columns: bool = False) -> list[str]:
        """Create the batch log and ``spec``'s table if missing; an existing table must have
        every column and the same primary key -- or, with ``add_columns`` (a value schema
        that gained fields), its missing non-key columns are added, nullable (``ALTER
        TABLE ADD COLUMN``; the rows already there read null).  The columns added."""
        with self._lock:
            self._execute_script([self.batches_ddl(), self.watermarks_ddl()])
            found = self._describe(spec.name)
            if found is None:
                self._execute_script([self.create_table_sql(spec)])
                return []
        columns, key = found
        if list(key) != list(spec.key):
            raise ConfigError(f"table {spec.name} exists with primary key "
                              f"({', '.join(key) or 'none'}), the sink needs "
                              f"({', '.join(spec.key)}); drop it or write to another table")
        missing = [c for c in spec.columns if c.name not in columns]
        if missing and add_columns:
            with self._lock:
                self._execute_script([self.add_column_sql(spec.name, c) for c in missing])
            return [c.name for c in missing]
        if missing:
            raise ConfigError(f"table {spec.name} exists without column(s) "
                              f"{', '.join(c.name for c in missing)}; drop it or write to "
                              "another table")
        return []

    def add_column_sql(self, table: str, column: Column) -> str:
        return (f"ALTER TABLE {quote(table)} ADD COLUMN {quote(column.name)} "
                f"{sql_type(column.type, self.dialect)}")

    def create_table_sql(self, spec: TableSpec) -> str:
        cols = [f"{quote(c.name)} {sql_type(c.type, self.dialect)}"
                + (" NOT NULL" if c.name in spec.key else "") for c in spec.columns]
        cols.append(f"PRIMARY KEY ({', '.join(quote(k) for k in spec.key)})")
        return f"CREATE TABLE IF NOT EXISTS {quote(spec.name)} ({', '.join(cols)})"

    @abstractmethod
    def batches_ddl(self) -> str: ...

    def watermarks_ddl(self) -> str:
        return (f"CREATE TABLE IF NOT EXISTS {WATERMARKS_TABLE} (pipeline TEXT NOT NULL, "
                "sink TEXT NOT NULL, query_id TEXT NOT NULL, max_event_ms BIGINT, "
                "watermark_ms BIGINT NOT NULL, PRIMARY KEY (pipeline, sink))")

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
        if spec.mode == "merge":
            sets = ", ".join(f"{quote(c)} = {self.merge_expression(spec, c, fn)}"
                             for c, fn in spec.merge)
            return f"ON CONFLICT ({key}) DO UPDATE SET {sets}"
        if spec.mode == "latest":
            new = ", ".join(f"excluded.{quote(c)}" for c in spec.order)
            old = ", ".join(f"{quote(spec.name)}.{quote(c)}" for c in spec.order)
            clause += f" WHERE ({new}) > ({old})"
        return clause

    def merge_expression(self, spec: TableSpec, column: str, function: str) -> str:
        """The stored value combined with the batch's: a null side leaves the other."""
        old, new = f"{quote(spec.name)}.{quote(column)}", f"excluded.{quote(column)}"
        if function in ("sum", "count"):
            combined = f"{old} + {new}"
        elif self.dialect == "sqlite":  # scalar min()/max() of SQLite: NULL if either is
            combined = f"{'MIN' if function == 'min' else 'MAX'}({old}, {new})"
        else:
            combined = f"{'LEAST' if function == 'min' else 'GREATEST'}({old}, {new})"
        return f"COALESCE({combined}, {old}, {new})"

    # ------------------------------------------------------------------ batches
    def prepare(self, spec: TableSpec, rows: pa.Table) -> pa.Table:
        """The rows to upsert: the spec's columns, and in latest mode one row per key."""
        rows = conform(rows, spec)
        if spec.mode == "latest":
            rows = latest_per_key(rows, spec.key, spec.order)
        return rows

    def commit_batch(self, spec: TableSpec, pipeline: str, sink: str, query_id: str,
                     batch_id: int, rows: pa.Table) -> int | None:
        """Apply one micro-batch of one sink exactly once: the number of rows inserted or
        changed, or None when this batch id was already committed for ``query_id``."""
        return self.commit(pipeline, query_id, batch_id, [SinkBatch(sink, spec, rows)])[sink]

    def commit(self, pipeline: str, query_id: str, batch_id: int,
               parts: Iterable[SinkBatch]) -> dict[str, int | None]:
        """Apply one micro-batch to every sink in ``parts`` in one transaction: sink ->
        rows inserted or changed, or None for a sink that had committed it already.

        ``parts`` is read inside the transaction, one sink at a time: a caller may still be
        computing the later sinks' rows (another thread feeding an iterator), and an
        exception raised by the iterator rolls the whole batch back."""
        outcome: dict[str, int | None] = {}
        p = self.placeholder
        with self._lock, self._transaction():
            for part in parts:
                found = self._fetch_one(
                    f"SELECT query_id FROM {BATCHES_TABLE} WHERE pipeline = {p} AND "
                    f"sink = {p} AND batch_id = {p}{self.lock_clause}",
                    (pipeline, part.sink, batch_id))
                staged = isinstance(part.rows, StagedRows)
                if found is not None and found[0] == query_id:
                    if staged:  # a replay's attempt: its rows are not needed
                        self._drop_staged(query_id, batch_id, part.spec)
                    outcome[part.sink] = None
                    continue
                if staged:
                    late_ms = (self._advance_watermark(pipeline, query_id, part)
                               if part.spec.mode == "merge" else 0)
                    changed = self._upsert_staged(query_id, batch_id, part, late_ms)
                else:
                    rows = part.rows
                    if part.spec.mode == "merge":
                        rows = self._apply_watermark(pipeline, query_id, part)
                    changed = self._upsert(
                        part.spec, self._encode(part.spec, self.prepare(part.spec, rows)))
                self._run(
                    f"INSERT INTO {BATCHES_TABLE} (pipeline, sink, batch_id, query_id, "
                    f"rows_upserted, committed_at) VALUES ({p}, {p}, {p}, {p}, {p}, "
                    f"{self.now_sql}) ON CONFLICT (pipeline, sink, batch_id) DO UPDATE SET "
                    "query_id = excluded.query_id, rows_upserted = excluded.rows_upserted, "
                    "committed_at = excluded.committed_at",
                    (pipeline, part.sink, batch_id, query_id, changed))
                outcome[part.sink] = changed
        return outcome

    def _apply_watermark(self, pipeline: str, query_id: str, part: SinkBatch) -> pa.Table:
        """Merge mode: drop the windows ending at or before the watermark of the previous
        batch and record this batch's watermark state (see the module doc)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        late_ms = self._advance_watermark(pipeline, query_id, part)
        rows = part.rows
        assert not isinstance(rows, StagedRows)
        if late_ms > 0 and rows.num_rows:
            end = rows["window_end"]
            limit = pa.scalar(late_ms * 1000, pa.timestamp("us", tz=end.type.tz))
            rows = rows.filter(pc.greater(pc.cast(end, limit.type), limit))
        return rows

    def _advance_watermark(self, pipeline: str, query_id: str, part: SinkBatch) -> int:
        """Merge mode: W(k-1), the watermark this batch's windows are held to (milliseconds
        since the epoch; 0 at first), after recording this batch's watermark state."""
        p = self.placeholder
        found = self._fetch_one(
            f"SELECT query_id, max_event_ms, watermark_ms FROM {WATERMARKS_TABLE} WHERE "
            f"pipeline = {p} AND sink = {p}{self.lock_clause}", (pipeline, part.sink))
        if found is None or found[0] != query_id:
            self._refuse_foreign_merge(pipeline, query_id, part.spec, part.sink)
            max_event_ms, late_ms = None, 0
        else:
            max_event_ms, late_ms = found[1], int(found[2])
        # W(k) from the events before this batch, then this batch's events join the max
        watermark_ms = late_ms if max_event_ms is None else \
            max(late_ms, int(max_event_ms) - part.watermark_delay_ms)
        if part.max_event_time_us is not None:
            batch_ms = part.max_event_time_us // 1000
            max_event_ms = batch_ms if max_event_ms is None else max(int(max_event_ms),
                                                                     batch_ms)
        self._run(
            f"INSERT INTO {WATERMARKS_TABLE} (pipeline, sink, query_id, max_event_ms, "
            f"watermark_ms) VALUES ({p}, {p}, {p}, {p}, {p}) ON CONFLICT (pipeline, sink) DO "
            "UPDATE SET query_id = excluded.query_id, max_event_ms = excluded.max_event_ms, "
            "watermark_ms = excluded.watermark_ms",
            (pipeline, part.sink, query_id, max_event_ms, watermark_ms))
        return late_ms

    def _refuse_foreign_merge(self, pipeline: str, query_id: str, spec: TableSpec,
                              sink: str) -> None:
        """A merge-mode table with rows merged under another query id (a deleted or
        different checkpoint) cannot take this query's batches without double counting."""
        p = self.placeholder
        other = self._fetch_one(
            f"SELECT query_id FROM {BATCHES_TABLE} WHERE pipeline = {p} AND sink = {p} AND "
            f"query_id <> {p} LIMIT 1", (pipeline, sink, query_id))
        if other is None or self._fetch_one(f"SELECT 1 FROM {quote(spec.name)} LIMIT 1") \
                is None:
            return
        raise ConfigError(
            f"table {spec.name} holds aggregates that pipeline {pipeline} merged under "
            f"another checkpoint (query {other[0]}); adding this checkpoint's batches would "
            f"count those events twice: delete the table's rows (they are rebuilt from the "
            f"topic) or restore the checkpoint")

    # ------------------------------------------------------------------ dialect
    lock_clause = ""  # appended to the SELECTs that decide a transaction (FOR UPDATE)
    now_sql = "CURRENT_TIMESTAMP"

    @abstractmethod
    def _transaction(self) -> AbstractContextManager[None]:
        """Begin a write transaction; commit on success, roll back on an exception."""

    @abstractmethod
    def _fetch_one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """The first row of a query inside the current transaction."""

    @abstractmethod
    def _run(self, sql: str, params: Sequence[Any] = ()) -> None:
        """One statement inside the current transaction."""

    @abstractmethod
    def _encode(self, spec: TableSpec, rows: pa.Table) -> Any:
        """Rows in the form ``_upsert`` sends."""

    @abstractmethod
    def _upsert(self, spec: TableSpec, payload: Any) -> int:
        """Upsert encoded rows inside the current transaction: rows inserted or changed."""

    def ensure_staging(self, spec: TableSpec) -> None:
        """The staging table for executor writes (``staged.py``): PostgreSQL only."""
        raise ConfigError(f"database_writes = executors needs PostgreSQL, not {self.dialect} "
                          "(executors on other machines cannot share a SQLite file)")

    def _upsert_staged(self, query_id: str, batch_id: int, part: SinkBatch,
                       late_ms: int) -> int:
        raise NotImplementedError(f"{self.dialect} has no executor writes")

    def _drop_staged(self, query_id: str, batch_id: int, spec: TableSpec) -> None:
        raise NotImplementedError(f"{self.dialect} has no executor writes")

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
        # The table exists now: a running pipeline created it between the query and the
        # check.  Ask once more (each query is its own transaction); a real error repeats.
        return int(self.query(sql, params)[0][0])
