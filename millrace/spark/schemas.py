"""Registered schemas as Spark types: Avro and JSON Schema to Spark, Spark to Avro.

The ``format("millrace")`` source decodes registry-framed values (``registry.py``) into
typed columns; this module says which Spark type a schema becomes and turns a decoded
datum into what Arrow takes for that type.  No I/O here.

Avro (``avro_spark_type``), the mapping Spark's own ``from_avro`` uses:

==========================================  ==========================================
Avro                                        Spark
==========================================  ==========================================
null                                        (only in unions)
boolean, int, long, float, double           boolean, int, bigint, float, double
string, enum, ``uuid``                      string
bytes, fixed                                binary
``decimal(p, s)`` on bytes or fixed         decimal(p, s)  (p <= 38)
``date``                                    date
``timestamp-millis`` / ``-micros``          timestamp
``local-timestamp-millis`` / ``-micros``    timestamp_ntz
``time-millis`` / ``time-micros``           int (ms) / bigint (us) since midnight
record                                      struct (every field nullable as declared)
array / map                                 array / map<string, ...>
union of null and one type                  that type, nullable
``[int, long]`` / ``[float, double]``       bigint / double  (with or without null)
any other union                             struct<member0, member1, ...>: the branch
                                            the datum took is set, the others null
==========================================  ==========================================

A field is nullable only when its type is a union with ``null``; a recursive record
cannot be a Spark type and is refused, naming it.

JSON Schema (``json_schema_spark_type``): an ``object`` with ``properties`` becomes a
struct (a property not in ``required``, or whose type admits ``null``, is nullable;
``additionalProperties`` is not a column), ``array`` with ``items`` an array, ``string``
a string (``format`` ``date-time`` a timestamp, ``date`` a date), ``integer`` a bigint,
``number`` a double, ``boolean`` a boolean; ``$ref`` into ``$defs``/``definitions`` of
the same document is followed; anything else (``oneOf``, a type list of several
non-null types, an object without properties) is kept as its JSON text in a string.

``spark_to_avro(struct, name)`` goes the other way for the sink: a record whose fields
are the columns, a nullable column ``["null", T]`` with default null.
``spark_to_json_schema(struct, title)`` likewise: an object whose properties are the
columns, the non-nullable ones required, a nullable one admitting ``null``; and
``spark_to_protobuf(struct, name)`` a proto3 message, a nullable scalar ``optional``.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from millrace.common.errors import ConfigError

Converter = Callable[[Any], Any]
_PRIMITIVES: dict[str, DataType] = {
    "boolean": BooleanType(), "int": IntegerType(), "long": LongType(),
    "float": FloatType(), "double": DoubleType(), "string": StringType(),
    "bytes": BinaryType(),
}
_MIDNIGHT = dt.datetime(2000, 1, 1)
MAX_DECIMAL_PRECISION = 38


class SchemaMappingError(ConfigError):
    """A registered schema has no Spark type (the message names the part)."""


# ---------------------------------------------------------------------------- Avro
def avro_spark_type(schema: Any, named: Mapping[str, Any] | None = None) -> tuple[DataType, bool]:
    """(Spark type, nullable) of an Avro schema -- parsed by fastavro or as JSON.

    ``named``: full name -> definition of the named types the schema refers to by name
    (fastavro's parsed schema carries its own under ``__named_schemas``)."""
    names = dict(named or {})
    if isinstance(schema, dict):
        names.update(schema.get("__named_schemas") or {})
    return _avro(schema, names, ())


def avro_struct(schema: Any, named: Mapping[str, Any] | None = None) -> StructType:
    """A record schema's fields as a struct (the columns of a decoded value)."""
    data_type, _ = avro_spark_type(schema, named)
    if not isinstance(data_type, StructType):
        raise SchemaMappingError(f"the schema is {data_type.simpleString()}, not a record")
    return data_type


def _full_name(schema: dict[str, Any], namespace: str = "") -> str:
    name = str(schema.get("name", ""))
    ns = schema.get("namespace", namespace)
    return name if "." in name or not ns else f"{ns}.{name}"


def _avro(schema: Any, named: dict[str, Any], stack: tuple[str, ...]) -> tuple[DataType, bool]:
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema], False
        if schema == "null":
            raise SchemaMappingError("a bare null type has no Spark column type")
        if schema not in named:
            raise SchemaMappingError(f"unknown Avro type {schema!r}")
        if schema in stack:
            raise SchemaMappingError(f"record {schema} is recursive: Spark types cannot nest "
                                     "without end")
        return _avro(named[schema], named, stack)
    if isinstance(schema, list):
        return _union(schema, named, stack)
    if not isinstance(schema, dict):
        raise SchemaMappingError(f"not an Avro schema: {schema!r}")
    kind = schema.get("type")
    logical = schema.get("logicalType")
    if logical is not None:
        mapped = _logical(schema, str(logical), kind)
        if mapped is not None:
            return mapped, False
    if kind == "record" or kind == "error":
        name = _full_name(schema)
        if name in stack:
            raise SchemaMappingError(f"record {name} is recursive: Spark types cannot nest "
                                     "without end")
        named.setdefault(name, schema)
        fields = []
        for field in schema.get("fields", []):
            try:
                data_type, nullable = _avro(field["type"], named, (*stack, name))
            except SchemaMappingError as e:
                raise SchemaMappingError(f"field {name}.{field['name']}: {e}") from None
            fields.append(StructField(field["name"], data_type, nullable))
        return StructType(fields), False
    if kind in ("enum", "fixed"):
        named.setdefault(_full_name(schema), schema)
        return (StringType() if kind == "enum" else BinaryType()), False
    if kind == "array":
        items, nullable = _avro(schema["items"], named, stack)
        return ArrayType(items, nullable), False
    if kind == "map":
        values, nullable = _avro(schema["values"], named, stack)
        return MapType(StringType(), values, nullable), False
    if isinstance(kind, str | list | dict):
        return _avro(kind, named, stack)
    raise SchemaMappingError(f"not an Avro schema: {schema!r}")


def _logical(schema: dict[str, Any], logical: str, kind: Any) -> DataType | None:
    """The Spark type of a logical type, or None to use the underlying type (an unknown
    logical type, or one on the wrong base type, is ignored as Avro says)."""
    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision = int(schema.get("precision", 0))
        scale = int(schema.get("scale", 0))
        if not 0 < precision <= MAX_DECIMAL_PRECISION:
            raise SchemaMappingError(f"decimal precision {precision}: Spark's decimals hold "
                                     f"1 to {MAX_DECIMAL_PRECISION} digits")
        return DecimalType(precision, scale)
    table: dict[tuple[str, Any], DataType] = {
        ("date", "int"): DateType(),
        ("timestamp-millis", "long"): TimestampType(),
        ("timestamp-micros", "long"): TimestampType(),
        ("local-timestamp-millis", "long"): TimestampNTZType(),
        ("local-timestamp-micros", "long"): TimestampNTZType(),
        ("time-millis", "int"): IntegerType(),
        ("time-micros", "long"): LongType(),
        ("uuid", "string"): StringType(),
        ("uuid", "fixed"): StringType(),
    }
    return table.get((logical, kind if isinstance(kind, str) else None))


def _union(branches: list[Any], named: dict[str, Any], stack: tuple[str, ...]
           ) -> tuple[DataType, bool]:
    nullable = "null" in branches
    rest = [b for b in branches if b != "null"]
    if not rest:
        raise SchemaMappingError("a union of null only has no Spark column type")
    if len(rest) == 1:
        data_type, _ = _avro(rest[0], named, stack)
        return data_type, nullable
    if sorted(map(str, rest)) == ["int", "long"]:
        return LongType(), nullable
    if sorted(map(str, rest)) == ["double", "float"]:
        return DoubleType(), nullable
    members = []
    for i, branch in enumerate(rest):
        data_type, _ = _avro(branch, named, stack)
        members.append(StructField(f"member{i}", data_type, True))
    return StructType(members), nullable


def avro_converter(schema: Any, named: Mapping[str, Any] | None = None) -> Converter | None:
    """What turns fastavro's datum for ``schema`` into the Python value Arrow takes for
    ``avro_spark_type(schema)``; None when it already is (the common case: no per-record
    work)."""
    names = dict(named or {})
    if isinstance(schema, dict):
        names.update(schema.get("__named_schemas") or {})
    return _convert(schema, names, ())


def _convert(schema: Any, named: dict[str, Any], stack: tuple[str, ...]) -> Converter | None:
    if isinstance(schema, str):
        if schema in named and schema not in stack:
            return _convert(named[schema], named, (*stack, schema))
        return None
    if isinstance(schema, list):
        rest = [b for b in schema if b != "null"]
        if len(rest) == 1:
            inner = _convert(rest[0], named, stack)
            return None if inner is None else (lambda v: None if v is None else inner(v))
        if sorted(map(str, rest)) in (["int", "long"], ["double", "float"]):
            return None
        return _union_converter(rest, named, stack)
    if not isinstance(schema, dict):
        return None
    kind, logical = schema.get("type"), schema.get("logicalType")
    if logical == "time-millis" and kind == "int":
        return lambda t: None if t is None else _since_midnight_us(t) // 1000
    if logical == "time-micros" and kind == "long":
        return lambda t: None if t is None else _since_midnight_us(t)
    if logical == "uuid":
        return lambda u: None if u is None else str(u)
    if kind in ("record", "error"):
        name = _full_name(schema)
        named.setdefault(name, schema)
        converters = {f["name"]: c for f in schema.get("fields", [])
                      if (c := _convert(f["type"], named, (*stack, name))) is not None}
        if not converters:
            return None

        def record(datum: Any) -> Any:
            if datum is None:
                return None
            out = dict(datum)
            for field, convert in converters.items():
                out[field] = convert(out.get(field))
            return out

        return record
    if kind == "array":
        item = _convert(schema["items"], named, stack)
        return None if item is None else (lambda a: None if a is None else [item(x) for x in a])
    if kind == "map":
        value = _convert(schema["values"], named, stack)
        return None if value is None else (
            lambda m: None if m is None else {k: value(v) for k, v in m.items()})
    if isinstance(kind, str | list | dict) and kind not in _PRIMITIVES and kind not in (
            "enum", "fixed", "null"):
        return _convert(kind, named, stack)
    return None


def _since_midnight_us(t: dt.time | int) -> int:
    if isinstance(t, int):
        return t
    return (t.hour * 3600 + t.minute * 60 + t.second) * 1_000_000 + t.microsecond


def _union_converter(branches: list[Any], named: dict[str, Any], stack: tuple[str, ...]
                     ) -> Converter:
    """A datum of a multi-branch union -> {"member<i>": value} for the branch it took
    (fastavro hands out the bare value, so the branch is found from it)."""
    tests = [(i, _accepts(b, named), _convert(b, named, stack)) for i, b in enumerate(branches)]

    def union(datum: Any) -> Any:
        if datum is None:
            return None
        for i, accepts, convert in tests:
            if accepts(datum):
                return {f"member{i}": convert(datum) if convert is not None else datum}
        raise ValueError(f"no branch of the union takes {type(datum).__name__}")

    return union


def _accepts(schema: Any, named: dict[str, Any]) -> Callable[[Any], bool]:
    if isinstance(schema, str) and schema in named:
        schema = named[schema]
    kind = schema.get("type") if isinstance(schema, dict) else schema
    logical = schema.get("logicalType") if isinstance(schema, dict) else None
    if logical in ("timestamp-millis", "timestamp-micros", "local-timestamp-millis",
                   "local-timestamp-micros"):
        return lambda v: isinstance(v, dt.datetime)
    if logical == "date":
        return lambda v: isinstance(v, dt.date) and not isinstance(v, dt.datetime)
    if logical in ("time-millis", "time-micros"):
        return lambda v: isinstance(v, dt.time)
    if logical == "decimal":
        from decimal import Decimal

        return lambda v: isinstance(v, Decimal)
    if logical == "uuid":
        return lambda v: isinstance(v, uuid.UUID | str)
    simple: dict[str, Callable[[Any], bool]] = {
        "boolean": lambda v: isinstance(v, bool),
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "long": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "float": lambda v: isinstance(v, float),
        "double": lambda v: isinstance(v, float),
        "string": lambda v: isinstance(v, str),
        "enum": lambda v: isinstance(v, str),
        "bytes": lambda v: isinstance(v, bytes),
        "fixed": lambda v: isinstance(v, bytes),
        "array": lambda v: isinstance(v, list),
        "map": lambda v: isinstance(v, dict),
        "record": lambda v: isinstance(v, dict),
        "error": lambda v: isinstance(v, dict),
    }
    return simple.get(str(kind), lambda v: False)


# ---------------------------------------------------------------------------- JSON Schema
def json_schema_spark_type(document: Mapping[str, Any]) -> tuple[DataType, bool]:
    """(Spark type, nullable) of a JSON Schema document (see the module doc)."""
    return _json_type(dict(document), dict(document), ())


def _json_ref(root: dict[str, Any], ref: str) -> dict[str, Any]:
    if not ref.startswith("#/"):
        raise SchemaMappingError(f"$ref {ref!r}: only references into the same document "
                                 "('#/$defs/...') are mapped to Spark types")
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            raise SchemaMappingError(f"$ref {ref!r} points nowhere")
        node = node[part]
    if not isinstance(node, dict):
        raise SchemaMappingError(f"$ref {ref!r} is not a schema")
    return node


def _json_type(schema: Any, root: dict[str, Any], stack: tuple[str, ...]
               ) -> tuple[DataType, bool]:
    if schema is True or schema == {}:
        return StringType(), True
    if not isinstance(schema, dict):
        return StringType(), True
    if "$ref" in schema:
        ref = str(schema["$ref"])
        if ref in stack:
            raise SchemaMappingError(f"$ref {ref} is recursive: Spark types cannot nest "
                                     "without end")
        return _json_type(_json_ref(root, ref), root, (*stack, ref))
    kinds = schema.get("type")
    types = [kinds] if isinstance(kinds, str) else list(kinds or [])
    nullable = "null" in types
    rest = [t for t in types if t != "null"]
    if len(rest) != 1:
        return StringType(), True  # several types, or none said: the JSON text
    kind = rest[0]
    if kind == "object":
        props = schema.get("properties")
        if not isinstance(props, dict) or not props:
            return StringType(), True
        required = set(schema.get("required") or [])
        fields = []
        for name, prop in props.items():
            try:
                data_type, null = _json_type(prop, root, stack)
            except SchemaMappingError as e:
                raise SchemaMappingError(f"property {name}: {e}") from None
            fields.append(StructField(name, data_type, null or name not in required))
        return StructType(fields), nullable
    if kind == "array":
        items = schema.get("items")
        if not isinstance(items, dict):
            return ArrayType(StringType(), True), nullable
        item_type, item_null = _json_type(items, root, stack)
        return ArrayType(item_type, item_null), nullable
    if kind == "string":
        fmt = schema.get("format")
        if fmt == "date-time":
            return TimestampType(), nullable
        if fmt == "date":
            return DateType(), nullable
        return StringType(), nullable
    if kind == "integer":
        return LongType(), nullable
    if kind == "number":
        return DoubleType(), nullable
    if kind == "boolean":
        return BooleanType(), nullable
    return StringType(), True


def json_converter(data_type: DataType) -> Converter:
    """A parsed JSON document -> the Python value Arrow takes for ``data_type`` (dates and
    times parsed from their ISO text, anything kept as text dumped back to JSON).  Raises
    ``ValueError`` naming the field that does not fit."""
    if isinstance(data_type, StructType):
        fields = [(f.name, json_converter(f.dataType), f.nullable) for f in data_type.fields]

        def struct(doc: Any) -> Any:
            if doc is None:
                return None
            if not isinstance(doc, dict):
                raise ValueError(f"expected an object, got {type(doc).__name__}")
            out = {}
            for name, convert, nullable in fields:
                value = doc.get(name)
                if value is None and not nullable:
                    raise ValueError(f"required property {name} is missing or null")
                try:
                    out[name] = convert(value)
                except ValueError as e:
                    raise ValueError(f"property {name}: {e}") from None
            return out

        return struct
    if isinstance(data_type, ArrayType):
        item = json_converter(data_type.elementType)

        def array(doc: Any) -> Any:
            if doc is None:
                return None
            if not isinstance(doc, list):
                raise ValueError(f"expected an array, got {type(doc).__name__}")
            return [item(x) for x in doc]

        return array
    if isinstance(data_type, TimestampType):
        return lambda v: None if v is None else dt.datetime.fromisoformat(
            str(v).replace("Z", "+00:00"))
    if isinstance(data_type, DateType):
        return lambda v: None if v is None else dt.date.fromisoformat(str(v))
    if isinstance(data_type, StringType):
        return lambda v: v if v is None or isinstance(v, str) else json.dumps(v)
    if isinstance(data_type, LongType):
        def integer(v: Any) -> Any:
            if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
                raise ValueError(f"{json.dumps(v)[:40]} is not an integer")
            return v
        return integer
    if isinstance(data_type, DoubleType):
        def number(v: Any) -> Any:
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
                raise ValueError(f"{json.dumps(v)[:40]} is not a number")
            return None if v is None else float(v)
        return number
    if isinstance(data_type, BooleanType):
        def boolean(v: Any) -> Any:
            if v is not None and not isinstance(v, bool):
                raise ValueError(f"{json.dumps(v)[:40]} is not a boolean")
            return v
        return boolean
    return lambda v: v


# ---------------------------------------------------------------------------- Spark -> Avro
def spark_to_avro(data_type: DataType, name: str = "record", namespace: str = "") -> Any:
    """An Avro schema (as JSON-able data) for ``data_type``: a struct becomes a record
    named ``name``; nullable parts become ``["null", T]`` with default null."""
    counter = iter(range(1, 1 << 30))

    def avro(t: DataType, record_name: str) -> Any:
        if isinstance(t, StructType):
            fields = []
            for f in t.fields:
                inner = avro(f.dataType, f"{record_name}_{f.name}" if isinstance(
                    f.dataType, StructType) else record_name)
                if f.nullable:
                    fields.append({"name": f.name, "type": ["null", inner], "default": None})
                else:
                    fields.append({"name": f.name, "type": inner})
            return {"type": "record", "name": record_name, "fields": fields}
        if isinstance(t, ArrayType):
            item = avro(t.elementType, f"{record_name}_item{next(counter)}")
            return {"type": "array", "items": ["null", item] if t.containsNull else item}
        if isinstance(t, MapType):
            if not isinstance(t.keyType, StringType):
                raise SchemaMappingError(f"map keys of type {t.keyType.simpleString()}: "
                                         "Avro maps have string keys")
            value = avro(t.valueType, f"{record_name}_value{next(counter)}")
            return {"type": "map",
                    "values": ["null", value] if t.valueContainsNull else value}
        if isinstance(t, DecimalType):
            return {"type": "bytes", "logicalType": "decimal", "precision": t.precision,
                    "scale": t.scale}
        if isinstance(t, TimestampType):
            return {"type": "long", "logicalType": "timestamp-micros"}
        if isinstance(t, TimestampNTZType):
            return {"type": "long", "logicalType": "local-timestamp-micros"}
        if isinstance(t, DateType):
            return {"type": "int", "logicalType": "date"}
        for avro_name, spark_type in _PRIMITIVES.items():
            if t == spark_type:
                return avro_name
        if t.simpleString() in ("tinyint", "smallint"):
            return "int"
        raise SchemaMappingError(f"Spark type {t.simpleString()} has no Avro schema here")

    schema = avro(data_type, name)
    if namespace and isinstance(schema, dict) and schema.get("type") == "record":
        schema["namespace"] = namespace
    return schema


def spark_to_avro_converter(data_type: DataType) -> Converter | None:
    """Arrow's ``to_pylist`` value for ``data_type`` -> what fastavro writes for the schema
    of ``spark_to_avro`` (naive timestamps from Arrow's UTC ones are made aware)."""
    return _nested_converter(data_type, _avro_leaf)


def _avro_leaf(data_type: DataType) -> Converter | None:
    if isinstance(data_type, TimestampType):
        return lambda v: v if v is None or v.tzinfo is not None else v.replace(
            tzinfo=dt.UTC)
    return None


def _nested_converter(data_type: DataType, leaf: Callable[[DataType], Converter | None]
                      ) -> Converter | None:
    """A converter of ``data_type``'s values that applies ``leaf``'s converter to every
    part that is not a struct, array or map; None when no part needs one."""
    if isinstance(data_type, StructType):
        converters = {f.name: c for f in data_type.fields
                      if (c := _nested_converter(f.dataType, leaf)) is not None}
        if not converters:
            return None
        return lambda d: None if d is None else {
            k: (converters[k](v) if k in converters else v) for k, v in d.items()}
    if isinstance(data_type, ArrayType):
        item = _nested_converter(data_type.elementType, leaf)
        return None if item is None else (lambda a: None if a is None else [item(x) for x in a])
    if isinstance(data_type, MapType):
        value = _nested_converter(data_type.valueType, leaf)
        if value is None:
            return lambda m: None if m is None else dict(m)
        return lambda m: None if m is None else {k: value(v) for k, v in dict(m).items()}
    return leaf(data_type)


# ---------------------------------------------------------------------------- Spark -> JSON
def spark_to_json_schema(data_type: DataType, title: str = "record") -> dict[str, Any]:
    """A JSON Schema (draft 7, what Confluent's serializers write by default) for
    ``data_type``: a struct is an ``object`` titled ``title`` whose non-nullable fields are
    ``required`` and which allows no other properties; a nullable part admits ``null``.
    Timestamps and dates are ISO strings (``format`` ``date-time`` / ``date``, read back
    as such by the source), decimals exact decimal strings, binary base64 strings, maps
    objects of their values."""

    def nullable(schema: dict[str, Any]) -> dict[str, Any]:
        kind = schema.get("type")
        if isinstance(kind, str):
            return {**schema, "type": [kind, "null"]}
        return {"oneOf": [{"type": "null"}, schema]}

    def convert(t: DataType) -> dict[str, Any]:
        if isinstance(t, StructType):
            props = {f.name: nullable(convert(f.dataType)) if f.nullable
                     else convert(f.dataType) for f in t.fields}
            return {"type": "object", "properties": props,
                    "required": [f.name for f in t.fields if not f.nullable],
                    "additionalProperties": False}
        if isinstance(t, ArrayType):
            item = convert(t.elementType)
            return {"type": "array", "items": nullable(item) if t.containsNull else item}
        if isinstance(t, MapType):
            if not isinstance(t.keyType, StringType):
                raise SchemaMappingError(f"map keys of type {t.keyType.simpleString()}: "
                                         "JSON objects have string keys")
            value = convert(t.valueType)
            return {"type": "object",
                    "additionalProperties": nullable(value) if t.valueContainsNull else value}
        if isinstance(t, TimestampType):
            return {"type": "string", "format": "date-time"}
        if isinstance(t, TimestampNTZType):
            return {"type": "string"}  # no zone: not an RFC 3339 date-time
        if isinstance(t, DateType):
            return {"type": "string", "format": "date"}
        if isinstance(t, DecimalType):
            return {"type": "string", "pattern": r"^-?[0-9]+(\.[0-9]+)?$"}
        if isinstance(t, BinaryType):
            return {"type": "string", "contentEncoding": "base64"}
        if isinstance(t, BooleanType):
            return {"type": "boolean"}
        if isinstance(t, StringType):
            return {"type": "string"}
        if isinstance(t, IntegerType | LongType) or t.simpleString() in ("tinyint",
                                                                         "smallint"):
            return {"type": "integer"}
        if isinstance(t, FloatType | DoubleType):
            return {"type": "number"}
        raise SchemaMappingError(f"Spark type {t.simpleString()} has no JSON Schema here")

    schema = convert(data_type)
    return {"$schema": "http://json-schema.org/draft-07/schema#", "title": title, **schema}


def spark_to_json_converter(data_type: DataType) -> Converter | None:
    """Arrow's ``to_pylist`` value for ``data_type`` -> the JSON-able value
    ``spark_to_json_schema`` describes; None when it already is."""
    return _nested_converter(data_type, _json_leaf)


def _json_leaf(data_type: DataType) -> Converter | None:
    if isinstance(data_type, TimestampType):
        return lambda v: None if v is None else (
            v if v.tzinfo is not None else v.replace(tzinfo=dt.UTC)).isoformat()
    if isinstance(data_type, TimestampNTZType | DateType):
        return lambda v: None if v is None else v.isoformat()
    if isinstance(data_type, DecimalType):
        return lambda v: None if v is None else format(v, "f")
    if isinstance(data_type, BinaryType):
        import base64

        return lambda v: None if v is None else base64.b64encode(bytes(v)).decode("ascii")
    return None


# ---------------------------------------------------------------------------- evolution
def added_columns(old: StructType, new: StructType) -> list[StructField]:
    """The top-level fields ``new`` adds to ``old``, when that is all it does: every field
    of ``old`` is in ``new`` with the same type (nullability may only widen).  (Old
    records get an added field's default: ``registry.check_widening`` asks the writer
    schema for one.)  Raises ``SchemaMappingError`` saying what else changed."""
    by_name = {f.name: f for f in new.fields}
    for field in old.fields:
        found = by_name.get(field.name)
        if found is None:
            raise SchemaMappingError(f"field {field.name} is gone")
        if found.dataType != field.dataType:
            raise SchemaMappingError(f"field {field.name} changed type from "
                                     f"{field.dataType.simpleString()} to "
                                     f"{found.dataType.simpleString()}")
        if field.nullable and not found.nullable:
            raise SchemaMappingError(f"field {field.name} is no longer nullable")
    known = {f.name for f in old.fields}
    return [f for f in new.fields if f.name not in known]


# ---------------------------------------------------------------------------- Protobuf
_TIMESTAMP_MESSAGE = "google.protobuf.Timestamp"
_WRAPPERS = {"google.protobuf.DoubleValue": DoubleType(), "google.protobuf.FloatValue":
             FloatType(), "google.protobuf.Int64Value": LongType(),
             "google.protobuf.UInt64Value": LongType(), "google.protobuf.Int32Value":
             IntegerType(), "google.protobuf.UInt32Value": LongType(),
             "google.protobuf.BoolValue": BooleanType(), "google.protobuf.StringValue":
             StringType(), "google.protobuf.BytesValue": BinaryType()}


def _proto_scalar(field: Any) -> DataType:
    from google.protobuf.descriptor import FieldDescriptor as F

    table: dict[int, DataType] = {
        F.TYPE_DOUBLE: DoubleType(), F.TYPE_FLOAT: FloatType(), F.TYPE_INT64: LongType(),
        F.TYPE_UINT64: LongType(), F.TYPE_INT32: IntegerType(), F.TYPE_FIXED64: LongType(),
        F.TYPE_FIXED32: LongType(), F.TYPE_BOOL: BooleanType(), F.TYPE_STRING: StringType(),
        F.TYPE_BYTES: BinaryType(), F.TYPE_UINT32: LongType(), F.TYPE_ENUM: StringType(),
        F.TYPE_SFIXED32: IntegerType(), F.TYPE_SFIXED64: LongType(),
        F.TYPE_SINT32: IntegerType(), F.TYPE_SINT64: LongType()}
    return table[field.type]


def protobuf_spark_type(descriptor: Any, stack: tuple[str, ...] = ()) -> StructType:
    """A message descriptor's fields as a struct: scalars as their Spark types (unsigned
    32-bit as bigint, enums as their names), repeated fields as arrays, map fields as
    maps, messages as structs (nullable), ``google.protobuf.Timestamp`` as a timestamp and
    the wrapper types as their nullable scalar.  A proto3 scalar without ``optional`` is
    not nullable (an absent field reads as its zero value)."""
    name = descriptor.full_name
    if name in stack:
        raise SchemaMappingError(f"message {name} is recursive: Spark types cannot nest "
                                 "without end")
    fields = []
    for field in descriptor.fields:
        fields.append(StructField(field.name, *_proto_field(field, (*stack, name))))
    return StructType(fields)


def _proto_field(field: Any, stack: tuple[str, ...]) -> tuple[DataType, bool]:
    message = field.message_type
    if field.is_repeated:
        if message is not None and message.GetOptions().map_entry:
            key_type, _ = _proto_single(message.fields_by_name["key"], stack)
            value_type, _ = _proto_single(message.fields_by_name["value"], stack)
            return MapType(key_type, value_type, True), True
        item, _ = _proto_single(field, stack)
        return ArrayType(item, False), True
    return _proto_single(field, stack)


def _proto_single(field: Any, stack: tuple[str, ...]) -> tuple[DataType, bool]:
    message = field.message_type
    if message is None:
        return _proto_scalar(field), bool(field.has_presence)
    if message.full_name == _TIMESTAMP_MESSAGE:
        return TimestampType(), True
    if message.full_name in _WRAPPERS:
        return _WRAPPERS[message.full_name], True
    return protobuf_spark_type(message, stack), True


def protobuf_to_python(message: Any, descriptor: Any) -> dict[str, Any]:
    """A parsed message as the dict Arrow takes for ``protobuf_spark_type(descriptor)``
    (fields by the reader descriptor's names; unknown fields are ignored)."""
    out: dict[str, Any] = {}
    for field in descriptor.fields:
        name = field.name
        if not hasattr(message, name):
            out[name] = None  # a field the writer's message does not have
            continue
        value = getattr(message, name)
        inner = field.message_type
        if field.is_repeated:
            if inner is not None and inner.GetOptions().map_entry:
                value_field = inner.fields_by_name["value"]
                out[name] = {k: _proto_value(v, value_field) for k, v in value.items()}
            else:
                out[name] = [_proto_value(v, field) for v in value]
        elif (inner is not None or field.has_presence) and not message.HasField(name):
            out[name] = None
        else:
            out[name] = _proto_value(value, field)
    return out


def _proto_value(value: Any, field: Any) -> Any:
    from google.protobuf.descriptor import FieldDescriptor as F

    inner = field.message_type
    if inner is None:
        if field.type == F.TYPE_ENUM:
            found = field.enum_type.values_by_number.get(value)
            return found.name if found is not None else str(value)
        return value
    if inner.full_name == _TIMESTAMP_MESSAGE:
        return dt.datetime.fromtimestamp(value.seconds, dt.UTC) + dt.timedelta(
            microseconds=value.nanos // 1000)
    if inner.full_name in _WRAPPERS:
        return value.value
    return protobuf_to_python(value, inner)



# ---------------------------------------------------------------------------- Spark -> Protobuf
_TIMESTAMP_FILE = "google/protobuf/timestamp.proto"


def spark_to_protobuf(data_type: DataType, name: str = "record",
                      package: str = "millrace") -> Any:
    """A proto3 ``FileDescriptorProto`` whose one top-level message ``name`` holds the
    struct ``data_type``'s fields, numbered from 1 in column order; nested structs are
    nested messages, arrays repeated fields, maps map fields, timestamps
    ``google.protobuf.Timestamp``, and a nullable scalar is an ``optional`` field (read
    back as nullable).  Dates, decimals and zone-less timestamps are strings (ISO, exact);
    tinyint and smallint are int32.  Only a struct has a message; an array or map of
    nullable elements cannot carry a null (refused when one comes)."""
    from google.protobuf import descriptor_pb2

    if not isinstance(data_type, StructType):
        raise SchemaMappingError(f"Spark type {data_type.simpleString()}: a Protobuf value "
                                 "is a message, so the value column must be a struct")
    F = descriptor_pb2.FieldDescriptorProto
    scalars = {"string": F.TYPE_STRING, "bigint": F.TYPE_INT64, "int": F.TYPE_INT32,
               "smallint": F.TYPE_INT32, "tinyint": F.TYPE_INT32, "double": F.TYPE_DOUBLE,
               "float": F.TYPE_FLOAT, "boolean": F.TYPE_BOOL, "binary": F.TYPE_BYTES,
               "date": F.TYPE_STRING, "timestamp_ntz": F.TYPE_STRING}
    file = descriptor_pb2.FileDescriptorProto(name=f"{name}.proto", package=package,
                                              syntax="proto3")

    def camel(text: str) -> str:
        return "".join(part[:1].upper() + part[1:] for part in text.split("_") if part) or "F"

    def fill(field: Any, t: DataType, parent: Any, path: str, label: str) -> None:
        """Set ``field``'s type to ``t`` (a nested type goes into ``parent``)."""
        if isinstance(t, StructType):
            nested = parent.nested_type.add(name=_unique(parent, camel(label)))
            message(nested, t, f"{path}.{nested.name}")
            field.type, field.type_name = F.TYPE_MESSAGE, f"{path}.{nested.name}"
        elif isinstance(t, TimestampType):
            if _TIMESTAMP_FILE not in file.dependency:
                file.dependency.append(_TIMESTAMP_FILE)
            field.type, field.type_name = F.TYPE_MESSAGE, f".{_TIMESTAMP_MESSAGE}"
        elif isinstance(t, DecimalType):
            field.type = F.TYPE_STRING
        elif t.simpleString() in scalars:
            field.type = scalars[t.simpleString()]
        else:
            raise SchemaMappingError(f"Spark type {t.simpleString()} has no Protobuf type "
                                     "here")

    def message(proto: Any, struct: StructType, path: str) -> None:
        for number, f in enumerate(struct.fields, 1):
            field = proto.field.add(name=f.name, number=number, label=F.LABEL_OPTIONAL)
            t = f.dataType
            if isinstance(t, ArrayType):
                if isinstance(t.elementType, ArrayType | MapType):
                    raise SchemaMappingError(f"column {f.name}: an array of "
                                             f"{t.elementType.simpleString()} has no "
                                             "Protobuf type (repeated fields do not nest)")
                field.label = F.LABEL_REPEATED
                fill(field, t.elementType, proto, path, f.name)
            elif isinstance(t, MapType):
                if t.keyType.simpleString() not in ("string", "int", "bigint", "boolean"):
                    raise SchemaMappingError(f"column {f.name}: map keys of type "
                                             f"{t.keyType.simpleString()} have no Protobuf "
                                             "type")
                if isinstance(t.valueType, ArrayType | MapType):
                    raise SchemaMappingError(f"column {f.name}: a map of "
                                             f"{t.valueType.simpleString()} has no "
                                             "Protobuf type")
                entry = proto.nested_type.add(name=_unique(proto, camel(f.name) + "Entry"))
                entry.options.map_entry = True
                key = entry.field.add(name="key", number=1, label=F.LABEL_OPTIONAL)
                fill(key, t.keyType, entry, f"{path}.{entry.name}", "key")
                value = entry.field.add(name="value", number=2, label=F.LABEL_OPTIONAL)
                fill(value, t.valueType, proto, path, f.name)
                field.label, field.type = F.LABEL_REPEATED, F.TYPE_MESSAGE
                field.type_name = f"{path}.{entry.name}"
            else:
                fill(field, t, proto, path, f.name)
                if f.nullable and field.type != F.TYPE_MESSAGE:
                    field.proto3_optional = True
                    field.oneof_index = len(proto.oneof_decl)
                    proto.oneof_decl.add(name=f"_{f.name}")

    top = file.message_type.add(name=name)
    message(top, data_type, f".{package}.{name}" if package else f".{name}")
    return file


def _unique(parent: Any, name: str) -> str:
    taken = {t.name for t in parent.nested_type}
    if name not in taken:
        return name
    return next(f"{name}{i}" for i in range(2, 1 << 20) if f"{name}{i}" not in taken)


def protobuf_filler(descriptor: Any) -> Callable[[Any, Mapping[str, Any]], None]:
    """What copies Arrow's ``to_pylist`` value of a struct into a message of
    ``descriptor`` (a message made by ``spark_to_protobuf``); raises ``ValueError``
    naming the field whose value a message cannot hold (a null element).  The work per
    field (its kind, its conversion, its name for errors) is decided here, once."""
    from google.protobuf.descriptor import FieldDescriptor as F

    Setter = Callable[[Any, Any], None]

    def text(v: Any) -> str:
        if isinstance(v, str):
            return v
        if isinstance(v, dt.date | dt.datetime):
            return v.isoformat()
        return format(v, "f")  # a Decimal: its exact digits

    def scalar(field: Any) -> Converter | None:
        return text if field.type == F.TYPE_STRING else \
            bytes if field.type == F.TYPE_BYTES else None

    def put(field: Any, where: str) -> Setter:
        """Fills the (sub-)message of ``field`` from a value."""
        if field.message_type.full_name == _TIMESTAMP_MESSAGE:
            def timestamp(m: Any, v: Any) -> None:
                m.FromDatetime(v if v.tzinfo is None else v.astimezone(dt.UTC)
                               .replace(tzinfo=None))
            return timestamp
        fill = plan(field.message_type, where)

        def struct(m: Any, v: Any) -> None:
            m.SetInParent()  # an empty struct is still there
            fill(m, v)
        return struct

    def map_step(name: str, at: str, value_field: Any) -> Setter:
        convert = scalar(value_field)
        nested = put(value_field, f"{at}[].") if value_field.message_type else None

        def step(m: Any, v: Any) -> None:
            target = getattr(m, name)
            for k, item in dict(v).items():
                if item is None:
                    raise ValueError(f"{at}[{k!r}] is null: a Protobuf map value cannot be")
                if nested is not None:
                    nested(target[k], item)
                else:
                    target[k] = convert(item) if convert is not None else item
        return step

    def repeated_step(name: str, at: str, field: Any) -> Setter:
        convert = scalar(field)
        nested = put(field, f"{at}[].") if field.message_type else None

        def step(m: Any, v: Any) -> None:
            target = getattr(m, name)
            for i, item in enumerate(v):
                if item is None:
                    raise ValueError(f"{at}[{i}] is null: a repeated Protobuf field cannot "
                                     "hold one")
                if nested is not None:
                    nested(target.add(), item)
                else:
                    target.append(convert(item) if convert is not None else item)
        return step

    def single_step(name: str, at: str, field: Any) -> Setter:
        if field.message_type is not None:
            nested = put(field, f"{at}.")
            return lambda m, v: nested(getattr(m, name), v)
        convert = scalar(field)
        if convert is None:
            return lambda m, v: setattr(m, name, v)
        return lambda m, v: setattr(m, name, convert(v))

    def plan(desc: Any, where: str) -> Callable[[Any, Mapping[str, Any]], None]:
        steps: list[tuple[str, Setter]] = []
        for field in desc.fields:
            name, inner, at = field.name, field.message_type, f"{where}{field.name}"
            if field.is_repeated and inner is not None and inner.GetOptions().map_entry:
                steps.append((name, map_step(name, at, inner.fields_by_name["value"])))
            elif field.is_repeated:
                steps.append((name, repeated_step(name, at, field)))
            else:
                steps.append((name, single_step(name, at, field)))

        def fill(m: Any, value: Mapping[str, Any]) -> None:
            get = value.get
            for name, step in steps:
                v = get(name)
                if v is not None:  # else unset: absent, or an implicit field's zero value
                    step(m, v)
        return fill

    return plan(descriptor, "")

# ---------------------------------------------------------------------------- fast times
# A record's top-level dates and timestamps are read as the numbers Avro stores and made
# dates and timestamps by Arrow, column at a time: fastavro's per-value datetime objects,
# and Arrow's taking them in again, were half of a record's decoding time.
_TIME_KINDS = {("long", "timestamp-millis"): "ms-utc", ("long", "timestamp-micros"): "us-utc",
               ("long", "local-timestamp-millis"): "ms",
               ("long", "local-timestamp-micros"): "us", ("int", "date"): "date"}
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = _EPOCH.replace(tzinfo=dt.UTC)


def _time_kind(field_type: Any) -> str | None:
    if isinstance(field_type, list):
        rest = [b for b in field_type if b != "null"]
        if len(rest) != 1 or len(field_type) != 2:
            return None
        field_type = rest[0]
    if not isinstance(field_type, dict):
        return None
    return _TIME_KINDS.get((str(field_type.get("type")), str(field_type.get("logicalType"))))


def avro_time_fields(raw: Any) -> dict[str, str]:
    """A record schema's (as JSON) top-level date and timestamp fields, nullable or not:
    field name -> ``ms-utc``, ``us-utc``, ``ms``, ``us`` or ``date``."""
    if not isinstance(raw, dict) or raw.get("type") not in ("record", "error"):
        return {}
    out = {}
    for field in raw.get("fields", []):
        kind = _time_kind(field.get("type"))
        if kind is not None:
            out[str(field["name"])] = kind
    return out


def strip_time_fields(raw: dict[str, Any], names: Iterable[str]) -> dict[str, Any]:
    """A copy of a record schema (as JSON) whose fields ``names`` lost their logical type:
    fastavro then reads the plain long (int) Avro stores."""
    wanted = set(names)

    def plain(field_type: Any) -> Any:
        if isinstance(field_type, list):
            return [plain(b) for b in field_type]
        if isinstance(field_type, dict) and "logicalType" in field_type:
            return {k: v for k, v in field_type.items() if k != "logicalType"}
        return field_type

    fields = [{**f, "type": plain(f["type"])} if f.get("name") in wanted else f
              for f in raw.get("fields", [])]
    return {**raw, "fields": fields}


def time_number(value: Any, kind: str) -> int | None:
    """A date or datetime as the number ``avro_time_fields``' kind stores (for a writer
    whose field has another logical type than the reader's)."""
    if value is None or isinstance(value, int):
        return value
    if kind == "date":
        return int((value - dt.date(1970, 1, 1)).days)
    if isinstance(value, dt.datetime):
        delta = value - (_EPOCH_UTC if value.tzinfo is not None else _EPOCH)
        micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        return micros // 1000 if kind in ("ms", "ms-utc") else micros
    raise ValueError(f"{value!r} is not a date or a timestamp")


def arrow_time_types(target: Any, times: Mapping[str, str]) -> Any:
    """The Arrow struct type the numbers of ``times`` are collected in (``target`` with
    int64 for timestamps and int32 for dates)."""
    import pyarrow as pa

    return pa.struct([pa.field(f.name, pa.int32() if times[f.name] == "date" else pa.int64(),
                               f.nullable) if f.name in times else f for f in target])


def arrow_times(array: Any, target: Any, times: Mapping[str, str]) -> Any:
    """A struct array of ``arrow_time_types`` as ``target``: the numbers cast to dates and
    timestamps (milliseconds scaled to Spark's microseconds)."""
    import pyarrow as pa

    children = []
    for i, field in enumerate(target):
        child = array.field(i)
        kind = times.get(field.name)
        if kind == "date":
            child = child.cast(pa.date32())
        elif kind is not None:
            unit = "ms" if kind.startswith("ms") else "us"
            child = child.cast(pa.timestamp(unit, tz="UTC" if kind.endswith("utc") else None))
            child = child.cast(field.type)
        children.append(child)
    return pa.StructArray.from_arrays(children, fields=list(target), mask=array.is_null())
