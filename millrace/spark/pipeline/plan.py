"""From a ``PipelineConfig`` to one streaming DataFrame and one ``TableSpec`` per sink.

::

    source (Kafka columns) --parse--> events view --transform?--> rows
        rows --select--> state sink frame        (latest row per key, append mode)
        rows --where/watermark/groupBy(window)--> aggregate sink frame  (update mode)

Reading once.  Every state sink, and every aggregate sink whose aggregates all combine
across batches (``sum``, ``count``, ``min``, ``max`` of any expression, no ``DISTINCT``),
also has a ``batch`` form: what to do with one micro-batch of ``rows``.  The runner
streams ``rows`` once for all of them (one query, one read of the topic, one transaction
per micro-batch); an aggregate's batch form is a plain ``groupBy`` whose partial results
the database merges (``TableSpec`` merge mode, the watermark kept by the database).  An
aggregate sink with another aggregate (``avg``, ``count(DISTINCT ...)``, ...) keeps its
own query on Spark's stateful aggregation (replace mode).

``events`` has the parsed value columns (json: ``from_json`` with the value schema; raw:
``key`` and ``value`` as binary) plus ``key`` (as string), ``topic``, ``partition``,
``offset`` and ``timestamp`` -- a metadata column is left out when the value has a column
of the same name.  Without a transform a state table holds the value columns plus its
order columns (``offset`` by default); with a transform it holds the transform's columns,
which must include the order columns.

Everything Spark rejects while analysing the plan (DDL, SQL, unknown columns) becomes a
one-line ``ConfigError`` naming the sink or field.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeVar, cast

from millrace.common.errors import ConfigError
from millrace.spark.pipeline.config import (
    AGGREGATE_KEY_COLUMNS,
    METADATA_COLUMNS,
    AggregateSink,
    PipelineConfig,
    StateSink,
    interval_seconds,
    parse_interval,
)
from millrace.spark.sinks.table import MergeFunction, TableSpec, columns_from_spark

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

EVENTS_VIEW = "events"
MAX_EVENT_TIME = "__max_event_time"  # the batch form's extra column: greatest event time
T = TypeVar("T")
_MERGEABLE = re.compile(r"^\s*(sum|count|min|max)\s*\(", re.IGNORECASE)
_DISTINCT = re.compile(r"^\s*distinct\b", re.IGNORECASE)


@dataclass
class SinkPlan:
    kind: Literal["state", "aggregate"]
    table: str
    frame: DataFrame  # the sink's own streaming frame (a query of its own)
    spec: TableSpec  # the table; its mode says how the stateful query's rows are written
    rows: DataFrame | None = None  # the streaming frame a batch form reads
    # one micro-batch of ``rows`` -> the sink's rows; None: the sink needs its own query
    batch: Callable[[DataFrame], DataFrame] | None = None
    batch_spec: TableSpec | None = None  # the table as the batch form writes it
    watermark_delay_ms: int = 0

    @property
    def output_mode(self) -> str:
        return "append" if self.kind == "state" else "update"

    @property
    def shares_query(self) -> bool:
        """True when the sink reads the pipeline's shared query (it has a batch form)."""
        return self.batch is not None

    @property
    def table_spec(self) -> TableSpec:
        """The table as this sink writes it: the batch form's, or its own query's."""
        return self.batch_spec if self.batch_spec is not None and self.shares_query \
            else self.spec


def merge_function(expression: str) -> MergeFunction | None:
    """``sum``/``count``/``min``/``max`` when ``expression`` is exactly one call of that
    aggregate (any argument, no ``DISTINCT``): its per-batch results combine into the
    whole stream's.  None for anything else (``avg(x)``, ``sum(x) + 1``, ``sum(x) FILTER
    (WHERE ...)``)."""
    match = _MERGEABLE.match(expression)
    if match is None:
        return None
    depth, quote_char = 0, ""
    start = match.end() - 1
    for i in range(start, len(expression)):
        ch = expression[i]
        if quote_char:
            if ch == quote_char:
                quote_char = ""
        elif ch in "'\"`":
            quote_char = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                if expression[i + 1:].strip() or _DISTINCT.match(expression[start + 1:i]):
                    return None
                return cast(MergeFunction, match[1].lower())
    return None


def spark_message(error: BaseException) -> str:
    """The first line of a Spark error, without the JVM stack."""
    text = getattr(error, "getMessage", lambda: str(error))() or str(error)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    # Py4J's first line only names the JVM call; the cause is on the next one
    if lines[0].startswith("An error occurred while calling") and len(lines) > 1:
        return " ".join(lines[1].lstrip(": ").split())[:500]
    return " ".join(lines[0].split())[:500]


@contextmanager
def spark_errors(what: str) -> Iterator[None]:
    """Spark's analysis and parse errors as ``ConfigError("<what>: <first line>")``."""
    from pyspark.errors import PySparkException

    try:
        yield
    except ConfigError:
        raise
    except PySparkException as e:
        raise ConfigError(f"{what}: {spark_message(e)}") from None


def _analysed(what: str, build: Callable[[], T]) -> T:
    with spark_errors(what):
        return build()


def parse_value_schema(ddl: str) -> StructType:
    """The value schema (Spark DDL) parsed by the active session."""
    from pyspark.sql.types import DataType, StructType

    with spark_errors("value_schema"):
        schema = DataType.fromDDL(ddl)
    if not isinstance(schema, StructType):
        raise ConfigError(f"value_schema {ddl!r}: expected column definitions like "
                          "'id STRING, n INT'")
    return schema


def source_frame(spark: SparkSession, config: PipelineConfig) -> DataFrame:
    """The configured source; ``format("millrace")`` reads with a task per core
    (``maxPartitions`` = the session's default parallelism) unless the options say."""
    source = config.source
    options = source.reader_options()
    if source.format == "millrace" and not any(k.lower() in ("maxpartitions", "minpartitions")
                                               for k in options):
        options["maxPartitions"] = str(spark.sparkContext.defaultParallelism)
    return _analysed(f"source format {source.format}", lambda: spark.readStream.format(
        source.format).options(**options).load())


def events_frame(config: PipelineConfig, source: DataFrame) -> tuple[DataFrame, list[str]]:
    """The ``events`` frame and its value columns (what a state table holds by default)."""
    from pyspark.sql import functions as F

    missing = [c for c in ("value", *METADATA_COLUMNS) if c not in source.columns]
    if missing:
        raise ConfigError(f"source {config.source.format} lacks column(s) "
                          f"{', '.join(missing)} (expected Kafka's source columns)")
    if config.value_format == "raw":
        value_columns = ["key", "value"]
        frame = source.select("key", "value", *[c for c in METADATA_COLUMNS if c != "key"])
        return frame, value_columns
    schema = parse_value_schema(config.value_schema or "")
    value_columns = [f.name for f in schema.fields]
    metadata = [c for c in METADATA_COLUMNS if c not in value_columns]
    options = {str(k): str(v) for k, v in config.value_options.items()}

    def build() -> DataFrame:
        parsed = source.select(
            F.from_json(F.col("value").cast("string"), schema, options).alias("__value"),
            *[F.col(c).cast("string").alias(c) if c == "key" else F.col(c)
              for c in metadata])
        return parsed.select("__value.*", *metadata)

    return _analysed("value_schema", build), value_columns


def _require(columns: list[str], names: list[str], what: str) -> None:
    unknown = [n for n in names if n not in columns]
    if unknown:
        raise ConfigError(f"{what}: unknown column(s) {', '.join(unknown)} "
                          f"(columns: {', '.join(columns)})")


def state_plan(sink: StateSink, rows: DataFrame, table_columns: list[str]) -> SinkPlan:
    what = f"state sink {sink.table}"
    _require(rows.columns, sink.key, f"{what}: key")
    _require(rows.columns, sink.order_by, f"{what}: order_by")
    columns = [*table_columns, *[o for o in sink.order_by if o not in table_columns]]
    _require(columns, sink.key, f"{what}: key")
    frame = rows.select(*columns)
    spec = TableSpec(sink.table, columns_from_spark(frame.schema, sink.table),
                     key=tuple(sink.key), mode="latest", order=tuple(sink.order_by))
    return SinkPlan("state", sink.table, frame, spec, rows=rows,
                    batch=lambda batch: batch.select(*columns), batch_spec=spec)


def aggregate_plan(sink: AggregateSink, rows: DataFrame) -> SinkPlan:
    from pyspark.sql import functions as F
    from pyspark.sql.types import TimestampNTZType, TimestampType

    what = f"aggregate sink {sink.table}"
    _require(rows.columns, [sink.event_time], f"{what}: event_time")
    _require(rows.columns, sink.group_by, f"{what}: group_by")
    event_type = rows.schema[sink.event_time].dataType
    if not isinstance(event_type, TimestampType | TimestampNTZType):
        raise ConfigError(f"{what}: event_time column {sink.event_time} is "
                          f"{event_type.simpleString()}, not a timestamp")
    clash = [c for c in AGGREGATE_KEY_COLUMNS if c in sink.group_by]
    if clash:
        raise ConfigError(f"{what}: group_by column(s) {', '.join(clash)} clash with the "
                          "window columns")
    window = parse_interval(sink.window, f"{what}: window")
    watermark = parse_interval(sink.watermark, f"{what}: watermark")
    frame = rows
    if sink.where:
        where = sink.where
        frame = _analysed(f"{what}: where", lambda: frame.where(F.expr(where)))
    if sink.slide:
        bucket = F.window(F.col(sink.event_time), window,
                          parse_interval(sink.slide, f"{what}: slide"))
    else:
        bucket = F.window(F.col(sink.event_time), window)
    aggregates = []
    for name, expression in sink.aggregates.items():
        with spark_errors(f"{what}: aggregate {name}"):
            aggregates.append(F.expr(expression).alias(name))

    def grouped(source: DataFrame, *extra: Column) -> DataFrame:
        out = source.groupBy(bucket.alias("__window"), *sink.group_by).agg(*aggregates,
                                                                           *extra)
        return out.select(F.col("__window.start").alias("window_start"),
                          F.col("__window.end").alias("window_end"),
                          *sink.group_by, *sink.aggregates,
                          *[F.col(MAX_EVENT_TIME) for _ in extra])

    out = _analysed(f"{what}", lambda: grouped(frame.withWatermark(sink.event_time,
                                                                   watermark)))
    columns = columns_from_spark(out.schema, sink.table)
    key = (*AGGREGATE_KEY_COLUMNS, *sink.group_by)
    spec = TableSpec(sink.table, columns, key=key, mode="replace")
    plan = SinkPlan("aggregate", sink.table, out, spec)
    functions = {name: merge_function(e) for name, e in sink.aggregates.items()}
    if all(functions.values()):
        merge = tuple((name, f) for name, f in functions.items() if f is not None)
        condition = sink.where
        plan.rows = rows
        plan.batch_spec = TableSpec(sink.table, columns, key=key, mode="merge", merge=merge)
        plan.watermark_delay_ms = round(interval_seconds(watermark) * 1000)
        plan.batch = lambda batch: grouped(batch.where(F.expr(condition)) if condition
                                           else batch,
                                           F.max(sink.event_time).alias(MAX_EVENT_TIME))
    return plan


def build_plan(spark: SparkSession, config: PipelineConfig,
               source: DataFrame | None = None) -> list[SinkPlan]:
    """One ``SinkPlan`` per sink (state sinks first).  ``source`` replaces the configured
    Kafka source (tests feed a frame with the same columns)."""
    config.validate()
    if source is None:
        source = source_frame(spark, config)
    events, value_columns = events_frame(config, source)
    if config.transform:
        events.createOrReplaceTempView(EVENTS_VIEW)
        transform = config.transform
        rows = _analysed("transform", lambda: spark.sql(transform))
        if not rows.isStreaming:
            raise ConfigError("transform: the query does not read the events view")
        table_columns = list(rows.columns)
    else:
        rows = events
        table_columns = value_columns
    plans = [state_plan(s, rows, table_columns) for s in config.state_sinks]
    plans += [aggregate_plan(a, rows) for a in config.aggregate_sinks]
    return plans
