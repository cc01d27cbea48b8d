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
``key`` and ``value`` as binary; avro, json-schema, protobuf: the fields of the registered
schema, decoded by the source) plus ``key`` (as string), ``topic``, ``partition``,
``offset`` and ``timestamp`` -- a metadata column is left out when the value has a column
of the same name.  Without a transform a state table holds the value columns plus its
order columns (``offset`` by default); with a transform it holds the transform's columns,
which must include the order columns.

Everything Spark rejects while analysing the plan (DDL, SQL, unknown columns) becomes a
one-line ``ConfigError`` naming the sink or field.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeVar, cast

from millrace.common.errors import ConfigError
from millrace.spark.pipeline.bad_records import (
    CORRUPT_COLUMN,
    ERROR_COLUMN,
    ERROR_FIELDS,
    NULL_KEY,
    PARSE,
    TOO_LARGE,
    ColumnLimit,
)
from millrace.spark.pipeline.config import (
    AGGREGATE_KEY_COLUMNS,
    METADATA_COLUMNS,
    REGISTRY_FORMATS,
    AggregateSink,
    PipelineConfig,
    StateSink,
    interval_seconds,
    parse_interval,
)
from millrace.spark.sinks.table import MergeFunction, TableSpec, columns_from_spark

DECODE_ERROR = "decodeError"  # the source's column under mode=PERMISSIVE (source.py)

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
    # the batch form's rows carry ERROR_COLUMN: the writer takes the bad rows from them
    bad_rows_inline: bool = False

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
    if source.format == "millrace" and not any(k.lower() == "tracereportsname"
                                               for k in options):
        options["traceReportsName"] = config.name  # the lane of its spark.batch reports
    options.update(registry_options(config))
    return _analysed(f"source format {source.format}", lambda: spark.readStream.format(
        source.format).options(**options).load())


def registry_options(config: PipelineConfig) -> dict[str, str]:
    """The source options that decode a registry format (PERMISSIVE: a record that does
    not decode reaches the bad-record policy with its reason and bytes); {} otherwise."""
    if config.value_format not in REGISTRY_FORMATS:
        return {}
    assert config.schema_registry_url is not None
    return {"valueFormat": config.value_format,
            "schema.registry.url": config.schema_registry_url, "mode": "PERMISSIVE"}


def _registry_events(config: PipelineConfig, source: DataFrame,
                     limits: Mapping[str, Mapping[str, ColumnLimit]]
                     ) -> tuple[DataFrame, list[str]]:
    """``events`` from a source that decoded the values (``registry_options``): the
    value's fields as columns; a ``decodeError`` or a null value is a parse error."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    if DECODE_ERROR not in source.columns:
        raise ConfigError(f"value_format {config.value_format}: the source has no "
                          f"{DECODE_ERROR} column (read with mode=PERMISSIVE)")
    value_type = source.schema["value"].dataType
    if isinstance(value_type, StructType):
        value_columns = [f.name for f in value_type.fields]
        values = [F.col("value").getField(c).alias(c) for c in value_columns]
    else:
        value_columns, values = ["value"], [F.col("value")]
    reserved = [c for c in value_columns if c.startswith("__millrace")]
    if reserved:
        raise ConfigError(f"the registered schema's field {reserved[0]}: names starting "
                          "__millrace are the pipeline's own")
    metadata = [c for c in METADATA_COLUMNS if c not in value_columns]
    error = F.col(DECODE_ERROR)
    raw = {c: F.col(c) for c in METADATA_COLUMNS}
    raw["key"] = F.coalesce(error["key"], F.col("key"))
    raw["value"] = error["value"]
    frame = source.select(*values, *[F.col(c).cast("string").alias(c) if c == "key"
                                     else F.col(c) for c in metadata],
                          error["reason"].alias(f"{_RAW}reason"),
                          F.col("value").isNull().alias(f"{_RAW}null"),
                          *[col.alias(f"{_RAW}{c}") for c, col in raw.items()])
    reason = F.col(f"{_RAW}reason")
    parse: list[tuple[str, str | Column, Column]] = [
        (PARSE, reason, reason.isNotNull()),
        (PARSE, "value is null", F.col(f"{_RAW}null"))]
    checks = _record_checks(config, frame, limits, parse)
    return _with_error_column(frame, checks, [*value_columns, *metadata]), value_columns


def events_frame(config: PipelineConfig, source: DataFrame,
                 limits: Mapping[str, Mapping[str, ColumnLimit]] | None = None
                 ) -> tuple[DataFrame, list[str]]:
    """The ``events`` frame and its value columns (what a state table holds by default).

    With json values, or sinks keyed on a column, it has ``ERROR_COLUMN`` too: null for
    a good record, the bad record's kind, reason, coordinates and original bytes
    otherwise (``bad_records.py``).  ``limits``: the existing tables' column sizes."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    missing = [c for c in ("value", *METADATA_COLUMNS) if c not in source.columns]
    if missing:
        raise ConfigError(f"source {config.source.format} lacks column(s) "
                          f"{', '.join(missing)} (expected Kafka's source columns)")
    if config.value_format in REGISTRY_FORMATS:
        return _registry_events(config, source, limits or {})
    # the record as read, for a dead letter: its coordinates and original bytes
    raw = [F.col(c).alias(f"{_RAW}{c}") for c in ("value", *METADATA_COLUMNS)]
    if config.value_format == "raw":
        value_columns = ["key", "value"]
        frame = source.select("key", "value", *[c for c in METADATA_COLUMNS if c != "key"],
                              *raw)
        checks = _record_checks(config, frame, limits or {}, [])
        return _with_error_column(frame, checks, ["key", "value", *METADATA_COLUMNS[1:]]), \
            value_columns
    schema = parse_value_schema(config.value_schema or "")
    value_columns = [f.name for f in schema.fields]
    reserved = [c for c in value_columns if c.startswith("__millrace")]
    if reserved:
        raise ConfigError(f"value_schema: column {reserved[0]}: names starting "
                          "__millrace are the pipeline's own")
    metadata = [c for c in METADATA_COLUMNS if c not in value_columns]
    options = {str(k): str(v) for k, v in config.value_options.items()}
    # PERMISSIVE with a corrupt-record column: set for a syntax error and for a field of
    # the wrong type alike (checked against Spark 4, see bad_records.py)
    options.update(mode="PERMISSIVE", columnNameOfCorruptRecord=CORRUPT_COLUMN)
    extended = StructType([*schema.fields, StructField(CORRUPT_COLUMN, StringType())])

    def build() -> DataFrame:
        parsed = source.select(
            F.from_json(F.col("value").cast("string"), extended, options).alias("__value"),
            *[F.col(c).cast("string").alias(c) if c == "key" else F.col(c)
              for c in metadata], *raw)
        flat = parsed.select(*[F.col("__value").getField(c).alias(c)
                               for c in value_columns],
                             F.col("__value").getField(CORRUPT_COLUMN).alias(CORRUPT_COLUMN),
                             F.col("__value").isNull().alias(f"{_RAW}empty"),
                             *metadata, *[f"{_RAW}{c}" for c in ("value", *METADATA_COLUMNS)])
        value = F.col(f"{_RAW}value")
        parse: list[tuple[str, str | Column, Column]] = [
                 (PARSE, "value is null", value.isNull()),
                 (PARSE, "value is empty", F.col(f"{_RAW}empty")),
                 (PARSE, "value does not parse as the value schema",
                  F.col(CORRUPT_COLUMN).isNotNull())]
        checks = _record_checks(config, flat, limits or {}, parse)
        return _with_error_column(flat, checks, [*value_columns, *metadata])

    return _analysed("value_schema", build), value_columns


_RAW = "__millrace_raw_"  # the source's own columns, kept until the error column is built


def _record_checks(config: PipelineConfig, frame: DataFrame,
                   limits: Mapping[str, Mapping[str, ColumnLimit]],
                   parse: list[tuple[str, str | Column, Column]]
                   ) -> list[tuple[str, str | Column, Column]]:
    """(kind, reason, condition) per check, the first that holds names a bad record.

    Null keys and sizes are checked on the events, so only without a transform (which
    makes other columns: its null keys fail the batch's transaction instead)."""
    from pyspark.sql import functions as F

    checks = list(parse)
    if config.transform:
        return checks
    columns = list(frame.columns)
    present = set(columns)

    def null(names: list[str], what: str, table: str, keep: Column | None = None) -> None:
        for name in names:
            if name in present:
                condition = F.col(name).isNull()
                if keep is not None:
                    condition = F.coalesce(keep, F.lit(False)) & condition
                checks.append((NULL_KEY, f"null {what} column {name} for table {table}",
                               condition))

    def sized(names: list[str], table: str) -> None:
        for name in names:
            limit = (limits.get(table) or {}).get(name)
            if name not in present or limit is None:
                continue
            if limit.max_chars is not None:
                over = F.length(F.col(name).cast("string")) > F.lit(limit.max_chars)
            else:
                over = (F.col(name) < F.lit(limit.low)) | (F.col(name) > F.lit(limit.high))
            checks.append((TOO_LARGE, f"column {name} does not fit {table}.{name} "
                                      f"{limit.declared}", F.coalesce(over, F.lit(False))))

    for state in config.state_sinks:
        null(state.key, "key", state.table)
        null(state.order_by, "order_by", state.table)
        sized([c for c in columns if not c.startswith("__millrace")], state.table)
    for agg in config.aggregate_sinks:
        keep = None
        if agg.where:
            keep = F.expr(agg.where)
            with spark_errors(f"aggregate sink {agg.table}: where"):
                frame.select(keep)  # analysed here, or it would pass for the value schema
        null([agg.event_time], "event_time", agg.table, keep)
        null(agg.group_by, "group_by", agg.table, keep)
        sized(agg.group_by, agg.table)
    return checks


def _with_error_column(frame: DataFrame, checks: list[tuple[str, str | Column, Column]],
                       keep: list[str]) -> DataFrame:
    """``keep`` and ``ERROR_COLUMN`` (null unless one of ``checks`` holds); no error
    column without checks."""
    from pyspark.sql import functions as F

    if not checks:
        return frame.select(*keep)
    kind, reason = F.lit(None).cast("string"), F.lit(None).cast("string")
    for name, text, condition in reversed(checks):  # the first check that holds wins
        kind = F.when(condition, F.lit(name)).otherwise(kind)
        reason = F.when(condition, F.lit(text) if isinstance(text, str) else text
                        ).otherwise(reason)
    raw = {c: F.col(f"{_RAW}{c}") for c in ("value", *METADATA_COLUMNS)}
    error = F.struct(kind.alias("kind"), reason.alias("reason"),
                     *[raw[c].alias(c) for c in ERROR_FIELDS[2:]])
    return frame.select(*keep, F.when(kind.isNotNull(), error).alias(ERROR_COLUMN))


def guarded(frame: DataFrame) -> DataFrame:
    """``frame`` without ``ERROR_COLUMN``, failing the task at a bad record with
    ``bad record <topic>-<partition>@<offset>: <reason>`` -- for the rows the driver never
    sees (a sink on a query of its own, a transform's input under errors_tolerance none)."""
    from pyspark.sql import functions as F

    if ERROR_COLUMN not in frame.columns:
        return frame
    error = F.col(ERROR_COLUMN)
    message = F.concat(F.lit("bad record "), error["topic"], F.lit("-"),
                       error["partition"].cast("string"), F.lit("@"),
                       error["offset"].cast("string"), F.lit(": "), error["reason"])
    guard = F.when(error.isNull(), F.lit(True)).otherwise(F.raise_error(message))
    return frame.where(guard).drop(ERROR_COLUMN)


def transform_guarded(config: PipelineConfig, rows: DataFrame) -> DataFrame:
    """A transform's rows, failing the task at a row with a null key column (a state
    sink's key or order_by, an aggregate's event_time or group_by): such a row cannot be
    traced to one record, so under either tolerance it stops the run, naming the table --
    where otherwise a database would refuse it or Spark's window() drop it unseen."""
    from pyspark.sql import functions as F

    guard = F.lit(True)
    checks: list[tuple[str, str]] = []
    for state in config.state_sinks:
        checks += [(c, state.table) for c in (*state.key, *state.order_by)]
    for agg in config.aggregate_sinks:
        checks += [(c, agg.table) for c in (agg.event_time, *agg.group_by)]
    for column, table in reversed(checks):
        if column in rows.columns:
            guard = F.when(F.col(column).isNull(), F.raise_error(F.lit(
                f"bad row of the transform: null key column {column} for table {table} "
                "(not traceable to one record)"))).otherwise(guard)
    return rows.where(guard) if checks else rows


def good(frame: DataFrame) -> DataFrame:
    """The good records of a micro-batch (its bad ones are the writer's)."""
    from pyspark.sql import functions as F

    if ERROR_COLUMN not in frame.columns:
        return frame
    return frame.where(F.col(ERROR_COLUMN).isNull()).drop(ERROR_COLUMN)


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
    # the bad rows ride along with the state rows: one collect for both
    errors = [ERROR_COLUMN] if ERROR_COLUMN in rows.columns else []
    return SinkPlan("state", sink.table, frame, spec, rows=rows,
                    batch=lambda batch: batch.select(*columns, *errors), batch_spec=spec,
                    bad_rows_inline=bool(errors))


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
    frame = guarded(rows)  # its own query's rows never reach the writer
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
        plan.batch = lambda batch: grouped(good(batch).where(F.expr(condition)) if condition
                                           else good(batch),
                                           F.max(sink.event_time).alias(MAX_EVENT_TIME))
    return plan


def build_plan(spark: SparkSession, config: PipelineConfig,
               source: DataFrame | None = None,
               limits: Mapping[str, Mapping[str, ColumnLimit]] | None = None
               ) -> list[SinkPlan]:
    """One ``SinkPlan`` per sink (state sinks first).  ``source`` replaces the configured
    Kafka source (tests feed a frame with the same columns); ``limits``: the column sizes
    of existing tables (``bad_records.column_limits``).

    Bad records: the shared query's rows carry ``ERROR_COLUMN`` to the writer; a sink on a
    query of its own, and a transform under errors_tolerance none, read rows ``guarded``
    in Spark.  Under errors_tolerance all a transform runs on each micro-batch's good
    records (``SinkPlan.batch``), after the writer has taken the bad ones."""
    config.validate()
    if source is None:
        source = source_frame(spark, config)
    events, value_columns = events_frame(config, source, limits)
    checked = ERROR_COLUMN in events.columns
    route = checked and config.errors_tolerance == "all"
    if config.transform:
        transform = config.transform
        view = guarded(events)
        view.createOrReplaceTempView(EVENTS_VIEW)
        rows = _analysed("transform", lambda: spark.sql(transform))
        if not rows.isStreaming:
            raise ConfigError("transform: the query does not read the events view")
        table_columns = list(rows.columns)
        rows = transform_guarded(config, rows)
    else:
        rows = events
        table_columns = value_columns
    plans = [state_plan(s, rows, table_columns) for s in config.state_sinks]
    plans += [aggregate_plan(a, rows) for a in config.aggregate_sinks]
    if route:
        own = [p.table for p in plans if not p.shares_query]
        if own:
            raise ConfigError(
                f"errors_tolerance all: sink {own[0]} runs a query of its own (an aggregate "
                "other than sum/count/min/max), whose input the writer never sees; use "
                "errors_tolerance none for it, or mergeable aggregates")
        if config.transform:
            for plan in plans:
                _transform_per_batch(plan, events, config)
    return plans


def _transform_per_batch(plan: SinkPlan, events: DataFrame, config: PipelineConfig) -> None:
    """The shared query reads ``events``; each micro-batch's good records go through the
    transform (a per-record query: select, where, a join with a static table), then
    the sink's batch form."""
    sink_batch = plan.batch
    transform = config.transform
    assert sink_batch is not None and transform is not None

    def batch(frame: DataFrame) -> DataFrame:
        view = good(frame)
        view.createOrReplaceTempView(EVENTS_VIEW)  # the callback thread's own session
        return sink_batch(transform_guarded(config, view.sparkSession.sql(transform)))

    plan.rows = events
    plan.batch = batch
    plan.bad_rows_inline = False
