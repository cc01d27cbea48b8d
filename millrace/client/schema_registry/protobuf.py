"""``ProtobufSerializer`` / ``ProtobufDeserializer`` (Java ``KafkaProtobufSerializer`` /
``KafkaProtobufDeserializer``): the message-index array and the message bytes after the
5-byte header.

The schema is the message's own file: a value is a protobuf ``Message``, and its
``DESCRIPTOR.file`` serialized and base64-encoded is the schema text (what confluent-kafka
registers, so the two register the same schema and get the same id).  The files it
imports are registered first, each under its file name as the subject, and named as
references -- except the well-known ``google/protobuf/...`` types the registry knows
(``skip.known.types``, default true).  The message-index array locates the message in
its file (``[0]``: the first top-level message, written as one 0 byte).

Reading needs no generated code: without a ``message_type`` the deserializer builds the
class from the writer's registered schema (a descriptor pool per schema, one class per
schema id and message index), so any topic decodes to ``Message`` objects.  Protobuf
decodes by field number, so ``use.latest.version`` changes nothing on the read side: a
field the class does not know stays in the message's unknown fields.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from millrace.client.errors import SerializationError
from millrace.client.schema_registry.client import SchemaRegistryClient, SchemaRegistryError
from millrace.client.schema_registry.schemas import (
    PROTOBUF,
    InvalidSchemaError,
    ProtobufSchema,
    Schema,
    SchemaReference,
)
from millrace.client.schema_registry.serdes import (
    SchemaRegistryDeserializer,
    SchemaRegistrySerializer,
)
from millrace.client.schema_registry.wire_format import (
    HEADER_SIZE,
    decode_message_indexes,
    encode_message_indexes,
    split,
)
from millrace.client.serialization import load_class
from millrace.common.errors import ConfigError

_ID = struct.Struct(">I")
_KNOWN_PREFIXES = ("google/protobuf/", "google/type/", "confluent/")

__all__ = ["ProtobufDeserializer", "ProtobufSerializer", "file_schema"]


def file_schema(file: Any, references: Sequence[SchemaReference] = ()) -> Schema:
    """The registry's schema of a protobuf ``FileDescriptor``: base64 of its bytes."""
    return Schema(base64.standard_b64encode(file.serialized_pb).decode("ascii"), PROTOBUF,
                  tuple(references))


class ProtobufSerializer(SchemaRegistrySerializer):
    """``ProtobufSerializer(client, message_type=None, conf={...})``: serializes
    ``Message`` objects (of ``message_type`` only, when given)."""

    schema_type = PROTOBUF
    _own_keys = frozenset({"skip.known.types"})
    _caches = ("_by_type",)

    def __init__(self, client: SchemaRegistryClient | None = None,
                 message_type: type | None = None,
                 conf: Mapping[str, Any] | None = None) -> None:
        super().__init__(client, None, conf)
        self._message_type = message_type
        # message class -> topic -> header with the message indexes; written under _lock
        self._by_type: dict[type, dict[str, bytes]] = {}

    def _apply(self) -> None:
        super()._apply()
        value = self._conf.get("skip.known.types", True)
        self._skip_known = value if isinstance(value, bool) else str(value).lower() == "true"

    def serialize(self, topic: str, data: Any,
                  headers: Sequence[tuple[str, bytes | None]] | None = None) -> bytes | None:
        if data is None:
            return None
        by_topic = self._by_type.get(type(data))
        head = by_topic.get(topic) if by_topic is not None else None
        if head is None:
            head = self._prepare(topic, data)
        try:
            return head + data.SerializeToString()
        except Exception as e:  # EncodeError: a required field is missing
            raise SerializationError(f"ProtobufSerializer: topic {topic!r}: "
                                     f"{type(e).__name__}: {e}") from e

    def _prepare(self, topic: str, data: Any) -> bytes:
        descriptor = getattr(data, "DESCRIPTOR", None)
        if descriptor is None or not hasattr(data, "SerializeToString"):
            raise SerializationError(f"ProtobufSerializer: topic {topic!r}: expected a "
                                     f"protobuf Message, got a {type(data).__name__}")
        if self._message_type is not None and not isinstance(data, self._message_type):
            raise SerializationError(
                f"ProtobufSerializer: topic {topic!r}: expected a "
                f"{self._message_type.__name__}, got a {type(data).__name__}")
        with self._lock:
            by_topic = self._by_type.setdefault(type(data), {})
            head = by_topic.get(topic)
            if head is None:
                schema = file_schema(descriptor.file, self._references(descriptor.file))
                schema_id, parsed = self._writer_schema(topic, schema, descriptor.full_name)
                assert isinstance(parsed, ProtobufSchema)
                try:
                    indexes = parsed.indexes_of(descriptor.full_name)
                except InvalidSchemaError as e:
                    raise SerializationError(f"ProtobufSerializer: topic {topic!r}: schema "
                                             f"id {schema_id}: {e}") from e
                head = self._header(schema_id) + encode_message_indexes(indexes)
                by_topic[topic] = head
            return head

    def _references(self, file: Any) -> list[SchemaReference]:
        """Register (or look up) the files ``file`` imports; their references."""
        if self._use_latest:
            return []  # the latest version's references are the registry's
        references = []
        for dependency in file.dependencies:
            if self._skip_known and dependency.name.startswith(_KNOWN_PREFIXES):
                continue
            schema = file_schema(dependency, self._references(dependency))
            subject = dependency.name
            try:
                if self._auto_register:
                    self.client.register_schema(subject, schema, self._normalize)
                version = self.client.lookup_schema(subject, schema, self._normalize).version
            except SchemaRegistryError as e:
                raise self._registry_error(f"the import {subject!r}", e) from e
            references.append(SchemaReference(dependency.name, subject, version))
        return references


class ProtobufDeserializer(SchemaRegistryDeserializer):
    """``ProtobufDeserializer(client, message_type=None, conf={...})``: a ``Message`` of
    ``message_type``, or of a class built from the writer's schema when none is given."""

    schema_type = PROTOBUF
    _caches = ("_classes",)

    def __init__(self, client: SchemaRegistryClient | None = None,
                 message_type: type | None = None,
                 conf: Mapping[str, Any] | None = None) -> None:
        super().__init__(client, None, conf)
        self._message_type = message_type
        # schema id (message index [0]) or (id, indexes) -> the message class
        self._classes: dict[Any, Any] = {}

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        name = "specific.protobuf.key.type" if is_key else "specific.protobuf.value.type"
        value = configs.get(name)
        if self._message_type is None and value is not None:
            self._message_type = load_class(value, name) if isinstance(value, str) else value
            if not isinstance(self._message_type, type):
                raise ConfigError(f"Invalid value {value!r} for configuration {name}: "
                                  "not a protobuf message class")
        super().configure(configs, is_key)

    def _needs_registry(self) -> bool:
        return self._message_type is None

    def deserialize(self, topic: str, data: bytes | None,
                    headers: Sequence[tuple[str, bytes | None]] | None = None) -> Any:
        if data is None:
            return None
        if len(data) <= HEADER_SIZE or data[0] != 0:
            if len(data) == HEADER_SIZE and data[0] == 0:
                raise SerializationError(f"ProtobufDeserializer: topic {topic!r}: the payload "
                                         "ends before its message-index array")
            split(data)  # raises, naming the problem
        schema_id = _ID.unpack_from(data, 1)[0]
        if data[HEADER_SIZE] == 0:  # the message indexes [0], as one byte
            key: Any = schema_id
            body = data[HEADER_SIZE + 1:]
        else:
            try:
                indexes, rest = decode_message_indexes(memoryview(data)[HEADER_SIZE:])
            except SerializationError as e:
                raise SerializationError(f"ProtobufDeserializer: topic {topic!r}: schema id "
                                         f"{schema_id}: {e}") from e
            key = (schema_id, tuple(indexes))
            body = bytes(rest)
        cls = self._classes.get(key)
        if cls is None:
            cls = self._prepare(topic, schema_id, key)
        try:
            return cls.FromString(body)
        except Exception as e:  # DecodeError
            raise SerializationError(
                f"ProtobufDeserializer: topic {topic!r}: the payload does not decode as "
                f"{cls.DESCRIPTOR.full_name} (schema id {schema_id}): {e}") from e

    def _prepare(self, topic: str, schema_id: int, key: Any) -> Any:
        with self._lock:
            cls = self._classes.get(key)
            if cls is not None:
                return cls
            indexes = [0] if isinstance(key, int) else list(key[1])
            if self._client is None:  # a message class and no registry: trust the id
                cls = self._message_type
            else:
                parsed = self._writer(topic, schema_id)  # an unknown id fails here
                assert isinstance(parsed, ProtobufSchema)
                try:
                    descriptor = parsed.message(indexes)
                except InvalidSchemaError as e:
                    raise SerializationError(f"ProtobufDeserializer: topic {topic!r}: schema "
                                             f"id {schema_id}: {e}") from e
                if self._message_type is not None:
                    cls = self._message_type
                else:
                    from google.protobuf import message_factory

                    cls = message_factory.GetMessageClass(descriptor)
            self._classes[key] = cls
            return cls
