"""Serializers and deserializers (Java ``org.apache.kafka.common.serialization``).

A ``Serializer`` turns a key or value into bytes (``None`` stays ``None``: a null key, or
a tombstone value).  The built-ins encode exactly as Kafka's Java ones do, so the bytes
interoperate: ``IntegerSerializer`` 4 bytes big-endian, ``LongSerializer`` 8,
``DoubleSerializer`` IEEE-754 big-endian, ``StringSerializer`` UTF-8.  ``JsonSerializer``
writes compact UTF-8 JSON.  A serializer that cannot convert its input raises
``SerializationError``; the producer lets it propagate from ``send()`` before anything
is buffered.

``resolve`` accepts what a config may hold: an instance, a class, a callable, a short
name (``"str"``, ``"int"``, ``"json"``...), a Java class name
(``org.apache.kafka.common.serialization.StringSerializer``) or a dotted Python path.
The schema-registry serializers of ``millrace.client.schema_registry`` resolve by the
names ``"avro"``, ``"json-schema"`` and ``"protobuf"`` (or Confluent's Java class names),
imported on first use.
"""

from __future__ import annotations

import importlib
import json
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from millrace.client.errors import SerializationError
from millrace.common.errors import ConfigError

T = TypeVar("T")

_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_SHORT = struct.Struct(">h")
_DOUBLE = struct.Struct(">d")
_FLOAT = struct.Struct(">f")


class Serializer(Generic[T]):
    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        """Called once with the client's configuration."""

    def serialize(self, topic: str, data: T | None,
                  headers: Sequence[tuple[str, bytes | None]] | None = None) -> bytes | None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class Deserializer(Generic[T]):
    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        """Called once with the client's configuration."""

    def deserialize(self, topic: str, data: bytes | None,
                    headers: Sequence[tuple[str, bytes | None]] | None = None) -> T | None:
        raise NotImplementedError

    def close(self) -> None:
        pass


def _type_error(what: str, data: Any, expected: str) -> SerializationError:
    return SerializationError(f"{what} cannot serialize a {type(data).__name__}; "
                              f"expected {expected}")


class ByteArraySerializer(Serializer[bytes]):
    """Passes bytes through (``bytearray``/``memoryview`` are copied to ``bytes``)."""

    def serialize(self, topic: str, data: Any,
                  headers: Sequence[tuple[str, bytes | None]] | None = None) -> bytes | None:
        if data is None or type(data) is bytes:
            return data
        if isinstance(data, bytes | bytearray | memoryview):
            return bytes(data)
        raise _type_error("ByteArraySerializer", data, "bytes")


class StringSerializer(Serializer[str]):
    def __init__(self, encoding: str = "utf-8") -> None:
        self.encoding = encoding

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        name = "key.serializer.encoding" if is_key else "value.serializer.encoding"
        self.encoding = configs.get(name, configs.get("serializer.encoding", self.encoding))

    def serialize(self, topic: str, data: Any,
                  headers: Sequence[tuple[str, bytes | None]] | None = None) -> bytes | None:
        if data is None:
            return None
        if not isinstance(data, str):
            raise _type_error("StringSerializer", data, "str")
        try:
            return data.encode(self.encoding)
        except UnicodeError as e:
            raise SerializationError(f"StringSerializer: {e}") from e


class _StructSerializer(Serializer[Any]):
    _struct: struct.Struct
    _kind: str
    _accepts: tuple[type, ...] = (int,)

    def serialize(self, topic: str, data: Any,
                  headers: Sequence[tuple[str, bytes | None]] | None = None) -> bytes | None:
        if data is None:
            return None
        if isinstance(data, bool) or not isinstance(data, self._accepts):
            raise _type_error(type(self).__name__, data, self._kind)
        try:
            return self._struct.pack(data)
        except (struct.error, OverflowError) as e:
            raise SerializationError(f"{type(self).__name__}: {data!r} does not fit a "
                                     f"{self._kind}: {e}") from e


class ShortSerializer(_StructSerializer):
    _struct, _kind = _SHORT, "int16"


class IntegerSerializer(_StructSerializer):
    _struct, _kind = _INT, "int32"


class LongSerializer(_StructSerializer):
    _struct, _kind = _LONG, "int64"


class DoubleSerializer(_StructSerializer):
    _struct, _kind, _accepts = _DOUBLE, "float64", (int, float)


class FloatSerializer(_StructSerializer):
    _struct, _kind, _accepts = _FLOAT, "float32", (int, float)


class JsonSerializer(Serializer[Any]):
    """Compact UTF-8 JSON (``None`` stays a null value, not ``b"null"``)."""

    def __init__(self, **dumps_kwargs: Any) -> None:
        self._kwargs = {"separators": (",", ":"), "ensure_ascii": False, **dumps_kwargs}

    def serialize(self, topic: str, data: Any,
                  headers: Sequence[tuple[str, bytes | None]] | None = None) -> bytes | None:
        if data is None:
            return None
        try:
            return json.dumps(data, **self._kwargs).encode("utf-8")
        except (TypeError, ValueError) as e:
            raise SerializationError(f"JsonSerializer: {e}") from e


class FunctionSerializer(Serializer[Any]):
    """Wraps ``fn(data) -> bytes``; any exception becomes ``SerializationError``."""

    def __init__(self, fn: Callable[[Any], bytes | None]) -> None:
        self._fn = fn

    def serialize(self, topic: str, data: Any,
                  headers: Sequence[tuple[str, bytes | None]] | None = None) -> bytes | None:
        if data is None:
            return None
        try:
            out = self._fn(data)
        except SerializationError:
            raise
        except Exception as e:
            raise SerializationError(f"serializer {self._fn!r} failed: {e}") from e
        if out is not None and not isinstance(out, bytes):
            if isinstance(out, bytearray | memoryview):
                return bytes(out)
            raise SerializationError(f"serializer {self._fn!r} returned a "
                                     f"{type(out).__name__}, not bytes")
        return out


class ByteArrayDeserializer(Deserializer[bytes]):
    def deserialize(self, topic: str, data: bytes | None,
                    headers: Sequence[tuple[str, bytes | None]] | None = None) -> bytes | None:
        return data


class StringDeserializer(Deserializer[str]):
    def __init__(self, encoding: str = "utf-8") -> None:
        self.encoding = encoding

    def deserialize(self, topic: str, data: bytes | None,
                    headers: Sequence[tuple[str, bytes | None]] | None = None) -> str | None:
        return None if data is None else data.decode(self.encoding)


class _StructDeserializer(Deserializer[Any]):
    _struct: struct.Struct

    def deserialize(self, topic: str, data: bytes | None,
                    headers: Sequence[tuple[str, bytes | None]] | None = None) -> Any:
        if data is None:
            return None
        if len(data) != self._struct.size:
            raise SerializationError(f"{type(self).__name__}: size of data received is "
                                     f"{len(data)}, not {self._struct.size}")
        return self._struct.unpack(data)[0]


class ShortDeserializer(_StructDeserializer):
    _struct = _SHORT


class IntegerDeserializer(_StructDeserializer):
    _struct = _INT


class LongDeserializer(_StructDeserializer):
    _struct = _LONG


class DoubleDeserializer(_StructDeserializer):
    _struct = _DOUBLE


class FloatDeserializer(_StructDeserializer):
    _struct = _FLOAT


class JsonDeserializer(Deserializer[Any]):
    def deserialize(self, topic: str, data: bytes | None,
                    headers: Sequence[tuple[str, bytes | None]] | None = None) -> Any:
        return None if data is None else json.loads(data)


_SERIALIZERS: dict[str, type[Serializer[Any]]] = {
    "bytes": ByteArraySerializer, "bytearray": ByteArraySerializer,
    "str": StringSerializer, "string": StringSerializer,
    "short": ShortSerializer, "int": IntegerSerializer, "integer": IntegerSerializer,
    "long": LongSerializer, "double": DoubleSerializer, "float": FloatSerializer,
    "json": JsonSerializer,
}
_DESERIALIZERS: dict[str, type[Deserializer[Any]]] = {
    "bytes": ByteArrayDeserializer, "bytearray": ByteArrayDeserializer,
    "str": StringDeserializer, "string": StringDeserializer,
    "short": ShortDeserializer, "int": IntegerDeserializer, "integer": IntegerDeserializer,
    "long": LongDeserializer, "double": DoubleDeserializer, "float": FloatDeserializer,
    "json": JsonDeserializer,
}
_JAVA_PACKAGE = "org.apache.kafka.common.serialization."
for _cls in (ByteArraySerializer, StringSerializer, ShortSerializer, IntegerSerializer,
             LongSerializer, DoubleSerializer, FloatSerializer):
    _SERIALIZERS[_JAVA_PACKAGE + _cls.__name__] = _cls
for _dcls in (ByteArrayDeserializer, StringDeserializer, ShortDeserializer, IntegerDeserializer,
              LongDeserializer, DoubleDeserializer, FloatDeserializer):
    _DESERIALIZERS[_JAVA_PACKAGE + _dcls.__name__] = _dcls

# The schema-registry serdes, by name; imported when named (fastavro, jsonschema and
# protobuf load only in a client that uses them).
_REGISTRY_SERDES = "millrace.client.schema_registry."
_CONFLUENT_PACKAGE = "io.confluent.kafka.serializers."
_LAZY_SERIALIZERS = {
    "avro": _REGISTRY_SERDES + "avro:AvroSerializer",
    "json-schema": _REGISTRY_SERDES + "json_schema:JsonSchemaSerializer",
    "protobuf": _REGISTRY_SERDES + "protobuf:ProtobufSerializer",
    _CONFLUENT_PACKAGE + "KafkaAvroSerializer": _REGISTRY_SERDES + "avro:AvroSerializer",
    _CONFLUENT_PACKAGE + "json.KafkaJsonSchemaSerializer":
        _REGISTRY_SERDES + "json_schema:JsonSchemaSerializer",
    _CONFLUENT_PACKAGE + "protobuf.KafkaProtobufSerializer":
        _REGISTRY_SERDES + "protobuf:ProtobufSerializer",
}
_LAZY_DESERIALIZERS = {name.replace("Serializer", "Deserializer"):
                       path.replace("Serializer", "Deserializer")
                       for name, path in _LAZY_SERIALIZERS.items()}


def load_class(path: str, config_name: str) -> Any:
    """Import ``pkg.module.Name`` or ``pkg.module:Name``; ConfigError naming the key."""
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as e:
        raise ConfigError(f"Invalid value {path} for configuration {config_name}: "
                          f"Class {path} cannot be found ({e})") from None


def resolve_serializer(value: Any, config_name: str, configs: Mapping[str, Any],
                       is_key: bool) -> Serializer[Any]:
    serializer = _resolve(value, config_name, _SERIALIZERS, Serializer, ByteArraySerializer)
    if isinstance(serializer, Serializer):
        serializer.configure(configs, is_key)
        return serializer
    if callable(serializer):
        return FunctionSerializer(serializer)
    raise ConfigError(f"Invalid value {value!r} for configuration {config_name}: "
                      "not a Serializer")


def resolve_deserializer(value: Any, config_name: str, configs: Mapping[str, Any],
                         is_key: bool) -> Deserializer[Any]:
    deserializer = _resolve(value, config_name, _DESERIALIZERS, Deserializer,
                            ByteArrayDeserializer)
    if isinstance(deserializer, Deserializer):
        deserializer.configure(configs, is_key)
        return deserializer
    raise ConfigError(f"Invalid value {value!r} for configuration {config_name}: "
                      "not a Deserializer")


def _resolve(value: Any, config_name: str, names: Mapping[str, type], base: type,
             default: type) -> Any:
    if value is None:
        return default()
    if isinstance(value, str):
        name = value.strip()
        cls = names.get(name) or names.get(name.lower())
        if cls is None:
            lazy = _LAZY_SERIALIZERS if base is Serializer else _LAZY_DESERIALIZERS
            name = lazy.get(name) or lazy.get(name.lower()) or name
        value = cls if cls is not None else load_class(name, config_name)
    if isinstance(value, type):
        if not issubclass(value, base):
            raise ConfigError(f"Invalid value {value.__name__} for configuration "
                              f"{config_name}: not a {base.__name__}")
        return value()
    return value
