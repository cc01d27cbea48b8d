"""PostgreSQL sinks (psycopg 3): ``COPY`` into a staging table, then one upsert.

Each batch: ``COPY`` the rows as CSV (written by Arrow, no Python loop per row) into a
session-local temporary table ``LIKE`` the target, then ``INSERT ... SELECT ... ON
CONFLICT`` into the target, all inside the batch's transaction.  The staging table is
``ON COMMIT DELETE ROWS`` and reused for the connection's lifetime.  Batches with a
binary column fall back to ``COPY`` row by row (Arrow's CSV has no ``bytea`` encoding).

A server that goes away (restarted, failed over) breaks the connection, and the next
batch's transaction fails with it.  ``commit`` then reconnects and runs the batch again,
for up to ``RECONNECT_TIMEOUT_S``: the batch-id guard makes that safe whether the lost
transaction was rolled back (the batch is applied now) or had committed before its
answer was lost (the batch is recorded: skipped).  Only a lost connection is retried;
any other error, or a server still away at the deadline, fails the batch as before.
"""

from __future__ import annotations

import io
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from millrace.spark.sinks.database import Database, SinkBatch
from millrace.spark.sinks.table import BATCHES_TABLE, TableSpec, quote

if TYPE_CHECKING:
    import pyarrow as pa

RECONNECT_TIMEOUT_S = 120.0  # how long a batch waits for a lost server to come back
RECONNECT_BACKOFF_S = (0.2, 2.0)  # first and longest pause between connection attempts


class _Replayable:
    """The parts of a batch, iterable again after a failed attempt: the parts already
    taken come first, then the rest of the source (which may still be computing)."""

    def __init__(self, parts: Iterable[SinkBatch]) -> None:
        self._source = iter(parts)
        self._taken: list[SinkBatch] = []

    def __iter__(self) -> Iterator[SinkBatch]:
        yield from list(self._taken)
        for part in self._source:
            self._taken.append(part)
            yield part


class PostgresDatabase(Database):
    dialect = "postgresql"
    placeholder = "%s"
    lock_clause = " FOR UPDATE"
    now_sql = "now()"

    def __init__(self, url: str) -> None:
        import psycopg

        super().__init__(url)
        self._conn = psycopg.connect(url, autocommit=True)
        self._staged: set[str] = set()
        self._cur: Any = None  # the open transaction's cursor

    def commit(self, pipeline: str, query_id: str, batch_id: int,
               parts: Iterable[SinkBatch]) -> dict[str, int | None]:
        """``Database.commit``, run again on a new connection when the server went away
        (see the module doc)."""
        import psycopg

        replayable = _Replayable(parts)
        deadline = time.monotonic() + RECONNECT_TIMEOUT_S
        while True:
            try:
                return super().commit(pipeline, query_id, batch_id, replayable)
            except psycopg.OperationalError:
                if not self._conn.closed:
                    raise  # the connection is fine: not a server that went away
                self._reconnect(deadline)

    def _reconnect(self, deadline: float) -> None:
        """A new connection once the server accepts one; the last error at ``deadline``."""
        conn = connect_when_up(self.url, deadline, autocommit=True)
        with self._lock:
            self._conn = conn
            self._staged.clear()  # temporary tables belong to the lost session

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock, self._conn.cursor() as cur:
            cur.execute(sql, tuple(params) or None)
            return [tuple(r) for r in cur.fetchall()] if cur.description else []

    def close(self) -> None:
        with self._lock:  # after a batch a Spark callback thread may still be committing
            self._conn.close()

    def batches_ddl(self) -> str:
        return (f"CREATE TABLE IF NOT EXISTS {BATCHES_TABLE} (pipeline TEXT NOT NULL, "
                "sink TEXT NOT NULL, batch_id BIGINT NOT NULL, query_id TEXT NOT NULL, "
                "rows_upserted BIGINT NOT NULL, "
                "committed_at TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "
                "PRIMARY KEY (pipeline, sink, batch_id))")

    def _execute_script(self, statements: Sequence[str]) -> None:
        with self._conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement.encode())

    def _describe(self, table: str) -> tuple[list[str], list[str]] | None:
        with self._conn.cursor() as cur:
            cur.execute("SELECT column_name FROM information_schema.columns WHERE "
                        "table_schema = current_schema() AND table_name = %s "
                        "ORDER BY ordinal_position", (table,))
            columns = [r[0] for r in cur.fetchall()]
            if not columns:
                return None
            cur.execute("SELECT a.attname FROM pg_index i JOIN pg_attribute a ON "
                        "a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) WHERE "
                        "i.indrelid = to_regclass(%s) AND i.indisprimary "
                        "ORDER BY array_position(i.indkey, a.attnum)", (quote(table),))
            key = [r[0] for r in cur.fetchall()]
        return columns, key

    def _encode(self, spec: TableSpec, rows: pa.Table) -> tuple[bytes | None, pa.Table]:
        """CSV bytes, or None when a binary column needs the row-by-row path."""
        return csv_bytes(rows), rows

    def _stage(self, cur: Any, spec: TableSpec) -> str:
        stage = f"millrace_stage_{spec.name}"
        if stage not in self._staged:
            cur.execute(f"CREATE TEMPORARY TABLE IF NOT EXISTS {quote(stage)} "
                        f"(LIKE {quote(spec.name)}) ON COMMIT DELETE ROWS".encode())
            self._staged.add(stage)
        return stage

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        try:
            with self._conn.transaction(), self._conn.cursor() as cur:
                self._cur = cur
                yield
        except BaseException:
            self._staged.clear()  # a staging table created in a rolled-back transaction
            raise
        finally:
            self._cur = None

    def _cursor(self) -> Any:
        assert self._cur is not None, "outside a transaction"
        return self._cur

    def _fetch_one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        cur = self._cursor()
        cur.execute(sql.encode(), tuple(params) or None)
        row = cur.fetchone()
        return None if row is None else tuple(row)

    def _run(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._cursor().execute(sql.encode(), tuple(params) or None)

    def _upsert(self, spec: TableSpec, payload: tuple[bytes | None, pa.Table]) -> int:
        data, rows = payload
        if not rows.num_rows:
            return 0
        cur = self._cursor()
        cols = ", ".join(quote(c) for c in spec.column_names)
        stage = self._stage(cur, spec)
        copy_rows(cur, stage, rows, data)
        cur.execute(f"INSERT INTO {quote(spec.name)} ({cols}) SELECT {cols} FROM "
                    f"{quote(stage)} {self.upsert_clause(spec)}".encode())
        return max(cur.rowcount, 0)

    # ------------------------------------------------------------------ executor writes
    def ensure_staging(self, spec: TableSpec) -> None:
        """The staging table executors copy ``spec``'s rows into (``staged.py``)."""
        from millrace.spark.sinks.staged import stage_ddl, staged_table

        with self._lock:
            self._execute_script([stage_ddl(spec)])
            found = self._describe(staged_table(spec.name))
            # a table that gained columns (ensure_table's add_columns): its stage too
            missing = [c for c in spec.columns if found is not None and c.name not in found[0]]
            self._execute_script([self.add_column_sql(staged_table(spec.name), c)
                                  for c in missing])

    def _upsert_staged(self, query_id: str, batch_id: int, part: SinkBatch,
                       late_ms: int) -> int:
        """Phase 2 of ``staged.py``: the staged rows of the batch's tasks into the table."""
        from millrace.spark.sinks.staged import (
            BATCH_COLUMN,
            QUERY_COLUMN,
            TASK_COLUMN,
            StagedRows,
            staged_table,
        )

        spec, staged = part.spec, part.rows
        assert isinstance(staged, StagedRows)
        cur = self._cursor()
        stage = quote(staged_table(spec.name))
        where = f"{QUERY_COLUMN} = %s AND {BATCH_COLUMN} = %s AND {TASK_COLUMN} = ANY(%s)"
        params: list[Any] = [query_id, batch_id, list(staged.tasks)]
        cur.execute(f"SELECT count(*) FROM {stage} WHERE {where}".encode(), params)
        found = cur.fetchone()[0]
        if found != staged.rows:
            raise RuntimeError(f"table {spec.name}: batch {batch_id} has {found} staged "
                               f"rows, its tasks reported {staged.rows}")
        changed = 0
        if staged.rows:
            if late_ms > 0:
                where += " AND window_end > to_timestamp(%s / 1000.0)"
                params.append(late_ms)
            cur.execute(f"INSERT INTO {quote(spec.name)} ({', '.join(map(quote, spec.column_names))}) "
                        f"{staged_select(spec, stage, where)} "
                        f"{self.upsert_clause(spec)}".encode(), params)
            changed = max(cur.rowcount, 0)
        self._drop_staged(query_id, batch_id, spec)
        return changed

    def _drop_staged(self, query_id: str, batch_id: int, spec: TableSpec) -> None:
        """The query's staged rows up to this batch: its own, and failed attempts'."""
        from millrace.spark.sinks.staged import BATCH_COLUMN, QUERY_COLUMN, staged_table

        self._cursor().execute(f"DELETE FROM {quote(staged_table(spec.name))} WHERE "
                               f"{QUERY_COLUMN} = %s AND {BATCH_COLUMN} <= %s".encode(),
                               (query_id, batch_id))


def staged_select(spec: TableSpec, stage: str, where: str) -> str:
    """The SELECT over a batch's staged rows that gives one row per key: the latest by the
    order columns (latest mode), the partial aggregates combined (merge mode), or the
    rows as they are (replace mode: Spark's update output has a key once per batch)."""
    cols = ", ".join(quote(c) for c in spec.column_names)
    key = ", ".join(quote(k) for k in spec.key)
    if spec.mode == "latest":
        order = ", ".join(f"{quote(o)} DESC NULLS LAST" for o in spec.order)
        return (f"SELECT DISTINCT ON ({key}) {cols} FROM {stage} WHERE {where} "
                f"ORDER BY {key}, {order}")
    if spec.mode == "merge":
        functions = dict(spec.merge)
        combined = ", ".join(
            quote(c) if c in spec.key
            else f"{'SUM' if functions[c] in ('sum', 'count') else functions[c].upper()}"
                 f"({quote(c)}) AS {quote(c)}"
            for c in spec.column_names)
        return f"SELECT {combined} FROM {stage} WHERE {where} GROUP BY {key}"
    return f"SELECT {cols} FROM {stage} WHERE {where}"


def connect_when_up(url: str, deadline: float, *, autocommit: bool) -> Any:
    """A connection once the server accepts one, retried with backoff; the last error
    at ``deadline`` (``time.monotonic()``)."""
    import psycopg

    pause = RECONNECT_BACKOFF_S[0]
    while True:
        try:
            return psycopg.connect(url, autocommit=autocommit)
        except psycopg.OperationalError:
            if time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, RECONNECT_BACKOFF_S[1])


def postgres_url(url: str) -> str:
    """A libpq URL: SQLAlchemy-style ``postgresql+driver://`` loses its driver part."""
    if url.startswith(("postgresql+", "postgres+")):
        return "postgresql:" + url.partition(":")[2]
    return url


def csv_bytes(rows: pa.Table) -> bytes | None:
    """``rows`` as CSV for ``COPY`` (written by Arrow, no Python loop per row), or None
    when a binary column has no CSV form."""
    import pyarrow as pa
    import pyarrow.csv as csv

    if any(pa.types.is_binary(t) or pa.types.is_large_binary(t) for t in rows.schema.types):
        return None
    buffer = io.BytesIO()
    if rows.num_rows:
        csv.write_csv(rows, buffer, csv.WriteOptions(include_header=False))
    return buffer.getvalue()


def copy_rows(cur: Any, table: str, rows: pa.Table, data: bytes | None = None) -> None:
    """``COPY`` ``rows`` into ``table`` (their columns, in order): ``data``, their CSV
    (``csv_bytes``, made here when not given), or row by row when there is none."""
    cols = ", ".join(quote(c) for c in rows.column_names)
    if data is None:
        data = csv_bytes(rows)
    if data is not None:
        with cur.copy(f"COPY {quote(table)} ({cols}) FROM STDIN (FORMAT csv)".encode()) as copy:
            copy.write(data)
        return
    with cur.copy(f"COPY {quote(table)} ({cols}) FROM STDIN".encode()) as copy:
        for row in zip(*(column.to_pylist() for column in rows.columns)):
            copy.write_row(row)
