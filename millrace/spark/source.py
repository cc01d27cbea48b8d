"""``format("millrace")``: Spark's Kafka source and sink on the Python Data Source API.

Switching a query from ``format("kafka")`` to ``format("millrace")`` is a one-word change:
option names, offset JSON, semantics and the output schema are those of Spark's built-in
Kafka source.  Register it with ``millrace.spark.register(spark)``.

Output schema (fixed)::

    key binary, value binary, topic string, partition int, offset long,
    timestamp timestamp, timestampType int
    [, headers array<struct<key: string, value: binary>>]   -- with includeHeaders=true
    [, decodeError struct<reason: string, key: binary, value: binary>]  -- mode=PERMISSIVE

With ``valueFormat`` (``keyFormat``) the ``value`` (``key``) column has the type of the
registered schema instead of binary -- a record schema is a struct (``schemas.py``).

Source options (names are case-insensitive):

``kafka.bootstrap.servers`` (required)
    host:port of one or more brokers.
``subscribe`` | ``subscribePattern`` | ``assign`` (exactly one)
    a comma-separated topic list; a regex matched against whole topic names (topics
    created later are picked up); or JSON ``{"topicA":[0,1],"topicB":[2]}``.
``startingOffsets``
    ``earliest``, ``latest`` or JSON ``{"topicA":{"0":23,"1":-2}}`` (-2 = earliest,
    -1 = latest; every partition must be named).  Default: latest when streaming,
    earliest in batch (where ``latest`` is refused).  Only for a new query: a restarted
    query continues from its checkpoint.
``startingTimestamp`` / ``startingOffsetsByTimestamp``
    ms since the epoch for every partition / JSON ``{"topicA":{"0":1700000000000}}``; the
    first offset with a timestamp at or after it.  Precedence: startingTimestamp, then
    startingOffsetsByTimestamp, then startingOffsets.
``startingOffsetsByTimestampStrategy``
    ``error`` (default: fail when no record is that recent) or ``latest``.
``endingOffsets`` / ``endingTimestamp`` / ``endingOffsetsByTimestamp`` (batch only)
    ``latest`` (default) or JSON (-1 = latest); where a batch read stops (exclusive).
``maxOffsetsPerTrigger``
    at most this many records per micro-batch, shared among partitions in proportion to
    their backlog (Spark's admission control: ``ReadMaxRows``).  Honoured by
    ``trigger(availableNow=True)``, which then runs several micro-batches.
``minPartitions``
    at least this many Spark partitions: big offset ranges are split.
``maxPartitions`` (millrace's own)
    at most this many Spark partitions per batch: the ranges of several topic partitions
    are read by one task, one after the other (ranges are never cut, so a batch may have
    fewer).  ``Pipeline`` sets it to the session's default parallelism: a task per core,
    not per topic partition.  Not below ``minPartitions``.
``failOnDataLoss`` (default true)
    fail the query when records it should read are gone (retention, deleted records or
    topic); false: log a warning and continue from the earliest available offset.
``includeHeaders`` (default false)
    add the ``headers`` column.
``kafkaConsumer.pollTimeoutMs`` (default 120000)
    how long a task waits without progress before failing.
``kafka.*``
    passed to the millrace consumer without the prefix (e.g. ``kafka.isolation.level``,
    ``kafka.max.partition.fetch.bytes``).  Refused: ``kafka.group.id``,
    ``kafka.auto.offset.reset``, ``kafka.enable.auto.commit``, ``kafka.key.deserializer``,
    ``kafka.value.deserializer``, ``kafka.interceptor.classes``.
``traceReports`` (millrace's own; default false)
    report each planned micro-batch to every broker's record tracer (stage
    ``spark.batch``, lane ``spark <traceReportsName>``, default name ``millrace``): a
    traced record's journey in the console then shows the micro-batch that read it
    (``trace_reports.py``; under ``Pipeline`` also the database write, ``sink.write``).
``valueFormat`` / ``keyFormat`` (millrace's own)
    ``avro``, ``json-schema`` or ``protobuf``: decode with the schema registry
    (Confluent's wire format; ``registry.py``); ``binary`` (default): the bytes.
``schema.registry.url``, ``schema.registry.basic.auth.user.info``
    the registry (required with a format) and its ``user:password``.
``subject`` / ``key.subject``
    default ``<topic>-value`` / ``<topic>-key`` (required unless one topic is named).
``schema.version`` / ``key.schema.version``
    the version to read with (default: the latest when the query starts, and a record of
    a newer version fails the query with ``newer schema: ...``; a pinned version reads
    records of every version, resolved to it).
``mode``
    ``FAILFAST`` (default: a record that does not decode fails the query naming topic,
    partition and offset) or ``PERMISSIVE`` (its key and value are null and
    ``decodeError`` says why, with the original bytes).
Accepted and ignored, as Spark's Kafka source has them: ``groupIdPrefix``,
``fetchOffset.numRetries``, ``fetchOffset.retryIntervalMs``.

Sink options: ``kafka.bootstrap.servers`` (required), ``topic`` (overrides a ``topic``
column), ``kafka.*`` for the millrace producer (``acks=all`` unless set; key/value
serializers and ``transactional.id`` refused), ``deliveryGuarantee`` (``at-least-once``,
the default, or ``exactly-once`` for ``writeStream``: a fenced transaction per micro-batch
and task, see ``exactly_once.py``), ``transactionalIdPrefix`` (exactly once; default
``millrace-spark-<query id>``), ``valueFormat=avro`` with ``schema.registry.url``
(``value`` of any type encoded as Avro under a schema derived from it and registered under
``subject``, default ``<topic>-value``; ``schema.version``: a registered version instead;
``recordName``).  Input columns: ``value`` (required, binary or string unless
``valueFormat``), ``key``, ``topic``, ``partition``, ``headers``.

Theory of operation: a streaming position is ``{TopicPartition: next offset}`` (Spark's
checkpoint holds it as ``{"topic":{"0":123}}``).  On the driver, ``latestOffset`` looks up
the partitions and their latest offsets (new partitions start at their earliest offset)
and applies the read limit; ``partitions(start, end)`` plans one range per partition,
checks for data loss and splits for ``minPartitions``.  Each range is read by a Spark
task in a Python worker with its own consumer (``reader.read_range``); ranges are exact,
so a batch replayed from the checkpoint reads the same records.  See ``offsets.py`` and
``reader.py``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from millrace.common.errors import ConfigError
from millrace.spark.offsets import (
    OffsetRange,
    PartitionOffsets,
    group_ranges,
    offsets_from_json,
    offsets_to_json,
    plan_ranges,
    rate_limit,
    report_data_loss,
    resolve_offsets,
    split_ranges,
)
from millrace.spark.options import SinkOptions, SourceOptions
from millrace.spark.reader import (
    Decoding,
    KafkaInputPartition,
    KafkaInputPartitionGroup,
    KafkaOffsetReader,
    arrow_schema,
    input_partitions,
    read_range,
    read_ranges,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from millrace.spark.trace_reports import TraceReporter
    from millrace.spark.writer import MillraceCommitMessage, SinkColumns

# The sink half (millrace.spark.writer, and with it the producer) is imported when a writer
# is made or runs: Spark's Python source process imports this module at every query start.

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()),
                                     StructField("value", BinaryType())]))


DECODE_ERROR = "decodeError"  # mode=PERMISSIVE: null, or why the record did not decode
DECODE_ERROR_TYPE = StructType([StructField("reason", StringType()),
                                StructField("key", BinaryType()),
                                StructField("value", BinaryType())])


def source_schema(include_headers: bool, key_type: DataType | None = None,
                  value_type: DataType | None = None, permissive: bool = False) -> StructType:
    """The output schema of Spark's Kafka source; with ``keyFormat`` / ``valueFormat`` the
    key / value column has the registered schema's type (``registry.py``), and with
    ``mode=PERMISSIVE`` a ``decodeError`` column follows."""
    schema = StructType([
        StructField("key", key_type or BinaryType()),
        StructField("value", value_type or BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ])
    if include_headers:
        schema = schema.add(StructField("headers", HEADERS_TYPE))
    if permissive:
        schema = schema.add(StructField(DECODE_ERROR, DECODE_ERROR_TYPE))
    return schema


def _registered_schema(options: SourceOptions) -> StructType:
    """The output schema with the key and value types of the latest (or pinned) versions."""
    from millrace.spark.registry import resolve_reader, spark_type

    types: dict[str, DataType | None] = {"key": None, "value": None}
    for column, spec in (("key", options.key_format), ("value", options.value_format)):
        if spec is not None:
            types[column] = spark_type(spec, resolve_reader(spec).schema)[0]
    return source_schema(options.include_headers, types["key"], types["value"],
                         options.permissive and options.decodes)


def _check_schema(given: StructType, options: SourceOptions) -> Decoding | None:
    """Check a schema Spark hands the reader; with registry formats, the reader schemas
    whose types it has (the decoders)."""
    fields = {f.name: f.dataType for f in given.fields}
    key_type = fields.get("key") if options.key_format is not None else None
    value_type = fields.get("value") if options.value_format is not None else None
    expected = source_schema(options.include_headers, key_type, value_type,
                             options.permissive and options.decodes)
    if [(f.name, f.dataType) for f in given.fields] != \
            [(f.name, f.dataType) for f in expected.fields]:
        raise ConfigError(f"The millrace source has a fixed schema ({expected.simpleString()}) "
                          f"and cannot read with {given.simpleString()}; drop the schema() "
                          "call or set includeHeaders")
    if not options.decodes:
        return None
    from millrace.spark.registry import RegistryDecoder, resolve_reader

    decoders: dict[str, RegistryDecoder | None] = {"key": None, "value": None}
    for column, spec, wanted in (("key", options.key_format, key_type),
                                 ("value", options.value_format, value_type)):
        if spec is not None:
            decoders[column] = RegistryDecoder(spec, resolve_reader(spec, wanted))
    return Decoding(decoders["key"], decoders["value"], options.permissive)


class MillraceDataSource(DataSource):
    """The data source class registered under the name ``millrace``."""

    @classmethod
    def name(cls) -> str:
        return "millrace"

    def schema(self) -> StructType:
        # Both modes' checks that do not depend on the mode fail here, at load().
        try:
            options = SourceOptions.parse(self.options, streaming=True)
        except ConfigError:
            options = SourceOptions.parse(self.options, streaming=False)
        if options.decodes:
            return _registered_schema(options)
        return source_schema(options.include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        options = SourceOptions.parse(self.options, streaming=False)
        return MillraceBatchReader(options, schema, _check_schema(schema, options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = SourceOptions.parse(self.options, streaming=True)
        return MillraceStreamReader(options, schema, _check_schema(schema, options))

    def writer(self, schema: StructType, overwrite: bool) -> MillraceBatchWriter:
        options = SinkOptions.parse(self.options)
        if options.exactly_once:
            raise ConfigError("deliveryGuarantee=exactly-once is for streaming writes "
                              "(writeStream): it commits one transaction per micro-batch and "
                              "task, and a batch write has no micro-batch id to write once")
        from millrace.spark.writer import SinkColumns

        return MillraceBatchWriter(options, SinkColumns.of(schema, options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> MillraceStreamWriter:
        options = SinkOptions.parse(self.options)
        from millrace.spark.writer import SinkColumns

        return MillraceStreamWriter(options, SinkColumns.of(schema, options))


class _RangeReading:
    """``read(partition)`` shared by the batch and the stream reader (executor side)."""

    _options: SourceOptions
    _schema: StructType
    _decoding: Decoding | None

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, KafkaInputPartitionGroup):
            return read_ranges(self._options, partition.parts, arrow_schema(self._schema),
                               self._decoding)
        if not isinstance(partition, KafkaInputPartition):
            return iter(())  # Spark's placeholder when there is nothing to read
        return read_range(self._options, partition, arrow_schema(self._schema),
                          self._decoding)

    def _plan(self, ranges: list[OffsetRange]) -> list[InputPartition]:
        options = self._options
        return input_partitions(group_ranges(split_ranges(ranges, options.min_partitions),
                                             options.max_partitions))


class MillraceBatchReader(_RangeReading, DataSourceReader):
    """``spark.read.format("millrace")``: startingOffsets to endingOffsets, once."""

    def __init__(self, options: SourceOptions, schema: StructType,
                 decoding: Decoding | None = None) -> None:
        self._options = options
        self._schema = schema
        self._decoding = decoding

    def partitions(self) -> Sequence[InputPartition]:
        options = self._options
        lookup = KafkaOffsetReader(options)
        try:
            current = lookup.topic_partitions()
            start = resolve_offsets(options.starting, current, lookup, option="startingOffsets",
                                    timestamp_strategy=options.timestamp_strategy)
            assert options.ending is not None
            end = resolve_offsets(options.ending, current, lookup, option="endingOffsets")
            for tp in sorted(current):
                if end[tp] < start[tp]:
                    raise ConfigError(f"The ending offset {end[tp]} of partition {tp} is below "
                                      f"its starting offset {start[tp]} (options "
                                      "'startingOffsets' / 'endingOffsets')")
            ranges = plan_ranges(start, end, lookup, options.fail_on_data_loss)
        finally:
            lookup.close()
        return self._plan(ranges)


class MillraceStreamReader(_RangeReading, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("millrace")``; driver methods run in Spark's long-lived
    Python source process, one instance per query, one call at a time."""

    def __init__(self, options: SourceOptions, schema: StructType,
                 decoding: Decoding | None = None) -> None:
        self._options = options
        self._schema = schema
        self._decoding = decoding
        self._lookup: KafkaOffsetReader | None = None
        self._latest: PartitionOffsets | None = None  # of the last latestOffset call
        self._available_now: PartitionOffsets | None = None
        self._reporter: TraceReporter | None = None  # traceReports=true

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_lookup": None, "_reporter": None}

    def _offset_reader(self) -> KafkaOffsetReader:
        if self._lookup is None:
            self._lookup = KafkaOffsetReader(self._options)
        return self._lookup

    def initialOffset(self) -> dict[str, Any]:
        lookup = self._offset_reader()
        options = self._options
        start = resolve_offsets(options.starting, lookup.topic_partitions(), lookup,
                                option="startingOffsets",
                                timestamp_strategy=options.timestamp_strategy)
        return offsets_to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self._options.max_offsets_per_trigger
        return ReadMaxRows(limit) if limit is not None else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        lookup = self._offset_reader()
        self._available_now = lookup.latest_offsets(lookup.topic_partitions())

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        lookup = self._offset_reader()
        fail = self._options.fail_on_data_loss
        begin = offsets_from_json(start)
        current = lookup.topic_partitions()
        latest = lookup.latest_offsets(current)
        self._latest = latest
        gone = sorted(tp for tp in begin if tp not in latest)
        if gone:
            report_data_loss(f"Partitions {', '.join(map(str, gone))} are gone (was a topic "
                             "deleted?); their records after offsets "
                             f"{', '.join(str(begin[tp]) for tp in gone)} cannot be read", fail)
        new = [tp for tp in latest if tp not in begin]
        base = {tp: begin[tp] for tp in latest if tp in begin}
        base.update(lookup.earliest_offsets(new) if new else {})
        target = {tp: o for tp, o in latest.items() if tp in base}
        if self._available_now is not None:
            cap = self._available_now
            target = {tp: min(o, cap[tp]) if tp in cap else base[tp]
                      for tp, o in target.items()}
        if isinstance(limit, ReadMaxRows):
            target = rate_limit(base, target, limit.max_rows)
        return offsets_to_json(target)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        if self._latest is None:
            lookup = self._offset_reader()
            self._latest = lookup.latest_offsets(lookup.topic_partitions())
        return offsets_to_json(self._latest)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        ranges = plan_ranges(offsets_from_json(start), offsets_from_json(end),
                             self._offset_reader(), self._options.fail_on_data_loss)
        if self._options.trace_reports:
            self._report_planned(ranges)
        return self._plan(ranges)

    def _report_planned(self, ranges: list[OffsetRange]) -> None:
        """``spark.batch`` for the micro-batch's ranges (``trace_reports.py``)."""
        from millrace.common.topic_partition import TopicPartition
        from millrace.spark.trace_reports import TraceReporter

        if self._reporter is None:
            options = self._options
            self._reporter = TraceReporter(options.kafka_params,
                                           f"spark {options.trace_reports_name}")
        spans = {TopicPartition(r.topic, r.partition): (r.from_offset, r.until_offset)
                 for r in ranges if r.from_offset < r.until_offset}
        shown = ", ".join(f"{tp} {a}..{b - 1}" for tp, (a, b) in sorted(spans.items()))
        self._reporter.report(
            "spark.batch", spans,
            f"micro-batch planned: {sum(b - a for a, b in spans.values())} record(s), "
            f"offsets {shown}", attrs={"partitions": len(spans)})

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: offsets live in Spark's checkpoint, not in Kafka."""

    def stop(self) -> None:
        if self._lookup is not None:
            self._lookup.close()
            self._lookup = None
        if self._reporter is not None:
            self._reporter.close()
            self._reporter = None


class MillraceBatchWriter(DataSourceArrowWriter):
    """``df.write.format("millrace")``."""

    def __init__(self, options: SinkOptions, columns: SinkColumns) -> None:
        self._options = options
        self._columns = columns

    def write(self, iterator: Iterator[pa.RecordBatch]) -> MillraceCommitMessage:
        from millrace.spark.writer import write_batches

        return write_batches(iterator, self._options, self._columns)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Every record was acknowledged by ``write``; nothing to finish."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Records written by successful tasks stay written (no transactions)."""


class MillraceStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("millrace")``: at least once, like Spark's Kafka sink; with
    ``deliveryGuarantee=exactly-once`` one fenced transaction per micro-batch and task
    (``exactly_once.py``)."""

    def __init__(self, options: SinkOptions, columns: SinkColumns) -> None:
        self._options = options
        self._columns = columns

    def write(self, iterator: Iterator[pa.RecordBatch]) -> MillraceCommitMessage:
        if self._options.exactly_once:
            from millrace.spark.exactly_once import TaskTransaction, write_batches_exactly_once

            return write_batches_exactly_once(iterator, self._options, self._columns,
                                              TaskTransaction.current(self._options))
        from millrace.spark.writer import write_batches

        return write_batches(iterator, self._options, self._columns)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Every task committed (or, exactly once, had committed) its rows in ``write``."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records written by successful tasks stay written: at least once they are
        visible; exactly once each task's transaction was committed or aborted whole, and
        a replay of the micro-batch skips the tasks that committed."""
