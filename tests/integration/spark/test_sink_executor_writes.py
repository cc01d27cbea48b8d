"""Executor writes (``millrace.spark.sinks.staged``) against a real PostgreSQL: Spark tasks
stage their rows, the driver's transaction moves exactly the returned tasks' rows.  The
whole pipeline with ``database_writes = executors`` equals the fold of its input over
two runs on one checkpoint; the cluster tests (``test_cluster_*.py``) run it under kills,
where ``auto`` picks executor writes for PostgreSQL.

Each write mode (latest, merge with a watermark, replace) gives the same table as the
driver path given the same rows; rows a dead task attempt staged are never applied; a
replayed batch id is skipped and its new staged rows dropped; and the row-count check is
shown to catch staged rows that went missing (its negative control).  SQLite refuses
executor writes with one line.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from pipeline_events import VALUE_SCHEMA, assert_tables, create_topic, events, fold, produce

from millrace.common.errors import ConfigError
from millrace.spark.pipeline import (
    AggregateSink,
    Pipeline,
    PipelineConfig,
    SourceConfig,
    StateSink,
)
from millrace.spark.sinks import Column, SinkBatch, TableSpec, open_database
from millrace.spark.sinks.database import Database
from millrace.spark.sinks.staged import (
    BATCH_COLUMN,
    QUERY_COLUMN,
    TASK_COLUMN,
    StagedRows,
    stage_rows,
    staged_table,
)
from millrace.testing.broker_process import BrokerProcess
from millrace.testing.postgres import PostgresServer

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = [
    pytest.mark.integration, pytest.mark.slow,
    # mapInArrow checks pyspark's pandas support at planning time
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

QUERY = "q-1"
T0 = dt.datetime(2026, 1, 1, 9, 0, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    with PostgresServer(tmp_path_factory.mktemp("postgres")) as server:
        yield server


@pytest.fixture
def db(postgres: PostgresServer) -> Iterator[Database]:
    with open_database(postgres.url) as database:
        yield database


def latest_spec(name: str) -> TableSpec:
    return TableSpec(name, (Column("id", "string"), Column("v", "bigint"),
                            Column("offset", "bigint")),
                     key=("id",), mode="latest", order=("offset",))


def merge_spec(name: str) -> TableSpec:
    return TableSpec(name, (Column("window_start", "timestamp"),
                            Column("window_end", "timestamp"), Column("product", "string"),
                            Column("n", "bigint"), Column("low", "bigint")),
                     key=("window_start", "window_end", "product"), mode="merge",
                     merge=(("n", "count"), ("low", "min")))


def latest_rows(spark: SparkSession, seed: int) -> DataFrame:
    """300 rows over 40 ids in 4 partitions: an id's rows spread over several tasks."""
    rows = [(f"id-{(i * 7 + seed) % 40}", i * seed, i) for i in range(300)]
    return spark.createDataFrame(rows, "id STRING, v BIGINT, offset BIGINT").repartition(4)


def merge_rows(spark: SparkSession) -> DataFrame:
    """Partial aggregates per window and product, the same key in several partitions."""
    rows = []
    for i in range(120):
        start = T0 + dt.timedelta(minutes=i % 6)
        rows.append((start, start + dt.timedelta(minutes=1), f"p{i % 3}", 1, 100 - i,
                     start + dt.timedelta(seconds=30)))
    return spark.createDataFrame(rows, "window_start TIMESTAMP, window_end TIMESTAMP, "
                                 "product STRING, n BIGINT, low BIGINT, "
                                 "__max_event_time TIMESTAMP").repartition(3)


def combined(frame: DataFrame) -> DataFrame:
    """One row per key, as the pipeline's batch form (a groupBy) hands the driver; the
    executors above take the uncombined rows, each key in several tasks."""
    from pyspark.sql import functions as F

    return frame.groupBy("window_start", "window_end", "product").agg(
        F.sum("n").alias("n"), F.min("low").alias("low"),
        F.max("__max_event_time").alias("__max_event_time"))


def table(db: Database, spec: TableSpec) -> list[tuple[Any, ...]]:
    cols = ", ".join(f'"{c}"' for c in spec.column_names)
    return sorted(db.query(f'SELECT {cols} FROM "{spec.name}"'), key=repr)


def staged_count(db: Database, spec: TableSpec) -> int:
    return int(db.query(f'SELECT count(*) FROM "{staged_table(spec.name)}"')[0][0])


def commit_on_executors(db: Database, frame: DataFrame, spec: TableSpec, batch_id: int,
                        event_time: str | None = None,
                        watermark_delay_ms: int = 0) -> int | None:
    staged, max_event_us = stage_rows(frame, db.url, spec, QUERY, batch_id, event_time)
    part = SinkBatch(spec.name, spec, staged, max_event_time_us=max_event_us,
                     watermark_delay_ms=watermark_delay_ms)
    return db.commit("p", QUERY, batch_id, [part])[spec.name]


def commit_on_driver(db: Database, frame: DataFrame, spec: TableSpec, batch_id: int,
                     event_time: str | None = None, watermark_delay_ms: int = 0) -> int | None:
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = frame.toArrow()
    latest = None
    if event_time is not None:
        latest = pc.max(pc.cast(rows[event_time], pa.int64())).as_py()
        rows = rows.drop_columns([event_time])
    return db.commit("p", QUERY, batch_id, [SinkBatch(spec.name, spec, rows, latest,
                                                      watermark_delay_ms)])[spec.name]


def test_latest_mode_equals_the_driver_path(spark: SparkSession, db: Database) -> None:
    staged, driven = latest_spec("latest_exec"), latest_spec("latest_driver")
    for spec in (staged, driven):
        db.ensure_table(spec)
    db.ensure_staging(staged)
    changed = []
    for batch_id, seed in enumerate((3, 5)):
        frame = latest_rows(spark, seed)
        changed.append(commit_on_executors(db, frame, staged, batch_id))
        assert changed[-1] == commit_on_driver(db, frame, driven, batch_id)
    assert changed[0] == 40 and 0 < changed[1] < 40  # the second batch is older for some
    assert table(db, staged) == table(db, driven)
    assert len(table(db, staged)) == 40
    assert staged_count(db, staged) == 0  # moved, then deleted


def test_merge_mode_with_a_watermark_equals_the_driver_path(spark: SparkSession,
                                                            db: Database) -> None:
    staged, driven = merge_spec("merge_exec"), merge_spec("merge_driver")
    for spec in (staged, driven):
        db.ensure_table(spec)
    db.ensure_staging(staged)
    frame = merge_rows(spark)
    for batch_id in range(3):  # windows of later batches fall behind a 2-minute watermark
        assert (commit_on_executors(db, frame, staged, batch_id, "__max_event_time", 120_000)
                == commit_on_driver(db, combined(frame), driven, batch_id, "__max_event_time",
                                    120_000))
    assert table(db, staged) == table(db, driven)
    counts = {row[:3]: row[3] for row in table(db, staged)}
    # W(1) = the greatest event time of batch 0 - 2 min: batch 2 drops the windows ending
    # at or before it (Spark holds a batch to the watermark of the one before)
    assert len(counts) == 6 and sorted(set(counts.values())) == [40, 60]


def test_a_dead_attempts_rows_are_never_applied(spark: SparkSession, db: Database) -> None:
    spec = latest_spec("orphans")
    db.ensure_table(spec)
    db.ensure_staging(spec)
    # a task attempt that staged its rows and died before answering the driver
    db.query(f'INSERT INTO "{staged_table(spec.name)}" (id, v, "offset", {QUERY_COLUMN}, '
             f"{BATCH_COLUMN}, {TASK_COLUMN}) VALUES ('ghost', 1, 999999, %s, 0, 'dead')",
             (QUERY,))
    commit_on_executors(db, latest_rows(spark, 3), spec, 0)
    ids = {row[0] for row in table(db, spec)}
    assert "ghost" not in ids and len(ids) == 40
    assert staged_count(db, spec) == 0


def test_a_replayed_batch_is_skipped_and_its_staged_rows_dropped(spark: SparkSession,
                                                                 db: Database) -> None:
    spec = latest_spec("replays")
    db.ensure_table(spec)
    db.ensure_staging(spec)
    assert commit_on_executors(db, latest_rows(spark, 3), spec, 0) == 40
    before = table(db, spec)
    # the same batch id again (a driver that died after its commit): different rows even
    assert commit_on_executors(db, latest_rows(spark, 11), spec, 0) is None
    assert table(db, spec) == before
    assert staged_count(db, spec) == 0


def test_the_row_count_check_catches_staged_rows_gone_missing(spark: SparkSession,
                                                              db: Database) -> None:
    spec = latest_spec("missing")
    db.ensure_table(spec)
    db.ensure_staging(spec)
    staged, _ = stage_rows(latest_rows(spark, 3), db.url, spec, QUERY, 0)
    assert isinstance(staged, StagedRows) and staged.rows > 0
    db.query(f'DELETE FROM "{staged_table(spec.name)}" WHERE ctid IN (SELECT ctid FROM '
             f'"{staged_table(spec.name)}" LIMIT 1)')
    with pytest.raises(RuntimeError, match=f"batch 0 has {staged.rows - 1} staged rows, "
                                           f"its tasks reported {staged.rows}"):
        db.commit("p", QUERY, 0, [SinkBatch(spec.name, spec, staged)])
    assert table(db, spec) == []  # rolled back: nothing applied


def test_sqlite_refuses_executor_writes(tmp_path: Path) -> None:
    with open_database(f"sqlite:///{tmp_path / 'x.db'}") as sqlite, \
            pytest.raises(ConfigError, match="database_writes = executors needs PostgreSQL"):
        sqlite.ensure_staging(latest_spec("t"))


def test_the_pipeline_with_executor_writes_equals_the_fold(
        spark: SparkSession, broker: BrokerProcess, postgres: PostgresServer,
        tmp_path: Path) -> None:
    create_topic(broker.bootstrap, "orders-staged", 3)
    stream = events(2000, seed=31)
    produce(broker.bootstrap, "orders-staged", stream[:1200])
    config = PipelineConfig(
        name="staged", database=postgres.url, checkpoint_dir=str(tmp_path / "ck"),
        source=SourceConfig(bootstrap_servers=broker.bootstrap, subscribe="orders-staged",
                            options={"startingOffsets": "earliest",
                                     "maxOffsetsPerTrigger": "500"}),
        value_schema=VALUE_SCHEMA, database_writes="executors",
        state_sinks=[StateSink(table="orders", key=["order_id"])],
        aggregate_sinks=[AggregateSink(
            table="revenue_per_minute", event_time="event_time", window="1 minute",
            watermark="10 minutes", group_by=["product"],
            aggregates={"revenue": "sum(quantity * price)", "orders": "count(*)"},
            where="status = 'paid'")])
    assert config.writes_on_executors()
    assert Pipeline(config, spark).run().input_rows == 1200
    produce(broker.bootstrap, "orders-staged", stream[1200:])
    assert Pipeline(config, spark).run().input_rows == 800  # resumed on the checkpoint
    assert_tables(postgres.url, fold(stream))
    with open_database(postgres.url) as db:
        for table in ("orders", "revenue_per_minute"):  # moved, then deleted
            assert db.query(f'SELECT count(*) FROM "{staged_table(table)}"') == [(0,)]


def test_auto_writes_on_executors_only_for_postgresql_on_a_cluster() -> None:
    def config(database: str, master: str, writes: str = "auto") -> PipelineConfig:
        return PipelineConfig(name="j", database=database, checkpoint_dir="/ck",
                              source=SourceConfig(bootstrap_servers="b:9092", subscribe="t"),
                              value_format="raw", database_writes=writes, spark_master=master,
                              state_sinks=[StateSink(table="t", key=["key"])])

    pg, lite = "postgresql://u@h/db", "sqlite:///x.db"
    assert config(pg, "spark://m:7077").writes_on_executors()
    assert not config(pg, "local[2]").writes_on_executors()
    assert not config(lite, "spark://m:7077").writes_on_executors()
    assert config(pg, "local[2]", "executors").writes_on_executors()
    assert not config(pg, "spark://m:7077", "driver").writes_on_executors()
    with pytest.raises(ConfigError, match="database_writes executors needs PostgreSQL"):
        config(lite, "local[2]", "executors").validate()
    with pytest.raises(ConfigError, match="database_writes 'both': expected auto, driver"):
        config(pg, "local[2]", "both").validate()
