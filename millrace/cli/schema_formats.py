"""The console producer's and consumer's schema formats: JSON lines in and out of the
registry's serializers (``millrace produce|consume --value-format avro|json-schema|protobuf``).

Writing, each input line is a JSON document converted to the schema's types before the
serializer sees it, so a line that does not fit says where (``at /items/2/price: expected
a double, got "abc"``) instead of leaving it to fastavro's or protobuf's messages:

- Avro: records take exactly their fields (an unknown field is refused; a missing one
  takes its default); ``int``/``long`` must be integers in range; ``bytes`` and ``fixed``
  are base64; ``float``/``double`` take numbers or ``"NaN"``/``"Infinity"``/
  ``"-Infinity"``; a union takes a plain value (its first branch that fits) or Avro's JSON
  encoding ``{"branch name": value}``; logical types take what fastavro writes (``date``,
  ``timestamp-*``, ``time-*`` as ISO 8601 text or the number; ``decimal`` as a number or
  a string; ``uuid`` as text).
- JSON Schema: the document itself, validated with ``jsonschema`` (the error's path named).
- Protobuf: protobuf's JSON mapping (``json_format.ParseDict``) into the schema file's
  first message; ``int64`` as a number or a string, ``bytes`` base64, enums by name.

Reading, values come back as JSON: ``bytes`` as base64, ``long`` and ``int64`` as numbers,
decimals as strings (exact), dates and times as ISO 8601 text, protobuf fields under their
``.proto`` names (fields without presence always shown, enums by name).

The subject is the TopicNameStrategy's (``<topic>-value``, ``<topic>-key``); the schema is
registered before the first line is read, so a registry problem is not blamed on a line.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import decimal
import math
import uuid
from collections.abc import Mapping
from typing import Any

from millrace.client.schema_registry.client import SchemaRegistryClient
from millrace.client.schema_registry.schemas import (
    AVRO,
    JSON,
    PROTOBUF,
    AvroSchema,
    JsonSchema,
    ParsedSchema,
    ProtobufSchema,
    Schema,
)

FORMATS: dict[str, str] = {"avro": AVRO, "json-schema": JSON, "protobuf": PROTOBUF}

_INT32 = (-(2 ** 31), 2 ** 31 - 1)
_INT64 = (-(2 ** 63), 2 ** 63 - 1)
_NAMED = ("record", "error", "enum", "fixed")
_PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
_SPECIAL_FLOATS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class DoesNotFit(ValueError):
    """A value does not fit the schema; the message names where."""


def _show(value: Any) -> str:
    import json

    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _at(path: str) -> str:
    return f"at {path or '/'}: "


# ---------------------------------------------------------------------- JSON -> Avro
def json_to_avro(parsed: AvroSchema, value: Any) -> Any:
    """``value`` (parsed JSON) as the datum fastavro writes with ``parsed``'s schema."""
    return _avro(parsed.parsed, value, parsed.named, "", False)


def _branch_name(branch: Any) -> str:
    """The name fastavro's union tuple notation matches a branch by."""
    if isinstance(branch, Mapping):
        kind = branch.get("type")
        return str(branch["name"]) if kind in _NAMED else str(kind)
    return str(branch)


def _avro(schema: Any, value: Any, named: Mapping[str, Any], path: str,
          default: bool) -> Any:
    """``default``: ``value`` is a field's default (Avro's JSON encoding: bytes as
    ISO-8859-1 text, a union's value for its first branch)."""
    if isinstance(schema, list):
        return _union(schema, value, named, path, default)
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _primitive(schema, None, value, path, default)
        if schema not in named:
            raise DoesNotFit(f"{_at(path)}unknown type {schema!r}")
        return _avro(named[schema], value, named, path, default)
    kind = schema.get("type")
    if kind in _PRIMITIVES:
        return _primitive(kind, schema, value, path, default)
    if kind in ("record", "error"):
        return _record(schema, value, named, path)
    if kind == "enum":
        if not isinstance(value, str) or value not in schema["symbols"]:
            raise DoesNotFit(f"{_at(path)}expected one of the symbols "
                             f"{', '.join(schema['symbols'])}, got {_show(value)}")
        return value
    if kind == "array":
        if not isinstance(value, list):
            raise DoesNotFit(f"{_at(path)}expected an array, got {_show(value)}")
        return [_avro(schema["items"], v, named, f"{path}/{i}", default)
                for i, v in enumerate(value)]
    if kind == "map":
        if not isinstance(value, dict):
            raise DoesNotFit(f"{_at(path)}expected an object (a map), got {_show(value)}")
        return {k: _avro(schema["values"], v, named, f"{path}/{k}", default)
                for k, v in value.items()}
    if kind == "fixed":
        if schema.get("logicalType") == "decimal":
            return _decimal(value, schema, path)
        data = _bytes(value, path, default)
        if len(data) != schema["size"]:
            raise DoesNotFit(f"{_at(path)}expected {schema['size']} bytes (fixed "
                             f"{schema['name']}), got {len(data)}")
        return data
    return _avro(kind, value, named, path, default)  # {"type": <another schema>}


def _record(schema: Mapping[str, Any], value: Any, named: Mapping[str, Any],
            path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DoesNotFit(f"{_at(path)}expected an object (record {schema['name']}), got "
                         f"{_show(value)}")
    fields = {f["name"]: f for f in schema["fields"]}
    unknown = [k for k in value if k not in fields]
    if unknown:
        raise DoesNotFit(f"{_at(path)}unknown field {unknown[0]!r} (record "
                         f"{schema['name']} has {', '.join(fields) or 'no fields'})")
    out: dict[str, Any] = {}
    for name, field in fields.items():
        if name in value:
            out[name] = _avro(field["type"], value[name], named, f"{path}/{name}", False)
        elif "default" in field:
            out[name] = _avro(field["type"], field["default"], named, f"{path}/{name}", True)
        else:
            raise DoesNotFit(f"{_at(path)}missing field {name!r} (it has no default)")
    return out


def _union(branches: list[Any], value: Any, named: Mapping[str, Any], path: str,
           default: bool) -> Any:
    names = [_branch_name(b) for b in branches]
    if default:  # a union's default is for its first branch
        return (names[0], _avro(branches[0], value, named, path, True))
    order = list(range(len(branches)))
    if isinstance(value, float) and "double" in names:  # no precision lost to "float"
        order.sort(key=lambda i: names[i] != "double")
    reasons: list[str] = []
    for i in order:
        try:
            return (names[i], _avro(branches[i], value, named, path, False))
        except DoesNotFit as e:
            reasons.append(str(e))
    if isinstance(value, dict) and len(value) == 1:  # Avro's JSON encoding of a union
        [(key, inner)] = value.items()
        for i, name in enumerate(names):
            if key == name or name.rsplit(".", 1)[-1] == key:
                return (name, _avro(branches[i], inner, named, f"{path}/{key}", False))
    raise DoesNotFit(f"{_at(path)}{_show(value)} fits none of the union's branches "
                     f"({', '.join(names)})")


def _integer(value: Any, bounds: tuple[int, int], what: str, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise DoesNotFit(f"{_at(path)}expected {what}, got {_show(value)}")
    if not bounds[0] <= value <= bounds[1]:
        raise DoesNotFit(f"{_at(path)}{value} is out of range for {what}")
    return value


def _bytes(value: Any, path: str, default: bool) -> bytes:
    if not isinstance(value, str):
        raise DoesNotFit(f"{_at(path)}expected bytes as base64 text, got {_show(value)}")
    if default:
        return value.encode("latin-1")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise DoesNotFit(f"{_at(path)}expected bytes as base64 text, got "
                         f"{_show(value)}") from None


def _parsed_text(value: Any, parse: Any, what: str, path: str) -> Any:
    try:
        return parse(value)
    except ValueError:
        raise DoesNotFit(f"{_at(path)}expected {what}, got {_show(value)}") from None


def _primitive(kind: str, schema: Mapping[str, Any] | None, value: Any, path: str,
               default: bool) -> Any:
    logical = schema.get("logicalType") if schema is not None else None
    if kind == "null":
        if value is not None:
            raise DoesNotFit(f"{_at(path)}expected null, got {_show(value)}")
        return None
    if kind == "boolean":
        if not isinstance(value, bool):
            raise DoesNotFit(f"{_at(path)}expected true or false, got {_show(value)}")
        return value
    if kind in ("int", "long"):
        if isinstance(value, str) and logical is not None:
            return _logical_text(logical, value, path)
        return _integer(value, _INT32 if kind == "int" else _INT64,
                        f"an {kind}" if kind == "int" else "a long", path)
    if kind in ("float", "double"):
        if isinstance(value, str) and value in _SPECIAL_FLOATS:
            return _SPECIAL_FLOATS[value]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise DoesNotFit(f"{_at(path)}expected a {kind}, got {_show(value)}")
        return float(value)
    if kind == "bytes":
        if logical == "decimal":
            return _decimal(value, schema, path)
        return _bytes(value, path, default)
    # string
    if not isinstance(value, str):
        raise DoesNotFit(f"{_at(path)}expected a string, got {_show(value)}")
    if logical == "uuid":
        _parsed_text(value, uuid.UUID, "a UUID", path)
    return value


def _logical_text(logical: str, value: str, path: str) -> Any:
    if logical == "date":
        return _parsed_text(value, datetime.date.fromisoformat, "a date (YYYY-MM-DD)", path)
    if logical in ("time-millis", "time-micros"):
        return _parsed_text(value, datetime.time.fromisoformat, "a time (HH:MM:SS)", path)
    if logical in ("timestamp-millis", "timestamp-micros", "local-timestamp-millis",
                   "local-timestamp-micros"):
        stamp = _parsed_text(value, datetime.datetime.fromisoformat,
                             "an ISO 8601 timestamp", path)
        if logical.startswith("timestamp") and stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=datetime.UTC)
        return stamp
    raise DoesNotFit(f"{_at(path)}expected a number, got {_show(value)}")


def _decimal(value: Any, schema: Mapping[str, Any] | None, path: str) -> decimal.Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise DoesNotFit(f"{_at(path)}expected a decimal (a number or a string), got "
                         f"{_show(value)}")
    try:
        number = decimal.Decimal(str(value))
    except decimal.InvalidOperation:
        raise DoesNotFit(f"{_at(path)}expected a decimal, got {_show(value)}") from None
    scale = int((schema or {}).get("scale", 0))
    exponent = number.as_tuple().exponent
    if not number.is_finite() or (isinstance(exponent, int) and -exponent > scale):
        raise DoesNotFit(f"{_at(path)}{value} has more than the schema's {scale} decimal "
                         "places")
    return number


# ---------------------------------------------------------------------- JSON -> others
def json_schema_problem(parsed: JsonSchema, value: Any) -> str | None:
    """Why ``value`` does not validate against ``parsed`` (the first error), or None."""
    error = next(parsed.validator.iter_errors(value), None)
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{_at('/' + where if where else '')}{error.message}"


def protobuf_class(parsed: ProtobufSchema) -> Any:
    """The class of the schema file's first message."""
    from google.protobuf import message_factory

    return message_factory.GetMessageClass(parsed.message([0]))


def json_to_protobuf(cls: Any, value: Any) -> Any:
    from google.protobuf import json_format

    if not isinstance(value, dict):
        raise DoesNotFit(f"{_at('')}expected an object (message "
                         f"{cls.DESCRIPTOR.full_name}), got {_show(value)}")
    try:
        return json_format.ParseDict(value, cls())
    except json_format.ParseError as e:
        raise DoesNotFit(" ".join(str(e).split())) from None


# ---------------------------------------------------------------------- decoded -> JSON
def to_json(value: Any) -> Any:
    """A decoded Avro / JSON Schema value, or a protobuf message, as plain JSON values."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, datetime.date | datetime.time):  # datetime is a date
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if hasattr(value, "DESCRIPTOR") and hasattr(value, "ListFields"):
        return _message_json(value)
    return str(value)


def _message_json(message: Any) -> dict[str, Any]:
    descriptor = message.DESCRIPTOR
    if descriptor.full_name.startswith("google.protobuf."):  # Timestamp, wrappers...
        from google.protobuf import json_format

        return json_format.MessageToDict(message, preserving_proto_field_name=True)
    out: dict[str, Any] = {}
    for field in descriptor.fields:
        if field.has_presence and not field.is_repeated and not message.HasField(field.name):
            continue
        value = getattr(message, field.name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            out[field.name] = {str(k): _field_json(value_field, v) for k, v in value.items()}
        elif field.is_repeated:
            out[field.name] = [_field_json(field, v) for v in value]
        else:
            out[field.name] = _field_json(field, value)
    return out


def _field_json(field: Any, value: Any) -> Any:
    if field.enum_type is not None:
        symbol = field.enum_type.values_by_number.get(value)
        return symbol.name if symbol is not None else value
    return to_json(value)


# ---------------------------------------------------------------------- the codecs
class RecordEncoder:
    """JSON values -> framed bytes for one side (key or value) of one topic."""

    def __init__(self, client: SchemaRegistryClient, fmt: str, schema: Schema,
                 parsed: ParsedSchema, topic: str, is_key: bool) -> None:
        self.topic = topic
        self.subject = f"{topic}-{'key' if is_key else 'value'}"
        self._parsed = parsed
        self._client = client
        self._message_class: Any = None
        serializer: Any
        if fmt == "avro":
            from millrace.client.schema_registry.avro import AvroSerializer

            serializer = AvroSerializer(client, schema)
            self._registered = schema
        elif fmt == "json-schema":
            from millrace.client.schema_registry.json_schema import JsonSchemaSerializer

            serializer = JsonSchemaSerializer(client, schema, {"validate": False})
            self._registered = schema
        else:
            from millrace.client.schema_registry.protobuf import (
                ProtobufSerializer,
                file_schema,
            )

            assert isinstance(parsed, ProtobufSchema)
            self._message_class = protobuf_class(parsed)
            serializer = ProtobufSerializer(client)
            self._registered = file_schema(self._message_class.DESCRIPTOR.file)
        serializer.configure({}, is_key)
        self._serializer = serializer

    def register(self) -> int:
        """Register the schema under the subject now (the serializer then finds the id in
        the client's cache); ``SchemaRegistryError`` when the registry refuses."""
        return self._client.register_schema(self.subject, self._registered)

    def encode(self, value: Any) -> bytes:
        """``DoesNotFit`` when ``value`` does not fit the schema."""
        from millrace.client.errors import SerializationError

        parsed = self._parsed
        if isinstance(parsed, AvroSchema):
            datum = json_to_avro(parsed, value)
        elif isinstance(parsed, JsonSchema):
            problem = json_schema_problem(parsed, value)
            if problem is not None:
                raise DoesNotFit(problem)
            datum = value
        else:
            datum = json_to_protobuf(self._message_class, value)
        try:
            data = self._serializer.serialize(self.topic, datum)
        except SerializationError as e:
            raise DoesNotFit(str(e)) from None
        assert data is not None
        return bytes(data)


class RecordDecoder:
    """Framed bytes -> JSON values (any schema id the registry knows)."""

    def __init__(self, client: SchemaRegistryClient, fmt: str) -> None:
        deserializer: Any
        if fmt == "avro":
            from millrace.client.schema_registry.avro import AvroDeserializer

            deserializer = AvroDeserializer(client)
        elif fmt == "json-schema":
            from millrace.client.schema_registry.json_schema import JsonSchemaDeserializer

            deserializer = JsonSchemaDeserializer(client)
        else:
            from millrace.client.schema_registry.protobuf import ProtobufDeserializer

            deserializer = ProtobufDeserializer(client)
        self.format = fmt
        self._deserializer = deserializer

    def decode(self, topic: str, data: bytes | None) -> Any:
        """``SerializationError`` when the bytes do not decode."""
        return to_json(self._deserializer.deserialize(topic, data))
