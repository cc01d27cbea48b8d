"""Bad records in the stream, against a real broker, real Spark and SQLite/PostgreSQL.

Each kind -- a value that does not parse with the value schema, a null key, a value over
its PostgreSQL column's size -- under ``errors_tolerance = "none"`` (the run fails naming
the record's partition and offset, and the database holds only the batches before it)
and under ``"all"`` (the dead-letter topic holds exactly the bad records, their original
bytes and Kafka Connect's headers; the tables equal the fold of the good records).

The bad record of a ``none`` run sits in the second micro-batch (``maxOffsetsPerTrigger``
= 100, one partition), so the first batch is committed and the second must not be.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from pipeline_events import (
    ORDER_COLUMNS,
    VALUE_SCHEMA,
    Event,
    assert_tables,
    create_topic,
    epoch_ms,
    events,
    fold,
)

from millrace.client.consumer import KafkaConsumer
from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.common.topic_partition import TopicPartition
from millrace.spark.pipeline import (
    AggregateSink,
    Pipeline,
    PipelineConfig,
    PipelineError,
    SourceConfig,
    StateSink,
)
from millrace.spark.sinks import open_database
from millrace.testing.broker_process import BrokerProcess
from millrace.testing.postgres import PostgresServer

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [
    pytest.mark.integration, pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

PER_BATCH = 100


@dataclass(frozen=True)
class Bad:
    """A bad record as produced: where it went, its bytes and the exception class."""

    partition: int
    key: bytes | None
    value: bytes | None
    error: str  # the dead letter's __connect.errors.exception.class.name, unqualified


def job(bootstrap: str, topic: str, database: str, checkpoints: Path, **changes: Any
        ) -> PipelineConfig:
    base: dict[str, Any] = dict(
        name=topic,
        source=SourceConfig(bootstrap_servers=bootstrap, subscribe=topic,
                            options={"startingOffsets": "earliest",
                                     "maxOffsetsPerTrigger": str(PER_BATCH)}),
        value_format="json", value_schema=VALUE_SCHEMA,
        state_sinks=[StateSink(table="orders", key=["order_id"])],
        aggregate_sinks=[AggregateSink(
            table="revenue_per_minute", event_time="event_time", window="1 minute",
            group_by=["product"], where="status = 'paid'",
            aggregates={"revenue": "sum(quantity * price)", "orders": "count(*)"})],
        database=database, checkpoint_dir=str(checkpoints))
    base.update(changes)
    return PipelineConfig(**base)


def send(bootstrap: str, topic: str, items: list[Event | Bad]) -> dict[tuple[int, int], Bad]:
    """Produce ``items`` in order (an Event to partition 0); (partition, offset) -> Bad."""
    placed: list[tuple[Bad, Any]] = []
    producer: KafkaProducer[bytes, bytes] = KafkaProducer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    with producer:
        for item in items:
            if isinstance(item, Event):
                producer.send(ProducerRecord(topic, item.to_json(),
                                             key=item.order_id.encode(), partition=0))
            else:
                placed.append((item, producer.send(ProducerRecord(
                    topic, item.value, key=item.key, partition=item.partition))))
        producer.flush()
    return {(f.get().partition, f.get().offset): bad for bad, f in placed}


def read_topic(bootstrap: str, topic: str, partitions: int) -> list[Any]:
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer: KafkaConsumer[bytes, bytes] = KafkaConsumer({"bootstrap.servers": bootstrap})
    with consumer:
        consumer.assign(tps)
        consumer.seek_to_beginning(tps)
        end = consumer.end_offsets(tps)
        out: list[Any] = []
        deadline = time.monotonic() + 60
        while any(consumer.position(tp) < end[tp] for tp in tps):
            assert time.monotonic() < deadline, "the dead-letter topic did not read to its end"
            out.extend(consumer.poll(200))
    return out


def committed(database: str, pipeline: str) -> list[tuple[str, int]]:
    with open_database(database) as db:
        return sorted(db.query("SELECT sink, batch_id FROM millrace_batches WHERE "
                               "pipeline = ?" if database.startswith("sqlite") else
                               "SELECT sink, batch_id FROM millrace_batches WHERE "
                               "pipeline = %s", (pipeline,)))


def assert_orders(database: str, table: str, stream: list[Event]) -> None:
    """A state table (alone) holds the last event per order id of ``stream``."""
    with open_database(database) as db:
        rows = db.query(f"SELECT {', '.join(ORDER_COLUMNS)} FROM {table}")
    got = {r[0]: Event(*r[:6], epoch_ms(r[6])) for r in rows}
    assert len(got) == len(rows) and got == fold(stream).orders


def dict_value(event: Event, **changes: Any) -> bytes:
    doc = json.loads(event.to_json())
    doc.update(changes)
    return json.dumps(doc).encode()


def second_batch_bad(bad: Bad, seed: int) -> tuple[list[Event | Bad], list[Event]]:
    """100 good events, 50 good, ``bad`` at offset 150, 49 good: (stream, first batch)."""
    good = events(2 * PER_BATCH - 1, seed=seed)
    return [*good[:150], bad, *good[150:]], good[:PER_BATCH]


def test_none_fails_at_a_value_that_does_not_parse(
        spark: SparkSession, broker: BrokerProcess, tmp_path: Path) -> None:
    topic = "bad-parse-none"
    create_topic(broker.bootstrap, topic, 1)
    stream, first = second_batch_bad(Bad(0, b"order-0001", b'{"order_id": "order-0001", ',
                                         "ValueParseError"), seed=1)
    send(broker.bootstrap, topic, stream)
    database = f"sqlite:///{tmp_path / 'db.sqlite'}"
    with pytest.raises(PipelineError, match=rf"^sink query {topic}.orders\+revenue_per_minute "
                                            rf"failed: bad record {topic}-0@150: value does "
                                            r"not parse as the value schema: JSON syntax "
                                            r"error: .* at line 1 column 28$"):
        Pipeline(job(broker.bootstrap, topic, database, tmp_path / "ck"), spark).run()
    # the first batch committed, nothing of the second
    assert committed(database, topic) == [("orders", 0), ("revenue_per_minute", 0)]
    assert_tables(database, fold(first))


def test_none_fails_at_a_null_key_in_spark_too(
        spark: SparkSession, broker: BrokerProcess, tmp_path: Path) -> None:
    """The state sink on the shared query (the writer finds it) and an ``avg`` aggregate
    on a query of its own (Spark's raise_error finds it): the same record named."""
    topic = "bad-key-none"
    create_topic(broker.bootstrap, topic, 1)
    stream, first = second_batch_bad(
        Bad(0, None, dict_value(events(1)[0], order_id=None, event_time=None),
            "NullKeyError"), seed=2)
    send(broker.bootstrap, topic, stream)
    database = f"sqlite:///{tmp_path / 'db.sqlite'}"
    config = job(broker.bootstrap, topic, database, tmp_path / "ck", aggregate_sinks=[
        AggregateSink(table="avg_price", event_time="event_time", window="1 minute",
                      aggregates={"price": "avg(price)"})])
    with pytest.raises(PipelineError, match=rf"failed: bad record {topic}-0@150: null key "
                                            r"column order_id for table orders$"):
        Pipeline(config, spark).run()
    assert ("orders", 1) not in committed(database, topic)
    assert ("avg_price", 1) not in committed(database, topic)
    assert_orders(database, "orders", first)
    # the guard alone: without the state sink, the aggregate's own query fails the same way
    only_avg = replace(config, name=f"{topic}-avg", state_sinks=[],
                       checkpoint_dir=str(tmp_path / "ck2"))
    with pytest.raises(PipelineError, match=rf"^sink query {topic}-avg.avg_price failed: "
                                            rf"bad record {topic}-0@150: null event_time "
                                            r"column event_time for table avg_price$"):
        Pipeline(only_avg, spark).run()


def test_all_routes_every_kind_to_the_dead_letter_topic(
        spark: SparkSession, broker: BrokerProcess, tmp_path: Path) -> None:
    topic, dead = "bad-all", "bad-all.dlq"
    create_topic(broker.bootstrap, topic, 2)
    create_topic(broker.bootstrap, dead, 1)
    good = events(400, seed=3)
    sample = good[0]
    bads = [
        Bad(0, b"k1", b'{"order_id": "x", oops}', "ValueParseError"),  # JSON syntax
        Bad(1, b"k2", dict_value(sample, quantity="three"), "ValueParseError"),  # a type
        Bad(1, b"k3", b'[{"order_id": "order-0001"}]', "ValueParseError"),  # not an object
        Bad(0, b"k4", b"", "ValueParseError"),  # empty
        Bad(1, b"k5", None, "ValueParseError"),  # a tombstone
        Bad(0, b"k6", b'{"customer": "c1"}', "NullKeyError"),  # no order_id at all
        Bad(1, None, dict_value(sample, status="paid", event_time=None), "NullKeyError"),
    ]
    stream: list[Event | Bad] = list(good)
    for i, bad in enumerate(bads):  # spread over the batches of both partitions
        stream.insert(30 + i * 55, bad)
    placed = send(broker.bootstrap, topic, stream)
    database = f"sqlite:///{tmp_path / 'db.sqlite'}"
    config = job(broker.bootstrap, topic, database, tmp_path / "ck",
                 errors_tolerance="all", dead_letter_topic=dead)
    result = Pipeline(config, spark).run()
    assert_tables(database, fold(good))
    assert result.dead_letters == len(bads) and result.input_rows == len(stream)

    letters = read_topic(broker.bootstrap, dead, 1)
    assert len(letters) == len(bads)  # each once: nothing replayed in this run
    by_origin = {}
    for letter in letters:
        headers = {k: v.decode() for k, v in letter.headers}
        assert headers["__connect.errors.topic"] == topic
        assert headers["__connect.errors.connector.name"] == topic
        origin = (int(headers["__connect.errors.partition"]),
                  int(headers["__connect.errors.offset"]))
        by_origin[origin] = (letter.key, letter.value,
                             headers["__connect.errors.exception.class.name"],
                             headers["__connect.errors.exception.message"])
    assert by_origin.keys() == placed.keys()
    for origin, bad in placed.items():
        key, value, error, message = by_origin[origin]
        assert (key, value) == (bad.key, bad.value), origin  # the original bytes
        assert error == f"millrace.spark.pipeline.bad_records.{bad.error}"
        assert message
    reasons = sorted(m for _, _, _, m in by_origin.values())
    assert "value is empty" in reasons and "value is null" in reasons
    assert "null event_time column event_time for table revenue_per_minute" in reasons
    assert any(m.startswith("value does not parse as the value schema: field quantity: "
                            '"three" is not int') for m in reasons)

    # a transform: the writer takes the bad records, then the transform runs on the good
    topic, dead = "bad-all-t", "bad-all-t.dlq"
    create_topic(broker.bootstrap, topic, 1)
    create_topic(broker.bootstrap, dead, 1)
    parse_errors = [replace(b, partition=0) for b in bads if b.error == "ValueParseError"]
    stream = list(good)
    for i, bad in enumerate(parse_errors):
        stream.insert(40 + i * 70, bad)
    send(broker.bootstrap, topic, stream)
    transformed = replace(
        config, name=topic, checkpoint_dir=str(tmp_path / "ck-t"), dead_letter_topic=dead,
        source=replace(config.source, subscribe=topic),
        transform="SELECT order_id, upper(status) AS status, event_time, offset FROM events",
        state_sinks=[StateSink(table="statuses", key=["order_id"])], aggregate_sinks=[])
    assert Pipeline(transformed, spark).run().dead_letters == len(parse_errors)
    with open_database(database) as db:
        rows = dict(db.query("SELECT order_id, status FROM statuses"))
    assert rows == {e.order_id: e.status.upper() for e in good}
    assert sorted(m.value or b"" for m in read_topic(broker.bootstrap, dead, 1)) == \
        sorted(b.value or b"" for b in parse_errors)


@pytest.fixture(scope="module")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    with PostgresServer(tmp_path_factory.mktemp("postgres")) as server:
        yield server


def create_sized_orders(url: str, table: str) -> None:
    """The state table made beforehand, with sizes our sink would not declare."""
    with open_database(url) as db:
        db.query(f'CREATE TABLE {table} (order_id varchar(10) NOT NULL PRIMARY KEY, '
                 'customer text, product varchar(8), quantity smallint, '
                 'price double precision, status text, event_time timestamptz, '
                 '"offset" bigint)')


def test_values_over_a_postgresql_columns_size(
        spark: SparkSession, broker: BrokerProcess, postgres: PostgresServer,
        tmp_path: Path) -> None:
    sample = events(1)[0]
    too_long = Bad(0, b"k", dict_value(sample, product="a-long-product"), "ValueTooLargeError")
    # none: the run fails at it, before the second batch commits
    topic = "bad-size-none"
    create_topic(broker.bootstrap, topic, 1)
    stream, first = second_batch_bad(too_long, seed=4)
    send(broker.bootstrap, topic, stream)
    create_sized_orders(postgres.url, "orders")
    config = job(broker.bootstrap, topic, postgres.url, tmp_path / "ck", aggregate_sinks=[])
    with pytest.raises(PipelineError, match=rf"failed: bad record {topic}-0@150: column "
                                            r"product does not fit orders.product "
                                            r"varchar\(8\)$"):
        Pipeline(config, spark).run()
    assert committed(postgres.url, topic) == [("orders", 0)]
    assert_orders(postgres.url, "orders", first)

    # all: too long and out of smallint's range go to the dead-letter topic
    topic, dead = "bad-size-all", "bad-size-all.dlq"
    create_topic(broker.bootstrap, topic, 1)
    create_topic(broker.bootstrap, dead, 1)
    good = events(300, seed=5)
    out_of_range = Bad(0, b"q", dict_value(sample, quantity=70000), "ValueTooLargeError")
    placed = send(broker.bootstrap, topic, [*good[:120], too_long, *good[120:250],
                                            out_of_range, *good[250:]])
    create_sized_orders(postgres.url, "sized")
    config = job(broker.bootstrap, topic, postgres.url, tmp_path / "ck-all",
                 state_sinks=[StateSink(table="sized", key=["order_id"])],
                 aggregate_sinks=[], errors_tolerance="all", dead_letter_topic=dead)
    assert Pipeline(config, spark).run().dead_letters == 2
    assert_orders(postgres.url, "sized", good)
    letters = read_topic(broker.bootstrap, dead, 1)
    assert {(int(dict(m.headers)["__connect.errors.offset"]), m.value) for m in letters} == \
        {(offset, bad.value) for (_, offset), bad in placed.items()}
    assert sorted(dict(m.headers)["__connect.errors.exception.message"].decode()
                  for m in letters) == ["column product does not fit sized.product varchar(8)",
                                        "column quantity does not fit sized.quantity smallint"]


def test_what_the_events_frame_marks_bad_and_what_plain_from_json_cannot_tell(
        spark: SparkSession) -> None:
    """``events_frame`` on a static frame with Kafka's columns: each input's verdict.  The
    negative control: plain PERMISSIVE ``from_json`` gives a wrong-typed field the same
    null as an absent one, so only the corrupt-record column can tell them apart."""
    import datetime as dt

    from pyspark.sql import functions as F

    from millrace.spark.pipeline.bad_records import ERROR_COLUMN
    from millrace.spark.pipeline.plan import events_frame, parse_value_schema

    values: list[bytes | None] = [
        b'{"order_id": "a", "quantity": 2, "event_time": "2026-01-01T00:00:00Z"}',
        b'{"order_id": "b", "event_time": "2026-01-01T00:00:00Z"}',  # quantity absent: good
        b'{"order_id": "c", "quantity": "x", "event_time": "2026-01-01T00:00:00Z"}',
        b'{"order_id": "d", "quantity": 2, "event_time": "2026-01-01T00:00:00Z"} trailing',
        b'{"order_id": 7, "event_time": "2026-01-01T00:00:00Z"}',  # coerced to "7": good
        b'{"order_id": "e", bad', b"[]", b"", None,
        b'{"quantity": 1, "event_time": "2026-01-01T00:00:00Z"}',  # null key
        b'{"order_id": "f", "status": "paid"}',  # null event_time, kept by the where
        b'{"order_id": "g", "status": "new"}',  # null event_time, not kept: good
    ]
    stamp = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    source = spark.createDataFrame(
        [(b"k", v, "t", 0, i, stamp) for i, v in enumerate(values)],
        "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
        "timestamp TIMESTAMP")
    schema = "order_id STRING, quantity INT, status STRING, event_time TIMESTAMP"
    config = PipelineConfig(
        name="t", source=SourceConfig(bootstrap_servers="h:1", subscribe="t"),
        database="sqlite:///x.db", checkpoint_dir="/ck", value_schema=schema,
        state_sinks=[StateSink(table="orders", key=["order_id"])],
        aggregate_sinks=[AggregateSink(table="n", event_time="event_time", window="1 minute",
                                       where="status = 'paid'",
                                       aggregates={"n": "count(*)"})])
    frame, _ = events_frame(config, source)
    verdicts = {r["offset"]: None if r[ERROR_COLUMN] is None else r[ERROR_COLUMN]["reason"]
                for r in frame.collect()}
    parse = "value does not parse as the value schema"
    assert verdicts == {
        0: None, 1: None, 2: parse, 3: None, 4: None, 5: parse, 6: parse,
        7: "value is empty", 8: "value is null",
        9: "null key column order_id for table orders",
        10: "null event_time column event_time for table n", 11: None}
    bad = frame.where(F.col(ERROR_COLUMN).isNotNull()).collect()
    assert {(r[ERROR_COLUMN]["offset"], r[ERROR_COLUMN]["value"]) for r in bad} == \
        {(i, values[i]) for i in (2, 5, 6, 7, 8, 9, 10)}  # the original bytes

    plain = source.select(F.from_json(F.col("value").cast("string"),
                                      parse_value_schema(schema)).alias("v")).collect()
    assert plain[2]["v"]["quantity"] is None and plain[1]["v"]["quantity"] is None
    assert plain[2]["v"]["order_id"] == "c"  # a row that looks good but for one null
