"""Bad records: what the pipeline refuses, and the dead-letter topic they may go to.

A record is bad when it cannot become the rows its tables expect:

- ``parse``: its value does not parse with the value schema.  Spark 4's ``from_json`` in
  PERMISSIVE mode (checked: pyspark 4.1) returns a struct of nulls for a JSON syntax
  error, a JSON array or scalar where an object is expected, and a field of the wrong
  type (``"x"`` or ``3.5`` for an INT, ``1e20`` for an INT, ``"not a time"`` for a
  TIMESTAMP, ``"1.5"`` for a DOUBLE); it fills the schema's corrupt-record column in all
  of those cases, so ``plan.py`` parses with the schema extended by ``CORRUPT_COLUMN``.
  An empty value parses to a null struct without a corrupt record, and a null value
  (a tombstone) to null: both are bad too.  Spark accepts what it coerces (a JSON number
  for a STRING field becomes its text, trailing text after the object is ignored): those
  records are good.
- ``null-key``: a column the table is keyed or ordered on is null after parsing (a state
  sink's key or order_by, an aggregate's event_time or group_by for the records its
  ``where`` keeps).
- ``too-large``: a value over its column's declared size in an existing PostgreSQL table
  (``varchar(n)``/``char(n)`` lengths, ``smallint``/``integer`` ranges), read from
  ``information_schema`` when the pipeline starts (``column_limits``).  SQLite declares
  no sizes.  What cannot be attributed to one record (an aggregate's sum over an
  ``integer`` column, a column computed by a transform) fails the batch's transaction
  with the database's error, naming the batch and tables, before anything is committed.

``plan.py`` computes ``ERROR_COLUMN`` per record: null for a good record (the good path
pays one column of nulls and one filter), else a struct of the kind, the reason, the
record's topic, partition, offset, timestamp and its original key and value bytes.  The
runner's ``SinkWriter`` collects a micro-batch's bad rows on the driver (they are few)
and hands them to ``BadRecordPolicy.handle`` before the batch's transaction commits:

- ``errors_tolerance = "none"``: raise ``BadRecordError`` for the first bad record (by
  topic, partition, offset): ``bad record orders-2@1234: value does not parse as the value
  schema: JSON syntax error: ...``; the transaction rolls back, the query fails.
- ``errors_tolerance = "all"``: produce every bad record to ``dead_letter_topic`` (an
  idempotent producer, ``acks=all``, flushed; a failed send fails the batch), then the
  good rows commit.  A batch replayed after a crash produces its dead letters again: the
  dead-letter topic is at-least-once, the database exactly once -- as in Kafka Connect.

A dead letter is the original record's key and value bytes, unchanged, with its original
timestamp and Kafka Connect's context headers (``errors.deadletterqueue.context.headers
.enable``), under Connect's own names so tools that read Connect's dead-letter topics read
ours: ``__connect.errors.topic``, ``.partition``, ``.offset`` (decimal text),
``.connector.name`` (the pipeline), ``.stage`` (``VALUE_CONVERTER`` for a parse error,
``TASK_PUT`` otherwise), ``.class.name``, ``.exception.class.name`` (one of the classes
below) and ``.exception.message`` (the reason).

Thread ownership: a ``BadRecordPolicy`` and its ``DeadLetterQueue`` belong to one
``SinkWriter``, called on Spark's callback thread one batch at a time; ``close`` is
called by ``Pipeline.run`` once its queries have stopped.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from millrace.common.errors import MillraceError

if TYPE_CHECKING:
    import pyarrow as pa

    from millrace.client.producer import KafkaProducer
    from millrace.spark.pipeline.config import PipelineConfig
    from millrace.spark.sinks import Database

ERROR_COLUMN = "__millrace_error"  # null, or struct<ERROR_FIELDS> for a bad record
CORRUPT_COLUMN = "__millrace_corrupt"  # from_json's corrupt-record column
ERROR_FIELDS = ("kind", "reason", "topic", "partition", "offset", "timestamp", "key", "value")
HEADER_PREFIX = "__connect.errors."  # Kafka Connect's DeadLetterQueueReporter names
PARSE, NULL_KEY, TOO_LARGE = "parse", "null-key", "too-large"
_BAD_RECORD = re.compile(r"(bad (?:record \S+-\d+@\d+|row of the transform): .*?)"
                         r"(?:\s+SQLSTATE: \w+)?(?:\n|$)")
_ids = itertools.count()


class BadRecordError(MillraceError):
    """A bad record under ``errors_tolerance = "none"`` (the message names it)."""


class ValueParseError(BadRecordError):
    """The value does not parse with the value schema."""


class NullKeyError(BadRecordError):
    """A key (or order, event-time, group-by) column is null."""


class ValueTooLargeError(BadRecordError):
    """A value is over its column's declared size."""


_CLASSES: dict[str, type[BadRecordError]] = {
    PARSE: ValueParseError, NULL_KEY: NullKeyError, TOO_LARGE: ValueTooLargeError}


@dataclass(frozen=True)
class ColumnLimit:
    """A column's declared size in an existing table: at most ``max_chars`` characters,
    or an integer in ``[low, high]``."""

    declared: str  # as the database shows it: "varchar(8)", "integer"
    max_chars: int | None = None
    low: int | None = None
    high: int | None = None


_INTEGER_RANGES = {"smallint": (-2**15, 2**15 - 1), "integer": (-2**31, 2**31 - 1)}


def column_limits(database: Database, tables: list[str]) -> dict[str, dict[str, ColumnLimit]]:
    """table -> column -> limit, for the existing tables of a PostgreSQL database (SQLite
    declares no sizes: {})."""
    if database.dialect != "postgresql" or not tables:
        return {}
    rows = database.query(
        "SELECT table_name, column_name, data_type, character_maximum_length FROM "
        "information_schema.columns WHERE table_schema = current_schema() AND "
        "table_name = ANY(%s)", (list(tables),))
    limits: dict[str, dict[str, ColumnLimit]] = {}
    for table, column, data_type, length in rows:
        limit = None
        if data_type in ("character varying", "character") and length is not None:
            short = "varchar" if data_type == "character varying" else "char"
            limit = ColumnLimit(f"{short}({length})", max_chars=int(length))
        elif data_type in _INTEGER_RANGES:
            low, high = _INTEGER_RANGES[data_type]
            limit = ColumnLimit(data_type, low=low, high=high)
        if limit is not None:
            limits.setdefault(table, {})[column] = limit
    return limits


@dataclass(frozen=True)
class BadRecord:
    kind: str
    reason: str
    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None
    key: bytes | None
    value: bytes | None

    @property
    def where(self) -> str:
        return f"{self.topic}-{self.partition}@{self.offset}"

    @property
    def exception_class(self) -> type[BadRecordError]:
        return _CLASSES.get(self.kind, BadRecordError)

    def error(self) -> BadRecordError:
        return self.exception_class(f"bad record {self.where}: {self.reason}")

    def headers(self, pipeline: str) -> list[tuple[str, bytes]]:
        cls = self.exception_class
        stage = "VALUE_CONVERTER" if self.kind == PARSE else "TASK_PUT"
        executing = ("pyspark.sql.functions.from_json" if self.kind == PARSE
                     else "millrace.spark.pipeline.sink_writer.SinkWriter")
        values = {"topic": self.topic, "partition": str(self.partition),
                  "offset": str(self.offset), "connector.name": pipeline, "stage": stage,
                  "class.name": executing,
                  "exception.class.name": f"{cls.__module__}.{cls.__qualname__}",
                  "exception.message": self.reason}
        return [(HEADER_PREFIX + name, value.encode()) for name, value in values.items()]


def bad_records(rows: pa.Table, value_types: Mapping[str, str], detail: bool = True
                ) -> list[BadRecord]:
    """The bad records of a batch's ``ERROR_COLUMN`` (null entries skipped), ordered by
    topic, partition and offset; a JSON parse error's reason says what is wrong, from the
    value bytes (``value_types``: the value schema's column -> Spark type; ``detail``
    False: the reason is complete already, as the registry decoder's are)."""
    out = []
    for item in rows[ERROR_COLUMN].to_pylist():
        if item is None:
            continue
        reason = str(item["reason"])
        if detail and item["kind"] == PARSE and item["value"]:
            reason = f"{reason}: {parse_detail(item['value'], value_types)}"
        stamp = item["timestamp"]
        out.append(BadRecord(
            kind=str(item["kind"]), reason=reason, topic=str(item["topic"]),
            partition=int(item["partition"]), offset=int(item["offset"]),
            timestamp_ms=None if stamp is None else _millis(stamp),
            key=item["key"], value=item["value"]))
    out.sort(key=lambda r: (r.topic, r.partition, r.offset))
    return out


def _millis(stamp: Any) -> int:
    if isinstance(stamp, dt.datetime):
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=dt.UTC)
        return int(stamp.timestamp() * 1000)
    return int(stamp)


def parse_detail(value: bytes, value_types: Mapping[str, str]) -> str:
    """Why a value Spark could not parse does not parse: the JSON syntax error, or the
    first field whose JSON value does not fit its type (best effort, driver side)."""
    try:
        text = bytes(value).decode("utf-8")
    except UnicodeDecodeError as e:
        return f"not UTF-8 ({e.reason} at byte {e.start})"
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        return f"JSON syntax error: {e.msg} at line {e.lineno} column {e.colno}"
    if not isinstance(doc, dict):
        kind = "array" if isinstance(doc, list) else "scalar"
        return f"a JSON {kind}, not an object"
    for name, spark_type in value_types.items():
        if name in doc and doc[name] is not None and not _fits(doc[name], spark_type):
            return f"field {name}: {json.dumps(doc[name])[:80]} is not {spark_type}"
    return "a field does not fit its type"


_INT_BITS = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64}


def _fits(value: Any, spark_type: str) -> bool:
    if spark_type in _INT_BITS:
        bits = _INT_BITS[spark_type]
        return (isinstance(value, int) and not isinstance(value, bool)
                and -2**(bits - 1) <= value < 2**(bits - 1))
    if spark_type in ("float", "double") or spark_type.startswith("decimal"):
        return isinstance(value, int | float) and not isinstance(value, bool)
    if spark_type == "boolean":
        return isinstance(value, bool)
    if spark_type in ("timestamp", "timestamp_ntz", "date"):
        if not isinstance(value, str):
            return False
        try:
            dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return False
        return True
    if spark_type.startswith(("struct", "map")):
        return isinstance(value, dict)
    if spark_type.startswith("array"):
        return isinstance(value, list)
    return True  # string and the rest: Spark takes any JSON text


def bad_record_message(error: BaseException | None) -> str | None:
    """``bad record <topic>-<p>@<offset>: <reason>`` from a Spark error (a query stopped
    by ``plan.guarded``'s ``raise_error``), or None."""
    if error is None:
        return None
    text = getattr(error, "desc", None) or getattr(error, "getMessage", lambda: "")()
    match = _BAD_RECORD.search(f"{text}\n{error}")
    return match[1].strip() if match else None


class DeadLetterQueue:
    """The producer of dead letters: idempotent, ``acks=all``, flushed per batch."""

    def __init__(self, topic: str, client_config: Mapping[str, Any], pipeline: str) -> None:
        self.topic = topic
        self.pipeline = pipeline
        self._client_config = dict(client_config)
        self._producer: KafkaProducer[bytes, bytes] | None = None

    def config(self) -> dict[str, Any]:
        from millrace.client.producer.config import PRODUCER_CONFIG

        # the source's client settings a producer has (where the brokers are, security)
        known = {k: v for k, v in self._client_config.items() if k in PRODUCER_CONFIG.keys}
        return {**known, "enable.idempotence": True, "acks": "all",
                "client.id": f"millrace-dead-letters-{self.pipeline}-{os.getpid()}-"
                             f"{next(_ids)}"}

    def send(self, records: list[BadRecord]) -> None:
        """Produce ``records`` and flush: returns once every one is acknowledged by all
        in-sync replicas; raises the first send's error otherwise."""
        from millrace.client.producer import KafkaProducer, ProducerRecord

        if self._producer is None:
            self._producer = KafkaProducer(self.config())
        failures: list[BaseException] = []

        def done(_metadata: Any, error: Exception | None) -> None:
            if error is not None:
                failures.append(error)

        for record in records:
            self._producer.send(ProducerRecord(
                self.topic, value=record.value, key=record.key,
                timestamp=record.timestamp_ms if record.timestamp_ms is not None
                and record.timestamp_ms >= 0 else None,
                headers=record.headers(self.pipeline)), done)
        self._producer.flush()
        if failures:
            raise MillraceError(f"dead-letter topic {self.topic}: {failures[0]}")

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close()
            self._producer = None


class BadRecordPolicy:
    """``errors_tolerance`` applied to one micro-batch's bad rows (see the module doc)."""

    def __init__(self, tolerance: str, value_types: Mapping[str, str],
                 dead_letters: DeadLetterQueue | None, detail: bool = True) -> None:
        self.tolerance = tolerance
        self.value_types = dict(value_types)
        self.dead_letters = dead_letters
        self.detail = detail  # JSON values: say why a value does not parse

    @classmethod
    def for_config(cls, config: PipelineConfig) -> BadRecordPolicy:
        from pyspark.sql.types import DataType, StructType

        types = {}
        if config.value_format == "json" and config.value_schema:
            schema = DataType.fromDDL(config.value_schema)  # checked by build_plan
            if isinstance(schema, StructType):
                types = {f.name: f.dataType.simpleString() for f in schema.fields}
        dead_letters = None
        if config.errors_tolerance == "all" and config.dead_letter_topic:
            dead_letters = DeadLetterQueue(config.dead_letter_topic,
                                           config.source.client_config(), config.name)
        return cls(config.errors_tolerance, types, dead_letters,
                   detail=config.value_format == "json")

    def handle(self, rows: pa.Table) -> int:
        """Raise for the first bad record (none), or send them all (all): how many."""
        records = bad_records(rows, self.value_types, self.detail)
        if not records:
            return 0
        if self.tolerance != "all" or self.dead_letters is None:
            raise records[0].error()
        self.dead_letters.send(records)
        return len(records)

    def close(self) -> None:
        if self.dead_letters is not None:
            self.dead_letters.close()
