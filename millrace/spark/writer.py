"""Writing DataFrames to Kafka: ``df.write.format("millrace")`` and ``writeStream``.

The input columns follow Spark's Kafka sink: ``value`` (required, binary or string; any
type with ``valueFormat`` avro, json-schema or protobuf: encoded with a registered
schema, ``registry.py``), ``key`` (binary or string), ``topic`` (string; the ``topic``
option, when set, wins), ``partition`` (int) and ``headers`` (array<struct<key: string,
value: binary>>); other columns are ignored.  ``SinkColumns.of(schema)`` checks them on
the driver, before any task runs.

Each Spark task runs ``write_batches`` with its own millrace ``KafkaProducer`` (``kafka.*``
options, ``acks=all`` unless set): Arrow record batches in, one ``send`` per row, a
``flush`` at the end.  The first failed send fails the task with the Kafka error (its
name is in the message).  By default nothing is transactional, so a retried task or
micro-batch writes its rows again (at least once, as Spark's Kafka sink); the streaming
sink's ``deliveryGuarantee=exactly-once`` (``exactly_once.py``) writes each task's rows of
a micro-batch in one transaction, fenced and written once.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructType,
)

from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.common.errors import ConfigError, MillraceError
from millrace.spark.options import SinkOptions

if TYPE_CHECKING:
    import pyarrow as pa

_ids = itertools.count(1)


class KafkaWriteError(MillraceError):
    """A record could not be written; the message names the Kafka error."""


@dataclass
class MillraceCommitMessage(WriterCommitMessage):
    records: int
    skipped: bool = False  # exactly-once: this task's rows of the micro-batch were already in


@dataclass(frozen=True)
class SinkColumns:
    """Which of the sink's columns the input has (and whether key/value are strings)."""

    value_is_string: bool
    has_key: bool = False
    key_is_string: bool = False
    has_topic: bool = False
    has_partition: bool = False
    has_headers: bool = False
    # valueFormat: registry.RegistryEncoder, prepared (schema registered) on the driver
    encoder: Any = None

    @classmethod
    def of(cls, schema: StructType, options: SinkOptions) -> SinkColumns:
        fields = {f.name.lower(): f.dataType for f in schema.fields}
        binary_or_string = (BinaryType(), StringType())
        if "value" not in fields:
            raise ConfigError("Required column 'value' not found: the millrace sink writes "
                              "the 'value' column (binary or string)")
        encoder = None
        if options.value_format is not None:
            from millrace.spark.registry import RegistryEncoder

            encoder = RegistryEncoder(options.value_format, fields["value"],
                                      options.record_name)
            encoder.prepare()
        for name in ("value", "key"):
            if name == "value" and encoder is not None:
                continue
            if name in fields and fields[name] not in binary_or_string:
                raise ConfigError(f"Column '{name}' must be binary or string, not "
                                  f"{fields[name].simpleString()}")
        if "topic" in fields and fields["topic"] != StringType():
            raise ConfigError(f"Column 'topic' must be a string, not "
                              f"{fields['topic'].simpleString()}")
        if "topic" not in fields and options.topic is None:
            raise ConfigError("No topic to write to: set the option 'topic' or give the "
                              "DataFrame a 'topic' column")
        if "partition" in fields and fields["partition"] != IntegerType():
            raise ConfigError(f"Column 'partition' must be an int, not "
                              f"{fields['partition'].simpleString()}")
        headers_type = ArrayType(StructType().add("key", StringType())
                                 .add("value", BinaryType()))
        if "headers" in fields and _shape(fields["headers"]) != \
                _shape(headers_type):
            raise ConfigError("Column 'headers' must be array<struct<key:string,value:binary>>,"
                              f" not {fields['headers'].simpleString()}")
        return cls(value_is_string=fields["value"] == StringType(),
                   has_key="key" in fields,
                   key_is_string=fields.get("key") == StringType(),
                   has_topic="topic" in fields and options.topic is None,
                   has_partition="partition" in fields,
                   has_headers="headers" in fields, encoder=encoder)


def _shape(data_type: Any) -> str:
    return str(data_type.simpleString())


def _column(batch: pa.RecordBatch, name: str, as_binary: bool = False) -> list[Any]:
    index = [n.lower() for n in batch.schema.names].index(name)
    column = batch.column(index)
    if as_binary:
        import pyarrow as pa

        column = column.cast(pa.binary())
    return column.to_pylist()


def send_rows(producer: KafkaProducer[bytes, bytes], batches: Iterator[pa.RecordBatch],
              options: SinkOptions, columns: SinkColumns) -> tuple[int, str | None]:
    """Send every row of ``batches`` and flush; (rows written, first topic written).  The
    first failed send raises ``KafkaWriteError`` naming the Kafka error."""
    failures: list[BaseException] = []

    def on_completion(_metadata: Any, error: Exception | None) -> None:
        if error is not None and not failures:
            failures.append(error)

    written = 0
    first_topic: str | None = None
    for batch in batches:
        n = batch.num_rows
        if n == 0:
            continue
        values = _column(batch, "value", columns.value_is_string)
        if columns.encoder is not None:
            values = [columns.encoder.encode(v) for v in values]
        keys = _column(batch, "key", columns.key_is_string) if columns.has_key \
            else itertools.repeat(None, n)
        topics = _column(batch, "topic") if columns.has_topic \
            else itertools.repeat(options.topic, n)
        partitions = _column(batch, "partition") if columns.has_partition \
            else itertools.repeat(None, n)
        headers = ([None if h is None else [(x["key"], x["value"]) for x in h]
                    for h in _column(batch, "headers")] if columns.has_headers
                   else itertools.repeat(None, n))
        send = producer.send
        try:
            for value, key, topic, partition, header in zip(values, keys, topics,
                                                            partitions, headers):
                if topic is None:
                    raise ValueError("A row has a null 'topic' and no 'topic' option is "
                                     "set")
                if first_topic is None:
                    first_topic = topic
                send(ProducerRecord(topic, value, key, partition, None, header),
                     on_completion)
        except MillraceError as e:
            failures.insert(0, e)
        _raise_first(failures)
        written += n
    producer.flush()
    _raise_first(failures)
    return written, first_topic


def write_batches(batches: Iterator[pa.RecordBatch], options: SinkOptions,
                  columns: SinkColumns) -> MillraceCommitMessage:
    """Send every row of ``batches``; returns how many were written (runs in a worker)."""
    client_id = f"millrace-spark-writer-{os.getpid()}-{next(_ids)}"
    producer: KafkaProducer[bytes, bytes] = KafkaProducer(options.producer_config(client_id))
    ok = False
    try:
        written, _ = send_rows(producer, batches, options, columns)
        ok = True
    finally:
        producer.close(None if ok else 0)
    return MillraceCommitMessage(written)


def _raise_first(failures: list[BaseException]) -> None:
    if failures:
        error = failures[0]
        raise KafkaWriteError(f"Writing to Kafka failed: {error} ({type(error).__name__})") \
            from error
