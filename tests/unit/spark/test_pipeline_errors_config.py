"""The bad-record policy's configuration (errors_tolerance, dead_letter_topic: job file keys
and CLI flags) and the driver-side pieces that need no Spark: a bad row to a dead letter
with Kafka Connect's headers, why a value does not parse, the error of a guarded query."""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from millrace.cli.pipeline import batch_line, build_config, register, summary_line
from millrace.common.errors import ConfigError
from millrace.spark.pipeline import (
    BatchProgress,
    PipelineConfig,
    PipelineResult,
    SourceConfig,
    StateSink,
)
from millrace.spark.pipeline.bad_records import (
    ERROR_COLUMN,
    BadRecordPolicy,
    NullKeyError,
    ValueParseError,
    bad_record_message,
    bad_records,
    parse_detail,
)

SCHEMA = "order_id STRING, quantity INT, price DOUBLE, event_time TIMESTAMP"
TYPES = {"order_id": "string", "quantity": "int", "price": "double",
         "event_time": "timestamp"}


def config(**changes: Any) -> PipelineConfig:
    base: dict[str, Any] = dict(
        name="orders",
        source=SourceConfig(bootstrap_servers="127.0.0.1:9092", subscribe="orders"),
        value_schema=SCHEMA, state_sinks=[StateSink(table="orders", key=["order_id"])],
        database="sqlite:///tmp/x.db", checkpoint_dir="/tmp/ck")
    base.update(changes)
    return PipelineConfig(**base)


def test_the_default_fails_the_query_and_all_needs_a_topic() -> None:
    c = config()
    c.validate()
    assert (c.errors_tolerance, c.dead_letter_topic) == ("none", None)
    config(errors_tolerance="all", dead_letter_topic="orders.dlq").validate()


@pytest.mark.parametrize(("changes", "message"), [
    ({"errors_tolerance": "all"},
     "errors_tolerance all needs dead_letter_topic: a bad record is never dropped silently"),
    ({"errors_tolerance": "skip"}, "errors_tolerance 'skip': expected none .* or all"),
    ({"errors_tolerance": "none", "dead_letter_topic": "dlq"},
     "dead_letter_topic applies to errors_tolerance all only"),
    ({"errors_tolerance": "all", "dead_letter_topic": "bad topic"},
     "dead_letter_topic 'bad topic': not a topic name"),
    ({"errors_tolerance": "all", "dead_letter_topic": ".."}, "not a topic name"),
    ({"errors_tolerance": "all", "dead_letter_topic": "orders"},
     "dead_letter_topic orders is the topic the pipeline reads"),
    ({"value_options": {"mode": "FAILFAST"}},
     "value_options.mode: bad values are handled by errors_tolerance"),
    ({"value_options": {"columnNameOfCorruptRecord": "_bad"}},
     "value_options.columnNameOfCorruptRecord"),
])
def test_bad_policies_are_one_line_config_errors(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        config(**changes).validate()
    assert "\n" not in str(info.value)


def test_job_file_keys(tmp_path: Path) -> None:
    doc = config(errors_tolerance="all", dead_letter_topic="orders.dlq").to_dict()
    path = tmp_path / "job.json"
    path.write_text(json.dumps(doc))
    loaded = PipelineConfig.load(path)
    assert (loaded.errors_tolerance, loaded.dead_letter_topic) == ("all", "orders.dlq")
    toml = tmp_path / "job.toml"
    toml.write_text('name = "o"\ndatabase = "sqlite:///tmp/x.db"\ncheckpoint_dir = "/ck"\n'
                    f'value_schema = "{SCHEMA}"\nerrors_tolerance = "all"\n'
                    '[source]\nbootstrap_servers = "h:9092"\nsubscribe = "o"\n'
                    '[[state_sinks]]\ntable = "o"\nkey = ["order_id"]\n')
    with pytest.raises(ConfigError, match="errors_tolerance all needs dead_letter_topic"):
        PipelineConfig.load(toml).validate()


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    return parser.parse_args(["pipeline", "run", *argv])


BASE_FLAGS = ("--topic", "orders", "--value-schema", SCHEMA, "--state-table", "orders",
              "--key", "order_id", "--database", "sqlite:///tmp/x.db", "--checkpoint", "/ck")


def test_cli_flags(tmp_path: Path) -> None:
    c = build_config(parse(*BASE_FLAGS, "--errors-tolerance", "all",
                           "--dead-letter-topic", "orders.dlq"))
    assert (c.errors_tolerance, c.dead_letter_topic) == ("all", "orders.dlq")
    assert build_config(parse(*BASE_FLAGS)).errors_tolerance == "none"
    with pytest.raises(ConfigError, match="needs dead_letter_topic"):
        build_config(parse(*BASE_FLAGS, "--errors-tolerance", "all"))
    # a flag replaces the job file's value
    job = tmp_path / "job.json"
    job.write_text(json.dumps(config(errors_tolerance="all", dead_letter_topic="d").to_dict()))
    c = build_config(parse("--config", str(job), "--dead-letter-topic", "other"))
    assert (c.errors_tolerance, c.dead_letter_topic) == ("all", "other")
    with pytest.raises(SystemExit):
        parse(*BASE_FLAGS, "--errors-tolerance", "skip")


ERROR_TYPE = pa.struct([("kind", pa.string()), ("reason", pa.string()),
                        ("topic", pa.string()), ("partition", pa.int32()),
                        ("offset", pa.int64()), ("timestamp", pa.timestamp("us", "UTC")),
                        ("key", pa.binary()), ("value", pa.binary())])


def error_rows(*items: dict[str, Any] | None) -> pa.Table:
    return pa.table({ERROR_COLUMN: pa.array(list(items), ERROR_TYPE)})


def bad(kind: str, reason: str, partition: int, offset: int, value: bytes | None,
        key: bytes | None = b"k") -> dict[str, Any]:
    return {"kind": kind, "reason": reason, "topic": "orders", "partition": partition,
            "offset": offset, "timestamp": dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
            "key": key, "value": value}


def test_bad_rows_become_records_in_offset_order_with_connect_headers() -> None:
    rows = error_rows(None, bad("null-key", "null key column order_id for table orders", 1,
                                7, b'{"quantity": 1}', key=None),
                      bad("parse", "value does not parse as the value schema", 0, 12,
                          b'{"order_id": "a", bad'), None)
    records = bad_records(rows, TYPES)
    assert [r.where for r in records] == ["orders-0@12", "orders-1@7"]
    first, second = records
    assert first.reason == ("value does not parse as the value schema: JSON syntax error: "
                            "Expecting property name enclosed in double quotes at line 1 "
                            "column 19")
    assert (first.key, first.value) == (b"k", b'{"order_id": "a", bad')
    assert (second.key, second.timestamp_ms) == (None, 1_767_225_600_000)
    assert dict(second.headers("orders-job")) == {
        "__connect.errors.topic": b"orders", "__connect.errors.partition": b"1",
        "__connect.errors.offset": b"7", "__connect.errors.connector.name": b"orders-job",
        "__connect.errors.stage": b"TASK_PUT",
        "__connect.errors.class.name": b"millrace.spark.pipeline.sink_writer.SinkWriter",
        "__connect.errors.exception.class.name":
            b"millrace.spark.pipeline.bad_records.NullKeyError",
        "__connect.errors.exception.message": b"null key column order_id for table orders"}
    assert dict(first.headers("j"))["__connect.errors.stage"] == b"VALUE_CONVERTER"


def test_under_none_the_first_bad_record_is_the_error() -> None:
    policy = BadRecordPolicy("none", TYPES, None)
    assert policy.handle(error_rows(None, None)) == 0
    rows = error_rows(bad("null-key", "null key column order_id for table orders", 2, 5,
                          b"{}"),
                      bad("parse", "value does not parse as the value schema", 2, 4,
                          b'{"quantity": "x"}'))
    with pytest.raises(ValueParseError, match=r"^bad record orders-2@4: value does not parse "
                                              r"as the value schema: field quantity: \"x\" "
                                              r"is not int$"):
        policy.handle(rows)
    with pytest.raises(NullKeyError, match=r"^bad record orders-2@5: null key"):
        policy.handle(error_rows(rows[ERROR_COLUMN][0].as_py()))


@pytest.mark.parametrize(("value", "detail"), [
    (b"\xff{}", "not UTF-8 (invalid start byte at byte 0)"),
    (b"[1, 2]", "a JSON array, not an object"),
    (b"123", "a JSON scalar, not an object"),
    (b'{"quantity": 3.5}', "field quantity: 3.5 is not int"),
    (b'{"quantity": 100000000000}', "field quantity: 100000000000 is not int"),
    (b'{"price": "1.5"}', 'field price: "1.5" is not double'),
    (b'{"event_time": "not a time"}', 'field event_time: "not a time" is not timestamp'),
    (b'{"order_id": "a"}', "a field does not fit its type"),
])
def test_why_a_value_does_not_parse(value: bytes, detail: str) -> None:
    assert parse_detail(value, TYPES) == detail


def test_the_error_of_a_guarded_query_is_the_bad_record_line() -> None:
    spark_text = ("[STREAM_FAILED] Query [id = 1] terminated with exception: Job aborted: "
                  "Lost task 0.0: org.apache.spark.SparkRuntimeException: "
                  "[USER_RAISED_EXCEPTION] bad record orders-2@1234: value does not parse as "
                  "the value schema SQLSTATE: P0001\n\tat org.apache.spark...")
    assert bad_record_message(RuntimeError(spark_text)) == (
        "bad record orders-2@1234: value does not parse as the value schema")
    assert bad_record_message(RuntimeError("Job aborted: out of memory")) is None
    assert bad_record_message(None) is None


def test_progress_and_summary_lines_count_dead_letters() -> None:
    p = BatchProgress(query="orders.orders", batch_id=3, input_rows=100,
                      input_rows_per_s=0.0, processed_rows_per_s=0.0, lag={},
                      rows_upserted=90, table="orders", dead_letters=2)
    assert "upserted 90, 2 bad records to the dead-letter topic, lag -" in batch_line(p)
    r = PipelineResult(batches=1, input_rows=100, rows_upserted={"orders": 90},
                       elapsed_s=1.0, records_per_s=100.0, dead_letters=2)
    assert "rows upserted orders=90; 2 bad records sent to the dead-letter topic; lag -" \
        in summary_line("orders", r)
    r.dead_letters = 0
    assert "dead-letter" not in summary_line("orders", r)
