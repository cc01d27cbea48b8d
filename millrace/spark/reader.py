"""Reading Kafka for Spark: driver-side offset lookups and executor-side range reads.

``KafkaOffsetReader`` (Spark's name for the same role) runs on the driver: it answers the
``OffsetLookup`` questions of ``offsets.py`` -- which partitions the subscription covers,
earliest and latest offsets, offsets by timestamp -- with one millrace ``KafkaConsumer``
that has no group and never commits.  It asks for offsets only of partitions the metadata
lists, so a deleted topic is an absent answer rather than a long retry.

``read_range`` runs in Spark's Python workers, once per ``KafkaInputPartition`` (a task
given a ``KafkaInputPartitionGroup`` -- ``maxPartitions`` -- reads its ranges one after the
other, ``read_ranges``): it builds
its own consumer (nothing driver-only is needed, so it works the same on a cluster),
assigns the partition, seeks to ``from_offset`` and polls until the consumer's position
reaches ``until_offset``.  The position, not the last record's offset, decides the end:
control batches and compacted gaps move the position without handing out records, and
records at or past ``until_offset`` (fetched ahead) are cut off, so a range reads exactly
the same records every time.  Records become Arrow record batches column by column (one
per poll), which Spark takes without converting rows one by one.

Data loss at read time: a fetch position below the log start offset (retention,
DeleteRecords) makes the consumer raise ``OffsetOutOfRangeError`` (``auto.offset.reset`` is
``none``); a partition that stops short of ``until_offset`` (deleted topic, truncated log)
is noticed when polls stall.  Both go through ``report_data_loss``.
"""

from __future__ import annotations

import bisect
import gc
import itertools
import logging
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import InputPartition

from millrace.client.cluster import TopicPartition
from millrace.client.consumer import KafkaConsumer, OffsetOutOfRangeError
from millrace.spark.offsets import OffsetRange, PartitionOffsets, report_data_loss
from millrace.spark.options import Assign, SourceOptions

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)

POLL_MS = 500
# rows per Arrow batch handed to Spark (spark.sql.execution.arrow.maxRecordsPerBatch's
# default); the consumer polls fewer at a time (options.READER_CONSUMER_DEFAULTS)
ARROW_BATCH_ROWS = 10_000
STALL_CHECK_MS = 2_000
_ids = itertools.count(1)
_offset_of = attrgetter("offset")


class KafkaOffsetReader:
    """Driver-side cluster lookups for one query; not thread-safe (Spark calls the source
    from one thread).  The consumer is created on first use and dropped when pickled."""

    def __init__(self, options: SourceOptions, role: str = "driver") -> None:
        self._options = options
        self._role = role
        self._consumer: KafkaConsumer[bytes, bytes] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_consumer": None}

    def _get(self) -> KafkaConsumer[bytes, bytes]:
        if self._consumer is None:
            client_id = f"millrace-spark-{self._role}-{os.getpid()}-{next(_ids)}"
            self._consumer = KafkaConsumer(config=self._options.consumer_config(client_id))
        return self._consumer

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()

    def _partition_counts(self) -> dict[str, int]:
        return {topic: len(infos) for topic, infos in self._get().list_topics().items()}

    def _existing(self, partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
        counts = self._partition_counts()
        return [tp for tp in partitions if tp.partition < counts.get(tp.topic, 0)]

    def topic_partitions(self) -> set[TopicPartition]:
        strategy = self._options.strategy
        counts = self._partition_counts()
        if isinstance(strategy, Assign):
            return {tp for tp in strategy.partitions if tp.partition < counts.get(tp.topic, 0)}
        return {TopicPartition(topic, p) for topic, count in counts.items()
                if strategy.matches(topic) for p in range(count)}

    def earliest_offsets(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets:
        existing = self._existing(partitions)
        return self._get().beginning_offsets(existing) if existing else {}

    def latest_offsets(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets:
        existing = self._existing(partitions)
        return self._get().end_offsets(existing) if existing else {}

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]
                          ) -> dict[TopicPartition, int | None]:
        existing = self._existing(timestamps)
        if not existing:
            return {}
        found = self._get().offsets_for_times({tp: timestamps[tp] for tp in existing})
        return {tp: (hit.offset if hit is not None else None) for tp, hit in found.items()}


@dataclass
class KafkaInputPartition(InputPartition):
    """One Spark task's work: records [from_offset, until_offset) of one partition."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @classmethod
    def of(cls, r: OffsetRange) -> KafkaInputPartition:
        return cls(r.topic, r.partition, r.from_offset, r.until_offset)


@dataclass
class KafkaInputPartitionGroup(InputPartition):
    """One Spark task's work when ranges are grouped (``maxPartitions``): several ranges,
    read one after the other."""

    parts: tuple[KafkaInputPartition, ...]

    @classmethod
    def of(cls, ranges: Iterable[OffsetRange]) -> KafkaInputPartitionGroup:
        return cls(tuple(KafkaInputPartition.of(r) for r in ranges))


def input_partitions(groups: Iterable[tuple[OffsetRange, ...]]) -> list[InputPartition]:
    """A micro-batch's Spark partitions: a single range as itself, several as a group."""
    return [KafkaInputPartition.of(g[0]) if len(g) == 1 else KafkaInputPartitionGroup.of(g)
            for g in groups]


# ---------------------------------------------------------------------------- executor side
def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark expects of record batches for ``schema``."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


@dataclass(frozen=True)
class Decoding:
    """How a range's keys and values are decoded (``valueFormat``/``keyFormat``): the
    decoders of ``registry.py`` (None: bytes) and whether a record that does not decode
    fails the task (FAILFAST) or becomes a row with a ``decodeError`` (PERMISSIVE)."""

    key: Any = None  # registry.RegistryDecoder
    value: Any = None
    permissive: bool = False


class _RecordAt:
    """``topic-partition@offset`` of the record being decoded, computed only when a decoder
    names it in an error."""

    __slots__ = ("offset", "partition")

    def __init__(self, partition: str) -> None:
        self.partition = partition
        self.offset = -1

    def __call__(self) -> str:
        return f"{self.partition}@{self.offset}"


class _BatchBuilder:
    """ConsumerRecords of one partition -> Arrow record batches of the source's schema.

    ``add`` keeps only the columns (bytes and ints: nothing the cyclic GC walks), so the
    records of a poll die with it; ``build`` makes one batch of everything added since.
    With ``decoding`` the keys and values are decoded in ``add``."""

    def __init__(self, schema: pa.Schema, topic: str, partition: int,
                 decoding: Decoding | None = None) -> None:
        import pyarrow as pa

        self._decoding = decoding
        self._where = f"{topic}-{partition}"
        self._pa = pa
        self._schema = schema
        self._topic = pa.scalar(topic, pa.string())
        self._partition = pa.scalar(partition, pa.int32())
        self._timestamp_ms = pa.timestamp("ms", tz="UTC")
        self._timestamp_us = schema.field("timestamp").type
        self._headers_type = schema.field("headers").type if "headers" in schema.names \
            else None
        self._key_type = schema.field("key").type
        self._value_type = schema.field("value").type
        # what decoded values are collected as (registry.RegistryDecoder.arrow_type)
        self._key_raw, self._value_raw = self._key_type, self._value_type
        if decoding is not None and decoding.key is not None:
            self._key_raw = decoding.key.arrow_type(self._key_type)
        if decoding is not None and decoding.value is not None:
            self._value_raw = decoding.value.arrow_type(self._value_type)
        self._error_type = schema.field("decodeError").type if "decodeError" in schema.names \
            else None

        self._clear()

    def _clear(self) -> None:
        self._keys: list[bytes | None] = []
        self._values: list[bytes | None] = []
        self._offsets: list[int] = []
        self._timestamps: list[int] = []
        self._types: list[int] = []
        self._headers: list[Any] = []
        self._errors: list[Any] = []

    @property
    def rows(self) -> int:
        return len(self._offsets)

    def add(self, records: list[Any]) -> None:
        if self._decoding is not None:
            self._add_decoded(records, self._decoding)
        else:
            self._keys += [r.key for r in records]
            self._values += [r.value for r in records]
        self._offsets += [r.offset for r in records]
        self._timestamps += [r.timestamp for r in records]
        self._types += [r.timestamp_type for r in records]
        if self._headers_type is not None:
            self._headers += [r.headers or None for r in records]

    def _add_decoded(self, records: list[Any], decoding: Decoding) -> None:
        """Keys and values decoded; a record that does not decode raises ``bad record
        <topic>-<partition>@<offset>: ...`` or (PERMISSIVE) gets a ``decodeError``."""
        from millrace.spark.registry import DecodeError

        key_decoder, value_decoder = decoding.key, decoding.value
        keys, values, errors = self._keys, self._values, self._errors
        where = _RecordAt(self._where)  # one object, moved along: no closure per record
        for r in records:
            where.offset = r.offset
            column = "key"
            try:
                key = r.key if key_decoder is None else key_decoder.decode(r.key, where)
                column = "value"
                value = r.value if value_decoder is None else value_decoder.decode(r.value,
                                                                                   where)
            except DecodeError as e:
                reason = f"{column} does not decode: {e}"
                if not decoding.permissive:
                    raise DecodeError(f"bad record {where()}: {reason}") from None
                keys.append(None)
                values.append(None)
                errors.append({"reason": reason, "key": r.key, "value": r.value})
                continue
            keys.append(key)
            values.append(value)
            errors.append(None)

    def build(self) -> pa.RecordBatch:
        pa = self._pa
        n = self.rows
        keys = pa.array(self._keys, self._key_raw)
        values = pa.array(self._values, self._value_raw)
        decoding = self._decoding
        if decoding is not None and decoding.key is not None:
            keys = decoding.key.finish(keys, self._key_type)
        if decoding is not None and decoding.value is not None:
            values = decoding.value.finish(values, self._value_type)
        columns = [
            keys,
            values,
            pa.repeat(self._topic, n),
            pa.repeat(self._partition, n),
            pa.array(self._offsets, pa.int64()),
            pa.array(self._timestamps, self._timestamp_ms).cast(self._timestamp_us),
            pa.array(self._types, pa.int32()),
        ]
        if self._headers_type is not None:
            columns.append(pa.array(self._headers, self._headers_type))
        if self._error_type is not None:
            columns.append(pa.array(self._errors, self._error_type))
        self._clear()
        return pa.RecordBatch.from_arrays(columns, schema=self._schema)


def read_ranges(options: SourceOptions, parts: Iterable[KafkaInputPartition],
                schema: pa.Schema, decoding: Decoding | None = None
                ) -> Iterator[pa.RecordBatch]:
    """The records of each of ``parts`` in turn (runs in a Python worker)."""
    for part in parts:
        yield from read_range(options, part, schema, decoding)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the block (back on after, if it was on).

    A range allocates a ``ConsumerRecord`` per record, and every 700 allocations start a
    young-generation pass over objects that hold no cycles and die with their poll: a
    third of the worker's time per record (1.65 -> 1.04 us per record in one process over
    300k records).  What the consumer's own objects may leave in cycles is collected when
    the collector runs again."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def read_range(options: SourceOptions, part: KafkaInputPartition, schema: pa.Schema,
               decoding: Decoding | None = None) -> Iterator[pa.RecordBatch]:
    """The records of ``part`` as Arrow record batches (runs in a Python worker, with the
    cyclic garbage collector paused: ``_gc_paused``)."""
    with _gc_paused():
        yield from _read_range(options, part, schema, decoding)


def _read_range(options: SourceOptions, part: KafkaInputPartition, schema: pa.Schema,
                decoding: Decoding | None = None) -> Iterator[pa.RecordBatch]:
    tp = TopicPartition(part.topic, part.partition)
    until = part.until_offset
    position = part.from_offset
    if position >= until:
        return
    builder = _BatchBuilder(schema, part.topic, part.partition, decoding)
    client_id = f"millrace-spark-reader-{os.getpid()}-{next(_ids)}"
    consumer: KafkaConsumer[bytes, bytes] = KafkaConsumer(
        config=options.consumer_config(client_id))
    try:
        consumer.assign([tp])
        consumer.seek(tp, position)
        progress_at = last_check = time.monotonic()
        while position < until:
            try:
                polled = consumer.poll(POLL_MS)
            except OffsetOutOfRangeError:
                position = _after_out_of_range(consumer, tp, position, until, options)
                if position < until:
                    consumer.seek(tp, position)
                progress_at = time.monotonic()
                continue
            records = polled.records(tp) if polled else []
            if records:
                if records[-1].offset >= until:
                    records = records[:bisect.bisect_left(records, until, key=_offset_of)]
                builder.add(records)
                if builder.rows >= ARROW_BATCH_ROWS:
                    yield builder.build()
            moved = consumer.position(tp)
            now = time.monotonic()
            if moved != position:
                position = moved
                progress_at = last_check = now
                continue
            if now - last_check >= STALL_CHECK_MS / 1000:
                last_check = now
                if _stopped_short(consumer, tp, position, until, options):
                    break  # what was read before the loss is still handed out
            if now - progress_at >= options.poll_timeout_ms / 1000:
                raise TimeoutError(
                    f"Reading partition {tp} made no progress at offset {position} for "
                    f"{options.poll_timeout_ms} ms (kafkaConsumer.pollTimeoutMs); the range "
                    f"to read ends at {until}")
        if builder.rows:
            yield builder.build()
    finally:
        consumer.close()


def _after_out_of_range(consumer: KafkaConsumer[bytes, bytes], tp: TopicPartition,
                        position: int, until: int, options: SourceOptions) -> int:
    """Where to continue after OFFSET_OUT_OF_RANGE at ``position`` (``until``: stop)."""
    earliest = consumer.beginning_offsets([tp]).get(tp)
    latest = consumer.end_offsets([tp]).get(tp)
    if earliest is not None and position < earliest:
        report_data_loss(f"Offsets {position} to {min(earliest, until)} of partition {tp} "
                         f"were deleted before they could be read (earliest available "
                         f"offset: {earliest})", options.fail_on_data_loss)
        return min(earliest, until)
    report_data_loss(f"Offset {position} of partition {tp} is out of range (the log now ends "
                     f"at {latest}); offsets {position} to {until} cannot be read",
                     options.fail_on_data_loss)
    return until


def _stopped_short(consumer: KafkaConsumer[bytes, bytes], tp: TopicPartition, position: int,
                   until: int, options: SourceOptions) -> bool:
    """True (after reporting data loss) if the partition can no longer reach ``until``."""
    topics = consumer.list_topics()
    if tp.partition >= len(topics.get(tp.topic, ())):
        report_data_loss(f"Partition {tp} is gone (was the topic deleted?): offsets {position} "
                         f"to {until} cannot be read", options.fail_on_data_loss)
        return True
    latest = consumer.end_offsets([tp]).get(tp)
    if latest is not None and latest <= position:
        report_data_loss(f"Partition {tp} now ends at offset {latest}: offsets {position} to "
                         f"{until} cannot be read (was the topic deleted and re-created?)",
                         options.fail_on_data_loss)
        return True
    return False
