"""The pipeline in-process against a real broker and real Spark: state and aggregate sinks
into SQLite (twice, the second run resuming from the checkpoint) and into PostgreSQL (a
server started by the test), a transform, and the configuration errors only Spark finds."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from pipeline_events import (
    EPOCH_MS,
    VALUE_SCHEMA,
    assert_tables,
    create_topic,
    events,
    fold,
    produce,
)

from millrace.common.errors import ConfigError
from millrace.spark.pipeline import (
    AggregateSink,
    BatchProgress,
    Pipeline,
    PipelineConfig,
    PipelineError,
    SourceConfig,
    StateSink,
)
from millrace.spark.pipeline.plan import build_plan
from millrace.spark.sinks import open_database
from millrace.testing.broker_process import BrokerProcess
from millrace.testing.postgres import PostgresServer

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [
    pytest.mark.integration, pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]


def job(bootstrap: str, topic: str, database: str, checkpoints: Path, **changes: Any
        ) -> PipelineConfig:
    base: dict[str, Any] = dict(
        name=topic,
        source=SourceConfig(bootstrap_servers=bootstrap, subscribe=topic,
                            options={"startingOffsets": "earliest",
                                     "maxOffsetsPerTrigger": "1000"}),
        value_format="json", value_schema=VALUE_SCHEMA,
        state_sinks=[StateSink(table="orders", key=["order_id"])],
        aggregate_sinks=[AggregateSink(
            table="revenue_per_minute", event_time="event_time", window="1 minute",
            watermark="10 minutes", group_by=["product"],
            aggregates={"revenue": "sum(quantity * price)", "orders": "count(*)"},
            where="status = 'paid'")],
        database=database, checkpoint_dir=str(checkpoints), trigger="available-now")
    base.update(changes)
    return PipelineConfig(**base)


def check_progress(progress: list[BatchProgress], queries: set[str], records: int) -> None:
    assert {p.query for p in progress} == queries
    for query in queries:
        mine = [p for p in progress if p.query == query]
        assert [p.batch_id for p in mine] == sorted({p.batch_id for p in mine})
        assert sum(p.input_rows for p in mine) == records
        assert all(p.input_rows <= 1000 for p in mine)  # maxOffsetsPerTrigger
        assert mine[-1].lag and not any(mine[-1].lag.values())
        assert not any(p.skipped for p in mine)


def test_state_and_aggregate_sinks_into_sqlite_resume_from_the_checkpoint(
        spark: SparkSession, broker: BrokerProcess, tmp_path: Path) -> None:
    create_topic(broker.bootstrap, "orders-sqlite", 2)
    stream = events(3000)
    produce(broker.bootstrap, "orders-sqlite", stream)
    database = f"sqlite:///{tmp_path / 'millrace.db'}"
    config = job(broker.bootstrap, "orders-sqlite", database, tmp_path / "checkpoints")

    progress: list[BatchProgress] = []
    result = Pipeline(config, spark).run(progress.append)
    assert_tables(database, fold(stream))
    queries = {"orders-sqlite.orders", "orders-sqlite.revenue_per_minute"}
    check_progress(progress, queries, 3000)
    assert result.input_rows == 3000 and result.batches == len(progress) >= 6
    assert result.rows_upserted == {
        t: sum(p.rows_upserted for p in progress if p.table == t)
        for t in ("orders", "revenue_per_minute")}
    assert result.rows_upserted["orders"] >= len(fold(stream).orders)
    assert not result.stopped and result.lag == {"orders-sqlite-0": 0, "orders-sqlite-1": 0}

    # more events: the next run reads only those, and the tables hold the whole stream
    more = events(1500, start=3000)
    produce(broker.bootstrap, "orders-sqlite", more)
    first = list(progress)
    progress.clear()
    result = Pipeline(config, spark).run(progress.append)
    assert result.input_rows == 1500
    check_progress(progress, queries, 1500)
    assert_tables(database, fold(stream + more))
    db = open_database(database)
    try:
        batches = db.query("SELECT sink, COUNT(*) FROM millrace_batches GROUP BY sink")
    finally:
        db.close()
    # every batch of both runs is in the batch log, once
    assert dict(batches) == {t: sum(1 for p in first + progress if p.table == t)
                             for t in ("orders", "revenue_per_minute")}

    # a processing-time trigger, told to stop once no partition lags
    last = events(500, start=4500)
    produce(broker.bootstrap, "orders-sqlite", last)
    result = Pipeline(replace(config, trigger="processing-time=200ms"), spark).run(
        until_caught_up=True)
    assert result.input_rows == 500 and not result.stopped
    assert_tables(database, fold(stream + more + last))


@pytest.fixture(scope="module")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    with PostgresServer(tmp_path_factory.mktemp("postgres")) as server:
        yield server


def test_state_and_aggregate_sinks_into_postgresql(
        spark: SparkSession, broker: BrokerProcess, postgres: PostgresServer,
        tmp_path: Path) -> None:
    create_topic(broker.bootstrap, "orders-pg", 3)
    stream = events(3000, seed=11)
    produce(broker.bootstrap, "orders-pg", stream)
    config = job(broker.bootstrap, "orders-pg", postgres.url, tmp_path / "checkpoints")
    progress: list[BatchProgress] = []
    result = Pipeline(config, spark).run(progress.append)
    check_progress(progress, {"orders-pg.orders", "orders-pg.revenue_per_minute"}, 3000)
    assert result.input_rows == 3000
    assert_tables(postgres.url, fold(stream))
    db = open_database(postgres.url)
    try:
        types = dict(db.query("SELECT column_name, data_type FROM information_schema.columns "
                              "WHERE table_name = 'orders'"))
    finally:
        db.close()
    assert types == {"order_id": "text", "customer": "text", "product": "text",
                     "quantity": "integer", "price": "double precision", "status": "text",
                     "event_time": "timestamp with time zone", "offset": "bigint"}


def test_the_postgresql_sink_transaction_and_types(postgres: PostgresServer) -> None:
    import datetime as dt
    import decimal

    import pyarrow as pa

    from millrace.spark.sinks import Column, TableSpec

    spec = TableSpec("typed", (Column("k", "string"), Column("blob", "binary"),
                               Column("amount", "decimal(10,2)"), Column("day", "date"),
                               Column("flag", "boolean"), Column("at", "timestamp"),
                               Column("note", "string"), Column("seq", "bigint")),
                     key=("k",), mode="latest", order=("seq",))
    at = dt.datetime(2026, 1, 1, 10, 0, 0, 250000, tzinfo=dt.UTC)

    def rows(*items: tuple[str, bytes | None, str, int]) -> pa.Table:
        n = len(items)
        return pa.table({
            "k": [i[0] for i in items], "blob": pa.array([i[1] for i in items], pa.binary()),
            "amount": pa.array([decimal.Decimal("12.34")] * n, pa.decimal128(10, 2)),
            "day": pa.array([dt.date(2026, 1, 2)] * n, pa.date32()),
            "flag": [True] * n, "at": pa.array([at] * n, pa.timestamp("us", tz="UTC")),
            "note": [i[2] for i in items], "seq": pa.array([i[3] for i in items], pa.int64())})

    db = open_database(postgres.url)
    try:
        db.ensure_table(spec)
        # a binary column takes the row-by-row COPY; "" and None stay apart
        assert db.commit_batch(spec, "p", "typed", "q", 0, rows(
            ("a", b"\x00\xff", "", 2), ("a", b"old", "x", 1), ("b", None, "b", 5))) == 2
        assert db.commit_batch(spec, "p", "typed", "q", 0, rows(("c", None, "c", 1))) is None
        assert db.commit_batch(spec, "p", "typed", "q", 1, rows(("a", None, "older", 0))) == 0
        got = db.query("SELECT * FROM typed ORDER BY k")
        assert got == [
            ("a", b"\x00\xff", decimal.Decimal("12.34"), dt.date(2026, 1, 2), True, at, "", 2),
            ("b", None, decimal.Decimal("12.34"), dt.date(2026, 1, 2), True, at, "b", 5)]
        # the CSV path: a table without binary columns, with an empty string and a null
        text = TableSpec("text", (Column("k", "string"), Column("v", "string")), key=("k",))
        db.ensure_table(text)
        assert db.commit_batch(text, "p", "text", "q", 0, pa.table(
            {"k": ["x", "y", "z"], "v": ["", None, 'comma, "quote"\nline']})) == 3
        assert db.query("SELECT k, v FROM text ORDER BY k") == [
            ("x", ""), ("y", None), ("z", 'comma, "quote"\nline')]
        with pytest.raises(ConfigError, match=r"exists with primary key \(k\)"):
            db.ensure_table(TableSpec("text", text.columns, key=("k", "v")))
        assert db.committed_batches("p") == 3
    finally:
        db.close()


def test_a_transform_shapes_the_rows_of_every_sink(
        spark: SparkSession, broker: BrokerProcess, tmp_path: Path) -> None:
    create_topic(broker.bootstrap, "orders-transform", 1)
    stream = events(600, seed=5)
    produce(broker.bootstrap, "orders-transform", stream)
    database = f"sqlite:///{tmp_path / 'millrace.db'}"
    config = job(
        broker.bootstrap, "orders-transform", database, tmp_path / "checkpoints",
        transform="SELECT order_id, upper(status) AS status, quantity * price AS amount, "
                  "event_time, partition, offset FROM events WHERE product <> 'dowel'",
        state_sinks=[StateSink(table="latest_status", key=["order_id"])],
        aggregate_sinks=[AggregateSink(table="status_per_minute", event_time="event_time",
                                       window="1 minute", group_by=["status"],
                                       aggregates={"n": "count(*)", "amount": "sum(amount)"})])
    Pipeline(config, spark).run()
    latest: dict[str, tuple[str, float]] = {}
    counts: dict[str, int] = {}
    for e in stream:
        if e.product != "dowel":
            latest[e.order_id] = (e.status.upper(), e.quantity * e.price)
            counts[e.status.upper()] = counts.get(e.status.upper(), 0) + 1
    db = open_database(database)
    try:
        rows = db.query("SELECT order_id, status, amount FROM latest_status")
        columns = [r[1] for r in db.query("PRAGMA table_info(latest_status)")]
        per_status = db.query("SELECT status, SUM(n) FROM status_per_minute GROUP BY status")
    finally:
        db.close()
    assert columns == ["order_id", "status", "amount", "event_time", "partition", "offset"]
    assert {r[0]: (r[1], pytest.approx(r[2])) for r in rows} == latest
    assert dict(per_status) == counts


def test_a_failing_sink_stops_the_pipeline_with_its_error(
        spark: SparkSession, broker: BrokerProcess, tmp_path: Path) -> None:
    create_topic(broker.bootstrap, "orders-fail", 1)
    produce(broker.bootstrap, "orders-fail", events(200, seed=3))
    database = f"sqlite:///{tmp_path / 'millrace.db'}"
    config = job(broker.bootstrap, "orders-fail", database, tmp_path / "checkpoints",
                 aggregate_sinks=[])
    db = open_database(database)
    try:
        db.ensure_table(build_plan(spark, config)[0].spec)
        db.query("CREATE TRIGGER refuse BEFORE INSERT ON orders "
                 "BEGIN SELECT RAISE(ABORT, 'no orders today'); END")
        with pytest.raises(PipelineError, match=r"^sink query orders-fail.orders failed: "
                                                r"IntegrityError: no orders today$"):
            Pipeline(config, spark).run()
        assert db.committed_batches("orders-fail") == 0
        assert db.query("SELECT COUNT(*) FROM orders") == [(0,)]
    finally:
        db.close()


def test_a_shared_query_fails_whole_whichever_side_fails(
        spark: SparkSession, broker: BrokerProcess, tmp_path: Path) -> None:
    """Two sinks on the shared query: the transaction writes the first sink's rows while
    Spark computes the second's.  The database refusing the first sink, or Spark failing
    on the second, fails the query with that error and commits nothing."""
    create_topic(broker.bootstrap, "orders-fail2", 1)
    produce(broker.bootstrap, "orders-fail2", events(200, seed=4))
    database = f"sqlite:///{tmp_path / 'millrace.db'}"
    db = open_database(database)
    try:
        config = job(broker.bootstrap, "orders-fail2", database, tmp_path / "c1")
        for plan in build_plan(spark, config):
            db.ensure_table(plan.table_spec)
        db.query("CREATE TRIGGER refuse BEFORE INSERT ON orders "
                 "BEGIN SELECT RAISE(ABORT, 'no orders today'); END")
        with pytest.raises(PipelineError, match=r"^sink query orders-fail2.orders\+"
                                                r"revenue_per_minute failed: IntegrityError: "
                                                r"no orders today$"):
            Pipeline(config, spark).run()
        db.query("DROP TRIGGER refuse")
        # ANSI mode: a division by zero fails the aggregate's job at run time
        failing = replace(config.aggregate_sinks[0], table="revenue_fail",
                          aggregates={"revenue": "sum(quantity / 0)", "orders": "count(*)"})
        config = job(broker.bootstrap, "orders-fail2", database, tmp_path / "c2",
                     aggregate_sinks=[failing])
        with pytest.raises(PipelineError, match=r"^sink query orders-fail2.orders\+"
                                                r"revenue_fail failed: .*DIVIDE_BY_ZERO"):
            Pipeline(config, spark).run()
        assert db.committed_batches("orders-fail2") == 0
        assert db.query("SELECT COUNT(*) FROM orders") == [(0,)]
    finally:
        db.close()


@pytest.mark.parametrize(("changes", "message"), [
    ({"value_schema": "order_id STRNG"}, r"^value_schema: .*STRNG"),
    ({"state_sinks": [StateSink(table="orders", key=["id"])]},
     r"^state sink orders: key: unknown column.s. id \(columns: order_id, customer"),
    ({"state_sinks": [StateSink(table="orders", key=["order_id"], order_by=["seq"])]},
     r"^state sink orders: order_by: unknown column.s. seq"),
    ({"aggregate_sinks": [AggregateSink(table="r", event_time="event_time", window="1 minute",
                                        group_by=["colour"], aggregates={"n": "count(*)"})]},
     r"^aggregate sink r: group_by: unknown column.s. colour"),
    ({"aggregate_sinks": [AggregateSink(table="r", event_time="price", window="1 minute",
                                        aggregates={"n": "count(*)"})]},
     r"^aggregate sink r: event_time column price is double, not a timestamp"),
    ({"aggregate_sinks": [AggregateSink(table="r", event_time="event_time", window="1 minute",
                                        aggregates={"n": "sum(weight)"})]},
     r"^aggregate sink r: .*weight"),
    ({"aggregate_sinks": [AggregateSink(table="r", event_time="event_time", window="1 minute",
                                        aggregates={"n": "count(*)"}, where="colour = 1")]},
     r"^aggregate sink r: where: .*colour"),
    ({"transform": "SELECT nope FROM events"}, r"^transform: .*nope"),
    ({"transform": "SELEKT 1"}, r"^transform: .*SELEKT"),
    ({"transform": "SELECT order_id, price FROM events"},
     r"^state sink orders: order_by: unknown column.s. offset"),
])
def test_what_spark_rejects_is_a_one_line_config_error(
        spark: SparkSession, tmp_path: Path, changes: dict[str, Any], message: str) -> None:
    config = job("127.0.0.1:1", "nowhere", f"sqlite:///{tmp_path / 'x.db'}",
                 tmp_path / "checkpoints", **changes)
    with pytest.raises(ConfigError, match=message) as info:
        build_plan(spark, config)
    assert "\n" not in str(info.value)


def test_merged_aggregates_equal_sparks_stateful_aggregation_late_events_included(
        spark: SparkSession, broker: BrokerProcess, tmp_path: Path) -> None:
    """The shared query's per-batch aggregates, merged by the database under its own
    watermark, against Spark's stateful aggregation of the same batches: an ``avg`` puts
    the second sink on Spark's state store; every other column must come out equal, and
    some events are late enough for both to drop them."""
    topic = "orders-late"
    create_topic(broker.bootstrap, topic, 1)
    stream = [replace(e, event_time_ms=EPOCH_MS + (i // 200) * 6 * 60_000 + (i % 200) * 100
                      - (30 * 60_000 if i % 50 == 49 else 0))
              for i, e in enumerate(events(2000, seed=11))]
    produce(broker.bootstrap, topic, stream)
    aggregates = {"revenue": "sum(quantity * price)", "orders": "count(*)",
                  "cheapest": "min(price)", "dearest": "MAX(price)"}

    def sink(table: str, extra: dict[str, str]) -> AggregateSink:
        return AggregateSink(table=table, event_time="event_time", window="1 minute",
                             watermark="10 minutes", group_by=["product"],
                             aggregates={**aggregates, **extra}, where="status = 'paid'")

    database = f"sqlite:///{tmp_path / 'millrace.db'}"
    config = job(broker.bootstrap, topic, database, tmp_path / "checkpoints",
                 source=SourceConfig(bootstrap_servers=broker.bootstrap, subscribe=topic,
                                     options={"startingOffsets": "earliest",
                                              "maxOffsetsPerTrigger": "200"}),
                 state_sinks=[], aggregate_sinks=[sink("merged", {}),
                                                  sink("stateful", {"mean": "avg(price)"})])
    plans = build_plan(spark, config)
    assert [(p.table, p.batch is not None) for p in plans] == [("merged", True),
                                                               ("stateful", False)]
    result = Pipeline(config, spark).run()
    assert result.input_rows == 2000
    columns = "window_start, window_end, product, revenue, orders, cheapest, dearest"
    db = open_database(database)
    try:
        merged = db.query(f"SELECT {columns} FROM merged ORDER BY 1, 3")
        stateful = db.query(f"SELECT {columns} FROM stateful ORDER BY 1, 3")
    finally:
        db.close()
    assert [r[:3] for r in merged] == [r[:3] for r in stateful]
    for mine, sparks in zip(merged, stateful):
        assert mine[3] == pytest.approx(sparks[3], rel=1e-9) and mine[4:] == sparks[4:]
    paid = sum(1 for e in stream if e.status == "paid")
    assert 0 < sum(r[4] for r in merged) < paid  # late events were dropped
