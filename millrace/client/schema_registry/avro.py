"""``AvroSerializer`` / ``AvroDeserializer`` (Java ``KafkaAvroSerializer`` /
``KafkaAvroDeserializer``): Avro binary after the 5-byte header, with ``fastavro``.

Writing: a dict (or what ``to_dict`` makes of the value) encoded with the writer schema,
no container and no schema in the record (fastavro's ``schemaless_writer``).  Reading:
the writer's schema comes from the registry by the record's schema id (fetched and parsed
once per id); with a reader schema (given, or the subject's latest version under
``use.latest.version``) fastavro resolves the writer's data into it by Avro's rules
(defaults for added fields, promotions, aliases).  A top-level ``"bytes"`` schema is the
one exception, as in Confluent's serializers: its value is the raw bytes, with no Avro
length prefix.

Per record, the serializer does one dict lookup (topic -> header and parsed schema) and
the encoding; the deserializer one dict lookup (schema id -> parsed schemas) and the
decoding, and it checks that the datum used every byte (trailing bytes are corruption).
"""

from __future__ import annotations

import io
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from millrace.client.errors import SerializationError
from millrace.client.schema_registry.client import SchemaRegistryClient
from millrace.client.schema_registry.schemas import AVRO, AvroSchema, ParsedSchema, Schema
from millrace.client.schema_registry.serdes import (
    Converter,
    SchemaRegistryDeserializer,
    SchemaRegistrySerializer,
)
from millrace.client.schema_registry.wire_format import HEADER_SIZE, split

_ID = struct.Struct(">I")

__all__ = ["AvroDeserializer", "AvroSerializer"]


def fastavro_schema(parsed: ParsedSchema) -> Any:
    """fastavro's parsed form of ``parsed`` with its write hint, so ``schemaless_writer``
    and ``schemaless_reader`` take it as it is (and find the references' named types)
    instead of parsing it again on every record."""
    import fastavro  # here, not at the top: resolving "avro" by name imports this module

    assert isinstance(parsed, AvroSchema)
    named: dict[str, Any] = {}
    for dependency in parsed.dependencies.values():
        if isinstance(dependency, AvroSchema):
            named.update(dependency.named)
    return fastavro.parse_schema(parsed.raw, named_schemas=named)


def _is_raw_bytes(schema: Any) -> bool:
    return schema == "bytes" or (isinstance(schema, Mapping) and schema.get("type") == "bytes")


class AvroSerializer(SchemaRegistrySerializer):
    """``AvroSerializer(client, schema_str, conf={...}, to_dict=None)``; or by name
    (``value.serializer="avro"``) with ``schema.registry.url`` and
    ``value.serializer.schema`` in the producer's configs."""

    schema_type = AVRO
    _caches = ("_by_topic",)

    def __init__(self, client: SchemaRegistryClient | None = None,
                 schema_str: Schema | str | None = None,
                 conf: Mapping[str, Any] | None = None,
                 to_dict: Converter | None = None) -> None:
        super().__init__(client, schema_str, conf)
        self._to_dict = to_dict
        # topic -> (header, fastavro schema, fastavro's schemaless_writer or None for a
        # top-level "bytes" schema); written under self._lock
        self._by_topic: dict[str, tuple[bytes, Any, Any]] = {}

    def serialize(self, topic: str, data: Any,
                  headers: Sequence[tuple[str, bytes | None]] | None = None) -> bytes | None:
        if data is None:
            return None
        entry = self._by_topic.get(topic)
        if entry is None:
            entry = self._prepare(topic)
        head, schema, write = entry
        if self._to_dict is not None:
            data = self._to_dict(data)
        if write is None:
            if not isinstance(data, bytes | bytearray | memoryview):
                raise SerializationError(f"AvroSerializer: topic {topic!r}: a \"bytes\" "
                                         f"schema takes bytes, not a {type(data).__name__}")
            return head + bytes(data)
        out = io.BytesIO()
        out.write(head)
        try:
            write(out, schema, data)
        except Exception as e:  # ValueError, TypeError, KeyError, AttributeError, ...
            raise SerializationError(
                f"AvroSerializer: topic {topic!r}: the {type(data).__name__} does not fit "
                f"the schema (id {_ID.unpack_from(head, 1)[0]}): {type(e).__name__}: "
                f"{e}") from e
        return out.getvalue()

    def _prepare(self, topic: str) -> tuple[bytes, Any, Any]:
        from fastavro import schemaless_writer

        with self._lock:
            entry = self._by_topic.get(topic)
            if entry is None:
                schema_id, parsed = self._writer_schema(topic)
                schema = fastavro_schema(parsed)
                entry = (self._header(schema_id), schema,
                         None if _is_raw_bytes(schema) else schemaless_writer)
                self._by_topic[topic] = entry
            return entry


class AvroDeserializer(SchemaRegistryDeserializer):
    """``AvroDeserializer(client, schema_str=None, conf={...}, from_dict=None)``:
    ``schema_str`` is an optional reader schema; without one, records come back as their
    writer wrote them."""

    schema_type = AVRO
    _own_keys = frozenset({"return.record.name"})
    _caches = ("_by_id",)

    def __init__(self, client: SchemaRegistryClient | None = None,
                 schema_str: Schema | str | None = None,
                 conf: Mapping[str, Any] | None = None,
                 from_dict: Converter | None = None) -> None:
        super().__init__(client, schema_str, conf)
        self._from_dict = from_dict
        self._reader_schema: Any = None
        # schema id (or (topic, id) under use.latest.version) -> (writer schema, reader
        # schema, fastavro's schemaless_reader or None for a top-level "bytes" schema)
        self._by_id: dict[Any, tuple[Any, Any, Any]] = {}

    def _forget(self) -> None:
        super()._forget()
        self._reader_schema = None

    def _apply(self) -> None:
        super()._apply()
        self._return_record_name = bool(self._conf.get("return.record.name", False))

    def deserialize(self, topic: str, data: bytes | None,
                    headers: Sequence[tuple[str, bytes | None]] | None = None) -> Any:
        if data is None:
            return None
        if len(data) < HEADER_SIZE or data[0] != 0:
            split(data)  # raises, naming the problem
        schema_id = _ID.unpack_from(data, 1)[0]
        key = (topic, schema_id) if self._use_latest else schema_id
        entry = self._by_id.get(key)
        if entry is None:
            entry = self._prepare(topic, schema_id, key)
        writer, reader, read = entry
        if read is None:
            value: Any = bytes(data[HEADER_SIZE:])
        else:
            source = io.BytesIO(data)
            source.seek(HEADER_SIZE)
            try:
                value = read(source, writer, reader, self._return_record_name)
            except Exception as e:  # EOFError, SchemaResolutionError, UnicodeDecodeError, ...
                raise SerializationError(
                    f"AvroDeserializer: topic {topic!r}: the payload does not decode with "
                    f"schema id {schema_id}: {type(e).__name__}: {e}") from e
            if source.tell() != len(data):
                raise SerializationError(
                    f"AvroDeserializer: topic {topic!r}: {len(data) - source.tell()} bytes "
                    f"left after the datum written with schema id {schema_id} "
                    f"({len(data)} bytes in all): not what its writer wrote")
        return value if self._from_dict is None else self._from_dict(value)

    def _prepare(self, topic: str, schema_id: int, key: Any) -> tuple[Any, Any, Any]:
        from fastavro import schemaless_reader

        with self._lock:
            entry = self._by_id.get(key)
            if entry is not None:
                return entry
            writer_parsed = self._writer(topic, schema_id)
            writer = fastavro_schema(writer_parsed)
            reader: Any = None
            if self._use_latest:
                _id, latest = self._latest(topic, writer_parsed.name())
                reader = fastavro_schema(latest)
            elif self._schema is not None:
                if self._reader_schema is None:
                    self._reader_schema = fastavro_schema(self.client.parse(self._schema))
                reader = self._reader_schema
            entry = (writer, reader, None if _is_raw_bytes(writer) else schemaless_reader)
            self._by_id[key] = entry
            return entry

    def _needs_registry(self) -> bool:
        return True
