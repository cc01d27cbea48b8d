"""Executor writes: each Spark task copies its rows into the database, the driver commits.

With ``database_writes = "executors"`` (PostgreSQL only) a micro-batch's rows never travel
through the driver.  Two phases, the commit protocol Spark's own file writers use:

1. **Stage (executors).**  ``stage_rows`` runs one Spark job over the sink's rows: every
   task opens its own connection and ``COPY``s its partition's rows, tagged with the
   query id, the batch id and a tag unique to this task attempt, into the sink's staging
   table ``millrace_staged_<table>`` (a plain logged table: staged rows survive a database
   restart), commits, and returns its tag and row count to the driver.  In latest mode a
   task first keeps one row per key of its own rows; in merge mode it reports the
   greatest event time of its rows.
2. **Commit (driver).**  ``Database.commit`` moves the staged rows of exactly the
   returned tags into the table -- one row per key across tasks by the order columns
   (latest), partial aggregates combined per key (merge, after the watermark), as they
   are (replace) -- with the same upsert clause, batch-id guard and watermark record as
   rows the driver holds, deletes the query's staged rows up to this batch, and commits
   once.

Why it is exactly once: only the driver's transaction changes the table, and it is the one
that records the batch id.  A task attempt that died after its ``COPY`` committed (an
executor killed, a speculative duplicate) left rows under a tag the driver never received:
the commit ignores them and deletes them.  A driver that died before its commit leaves
staged rows of a batch Spark re-runs with new tags; a driver that died after it finds the
batch recorded on replay and deletes the new attempt's rows.  The commit checks that the
staged rows of the returned tags number what the tasks reported, so nothing staged can go
missing unseen.

Thread ownership: ``stage_rows`` runs on the sink writer's thread in the driver (it
blocks on the Spark job); ``_stage_partition`` runs in a Spark Python worker, one call
per task, with a connection of its own.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from millrace.spark.sinks.table import TableSpec, conform, latest_per_key, quote

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

STAGE_PREFIX = "millrace_staged_"
# the columns a staging table has next to the sink table's own
QUERY_COLUMN, BATCH_COLUMN, TASK_COLUMN = "millrace_query", "millrace_batch", "millrace_task"
RESULT_SCHEMA = "task STRING, rows BIGINT, max_event_us BIGINT"


@dataclass(frozen=True)
class StagedRows:
    """A sink's share of a micro-batch, staged by the tasks that returned these tags."""

    tasks: tuple[str, ...]
    rows: int  # staged rows over those tasks

    @property
    def num_rows(self) -> int:
        return self.rows


def staged_table(table: str) -> str:
    return f"{STAGE_PREFIX}{table}"


def stage_ddl(spec: TableSpec) -> str:
    """The staging table: the sink table's columns (no key), tagged per task attempt."""
    return (f"CREATE TABLE IF NOT EXISTS {quote(staged_table(spec.name))} "
            f"(LIKE {quote(spec.name)}, {QUERY_COLUMN} TEXT NOT NULL, "
            f"{BATCH_COLUMN} BIGINT NOT NULL, {TASK_COLUMN} TEXT NOT NULL)")


def stage_rows(frame: DataFrame, url: str, spec: TableSpec, query_id: str, batch_id: int,
               event_time_column: str | None = None) -> tuple[StagedRows, int | None]:
    """Phase 1: every task of ``frame`` stages its rows; (what they staged, the greatest
    ``event_time_column`` value in microseconds, None without one or without rows)."""
    def stage(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield _stage_partition(batches, url, spec, query_id, batch_id, event_time_column)

    results = frame.mapInArrow(stage, RESULT_SCHEMA).collect()
    events = [r["max_event_us"] for r in results if r["max_event_us"] is not None]
    staged = StagedRows(tuple(r["task"] for r in results), sum(r["rows"] for r in results))
    return staged, max(events) if events else None


def _stage_partition(batches: Iterator[pa.RecordBatch], url: str, spec: TableSpec,
                     query_id: str, batch_id: int,
                     event_time_column: str | None) -> pa.RecordBatch:
    """One task: its rows into the staging table in one transaction; (tag, rows, max)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    task = uuid.uuid4().hex
    rows = pa.Table.from_batches(list(batches))
    max_event_us = None
    if event_time_column is not None and rows.num_rows:
        max_event_us = pc.max(pc.cast(rows[event_time_column], pa.int64())).as_py()
    rows = conform(rows, spec)
    if spec.mode == "latest":
        rows = latest_per_key(rows, spec.key, spec.order)
    if rows.num_rows:
        _copy(url, spec, rows, query_id, batch_id, task)
    return pa.RecordBatch.from_pydict({"task": [task], "rows": [rows.num_rows],
                                       "max_event_us": [max_event_us]},
                                      schema=pa.schema([("task", pa.string()),
                                                        ("rows", pa.int64()),
                                                        ("max_event_us", pa.int64())]))


def _copy(url: str, spec: TableSpec, rows: pa.Table, query_id: str, batch_id: int,
          task: str) -> None:
    """The task's rows, tagged, into the staging table in one transaction.  A server
    that went away is waited for as the driver's commit waits (``RECONNECT_TIMEOUT_S``):
    an attempt that lost its connection half-way never committed, so it runs again."""
    import psycopg
    import pyarrow as pa

    from millrace.spark.sinks.postgres import (
        RECONNECT_TIMEOUT_S,
        connect_when_up,
        copy_rows,
        postgres_url,
    )

    n = rows.num_rows
    tagged = (rows.append_column(QUERY_COLUMN, pa.array([query_id] * n, pa.string()))
              .append_column(BATCH_COLUMN, pa.array([batch_id] * n, pa.int64()))
              .append_column(TASK_COLUMN, pa.array([task] * n, pa.string())))
    deadline = time.monotonic() + RECONNECT_TIMEOUT_S
    while True:
        conn = connect_when_up(postgres_url(url), deadline, autocommit=False)
        try:
            with conn, conn.cursor() as cur:  # commits at the end of the block
                copy_rows(cur, staged_table(spec.name), tagged)
            return
        except psycopg.OperationalError:  # the connection's failure, not the data's
            if time.monotonic() > deadline:
                raise
