"""``JsonSchemaSerializer`` / ``JsonSchemaDeserializer`` (Java ``KafkaJsonSchemaSerializer``
/ ``KafkaJsonSchemaDeserializer``): UTF-8 JSON after the 5-byte header.

The JSON is compact (``,`` and ``:`` with no spaces) and keeps non-ASCII characters as
they are, the text confluent-kafka writes, so the bytes agree.  The serializer validates
each value against the schema with ``jsonschema`` first (``validate``, default true;
``json.fail.invalid.schema`` in a client's configs); the deserializer validates only when
asked (``validate``, default false): a reader trusts what was checked on the way in.  The
record name a RecordNameStrategy uses is the schema's ``title``.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from millrace.client.errors import SerializationError
from millrace.client.schema_registry.client import SchemaRegistryClient
from millrace.client.schema_registry.schemas import JSON, JsonSchema, Schema
from millrace.client.schema_registry.serdes import (
    Converter,
    SchemaRegistryDeserializer,
    SchemaRegistrySerializer,
)
from millrace.client.schema_registry.wire_format import HEADER_SIZE, split

_ID = struct.Struct(">I")
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode

__all__ = ["JsonSchemaDeserializer", "JsonSchemaSerializer"]


def _validation_message(e: Exception) -> str:
    path = "/".join(str(p) for p in getattr(e, "absolute_path", ()))
    message = getattr(e, "message", str(e))
    return f"at /{path}: {message}" if path else message


def _validate_flag(conf: Mapping[str, Any], default: bool) -> bool:
    value = conf.get("validate", conf.get("json.fail.invalid.schema", default))
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)


class JsonSchemaSerializer(SchemaRegistrySerializer):
    """``JsonSchemaSerializer(client, schema_str, conf={...}, to_dict=None)``."""

    schema_type = JSON
    _own_keys = frozenset({"validate", "json.fail.invalid.schema"})
    _caches = ("_by_topic",)

    def __init__(self, client: SchemaRegistryClient | None = None,
                 schema_str: Schema | str | None = None,
                 conf: Mapping[str, Any] | None = None,
                 to_dict: Converter | None = None) -> None:
        super().__init__(client, schema_str, conf)
        self._to_dict = to_dict
        self._by_topic: dict[str, tuple[bytes, Any]] = {}  # topic -> (header, validator)

    def _apply(self) -> None:
        super()._apply()
        self._validate = _validate_flag(self._conf, True)

    def serialize(self, topic: str, data: Any,
                  headers: Sequence[tuple[str, bytes | None]] | None = None) -> bytes | None:
        if data is None:
            return None
        entry = self._by_topic.get(topic)
        if entry is None:
            entry = self._prepare(topic)
        head, validator = entry
        if self._to_dict is not None:
            data = self._to_dict(data)
        if validator is not None:
            error = next(validator.iter_errors(data), None)
            if error is not None:
                raise SerializationError(
                    f"JsonSchemaSerializer: topic {topic!r}: the value does not validate "
                    f"against the schema (id {_ID.unpack_from(head, 1)[0]}) "
                    f"{_validation_message(error)}")
        try:
            return head + _dumps(data).encode("utf-8")
        except (TypeError, ValueError) as e:
            raise SerializationError(f"JsonSchemaSerializer: topic {topic!r}: {e}") from e

    def _prepare(self, topic: str) -> tuple[bytes, Any]:
        with self._lock:
            entry = self._by_topic.get(topic)
            if entry is None:
                schema_id, parsed = self._writer_schema(topic)
                assert isinstance(parsed, JsonSchema)
                entry = (self._header(schema_id), parsed.validator if self._validate else None)
                self._by_topic[topic] = entry
            return entry


class JsonSchemaDeserializer(SchemaRegistryDeserializer):
    """``JsonSchemaDeserializer(client, schema_str=None, conf={"validate": True},
    from_dict=None)``: with ``validate``, checks each value against ``schema_str`` when
    given, the subject's latest version under ``use.latest.version``, else the writer's
    schema."""

    schema_type = JSON
    _own_keys = frozenset({"validate", "json.fail.invalid.schema"})
    _caches = ("_by_id",)

    def __init__(self, client: SchemaRegistryClient | None = None,
                 schema_str: Schema | str | None = None,
                 conf: Mapping[str, Any] | None = None,
                 from_dict: Converter | None = None) -> None:
        super().__init__(client, schema_str, conf)
        self._from_dict = from_dict
        # schema id (or (topic, id) under use.latest.version) -> validator or None
        self._by_id: dict[Any, Any] = {}

    def _apply(self) -> None:
        super()._apply()
        self._validate = _validate_flag(self._conf, False)

    def deserialize(self, topic: str, data: bytes | None,
                    headers: Sequence[tuple[str, bytes | None]] | None = None) -> Any:
        if data is None:
            return None
        if len(data) < HEADER_SIZE or data[0] != 0:
            split(data)  # raises, naming the problem
        schema_id = _ID.unpack_from(data, 1)[0]
        key = (topic, schema_id) if self._use_latest else schema_id
        if key in self._by_id:
            validator = self._by_id[key]
        else:
            validator = self._prepare(topic, schema_id, key)
        try:
            value = json.loads(data[HEADER_SIZE:])
        except (ValueError, UnicodeDecodeError) as e:
            raise SerializationError(f"JsonSchemaDeserializer: topic {topic!r}: the payload "
                                     f"(schema id {schema_id}) is not JSON: {e}") from e
        if validator is not None:
            error = next(validator.iter_errors(value), None)
            if error is not None:
                raise SerializationError(
                    f"JsonSchemaDeserializer: topic {topic!r}: the value (schema id "
                    f"{schema_id}) does not validate {_validation_message(error)}")
        return value if self._from_dict is None else self._from_dict(value)

    def _prepare(self, topic: str, schema_id: int, key: Any) -> Any:
        with self._lock:
            if key in self._by_id:
                return self._by_id[key]
            writer = self._writer(topic, schema_id)  # an unknown id fails here
            validator = None
            if self._validate:
                if self._use_latest:
                    parsed = self._latest(topic, writer.name())[1]
                elif self._schema is not None:
                    parsed = self.client.parse(self._schema)
                else:
                    parsed = writer
                assert isinstance(parsed, JsonSchema)
                validator = parsed.validator
            self._by_id[key] = validator
            return validator
