"""The pipeline's configuration: source, value format, transform, sinks, database, trigger.

``PipelineConfig.validate()`` checks everything that can be checked without Spark (names,
URLs, intervals, trigger, sink shapes) and raises ``ConfigError`` with one line naming
the field; what needs Spark (the value schema DDL, the transform SQL, whether key and
group-by columns exist) is checked when the plan is built (``plan.py``).

A job file (TOML or JSON) holds the same fields::

    name = "orders"
    database = "sqlite:///var/millrace/orders.db"
    checkpoint_dir = "/var/millrace/checkpoints"
    value_schema = "order_id STRING, product STRING, price DOUBLE, event_time TIMESTAMP"
    [source]
    bootstrap_servers = "127.0.0.1:9092"
    subscribe = "orders"
    options = { startingOffsets = "earliest" }
    [[state_sinks]]
    table = "orders"
    key = ["order_id"]
    [[aggregate_sinks]]
    table = "revenue_per_minute"
    event_time = "event_time"
    window = "1 minute"
    aggregates = { revenue = "sum(price)" }

Registry formats: ``value_format = "avro"`` (or ``json-schema``, ``protobuf``) with
``schema_registry_url`` reads values written in Confluent's wire format; the source decodes
them with the subject's latest version (``<topic>-value``, or the source option
``subject``) and its fields are the events' columns.  A new version that only adds fields
restarts the query with the new columns (added to the tables); see ``runner.py``.

Bad records (``plan.py`` finds them, ``runner.py`` acts on them): ``errors_tolerance``
``none`` (the default) fails the query at the first bad record of a batch, naming its
topic, partition and offset, before anything of that batch is committed; ``all`` sends
the bad records to ``dead_letter_topic`` and commits the rest -- Kafka Connect's
``errors.tolerance`` and ``errors.deadletterqueue.topic.name``.  ``all`` without a topic
is refused: a bad record is never dropped silently.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from millrace.common.errors import ConfigError
from millrace.spark.options import kafka_options, redact
from millrace.spark.sinks import check_database_url
from millrace.spark.sinks.table import check_table_name

VALUE_FORMATS = ("json", "raw", "avro", "json-schema", "protobuf")
# decoded by the source with the schema registry (millrace.spark.registry)
REGISTRY_FORMATS = ("avro", "json-schema", "protobuf")
ERRORS_TOLERANCES = ("none", "all")  # Kafka Connect's errors.tolerance values
# the Kafka record fields the ``events`` view carries next to the parsed value columns
METADATA_COLUMNS = ("key", "topic", "partition", "offset", "timestamp")
DEFAULT_ORDER = ("offset",)
AGGREGATE_KEY_COLUMNS = ("window_start", "window_end")

DEFAULT_MASTER = "local[2]"
DATABASE_WRITES = ("auto", "driver", "executors")
_MASTER = re.compile(r"^(local(\[(\d+|\*)(,\d+)?\])?|spark://[^\s/,]+:\d+(,[^\s/,]+:\d+)*"
                     r"|yarn|k8s://\S+)$")
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")
_TOPIC = re.compile(r"^(?!\.{1,2}$)[A-Za-z0-9._-]{1,249}$")
_COLUMN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_UNITS = {
    "us": "microseconds", "microsecond": "microseconds", "microseconds": "microseconds",
    "ms": "milliseconds", "millisecond": "milliseconds", "milliseconds": "milliseconds",
    "s": "seconds", "sec": "seconds", "secs": "seconds", "second": "seconds",
    "seconds": "seconds",
    "m": "minutes", "min": "minutes", "mins": "minutes", "minute": "minutes",
    "minutes": "minutes",
    "h": "hours", "hour": "hours", "hours": "hours",
    "d": "days", "day": "days", "days": "days",
    "w": "weeks", "week": "weeks", "weeks": "weeks",
}
_INTERVAL = re.compile(r"^\s*(\d+)\s*([A-Za-z]+)\s*$")
_SECONDS = {"microseconds": 1e-6, "milliseconds": 1e-3, "seconds": 1.0, "minutes": 60.0,
            "hours": 3600.0, "days": 86400.0, "weeks": 604800.0}


def check_master(master: str) -> None:
    """A Spark master URL as ``spark-submit --master`` takes it (the forms Spark knows)."""
    if not isinstance(master, str) or not _MASTER.match(master):
        raise ConfigError(f"spark_master {master!r}: expected local, local[N], local[*], "
                          "spark://HOST:PORT[,HOST:PORT...], yarn or k8s://URL")


def parse_interval(text: str, what: str) -> str:
    """``"5s"``, ``"1 minute"``, ``"10 minutes"`` -> Spark's ``"<n> <unit>s"``."""
    match = _INTERVAL.match(str(text))
    unit = _UNITS.get(match[2].lower()) if match else None
    if match is None or unit is None:
        raise ConfigError(f"{what}: {text!r} is not an interval like '10 seconds', "
                          "'1 minute', '500ms'")
    return f"{int(match[1])} {unit}"


def interval_seconds(interval: str) -> float:
    count, unit = parse_interval(interval, "interval").split()
    return int(count) * _SECONDS[unit]


@dataclass(frozen=True)
class Trigger:
    """``available-now`` (everything in the topic when the run starts, then stop) or
    ``processing-time=<interval>`` (a micro-batch every interval until stopped)."""

    kind: Literal["available-now", "processing-time"]
    interval: str = ""  # Spark's form, processing-time only

    @classmethod
    def parse(cls, text: str) -> Trigger:
        name, _, value = str(text).strip().partition("=")
        name = name.strip().lower().replace("_", "-")
        if name in ("available-now", "availablenow") and not value:
            return cls("available-now")
        if name in ("processing-time", "processingtime") and value:
            return cls("processing-time", parse_interval(value, "trigger processing-time"))
        raise ConfigError(f"trigger {text!r}: expected 'available-now' or "
                          "'processing-time=<interval>' (e.g. processing-time=5s)")

    def __str__(self) -> str:
        return self.kind if self.kind == "available-now" else f"{self.kind}={self.interval}"


@dataclass
class SourceConfig:
    bootstrap_servers: str
    subscribe: str
    options: dict[str, str] = field(default_factory=dict)
    format: str = "millrace"  # the Spark data source: "millrace" (or Spark's "kafka")

    def reader_options(self) -> dict[str, str]:
        return {"kafka.bootstrap.servers": self.bootstrap_servers,
                "subscribe": self.subscribe,
                **{str(k): _option_text(v) for k, v in self.options.items()}}

    def client_config(self) -> dict[str, str]:
        """The client settings of the source (its ``kafka.*`` options without the prefix,
        e.g. ``security.protocol``, ``sasl.*``, ``ssl.*``): for the pipeline's own client
        calls next to Spark's."""
        return dict(kafka_options(self.reader_options()))

    def __repr__(self) -> str:  # the options may hold a password: never shown
        return (f"SourceConfig(bootstrap_servers={self.bootstrap_servers!r}, "
                f"subscribe={self.subscribe!r}, options={redact(self.options)!r}, "
                f"format={self.format!r})")


def _option_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass
class StateSink:
    """The latest row per ``key``: by highest (partition-local) offset, or by ``order_by``."""

    table: str
    key: list[str]
    order_by: list[str] = field(default_factory=lambda: list(DEFAULT_ORDER))


@dataclass
class AggregateSink:
    """``aggregates`` per event-time ``window`` and ``group_by`` columns, upserted per batch
    (update output mode) with late events past ``watermark`` dropped."""

    table: str
    event_time: str
    window: str
    aggregates: dict[str, str]
    watermark: str = "10 minutes"
    group_by: list[str] = field(default_factory=list)
    where: str | None = None
    slide: str | None = None  # sliding windows; None = tumbling


@dataclass
class PipelineConfig:
    name: str
    source: SourceConfig
    database: str
    checkpoint_dir: str
    value_format: str = "json"
    value_schema: str | None = None  # Spark DDL, json format only
    # avro, json-schema, protobuf: the registry the values' schemas are in; the subject is
    # the source option ``subject`` (default <topic>-value)
    schema_registry_url: str | None = None
    transform: str | None = None  # Spark SQL over the temporary view ``events``
    state_sinks: list[StateSink] = field(default_factory=list)
    aggregate_sinks: list[AggregateSink] = field(default_factory=list)
    trigger: str = "available-now"
    value_options: dict[str, str] = field(default_factory=dict)  # from_json options
    # where the queries run: local[N] (the embedded default) or a cluster manager's URL
    # (spark://HOST:PORT for a standalone cluster); spark_conf: further Spark settings
    spark_master: str = DEFAULT_MASTER
    spark_conf: dict[str, str] = field(default_factory=dict)
    # bad records: "none" fails the query, "all" routes them to dead_letter_topic
    errors_tolerance: str = "none"
    dead_letter_topic: str | None = None
    # who writes the database rows: the executors (staged, PostgreSQL), the driver, or
    # auto = the executors for PostgreSQL on a cluster manager, the driver otherwise
    database_writes: str = "auto"

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        if not _NAME.match(self.name or ""):
            raise ConfigError(f"name {self.name!r}: letters, digits, '_', '.', '-' only")
        if not self.source.bootstrap_servers:
            raise ConfigError("source.bootstrap_servers is required")
        if not self.source.subscribe:
            raise ConfigError("source.subscribe (the topic) is required")
        if self.value_format not in VALUE_FORMATS:
            raise ConfigError(f"value_format {self.value_format!r}: expected one of "
                              f"{', '.join(VALUE_FORMATS)}")
        if self.value_format == "json" and not (self.value_schema or "").strip():
            raise ConfigError("value_schema (Spark DDL, e.g. 'id STRING, n INT') is required "
                              "with value_format json")
        if self.value_format != "json" and self.value_schema:
            raise ConfigError("value_schema applies to value_format json only (avro, "
                              "json-schema and protobuf take the registered schema)")
        if self.value_format in REGISTRY_FORMATS:
            if not (self.schema_registry_url or "").strip():
                raise ConfigError(f"schema_registry_url is required with value_format "
                                  f"{self.value_format}")
            if self.source.format != "millrace":
                raise ConfigError(f"value_format {self.value_format} needs the millrace "
                                  f"source (source.format millrace, not {self.source.format})")
            if self.value_options:
                raise ConfigError("value_options apply to value_format json only")
        elif self.schema_registry_url:
            raise ConfigError("schema_registry_url applies to value_format avro, json-schema "
                              "or protobuf")
        if self.transform is not None and not self.transform.strip():
            raise ConfigError("transform is empty")
        check_database_url(self.database)
        self._validate_errors()
        check_master(self.spark_master)
        if self.database_writes not in DATABASE_WRITES:
            raise ConfigError(f"database_writes {self.database_writes!r}: expected "
                              f"{', '.join(DATABASE_WRITES)}")
        if self.database_writes == "executors" and check_database_url(self.database) != \
                "postgresql":
            raise ConfigError("database_writes executors needs PostgreSQL (executors on other "
                              "machines cannot share a SQLite file): use driver or auto")
        if not isinstance(self.spark_conf, dict) or not all(
                isinstance(k, str) and k.startswith("spark.") for k in self.spark_conf):
            raise ConfigError("spark_conf: expected a table of spark.* settings")
        if not self.checkpoint_dir:
            raise ConfigError("checkpoint_dir is required")
        self.parsed_trigger()
        if not self.state_sinks and not self.aggregate_sinks:
            raise ConfigError("no sinks: add a state sink or an aggregate sink")
        tables: set[str] = set()
        for table in self.sink_tables():
            check_table_name(table)
            if table in tables:
                raise ConfigError(f"table {table} is the target of two sinks")
            tables.add(table)
        for state in self.state_sinks:
            _check_columns(state.key, f"state sink {state.table}: key", required=True)
            _check_columns(state.order_by, f"state sink {state.table}: order_by",
                           required=True)
        for agg in self.aggregate_sinks:
            self._validate_aggregate(agg)

    def _validate_errors(self) -> None:
        if self.errors_tolerance not in ERRORS_TOLERANCES:
            raise ConfigError(f"errors_tolerance {self.errors_tolerance!r}: expected none "
                              "(fail the query) or all (route bad records to "
                              "dead_letter_topic)")
        topic = self.dead_letter_topic
        if topic is not None and not _TOPIC.match(topic):
            raise ConfigError(f"dead_letter_topic {topic!r}: not a topic name (letters, "
                              "digits, '.', '_', '-', at most 249)")
        if self.errors_tolerance == "all" and topic is None:
            raise ConfigError("errors_tolerance all needs dead_letter_topic: a bad record "
                              "is never dropped silently")
        if self.errors_tolerance == "none" and topic is not None:
            raise ConfigError("dead_letter_topic applies to errors_tolerance all only "
                              "(none fails the query at the first bad record)")
        if topic is not None and topic in _topics(self.source.subscribe):
            raise ConfigError(f"dead_letter_topic {topic} is the topic the pipeline reads")
        reserved = [k for k in self.value_options
                    if str(k).lower() in ("mode", "columnnameofcorruptrecord")]
        if reserved:
            raise ConfigError(f"value_options.{reserved[0]}: bad values are handled by "
                              "errors_tolerance (none or all), not by from_json's mode")

    def _validate_aggregate(self, agg: AggregateSink) -> None:
        what = f"aggregate sink {agg.table}"
        _check_columns([agg.event_time], f"{what}: event_time", required=True)
        _check_columns(agg.group_by, f"{what}: group_by", required=False)
        parse_interval(agg.window, f"{what}: window")
        parse_interval(agg.watermark, f"{what}: watermark")
        if agg.slide is not None:
            parse_interval(agg.slide, f"{what}: slide")
        if not agg.aggregates:
            raise ConfigError(f"{what}: aggregates is empty (e.g. {{'n': 'count(*)'}})")
        _check_columns(list(agg.aggregates), f"{what}: aggregate name", required=True)
        for name, expression in agg.aggregates.items():
            if not str(expression).strip():
                raise ConfigError(f"{what}: aggregate {name} has no expression")
        clash = set(agg.aggregates) & {*agg.group_by, *AGGREGATE_KEY_COLUMNS}
        if clash:
            raise ConfigError(f"{what}: aggregate name(s) {', '.join(sorted(clash))} clash "
                              "with the key columns (window_start, window_end, group_by)")
        if agg.where is not None and not agg.where.strip():
            raise ConfigError(f"{what}: where is empty")

    def writes_on_executors(self) -> bool:
        """Whether the executors stage the database rows (``sinks/staged.py``)."""
        if self.database_writes == "auto":
            return (check_database_url(self.database) == "postgresql"
                    and not self.spark_master.startswith("local"))
        return self.database_writes == "executors"

    def parsed_trigger(self) -> Trigger:
        return Trigger.parse(self.trigger)

    def sink_tables(self) -> list[str]:
        return [*(s.table for s in self.state_sinks), *(a.table for a in self.aggregate_sinks)]

    # ------------------------------------------------------------------ files
    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> PipelineConfig:
        """A config from a parsed job file; unknown keys are errors naming the key."""
        if not isinstance(doc, dict):
            raise ConfigError("a pipeline config is a table of keys")
        doc = dict(doc)
        if "source" not in doc:
            raise ConfigError("missing config key source")
        source = _build(SourceConfig, doc.pop("source"), "source")
        states = [_build(StateSink, s, f"state_sinks[{i}]")
                  for i, s in enumerate(_list(doc.pop("state_sinks", []), "state_sinks"))]
        aggs = [_build(AggregateSink, s, f"aggregate_sinks[{i}]")
                for i, s in enumerate(_list(doc.pop("aggregate_sinks", []),
                                            "aggregate_sinks"))]
        config = _build(cls, {**doc, "source": source, "state_sinks": states,
                              "aggregate_sinks": aggs}, "")
        return config

    @classmethod
    def load(cls, path: str | Path) -> PipelineConfig:
        """A job file: ``.toml`` or ``.json``."""
        path = Path(path)
        try:
            data = path.read_bytes()
        except OSError as e:
            raise ConfigError(f"cannot read {path}: {e.strerror}") from None
        try:
            if path.suffix.lower() == ".json":
                doc = json.loads(data)
            else:
                import tomllib

                doc = tomllib.loads(data.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise ConfigError(f"{path}: {e}") from None
        return cls.from_dict(doc)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _topics(subscribe: str) -> list[str]:
    return [t.strip() for t in str(subscribe).split(",")]


def _check_columns(names: list[str], what: str, *, required: bool) -> None:
    if not isinstance(names, list | tuple):
        raise ConfigError(f"{what}: expected a list of column names, got {names!r}")
    if required and not names:
        raise ConfigError(f"{what}: at least one column is required")
    for name in names:
        if not isinstance(name, str) or not _COLUMN.match(name):
            raise ConfigError(f"{what}: {name!r} is not a column name")
    if len(set(names)) != len(names):
        raise ConfigError(f"{what}: a column is listed twice ({', '.join(names)})")


def _list(value: Any, what: str) -> list[Any]:
    if isinstance(value, dict):
        return [value]
    if not isinstance(value, list):
        raise ConfigError(f"{what}: expected a list of tables")
    return value


def _build(cls: Any, doc: Any, what: str) -> Any:
    if isinstance(doc, cls):
        return doc
    if not isinstance(doc, dict):
        raise ConfigError(f"{what or 'config'}: expected a table of keys")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(doc) - set(fields))
    if unknown:
        prefix = f"{what}." if what else ""
        raise ConfigError(f"unknown config key {prefix}{unknown[0]} (known: "
                          f"{', '.join(sorted(fields))})")
    missing = [name for name, f in fields.items() if name not in doc
               and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        prefix = f"{what}." if what else ""
        raise ConfigError(f"missing config key {prefix}{missing[0]}")
    return cls(**doc)
