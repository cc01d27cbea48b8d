"""The sink transaction against real SQLite files: exactly-once replay, order-safe upserts,
the latest row per key within a batch, table creation and checks, and type mapping."""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from millrace.common.errors import ConfigError
from millrace.spark.pipeline.plan import merge_function
from millrace.spark.sinks import (
    Column,
    SinkBatch,
    TableSpec,
    check_database_url,
    columns_from_spark,
    latest_per_key,
    open_database,
    sql_type,
)
from millrace.spark.sinks.sqlite import SQLiteDatabase, sqlite_path

STATE = TableSpec("orders", (Column("order_id", "string"), Column("status", "string"),
                             Column("price", "double"), Column("event_time", "timestamp"),
                             Column("offset", "bigint")),
                  key=("order_id",), mode="latest", order=("offset",))
WINDOWS = TableSpec("revenue", (Column("window_start", "timestamp"),
                                Column("product", "string"), Column("revenue", "double"),
                                Column("orders", "bigint")),
                    key=("window_start", "product"), mode="replace")
T0 = dt.datetime(2026, 1, 1, 10, 0, tzinfo=dt.UTC)


def state_rows(*rows: tuple[str, str, float, int]) -> pa.Table:
    """(order_id, status, price, offset) rows; event_time = T0 + offset ms."""
    return pa.table({
        "order_id": pa.array([r[0] for r in rows], pa.string()),
        "status": pa.array([r[1] for r in rows], pa.string()),
        "price": pa.array([r[2] for r in rows], pa.float64()),
        "event_time": pa.array([T0 + dt.timedelta(milliseconds=r[3]) for r in rows],
                               pa.timestamp("us", tz="UTC")),
        "offset": pa.array([r[3] for r in rows], pa.int64()),
    })


@pytest.fixture
def db(tmp_path: Path) -> SQLiteDatabase:
    database = open_database(f"sqlite:///{tmp_path / 'sink.db'}")
    assert isinstance(database, SQLiteDatabase)
    database.ensure_table(STATE)
    yield database
    database.close()


def table(db: SQLiteDatabase, name: str = "orders") -> dict[str, tuple[object, ...]]:
    return {r[0]: r[1:] for r in db.query(f'SELECT * FROM {name} ORDER BY 1')}


def test_a_batch_is_upserted_and_recorded_in_one_transaction(db: SQLiteDatabase) -> None:
    changed = db.commit_batch(STATE, "p", "orders", "q1", 0,
                              state_rows(("a", "created", 1.5, 10), ("b", "paid", 2.0, 11)))
    assert changed == 2
    assert table(db) == {"a": ("created", 1.5, "2026-01-01 10:00:00.010000", 10),
                         "b": ("paid", 2.0, "2026-01-01 10:00:00.011000", 11)}
    assert db.query("SELECT pipeline, sink, batch_id, query_id, rows_upserted "
                    "FROM millrace_batches") == [("p", "orders", 0, "q1", 2)]
    assert db.committed_batches("p") == 1 and db.committed_batches("p", "other") == 0


def test_a_replayed_batch_id_is_skipped_and_changes_nothing(db: SQLiteDatabase) -> None:
    db.commit_batch(STATE, "p", "orders", "q1", 0, state_rows(("a", "created", 1.0, 10)))
    db.commit_batch(STATE, "p", "orders", "q1", 1, state_rows(("a", "paid", 1.0, 20)))
    before = table(db)
    # batch 0 again, as Spark re-runs it after a crash between our commit and its own
    assert db.commit_batch(STATE, "p", "orders", "q1", 0,
                           state_rows(("a", "created", 1.0, 10), ("z", "new", 9.0, 5))) is None
    assert table(db) == before
    assert db.committed_batches("p") == 2
    # the same batch id of another pipeline or sink is a different batch
    assert db.commit_batch(STATE, "other", "orders", "q1", 0,
                           state_rows(("z", "new", 9.0, 5))) == 1


def test_a_batch_id_left_by_a_deleted_checkpoint_is_not_trusted(db: SQLiteDatabase) -> None:
    db.commit_batch(STATE, "p", "orders", "old-query", 0, state_rows(("a", "created", 1.0, 10)))
    # a fresh checkpoint (new query id) numbers its batches from 0 again
    assert db.commit_batch(STATE, "p", "orders", "new-query", 0,
                           state_rows(("b", "paid", 2.0, 3))) == 1
    assert set(table(db)) == {"a", "b"}
    assert db.query("SELECT query_id FROM millrace_batches") == [("new-query",)]


def test_an_older_row_never_replaces_a_newer_one(db: SQLiteDatabase) -> None:
    db.commit_batch(STATE, "p", "orders", "q", 0, state_rows(("a", "shipped", 3.0, 30)))
    changed = db.commit_batch(STATE, "p", "orders", "q", 1,
                              state_rows(("a", "created", 1.0, 10), ("a", "paid", 2.0, 20)))
    assert changed == 0
    assert table(db)["a"][:1] == ("shipped",)
    assert db.commit_batch(STATE, "p", "orders", "q", 2, state_rows(("a", "done", 4.0, 31))) == 1
    assert table(db)["a"] == ("done", 4.0, "2026-01-01 10:00:00.031000", 31)


def test_within_a_batch_the_highest_order_wins_whatever_the_row_order(
        db: SQLiteDatabase) -> None:
    rows = state_rows(("a", "paid", 2.0, 20), ("b", "x", 1.0, 7), ("a", "shipped", 3.0, 30),
                      ("a", "created", 1.0, 10), ("b", "y", 1.0, 3))
    assert db.commit_batch(STATE, "p", "orders", "q", 0, rows) == 2
    assert table(db)["a"][0] == "shipped" and table(db)["b"][0] == "x"


def test_latest_per_key_keeps_one_row_per_key_and_drops_null_keys() -> None:
    rows = pa.table({"k1": ["a", "a", "b", None, "a"], "k2": [1, 2, 1, 1, 1],
                     "o": [5, 9, None, 1, 7], "v": ["a1-5", "a2-9", "b1", "null", "a1-7"]})
    out = latest_per_key(rows, ["k1", "k2"], ["o"])
    assert sorted(out.column("v").to_pylist()) == ["a1-7", "a2-9", "b1"]
    # a null order value loses against any value
    rows = pa.table({"k": ["a", "a"], "o": [None, 1], "v": ["null", "one"]})
    assert latest_per_key(rows, ["k"], ["o"]).column("v").to_pylist() == ["one"]
    # several order columns compare left to right
    rows = pa.table({"k": ["a", "a", "a"], "o1": [1, 2, 2], "o2": [9, 1, 3],
                     "v": ["x", "y", "z"]})
    assert latest_per_key(rows, ["k"], ["o1", "o2"]).column("v").to_pylist() == ["z"]


def test_replace_mode_overwrites_every_window_it_is_given(db: SQLiteDatabase) -> None:
    db.ensure_table(WINDOWS)

    def windows(*rows: tuple[int, str, float, int]) -> pa.Table:
        return pa.table({
            "window_start": pa.array([T0 + dt.timedelta(minutes=r[0]) for r in rows],
                                     pa.timestamp("us", tz="UTC")),
            "product": [r[1] for r in rows], "revenue": [r[2] for r in rows],
            "orders": pa.array([r[3] for r in rows], pa.int64())})

    db.commit_batch(WINDOWS, "p", "revenue", "q", 0, windows((0, "anvil", 10.0, 1),
                                                             (1, "anvil", 5.0, 1)))
    db.commit_batch(WINDOWS, "p", "revenue", "q", 1, windows((0, "anvil", 25.5, 3)))
    assert db.query("SELECT * FROM revenue ORDER BY window_start") == [
        ("2026-01-01 10:00:00.000000", "anvil", 25.5, 3),
        ("2026-01-01 10:01:00.000000", "anvil", 5.0, 1)]


def test_a_failing_batch_leaves_table_and_batch_log_untouched(db: SQLiteDatabase) -> None:
    db.commit_batch(STATE, "p", "orders", "q", 0, state_rows(("a", "created", 1.0, 10)))
    bad = pa.table({"order_id": ["b"], "status": ["x"], "price": [1.0],
                    "event_time": pa.array([T0], pa.timestamp("us", tz="UTC")),
                    "offset": pa.array([11], pa.int64())})
    db.query("CREATE TRIGGER refuse BEFORE INSERT ON orders WHEN NEW.order_id = 'b' "
             "BEGIN SELECT RAISE(ABORT, 'refused'); END")
    with pytest.raises(sqlite3.IntegrityError, match="refused"):
        db.commit_batch(STATE, "p", "orders", "q", 1, bad)
    assert set(table(db)) == {"a"} and db.committed_batches("p") == 1
    db.query("DROP TRIGGER refuse")
    assert db.commit_batch(STATE, "p", "orders", "q", 1, bad) == 1


def test_an_empty_batch_is_recorded(db: SQLiteDatabase) -> None:
    assert db.commit_batch(STATE, "p", "orders", "q", 0, state_rows()) == 0
    assert db.committed_batches("p", "orders") == 1


def test_tables_are_created_with_mapped_types_and_checked_when_they_exist(
        db: SQLiteDatabase, tmp_path: Path) -> None:
    info = db.query("PRAGMA table_info(orders)")
    assert [(r[1], r[2], r[5]) for r in info] == [
        ("order_id", "TEXT", 1), ("status", "TEXT", 0), ("price", "REAL", 0),
        ("event_time", "TEXT", 0), ("offset", "INTEGER", 0)]
    assert db.query("PRAGMA journal_mode") == [("wal",)]
    db.ensure_table(STATE)  # again: fine
    wider = TableSpec("orders", (*STATE.columns, Column("extra", "int")), key=("order_id",),
                      mode="latest", order=("offset",))
    with pytest.raises(ConfigError, match=r"table orders exists without column.s. extra"):
        db.ensure_table(wider)
    rekeyed = TableSpec("orders", STATE.columns, key=("order_id", "status"), mode="latest",
                        order=("offset",))
    with pytest.raises(ConfigError, match=r"primary key \(order_id\), the sink needs"):
        db.ensure_table(rekeyed)


def test_values_of_every_atomic_type_reach_sqlite(db: SQLiteDatabase) -> None:
    import decimal

    spec = TableSpec("typed", (Column("k", "int"), Column("flag", "boolean"),
                               Column("day", "date"), Column("amount", "decimal(10,2)"),
                               Column("blob", "binary"), Column("naive", "timestamp_ntz"),
                               Column("small", "smallint"), Column("ratio", "float")),
                     key=("k",))
    db.ensure_table(spec)
    rows = pa.table({
        "k": pa.array([1, 2], pa.int32()), "flag": [True, None],
        "day": pa.array([dt.date(2026, 1, 2), None], pa.date32()),
        "amount": pa.array([decimal.Decimal("12.34"), None], pa.decimal128(10, 2)),
        "blob": pa.array([b"\x00\x01", None], pa.binary()),
        "naive": pa.array([dt.datetime(2026, 1, 1, 9, 30), None], pa.timestamp("us")),
        "small": pa.array([7, None], pa.int16()), "ratio": pa.array([0.5, None], pa.float32())})
    assert db.commit_batch(spec, "p", "typed", "q", 0, rows) == 2
    assert db.query("SELECT * FROM typed ORDER BY k") == [
        (1, 1, "2026-01-02", 12.34, b"\x00\x01", "2026-01-01 09:30:00.000000", 7, 0.5),
        (2, None, None, None, None, None, None, None)]


def test_timestamps_reach_sqlite_as_utc_text_with_their_units_fraction(
        db: SQLiteDatabase) -> None:
    spec = TableSpec("stamps", (Column("k", "int"), Column("at", "timestamp")), key=("k",))
    db.ensure_table(spec)
    instant = dt.datetime(2026, 1, 1, 9, 30, 1, 250000, tzinfo=dt.UTC)
    rows = pa.table({"k": pa.array([1, 2], pa.int32()),
                     "at": pa.array([instant, dt.datetime(1960, 1, 1, tzinfo=dt.UTC)],
                                    pa.timestamp("us", tz="UTC")).cast(
                                        pa.timestamp("us", tz="Asia/Tokyo"))})
    db.commit_batch(spec, "p", "stamps", "q", 0, rows)
    assert db.query("SELECT at FROM stamps ORDER BY k") == [
        ("2026-01-01 09:30:01.250000",), ("1960-01-01 00:00:00.000000",)]


def test_type_mapping_per_dialect() -> None:
    assert [sql_type(t, "sqlite") for t in ("string", "bigint", "double", "timestamp",
                                            "boolean", "decimal(10,2)", "binary")] == [
        "TEXT", "INTEGER", "REAL", "TEXT", "INTEGER", "NUMERIC", "BLOB"]
    assert [sql_type(t, "postgresql") for t in ("string", "int", "bigint", "double",
                                                "timestamp", "timestamp_ntz", "date",
                                                "decimal(10,2)", "binary", "varchar(5)")] == [
        "TEXT", "INTEGER", "BIGINT", "DOUBLE PRECISION", "TIMESTAMP WITH TIME ZONE",
        "TIMESTAMP", "DATE", "NUMERIC(10,2)", "BYTEA", "TEXT"]
    with pytest.raises(ConfigError, match="array<int> cannot be stored"):
        sql_type("array<int>", "sqlite")


def test_columns_from_a_spark_schema_refuse_complex_types() -> None:
    from pyspark.sql.types import (
        ArrayType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    schema = StructType([StructField("id", StringType()), StructField("n", LongType()),
                         StructField("at", TimestampType())])
    assert columns_from_spark(schema, "t") == (Column("id", "string"), Column("n", "bigint"),
                                               Column("at", "timestamp"))
    bad = StructType([StructField("tags", ArrayType(StringType()))])
    with pytest.raises(ConfigError, match="table t: column tags has type array<string>"):
        columns_from_spark(bad, "t")


def test_table_specs_are_checked() -> None:
    cols = (Column("a", "string"), Column("b", "bigint"))
    with pytest.raises(ConfigError, match=r"key column.s. x not among the columns"):
        TableSpec("t", cols, key=("x",))
    with pytest.raises(ConfigError, match=r"order column.s. y not among"):
        TableSpec("t", cols, key=("a",), mode="latest", order=("y",))
    with pytest.raises(ConfigError, match="must be a plain SQL identifier"):
        TableSpec("drop table x;", cols, key=("a",))
    with pytest.raises(ConfigError, match="reserved"):
        TableSpec("millrace_batches", cols, key=("a",))


def test_database_urls() -> None:
    assert sqlite_path("sqlite:///abs/x.db") == "/abs/x.db"
    assert sqlite_path("sqlite:////abs/x.db") == "/abs/x.db"
    assert sqlite_path("sqlite://rel.db") == "rel.db"
    assert sqlite_path("sqlite:rel.db") == "rel.db"
    assert check_database_url("postgresql://u:p@h:5432/db") == "postgresql"
    assert check_database_url("postgres://h/db") == "postgresql"
    with pytest.raises(ConfigError, match="unknown scheme 'mysql'"):
        open_database("mysql://h/db")
    with pytest.raises(ConfigError, match="no file path"):
        open_database("sqlite://")


MERGED = TableSpec("sales", (Column("window_start", "timestamp"),
                             Column("window_end", "timestamp"), Column("product", "string"),
                             Column("revenue", "double"), Column("orders", "bigint"),
                             Column("cheapest", "double"), Column("dearest", "double")),
                   key=("window_start", "window_end", "product"), mode="merge",
                   merge=(("revenue", "sum"), ("orders", "count"), ("cheapest", "min"),
                          ("dearest", "max")))
MINUTE_MS = 60_000


def partials(*rows: tuple[int, str, float | None, int, float | None, float | None]
             ) -> pa.Table:
    """(minute, product, revenue, orders, cheapest, dearest): one-minute windows from T0."""
    def at(minute: int) -> dt.datetime:
        return T0 + dt.timedelta(minutes=minute)

    return pa.table({
        "window_start": pa.array([at(r[0]) for r in rows], pa.timestamp("us", tz="UTC")),
        "window_end": pa.array([at(r[0] + 1) for r in rows], pa.timestamp("us", tz="UTC")),
        "product": pa.array([r[1] for r in rows], pa.string()),
        "revenue": pa.array([r[2] for r in rows], pa.float64()),
        "orders": pa.array([r[3] for r in rows], pa.int64()),
        "cheapest": pa.array([r[4] for r in rows], pa.float64()),
        "dearest": pa.array([r[5] for r in rows], pa.float64())})


def merge_batch(db: SQLiteDatabase, batch_id: int, rows: pa.Table, latest_minute: float,
                query: str = "q", delay_minutes: int = 10) -> int | None:
    part = SinkBatch("sales", MERGED, rows,
                     max_event_time_us=int((T0.timestamp() * 1000 + latest_minute * MINUTE_MS)
                                           * 1000),
                     watermark_delay_ms=delay_minutes * MINUTE_MS)
    return db.commit("p", query, batch_id, [part])["sales"]


def sales(db: SQLiteDatabase) -> dict[tuple[str, str], tuple[object, ...]]:
    return {(r[0][11:16], r[1]): r[2:] for r in db.query(
        "SELECT window_start, product, revenue, orders, cheapest, dearest FROM sales")}


def test_merge_mode_combines_each_batch_with_the_stored_aggregate(db: SQLiteDatabase) -> None:
    db.ensure_table(MERGED)
    assert merge_batch(db, 0, partials((0, "anvil", 10.0, 1, 10.0, 10.0),
                                       (1, "anvil", None, 1, None, None)), 1.5) == 2
    assert merge_batch(db, 1, partials((0, "anvil", 5.5, 2, 2.0, 3.5),
                                       (1, "anvil", 4.0, 1, 4.0, 4.0)), 1.6) == 2
    # a replay of a committed batch changes nothing
    assert merge_batch(db, 1, partials((0, "anvil", 5.5, 2, 2.0, 3.5)), 1.6) is None
    assert sales(db) == {("10:00", "anvil"): (15.5, 3, 2.0, 10.0),
                         ("10:01", "anvil"): (4.0, 2, 4.0, 4.0)}  # a null side keeps the other


def test_merge_mode_drops_windows_as_late_as_sparks_watermark_does(db: SQLiteDatabase) -> None:
    """Spark's rule, measured: batch k drops windows ending at or before W(k-1), where W(j)
    is the latest event time of the batches before j minus the delay."""
    db.ensure_table(MERGED)
    merge_batch(db, 0, partials((30, "anvil", 1.0, 1, 1.0, 1.0)), 30.5)  # W(0) = 0
    # W(1) = 10:20:30: this batch still filters with W(0), so 10:05 counts
    merge_batch(db, 1, partials((5, "anvil", 1.0, 1, 1.0, 1.0)), 5.5)
    # W(2) = W(1); filtered with W(1) = 10:20:30: 10:20 (ends 10:21) counts, 10:19 does not
    merge_batch(db, 2, partials((19, "anvil", 1.0, 1, 1.0, 1.0),
                                (20, "anvil", 1.0, 1, 1.0, 1.0)), 20.5)
    assert set(sales(db)) == {("10:30", "anvil"), ("10:05", "anvil"), ("10:20", "anvil")}
    assert db.query("SELECT max_event_ms, watermark_ms FROM millrace_watermarks") == [
        (int(T0.timestamp() * 1000) + int(30.5 * MINUTE_MS),
         int(T0.timestamp() * 1000) + int(20.5 * MINUTE_MS))]


def test_merge_mode_refuses_rows_merged_under_another_checkpoint(db: SQLiteDatabase) -> None:
    db.ensure_table(MERGED)
    merge_batch(db, 0, partials((0, "anvil", 1.0, 1, 1.0, 1.0)), 0.5, query="old")
    with pytest.raises(ConfigError, match=r"table sales holds aggregates that pipeline p "
                                          r"merged under another checkpoint \(query old\)"):
        merge_batch(db, 0, partials((0, "anvil", 1.0, 1, 1.0, 1.0)), 0.5, query="new")
    assert sales(db) == {("10:00", "anvil"): (1.0, 1, 1.0, 1.0)}
    # emptied, the table is rebuilt by the new checkpoint
    db.query("DELETE FROM sales")
    assert merge_batch(db, 0, partials((0, "anvil", 2.0, 1, 2.0, 2.0)), 0.5, query="new") == 1
    assert sales(db) == {("10:00", "anvil"): (2.0, 1, 2.0, 2.0)}


def test_one_transaction_applies_a_batch_to_every_sink_or_to_none(db: SQLiteDatabase) -> None:
    db.ensure_table(MERGED)
    orders = SinkBatch("orders", STATE, state_rows(("a", "paid", 1.0, 10)))

    def window(revenue: float | None) -> SinkBatch:
        return SinkBatch("sales", MERGED, partials((0, "anvil", revenue, 1, 1.0, 1.0)),
                         max_event_time_us=int(T0.timestamp() * 1e6), watermark_delay_ms=0)

    assert db.commit("p", "q", 0, [orders, window(1.0)]) == {"orders": 1, "sales": 1}
    db.query("CREATE TRIGGER refuse BEFORE UPDATE ON sales BEGIN "
             "SELECT RAISE(ABORT, 'no sales today'); END")
    later = SinkBatch("orders", STATE, state_rows(("a", "shipped", 1.0, 20)))
    with pytest.raises(sqlite3.IntegrityError, match="no sales today"):
        db.commit("p", "q", 1, [later, window(2.0)])
    assert table(db)["a"][0] == "paid" and db.committed_batches("p") == 2
    db.query("DROP TRIGGER refuse")
    assert db.commit("p", "q", 1, [later, window(2.0)]) == {"orders": 1, "sales": 1}
    assert db.commit("p", "q", 1, [later, window(2.0)]) == {"orders": None, "sales": None}
    assert table(db)["a"][0] == "shipped" and sales(db)[("10:00", "anvil")][:2] == (3.0, 2)


def test_sinks_fed_one_by_one_commit_together_or_not_at_all(db: SQLiteDatabase,
                                                           tmp_path: Path) -> None:
    """``commit`` reads its parts inside the transaction (the shared query's writer feeds
    them from another thread): nothing is visible before the last part, and a part that
    cannot be computed rolls back the sinks already written."""
    db.ensure_table(WINDOWS)
    reader = sqlite3.connect(tmp_path / "sink.db")
    window = SinkBatch("revenue", WINDOWS, pa.table({
        "window_start": pa.array([T0], pa.timestamp("us", tz="UTC")), "product": ["anvil"],
        "revenue": [5.0], "orders": pa.array([1], pa.int64())}))

    def fed(fail: bool) -> Iterator[SinkBatch]:
        yield SinkBatch("orders", STATE, state_rows(("a", "paid", 1.0, 10)))
        # the first sink is written, the transaction still open
        assert reader.execute("SELECT COUNT(*) FROM orders").fetchone() == (0,)
        if fail:
            raise RuntimeError("the aggregate's Spark job failed")
        yield window

    with pytest.raises(RuntimeError, match="Spark job failed"):
        db.commit("p", "q", 0, fed(fail=True))
    assert table(db) == {} and db.committed_batches("p") == 0
    assert db.commit("p", "q", 0, fed(fail=False)) == {"orders": 1, "revenue": 1}
    assert reader.execute("SELECT COUNT(*) FROM orders").fetchone() == (1,)
    assert db.committed_batches("p") == 2


@pytest.mark.parametrize(("expression", "function"), [
    ("sum(quantity * price)", "sum"), ("COUNT(*)", "count"), (" min(price) ", "min"),
    ("max(coalesce(a, ')'))", "max"), ("sum(if(x > 0, x, 0))", "sum"),
    ("avg(price)", None), ("count(DISTINCT customer)", None), ("sum(a) + sum(b)", None),
    ("sum(a) FILTER (WHERE b)", None), ("summary(a)", None), ("sum(a", None),
])
def test_merge_function_accepts_one_call_of_an_aggregate_that_combines(
        expression: str, function: str | None) -> None:
    assert merge_function(expression) == function
