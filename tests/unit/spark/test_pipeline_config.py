"""Pipeline configuration: validation (one-line errors naming the field), triggers and
intervals, job files (TOML, JSON), the CLI's flags, and lag from progress offsets."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from millrace.cli.common import CommandError
from millrace.cli.pipeline import batch_line, build_config, register, summary_line
from millrace.common.errors import ConfigError
from millrace.spark.pipeline import (
    AggregateSink,
    BatchProgress,
    PipelineConfig,
    PipelineResult,
    SourceConfig,
    StateSink,
    Trigger,
)
from millrace.spark.pipeline.config import interval_seconds, parse_interval
from millrace.spark.pipeline.runner import offsets_lag

SCHEMA = "order_id STRING, product STRING, price DOUBLE, status STRING, event_time TIMESTAMP"


def config(**changes: Any) -> PipelineConfig:
    base: dict[str, Any] = dict(
        name="orders",
        source=SourceConfig(bootstrap_servers="127.0.0.1:9092", subscribe="orders",
                            options={"startingOffsets": "earliest"}),
        value_format="json", value_schema=SCHEMA,
        state_sinks=[StateSink(table="orders", key=["order_id"])],
        aggregate_sinks=[AggregateSink(table="revenue", event_time="event_time",
                                       window="1 minute", group_by=["product"],
                                       aggregates={"revenue": "sum(price)"},
                                       where="status = 'paid'")],
        database="sqlite:///tmp/x.db", checkpoint_dir="/tmp/ck")
    base.update(changes)
    return PipelineConfig(**base)


def test_a_good_config_validates_with_defaults() -> None:
    c = config()
    c.validate()
    assert c.trigger == "available-now" and c.state_sinks[0].order_by == ["offset"]
    assert c.aggregate_sinks[0].watermark == "10 minutes"
    assert c.source.reader_options() == {"kafka.bootstrap.servers": "127.0.0.1:9092",
                                         "subscribe": "orders", "startingOffsets": "earliest"}
    assert c.sink_tables() == ["orders", "revenue"]


@pytest.mark.parametrize(("changes", "message"), [
    ({"database": "mysql://h/db"}, "unknown scheme 'mysql'"),
    ({"database": "postgresql:db"}, "expected postgresql://"),
    ({"value_format": "xml"}, "value_format 'xml': expected one of json, raw, avro, "
                              "json-schema, protobuf"),
    ({"value_format": "avro", "value_schema": None},
     "schema_registry_url is required with value_format avro"),
    ({"value_format": "avro", "schema_registry_url": "http://r:8081"},
     "value_schema applies to value_format json only"),
    ({"schema_registry_url": "http://r:8081"},
     "schema_registry_url applies to value_format avro"),
    ({"value_schema": None}, "value_schema .* is required with value_format json"),
    ({"value_format": "raw"}, "value_schema applies to value_format json only"),
    ({"trigger": "continuous"}, "trigger 'continuous': expected 'available-now'"),
    ({"trigger": "processing-time=fast"}, "trigger processing-time: 'fast' is not an interval"),
    ({"state_sinks": [], "aggregate_sinks": []}, "no sinks"),
    ({"state_sinks": [StateSink(table="orders", key=[])]},
     "state sink orders: key: at least one column"),
    ({"state_sinks": [StateSink(table="orders", key="order_id")]},  # type: ignore[arg-type]
     "state sink orders: key: expected a list"),
    ({"state_sinks": [StateSink(table="revenue", key=["order_id"])]},
     "table revenue is the target of two sinks"),
    ({"state_sinks": [StateSink(table="1bad", key=["order_id"])]},
     "table name '1bad' must be a plain SQL identifier"),
    ({"aggregate_sinks": [AggregateSink(table="r", event_time="event_time",
                                        window="a while", aggregates={"n": "count(*)"})]},
     "aggregate sink r: window: 'a while' is not an interval"),
    ({"aggregate_sinks": [AggregateSink(table="r", event_time="event_time",
                                        window="1 minute", aggregates={})]},
     "aggregate sink r: aggregates is empty"),
    ({"aggregate_sinks": [AggregateSink(table="r", event_time="event_time",
                                        window="1 minute", group_by=["product"],
                                        aggregates={"product": "count(*)"})]},
     "aggregate name.s. product clash"),
    ({"checkpoint_dir": ""}, "checkpoint_dir is required"),
    ({"name": "a b"}, "name 'a b'"),
])
def test_bad_configs_fail_with_one_line_naming_the_field(changes: dict[str, Any],
                                                         message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        config(**changes).validate()
    assert "\n" not in str(info.value)


def test_triggers_and_intervals() -> None:
    assert Trigger.parse("available-now") == Trigger("available-now")
    assert Trigger.parse("processing-time=5s") == Trigger("processing-time", "5 seconds")
    assert Trigger.parse("processing-time=500ms").interval == "500 milliseconds"
    assert str(Trigger.parse("processing-time=2 minutes")) == "processing-time=2 minutes"
    assert parse_interval("1 minute", "w") == "1 minutes"
    assert parse_interval("10m", "w") == "10 minutes"
    assert interval_seconds("1 hour") == 3600.0
    with pytest.raises(ConfigError, match=r"w: '1.5 minutes' is not an interval"):
        parse_interval("1.5 minutes", "w")


def test_job_files_in_toml_and_json(tmp_path: Path) -> None:
    toml = tmp_path / "job.toml"
    toml.write_text('''
name = "orders"
database = "sqlite:///tmp/x.db"
checkpoint_dir = "/tmp/ck"
value_schema = "order_id STRING, price DOUBLE, event_time TIMESTAMP"
trigger = "processing-time=5s"
[source]
bootstrap_servers = "127.0.0.1:9092"
subscribe = "orders"
options = { startingOffsets = "earliest", maxOffsetsPerTrigger = 1000 }
[[state_sinks]]
table = "orders"
key = ["order_id"]
[[aggregate_sinks]]
table = "revenue"
event_time = "event_time"
window = "1 minute"
aggregates = { revenue = "sum(price)", n = "count(*)" }
''')
    c = PipelineConfig.load(toml)
    c.validate()
    assert c.state_sinks == [StateSink(table="orders", key=["order_id"])]
    assert c.aggregate_sinks[0].aggregates == {"revenue": "sum(price)", "n": "count(*)"}
    assert c.source.reader_options()["maxOffsetsPerTrigger"] == "1000"
    as_json = tmp_path / "job.json"
    as_json.write_text(json.dumps(c.to_dict()))
    assert PipelineConfig.load(as_json) == c

    doc = c.to_dict()
    doc["state_sinks"][0]["keys"] = ["x"]
    with pytest.raises(ConfigError, match=r"unknown config key state_sinks\[0\].keys"):
        PipelineConfig.from_dict(doc)
    with pytest.raises(ConfigError, match="missing config key source"):
        PipelineConfig.from_dict({"name": "x", "database": "sqlite:///x",
                                  "checkpoint_dir": "/c"})
    (tmp_path / "bad.toml").write_text("name = ")
    with pytest.raises(ConfigError, match=r"bad.toml"):
        PipelineConfig.load(tmp_path / "bad.toml")
    with pytest.raises(ConfigError, match="cannot read"):
        PipelineConfig.load(tmp_path / "missing.toml")


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    return parser.parse_args(["pipeline", "run", *argv])


def test_the_cli_builds_the_same_job_from_flags() -> None:
    args = parse("--bootstrap-server", "127.0.0.1:9092", "--topic", "orders",
                 "--option", "startingOffsets=earliest", "--option", "maxOffsetsPerTrigger=500",
                 "--value-schema", SCHEMA, "--state-table", "orders", "--key", "order_id",
                 "--aggregate-table", "revenue", "--event-time", "event_time",
                 "--group-by", "product", "--aggregate", "revenue=sum(price)",
                 "--where", "status = 'paid'", "--database", "sqlite:///tmp/x.db",
                 "--checkpoint", "/tmp/ck", "--trigger", "processing-time=1s")
    c = build_config(args)
    expected = config(trigger="processing-time=1s")
    expected.source.options["maxOffsetsPerTrigger"] = "500"
    assert c == expected


def test_cli_flags_override_and_extend_a_job_file(tmp_path: Path) -> None:
    job = tmp_path / "job.json"
    job.write_text(json.dumps(config().to_dict()))
    c = build_config(parse("--config", str(job), "--database", "sqlite:///other.db",
                           "--option", "maxOffsetsPerTrigger=10", "--state-table", "customers",
                           "--key", "customer", "--order-by", "event_time"))
    assert c.database == "sqlite:///other.db"
    assert c.source.options == {"startingOffsets": "earliest", "maxOffsetsPerTrigger": "10"}
    assert [s.table for s in c.state_sinks] == ["orders", "customers"]
    assert c.state_sinks[1].order_by == ["event_time"]


@pytest.mark.parametrize(("argv", "message"), [
    (("--topic", "t", "--checkpoint", "/c", "--state-table", "s", "--key", "k",
      "--value-format", "raw"), "--database"),
    (("--topic", "t", "--database", "sqlite:///x", "--checkpoint", "/c",
      "--state-table", "s", "--value-format", "raw"), "--state-table needs --key"),
    (("--topic", "t", "--database", "sqlite:///x", "--checkpoint", "/c",
      "--aggregate-table", "a", "--value-format", "raw"), "needs --event-time and --aggregate"),
    (("--topic", "t", "--database", "sqlite:///x", "--checkpoint", "/c", "--key", "k",
      "--value-format", "raw"), "--key and --order-by belong to --state-table"),
    (("--database", "sqlite:///x", "--checkpoint", "/c"), "--topic"),
])
def test_cli_flag_mistakes_are_one_line_errors(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        build_config(parse(*argv))


def test_lag_comes_from_the_latest_and_end_offsets_of_the_progress() -> None:
    source = {"startOffset": '{"orders":{"0":0,"1":0}}',
              "endOffset": '{"orders":{"0":100,"1":50}}',
              "latestOffset": '{"orders":{"0":130,"1":50}}'}
    assert offsets_lag(source) == {"orders-0": 30, "orders-1": 0}
    assert offsets_lag({"endOffset": "12", "latestOffset": None}) == {}
    assert offsets_lag({"endOffset": {"t": {"0": 1}}, "latestOffset": {"t": {"0": 4}}}) == {
        "t-0": 3}


def test_progress_and_summary_lines() -> None:
    p = BatchProgress(query="orders.orders", batch_id=3, input_rows=1000,
                      input_rows_per_s=2000.0, processed_rows_per_s=2500.0,
                      lag={"orders-1": 5, "orders-0": 10}, rows_upserted=250, table="orders")
    assert batch_line(p) == ("orders.orders batch 3: 1,000 records, 2,000 in/s, 2,500 "
                             "processed/s, upserted 250, lag orders-0=10 orders-1=5 "
                             "(total 15); spark 0 ms, database 0 ms")
    p.skipped = True
    assert "replayed, already committed" in batch_line(p)
    r = PipelineResult(batches=4, input_rows=3000, rows_upserted={"orders": 700, "rev": 20},
                       elapsed_s=2.0, records_per_s=1500.0)
    assert summary_line("orders", r) == (
        "pipeline orders caught up: 4 sink batches, 3,000 records in 2.0 s (1,500 "
        "records/s); rows upserted orders=700, rev=20; lag -")
    r.batches_by_table = {"orders": 2, "rev": 2}  # one query feeding both tables
    assert summary_line("orders", r).startswith(
        "pipeline orders caught up: micro-batches per table: orders 2, rev 2, 3,000 records")
