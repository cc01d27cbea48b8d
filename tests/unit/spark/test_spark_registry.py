"""Registry-encoded values in the Spark source: type mapping, decoding, evolution, options.

The registry is an in-process fake with the ``SchemaRegistryClient`` methods the source
uses (ids and versions as a registry assigns them); the bytes are Confluent's wire format
written here with fastavro / json / protobuf, independently of the code under test.
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import struct
from typing import Any

import fastavro
import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from millrace.client.schema_registry.client import RegisteredSchema, SchemaRegistryError
from millrace.client.schema_registry.schemas import ParsedSchema, Schema, parse_schema
from millrace.common.errors import ConfigError
from millrace.spark import registry
from millrace.spark.options import SourceOptions
from millrace.spark.reader import Decoding, _BatchBuilder, arrow_schema
from millrace.spark.registry import (
    DecodeError,
    NewerSchemaError,
    RegistryDecoder,
    RegistryEncoder,
    RegistryFormat,
    check_widening,
    resolve_reader,
)
from millrace.spark.schemas import (
    SchemaMappingError,
    avro_converter,
    avro_spark_type,
    json_schema_spark_type,
    spark_to_avro,
)
from millrace.spark.source import source_schema

pytestmark = pytest.mark.filterwarnings(
    "ignore:PySpark does not yet fully support pandas:FutureWarning")

URL = "http://registry.test:8081"


class FakeRegistry:
    """The client methods the source uses, over dicts (ids global, versions per subject)."""

    def __init__(self) -> None:
        self.by_id: dict[int, Schema] = {}
        self.subjects: dict[str, list[int]] = {}

    def register_schema(self, subject: str, schema: Schema, normalize: bool = False) -> int:
        known = [i for i, s in self.by_id.items() if s == schema]
        schema_id = known[0] if known else len(self.by_id) + 1
        self.by_id[schema_id] = schema
        versions = self.subjects.setdefault(subject, [])
        if schema_id not in versions:
            versions.append(schema_id)
        return schema_id

    def get_schema(self, schema_id: int) -> Schema:
        if schema_id not in self.by_id:
            raise SchemaRegistryError(404, 40403, "Schema not found")
        return self.by_id[schema_id]

    def _registered(self, subject: str, version: int) -> RegisteredSchema:
        ids = self.subjects.get(subject)
        if not ids:
            raise SchemaRegistryError(404, 40401, f"Subject '{subject}' not found.")
        schema_id = ids[version - 1]
        return RegisteredSchema(schema_id, subject, version, self.by_id[schema_id])

    def get_latest_version(self, subject: str) -> RegisteredSchema:
        return self._registered(subject, len(self.subjects.get(subject, [None])))

    def get_version(self, subject: str, version: int | str) -> RegisteredSchema:
        if version == "latest":
            return self.get_latest_version(subject)
        return self._registered(subject, int(version))

    def get_versions(self, subject: str) -> list[int]:
        return list(range(1, len(self.subjects.get(subject, [])) + 1))

    def lookup_schema(self, subject: str, schema: Schema) -> RegisteredSchema:
        for version, schema_id in enumerate(self.subjects.get(subject, []), 1):
            if self.by_id[schema_id] == schema:
                return RegisteredSchema(schema_id, subject, version, schema)
        raise SchemaRegistryError(404, 40403, "Schema not found")

    def parse(self, schema: Schema) -> ParsedSchema:
        return parse_schema(schema, lambda ref: self.get_version(ref.subject,
                                                                 ref.version).schema)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeRegistry:
    client = FakeRegistry()
    monkeypatch.setattr(registry, "registry_client", lambda url, user_info=None: client)
    return client


ORDER_V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "order_id", "type": "string"},
    {"name": "quantity", "type": "int"},
    {"name": "price", "type": "double"},
    {"name": "event_time", "type": {"type": "long", "logicalType": "timestamp-millis"}},
]}
ORDER_V2 = {**ORDER_V1, "fields": [*ORDER_V1["fields"],
                                   {"name": "coupon", "type": ["null", "string"],
                                    "default": None}]}


def avro_frame(schema_id: int, schema: Any, datum: Any) -> bytes:
    out = io.BytesIO()
    out.write(struct.pack(">bI", 0, schema_id))
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), datum)
    return out.getvalue()


def order(n: int, **extra: Any) -> dict[str, Any]:
    return {"order_id": f"o{n}", "quantity": n, "price": 1.5 * n,
            "event_time": dt.datetime(2026, 1, 1, 9, 0, n, tzinfo=dt.UTC), **extra}


def avro_schema(doc: Any) -> Schema:
    return Schema(json.dumps(doc))


def where() -> str:
    return "orders-0@7"


def decoded(decoder: RegistryDecoder, data: bytes) -> Any:
    """What the source's column holds for ``data``: ``decode`` then its Arrow type (dates
    and timestamps of a record come out of ``decode`` as numbers)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_type

    value = decoder.decode(data, where)
    target = to_arrow_type(registry.spark_type(decoder.spec, decoder.reader.schema)[0],
                           timezone="UTC")
    return decoder.finish(pa.array([value], decoder.arrow_type(target)), target).to_pylist()[0]


# ---------------------------------------------------------------------------- mapping
def test_avro_types_map_to_spark_types() -> None:
    schema = fastavro.parse_schema({"type": "record", "name": "R", "fields": [
        {"name": "b", "type": "boolean"}, {"name": "i", "type": "int"},
        {"name": "l", "type": "long"}, {"name": "d", "type": "double"},
        {"name": "s", "type": ["null", "string"]}, {"name": "raw", "type": "bytes"},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
        {"name": "e2", "type": "E"},
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10,
                                 "scale": 2}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": ["null", "long"]}},
        {"name": "wide", "type": ["int", "long"]},
        {"name": "either", "type": ["null", "string", "int"]},
        {"name": "inner", "type": ["null", {"type": "record", "name": "In", "fields": [
            {"name": "x", "type": "float"}]}]},
    ]})
    data_type, nullable = avro_spark_type(schema)
    assert not nullable
    assert isinstance(data_type, StructType)
    got = {f.name: (f.dataType, f.nullable) for f in data_type.fields}
    assert got["b"] == (BooleanType(), False)
    assert got["i"] == (IntegerType(), False)
    assert got["l"] == (LongType(), False)
    assert got["d"] == (DoubleType(), False)
    assert got["s"] == (StringType(), True)
    assert got["raw"] == (BinaryType(), False)
    assert got["e"] == got["e2"] == (StringType(), False)
    assert got["dec"] == (DecimalType(10, 2), False)
    assert got["day"] == (DateType(), False)
    assert got["ts"] == (TimestampType(), False)
    assert got["local"] == (TimestampNTZType(), False)
    assert got["tags"] == (ArrayType(StringType(), False), False)
    assert got["attrs"] == (MapType(StringType(), LongType(), True), False)
    assert got["wide"] == (LongType(), False)
    assert got["either"][0] == StructType([StructField("member0", StringType()),
                                           StructField("member1", IntegerType())])
    assert got["inner"][0].simpleString() == "struct<x:float>" and got["inner"][1]


def test_avro_schemas_without_a_spark_type_are_refused() -> None:
    recursive = {"type": "record", "name": "Node", "fields": [
        {"name": "next", "type": ["null", "Node"]}]}
    with pytest.raises(SchemaMappingError, match="Node is recursive"):
        avro_spark_type(fastavro.parse_schema(recursive))
    too_wide = {"type": "bytes", "logicalType": "decimal", "precision": 39, "scale": 0}
    with pytest.raises(SchemaMappingError, match="precision 39"):
        avro_spark_type(too_wide)
    # control: a record that names itself only through a sibling type is fine
    assert avro_spark_type({"type": "record", "name": "P", "fields": [
        {"name": "a", "type": {"type": "fixed", "name": "F", "size": 2}},
        {"name": "b", "type": "F"}]}, None)[0].simpleString() == "struct<a:binary,b:binary>"


def test_multi_branch_unions_set_the_member_the_datum_took() -> None:
    schema = fastavro.parse_schema({"type": "record", "name": "U", "fields": [
        {"name": "v", "type": ["null", "string", "int"]},
        {"name": "t", "type": {"type": "int", "logicalType": "time-millis"}}]})
    convert = avro_converter(schema)
    assert convert is not None
    assert convert({"v": 3, "t": dt.time(0, 0, 1, 500_000)}) == {
        "v": {"member1": 3}, "t": 1500}
    assert convert({"v": "x", "t": dt.time(0)})["v"] == {"member0": "x"}
    assert convert({"v": None, "t": dt.time(0)})["v"] is None
    assert avro_converter(fastavro.parse_schema(ORDER_V1)) is None  # nothing to convert


def test_json_schema_maps_properties() -> None:
    doc = {"type": "object", "required": ["id", "n"], "properties": {
        "id": {"type": "string"}, "n": {"type": "integer"},
        "price": {"type": ["number", "null"]}, "at": {"type": "string", "format": "date-time"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "inner": {"$ref": "#/$defs/Inner"}, "anything": {}},
        "$defs": {"Inner": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}}
    data_type, _ = json_schema_spark_type(doc)
    assert isinstance(data_type, StructType)
    got = {f.name: (f.dataType.simpleString(), f.nullable) for f in data_type.fields}
    assert got == {"id": ("string", False), "n": ("bigint", False), "price": ("double", True),
                   "at": ("timestamp", True), "tags": ("array<string>", True),
                   "inner": ("struct<ok:boolean>", True), "anything": ("string", True)}


def test_spark_to_avro_round_trips_the_types() -> None:
    struct_type = StructType([StructField("id", StringType(), False),
                              StructField("n", LongType()),
                              StructField("at", TimestampType()),
                              StructField("amount", DecimalType(8, 2)),
                              StructField("tags", ArrayType(StringType())),
                              StructField("inner", StructType([StructField("x",
                                                                           DoubleType())]))])
    schema = spark_to_avro(struct_type, "Row", "millrace")
    mapped, _ = avro_spark_type(fastavro.parse_schema(schema))
    assert mapped == struct_type


# ---------------------------------------------------------------------------- decoding
def spec(subject: str = "orders-value", version: int | None = None,
         fmt: str = "avro") -> RegistryFormat:
    return RegistryFormat(fmt, URL, subject, version)


def test_old_and_new_records_decode_with_the_latest_version(fake: FakeRegistry) -> None:
    v1 = fake.register_schema("orders-value", avro_schema(ORDER_V1))
    v2 = fake.register_schema("orders-value", avro_schema(ORDER_V2))
    reader = resolve_reader(spec())
    assert (reader.version, reader.schema_id) == (2, v2)
    decoder = RegistryDecoder(spec(), reader)
    assert decoded(decoder, avro_frame(v1, ORDER_V1, order(1))) == order(1, coupon=None)
    assert decoded(decoder, avro_frame(v2, ORDER_V2, order(2, coupon="X"))) == \
        order(2, coupon="X")
    assert decoder.decode(None, where) is None


def test_a_newer_version_than_the_query_reads_stops_it(fake: FakeRegistry) -> None:
    fake.register_schema("orders-value", avro_schema(ORDER_V1))
    reader = resolve_reader(spec())  # the query started at version 1
    v2 = fake.register_schema("orders-value", avro_schema(ORDER_V2))
    decoder = RegistryDecoder(spec(), reader)
    record = avro_frame(v2, ORDER_V2, order(3, coupon="Y"))
    with pytest.raises(NewerSchemaError) as caught:
        decoder.decode(record, where)
    text = str(caught.value)
    assert text.startswith("newer schema: version 2 of subject orders-value (schema id 2)")
    assert "orders-0@7" in text and "reads version 1" in text
    match = registry.NEWER_SCHEMA_TEXT.search(text)
    assert match is not None and match.groups() == ("2", "orders-value", str(v2), "orders-0@7", "1")
    # control: a query pinned to version 1 reads the same record, resolved to version 1
    pinned = RegistryDecoder(spec(version=1), resolve_reader(spec(version=1)))
    assert decoded(pinned, record) == order(3)


def test_bytes_that_do_not_decode_say_why(fake: FakeRegistry) -> None:
    v1 = fake.register_schema("orders-value", avro_schema(ORDER_V1))
    decoder = RegistryDecoder(spec(), resolve_reader(spec()))
    good = avro_frame(v1, ORDER_V1, order(4))
    assert decoded(decoder, good) == order(4)  # control
    cases = {
        b'{"order_id": "o1"}': "unknown magic byte 0x7b",
        b"\x00\x00": "too short",
        struct.pack(">bI", 0, 99) + good[5:]: "schema id 99 is not in the schema registry",
        good[:8]: "does not decode with schema id 1",
        good + b"\x02": r"1 byte\(s\) left after the Avro datum",
    }
    for data, reason in cases.items():
        with pytest.raises(DecodeError, match=reason):
            decoder.decode(data, where)


def test_the_batch_builder_names_the_record_or_keeps_it_permissively(
        fake: FakeRegistry) -> None:
    v1 = fake.register_schema("orders-value", avro_schema(ORDER_V1))
    reader = resolve_reader(spec())
    value_type = avro_spark_type(fastavro.parse_schema(ORDER_V1))[0]

    class Record:
        def __init__(self, offset: int, value: bytes) -> None:
            self.key, self.value, self.offset = b"k", value, offset
            self.timestamp, self.timestamp_type, self.headers = 1_700_000_000_000, 0, None

    records = [Record(5, avro_frame(v1, ORDER_V1, order(5))), Record(6, b"not avro")]
    failfast = _BatchBuilder(arrow_schema(source_schema(False, None, value_type)), "orders", 0,
                             Decoding(value=RegistryDecoder(spec(), reader)))
    with pytest.raises(DecodeError, match=r"^bad record orders-0@6: value does not decode: "
                                          r"unknown magic byte"):
        failfast.add(records)
    permissive = _BatchBuilder(
        arrow_schema(source_schema(False, None, value_type, permissive=True)), "orders", 0,
        Decoding(value=RegistryDecoder(spec(), reader), permissive=True))
    permissive.add(records)
    rows = permissive.build().to_pylist()
    assert rows[0]["value"]["order_id"] == "o5" and rows[0]["decodeError"] is None
    assert rows[1]["value"] is None
    assert rows[1]["decodeError"]["value"] == b"not avro"
    assert rows[1]["decodeError"]["reason"].startswith("value does not decode: unknown magic")


def test_json_schema_values_decode_and_validate(fake: FakeRegistry) -> None:
    doc = {"type": "object", "required": ["id"], "properties": {
        "id": {"type": "string"}, "n": {"type": "integer"},
        "at": {"type": "string", "format": "date-time"}}}
    schema_id = fake.register_schema("t-value", Schema(json.dumps(doc), "JSON"))
    s = spec("t-value", fmt="json-schema")
    decoder = RegistryDecoder(s, resolve_reader(s))
    frame = struct.pack(">bI", 0, schema_id)
    assert decoder.decode(frame + b'{"id": "a", "n": 2, "at": "2026-01-01T09:00:00Z"}',
                          where) == {"id": "a", "n": 2,
                                     "at": dt.datetime(2026, 1, 1, 9, tzinfo=dt.UTC)}
    with pytest.raises(DecodeError, match="at n: 'x' is not of type 'integer'"):
        decoder.decode(frame + b'{"id": "a", "n": "x"}', where)
    with pytest.raises(DecodeError, match="not JSON"):
        decoder.decode(frame + b"{", where)


def register_proto(fake: FakeRegistry, subject: str, fdp: Any, message: str
                   ) -> tuple[int, Any]:
    """Register a FileDescriptorProto (base64, as Confluent's serializers send it); its id
    and the class of ``message`` built by protobuf from it."""
    import base64

    from google.protobuf import descriptor_pool, message_factory

    schema_id = fake.register_schema(subject, Schema(
        base64.b64encode(fdp.SerializeToString()).decode(), "PROTOBUF"))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return schema_id, message_factory.GetMessageClass(pool.FindMessageTypeByName(message))


def test_protobuf_values_decode(fake: FakeRegistry) -> None:
    from google.protobuf import descriptor_pb2

    fdp = descriptor_pb2.FileDescriptorProto(name="order.proto", package="shop",
                                             syntax="proto3")
    message = fdp.message_type.add(name="Order")
    F = descriptor_pb2.FieldDescriptorProto
    message.field.add(name="order_id", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    message.field.add(name="quantity", number=2, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    message.field.add(name="tags", number=3, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
    schema_id, cls = register_proto(fake, "p-value", fdp, "shop.Order")
    body = cls(order_id="o1", quantity=3, tags=["a", "b"]).SerializeToString()
    s = spec("p-value", fmt="protobuf")
    reader = resolve_reader(s)
    assert registry.spark_type(s, reader.schema)[0].simpleString() == \
        "struct<order_id:string,quantity:int,tags:array<string>>"
    decoder = RegistryDecoder(s, reader)
    assert decoder.decode(struct.pack(">bI", 0, schema_id) + b"\x00" + body, where) == {
        "order_id": "o1", "quantity": 3, "tags": ["a", "b"]}



def test_protobuf_message_name_picks_the_message_of_a_file(fake: FakeRegistry) -> None:

    from google.protobuf import descriptor_pb2

    from millrace.client.schema_registry.wire_format import encode_message_indexes

    fdp = descriptor_pb2.FileDescriptorProto(name="shop.proto", package="shop",
                                             syntax="proto3")
    F = descriptor_pb2.FieldDescriptorProto
    order = fdp.message_type.add(name="Order")
    order.field.add(name="order_id", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    refund = fdp.message_type.add(name="Refund")
    refund.field.add(name="refund_id", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    refund.field.add(name="cents", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    schema_id, cls = register_proto(fake, "r-value", fdp, "shop.Refund")
    record = (struct.pack(">bI", 0, schema_id) + encode_message_indexes([1])
              + cls(refund_id="r1", cents=250).SerializeToString())
    for name in ("shop.Refund", "Refund"):
        s = RegistryFormat("protobuf", URL, "r-value", message_name=name)
        reader = resolve_reader(s)
        assert registry.spark_type(s, reader.schema)[0].simpleString() == \
            "struct<refund_id:string,cents:bigint>"
        assert RegistryDecoder(s, reader).decode(record, where) == {"refund_id": "r1",
                                                                    "cents": 250}
    # without it the column is the first message, and a Refund record is named as wrong
    first = spec("r-value", fmt="protobuf")
    with pytest.raises(DecodeError, match=r"message shop\.Refund is not the reader's "
                                          r"shop\.Order"):
        RegistryDecoder(first, resolve_reader(first)).decode(record, where)
    missing = RegistryFormat("protobuf", URL, "r-value", message_name="Invoice")
    with pytest.raises(ConfigError, match=r"messageName 'Invoice' names no message of "
                                          r"shop.proto \(it has shop.Order, shop.Refund\)"):
        registry.spark_type(missing, resolve_reader(missing).schema)
    # the sink writes the message named, with its index path
    row_type = StructType([StructField("refund_id", StringType()),
                           StructField("cents", LongType())])
    sink = RegistryFormat("protobuf", URL, "r-value", 1, message_name="Refund")
    encoder = RegistryEncoder(sink, row_type, "unused")
    encoder.prepare()
    written = encoder.encode({"refund_id": "r2", "cents": 5})
    assert written is not None and written[5:7] == encode_message_indexes([1])
    assert cls.FromString(written[7:]).refund_id == "r2"
    with pytest.raises(ConfigError, match="'messageName' goes with valueFormat=protobuf"):
        SourceOptions.parse(options(valueFormat="avro", messageName="Refund",
                                    **{"schema.registry.url": URL}), streaming=False)

# ---------------------------------------------------------------------------- evolution
def test_widening_accepts_added_fields_and_names_the_rest(fake: FakeRegistry) -> None:
    fake.register_schema("orders-value", avro_schema(ORDER_V1))
    old = resolve_reader(spec())
    fake.register_schema("orders-value", avro_schema(ORDER_V2))
    new, added = check_widening(spec(), old, 2)
    assert new.version == 2 and [(f.name, f.dataType) for f in added] == [
        ("coupon", StringType())]
    retyped = {**ORDER_V1, "fields": [{"name": "order_id", "type": "long"},
                                      *ORDER_V1["fields"][1:]]}
    fake.register_schema("orders-value", avro_schema(retyped))
    with pytest.raises(ConfigError, match=r"subject orders-value version 3 is incompatible "
                                          r"with version 1 .* order_id changed type from "
                                          "string to bigint"):
        check_widening(spec(), old, 3)
    no_default = {**ORDER_V1, "fields": [*ORDER_V1["fields"],
                                         {"name": "note", "type": ["null", "string"]}]}
    fake.register_schema("orders-value", avro_schema(no_default))
    with pytest.raises(ConfigError, match=r"version 4 .* note have no default"):
        check_widening(spec(), old, 4)


# ---------------------------------------------------------------------------- encoding
def test_the_sink_encoder_registers_a_derived_schema(fake: FakeRegistry) -> None:
    row_type = StructType([StructField("id", StringType(), False),
                           StructField("amount", DecimalType(6, 2)),
                           StructField("at", TimestampType())])
    encoder = RegistryEncoder(spec("out-value"), row_type, "Row")
    encoder.prepare()
    assert fake.subjects["out-value"] == [encoder.schema_id]
    at = dt.datetime(2026, 1, 1, 9, 30)  # Arrow hands Spark's timestamps without a zone
    data = encoder.encode({"id": "a", "amount": decimal.Decimal("1.25"), "at": at})
    assert data is not None and data[:5] == struct.pack(">bI", 0, encoder.schema_id)
    s = spec("out-value")
    assert decoded(RegistryDecoder(s, resolve_reader(s)), data) == {"id": "a", "amount": decimal.Decimal("1.25"),
                       "at": at.replace(tzinfo=dt.UTC)}
    assert encoder.encode(None) is None


def test_the_sink_encoder_writes_json_schema_the_source_reads_back(fake: FakeRegistry) -> None:
    import base64

    import jsonschema

    address = StructType([StructField("city", StringType(), False),
                          StructField("zip", StringType())])
    row_type = StructType([
        StructField("id", StringType(), False), StructField("quantity", LongType(), False),
        StructField("price", DoubleType()), StructField("paid", BooleanType()),
        StructField("at", TimestampType()), StructField("day", DateType()),
        StructField("tags", ArrayType(StringType(), False)),
        StructField("ship_to", address), StructField("amount", DecimalType(6, 2)),
        StructField("blob", BinaryType()), StructField("extra", MapType(StringType(),
                                                                        LongType()))])
    encoder = RegistryEncoder(spec("out-value", fmt="json-schema"), row_type, "Order")
    encoder.prepare()
    assert fake.subjects["out-value"] == [encoder.schema_id]
    registered = fake.by_id[encoder.schema_id]
    assert registered.schema_type == "JSON"
    document = json.loads(registered.schema_str)
    assert document["title"] == "Order" and document["required"] == ["id", "quantity"]
    at = dt.datetime(2026, 1, 1, 9, 30)  # Arrow hands Spark's timestamps without a zone
    row = {"id": "a", "quantity": 3, "price": 2.5, "paid": True, "at": at,
           "day": dt.date(2026, 1, 2), "tags": ["x", "y"],
           "ship_to": {"city": "Lyon", "zip": None}, "amount": decimal.Decimal("1.20"),
           "blob": b"\x00\xff", "extra": {"n": 1}}
    data = encoder.encode(row)
    assert data is not None and data[:5] == struct.pack(">bI", 0, encoder.schema_id)
    payload = json.loads(data[5:])
    jsonschema.Draft7Validator(document).validate(payload)  # an independent judge
    assert payload["amount"] == "1.20" and base64.b64decode(payload["blob"]) == b"\x00\xff"
    assert payload["at"] == "2026-01-01T09:30:00+00:00"
    # the negative control: the schema refuses what it must
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(document).validate({**payload, "quantity": None})
    s = spec("out-value", fmt="json-schema")
    back = decoded(RegistryDecoder(s, resolve_reader(s)), data)
    assert back["id"] == "a" and back["quantity"] == 3 and back["price"] == 2.5
    assert back["at"] == at.replace(tzinfo=dt.UTC) and back["day"] == dt.date(2026, 1, 2)
    assert back["tags"] == ["x", "y"] and back["ship_to"] == {"city": "Lyon", "zip": None}
    assert encoder.encode(None) is None


def test_the_sink_encoder_writes_protobuf_the_source_reads_back(fake: FakeRegistry) -> None:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

    item = StructType([StructField("sku", StringType(), False),
                       StructField("qty", IntegerType(), False)])
    row_type = StructType([
        StructField("id", StringType(), False), StructField("quantity", LongType(), False),
        StructField("coupon", StringType()), StructField("price", DoubleType()),
        StructField("at", TimestampType()), StructField("day", DateType()),
        StructField("amount", DecimalType(6, 2)), StructField("tags", ArrayType(StringType())),
        StructField("lines", ArrayType(item, False)),
        StructField("ship_to", StructType([StructField("city", StringType())])),
        StructField("extra", MapType(StringType(), LongType(), False))])
    s = spec("out-value", fmt="protobuf")
    encoder = RegistryEncoder(s, row_type, "Order")
    encoder.prepare()
    registered = fake.by_id[encoder.schema_id]
    assert registered.schema_type == "PROTOBUF"
    at = dt.datetime(2026, 1, 1, 9, 30, 0, 250000)  # Arrow: Spark's timestamps without a zone
    row = {"id": "a", "quantity": 3, "coupon": None, "price": 2.5, "at": at,
           "day": dt.date(2026, 1, 2), "amount": decimal.Decimal("1.20"), "tags": ["x"],
           "lines": [{"sku": "s1", "qty": 2}], "ship_to": {"city": None},
           "extra": [("n", 1)]}  # a map as Arrow's to_pylist gives it
    data = encoder.encode(row)
    assert data is not None and data[:6] == struct.pack(">bI", 0, encoder.schema_id) + b"\0"
    # an independent judge: protobuf's own parser, with a class built from the registered
    # file descriptor, not from millrace's mapping
    file = descriptor_pb2.FileDescriptorProto.FromString(
        __import__("base64").b64decode(registered.schema_str))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(
        timestamp_pb2.DESCRIPTOR.serialized_pb))
    pool.Add(file)
    order = message_factory.GetMessageClass(pool.FindMessageTypeByName("millrace.Order"))
    message = order.FromString(data[6:])
    assert (message.id, message.quantity, message.price) == ("a", 3, 2.5)
    assert not message.HasField("coupon") and message.HasField("ship_to")
    assert message.at.ToDatetime() == at and message.day == "2026-01-02"
    assert message.amount == "1.20" and list(message.tags) == ["x"]
    assert [(line.sku, line.qty) for line in message.lines] == [("s1", 2)]
    assert dict(message.extra) == {"n": 1}
    back = decoded(RegistryDecoder(s, resolve_reader(s)), data)
    assert back["id"] == "a" and back["coupon"] is None and back["at"] == at.replace(
        tzinfo=dt.UTC)
    assert back["lines"] == [{"sku": "s1", "qty": 2}] and dict(back["extra"]) == {"n": 1}
    assert back["ship_to"] == {"city": None}
    # a null the message cannot hold is named, not dropped
    with pytest.raises(ValueError, match=r"tags\[1\] is null"):
        encoder.encode({**row, "tags": ["x", None]})
    assert encoder.encode(None) is None


def test_the_sink_checks_values_against_a_pinned_json_schema(fake: FakeRegistry) -> None:
    document = {"type": "object", "title": "Order", "required": ["order_id", "quantity"],
                "properties": {"order_id": {"type": "string"},
                               "quantity": {"type": "integer", "minimum": 1}}}
    fake.register_schema("pinned-value", Schema(json.dumps(document), "JSON"))
    row_type = StructType([StructField("order_id", StringType(), False),
                           StructField("quantity", LongType(), False)])
    encoder = RegistryEncoder(RegistryFormat("json-schema", URL, "pinned-value", 1), row_type,
                              "Order")
    encoder.prepare()
    data = encoder.encode({"order_id": "o1", "quantity": 2})
    assert data is not None and json.loads(data[5:]) == {"order_id": "o1", "quantity": 2}
    with pytest.raises(ValueError, match=r"quantity does not fit subject pinned-value "
                                         r"version 1: 0 is less than the minimum of 1"):
        encoder.encode({"order_id": "o2", "quantity": 0})


def test_the_sink_refuses_what_its_format_cannot_hold(fake: FakeRegistry) -> None:
    row_type = StructType([StructField("id", StringType(), False)])
    with pytest.raises(SchemaMappingError, match="value column must be a struct"):
        RegistryEncoder(spec("out-value", fmt="protobuf"), StringType(), "Row").prepare()
    nested = StructType([StructField("grid", ArrayType(ArrayType(LongType())))])
    with pytest.raises(SchemaMappingError, match="repeated fields do not nest"):
        RegistryEncoder(spec("out-value", fmt="protobuf"), nested, "Row").prepare()
    fake.register_schema("out-value", avro_schema({"type": "record", "name": "Row", "fields": [
        {"name": "id", "type": "string"}]}))
    pinned = RegistryFormat("json-schema", URL, "out-value", 1)
    with pytest.raises(ConfigError, match="version 1 is AVRO, not JSON"):
        RegistryEncoder(pinned, row_type, "Row").prepare()


# ---------------------------------------------------------------------------- options
def options(**extra: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "orders", **extra}


def test_source_options_for_registry_formats() -> None:
    parsed = SourceOptions.parse(options(valueFormat="avro", **{"schema.registry.url": URL}),
                                 streaming=True)
    assert parsed.value_format == RegistryFormat("avro", URL, "orders-value")
    assert parsed.key_format is None and not parsed.permissive
    both = SourceOptions.parse(options(valueFormat="json-schema", keyFormat="avro",
                                       mode="permissive", subject="s",
                                       **{"schema.registry.url": URL, "schema.version": "3",
                                          "schema.registry.basic.auth.user.info": "u:secret"}),
                               streaming=True)
    assert both.value_format.subject == "s" and both.value_format.version == 3
    assert both.key_format.subject == "orders-key" and both.permissive
    assert "secret" not in repr(both)
    bad = {
        "needs the option 'schema.registry.url'": options(valueFormat="avro"),
        "'valueFormat': one of avro, json-schema, protobuf": options(
            valueFormat="thrift", **{"schema.registry.url": URL}),
        "'subject' is required": {**options(valueFormat="avro",
                                            **{"schema.registry.url": URL}),
                                  "subscribe": "a,b"},
        "'mode': FAILFAST": options(valueFormat="avro", mode="lenient",
                                    **{"schema.registry.url": URL}),
        "'mode' applies to decoding": options(mode="PERMISSIVE"),
        "'subject' needs the option 'valueFormat'": options(subject="x"),
    }
    for message, opts in bad.items():
        with pytest.raises(ConfigError, match=message):
            SourceOptions.parse(opts, streaming=True)


# ---------------------------------------------------------------------------- tables, demo
def test_a_table_gains_added_columns_only_when_asked(tmp_path: Any) -> None:
    from millrace.spark.sinks import open_database
    from millrace.spark.sinks.table import Column, TableSpec

    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    old = TableSpec("orders", (Column("order_id", "string"), Column("offset", "bigint")),
                    key=("order_id",), mode="latest", order=("offset",))
    new = TableSpec("orders", (*old.columns, Column("coupon", "string")), key=("order_id",),
                    mode="latest", order=("offset",))
    with open_database(url) as db:
        assert db.ensure_table(old) == []
        db.query("INSERT INTO orders VALUES ('o1', 1)")
        with pytest.raises(ConfigError, match=r"exists without column\(s\) coupon"):
            db.ensure_table(new)  # control: not asked to add
        assert db.ensure_table(new, add_columns=True) == ["coupon"]
        assert db.query("SELECT order_id, coupon, \"offset\" FROM orders") == [("o1", None, 1)]
        assert db.ensure_table(new, add_columns=True) == []


def test_the_demo_checks_coupons_against_the_events() -> None:
    from millrace.demo.avro import COUPON, check_coupons, coupon_for
    from millrace.demo.fold import Verification
    from millrace.demo.orders import OrderEventGenerator

    events = list(OrderEventGenerator(3).take(400))
    evolved_at = 200
    latest = {e.order_id: (i, e) for i, e in enumerate(events)}
    right = {o: coupon_for(e) if i >= evolved_at else None for o, (i, e) in latest.items()}
    assert COUPON in right.values() and None in right.values()
    passed = Verification(0, 0, 0, 0)
    check_coupons(passed, events, evolved_at, right)
    assert passed.passed
    # control: a coupon on an order whose latest event was written with version 1
    old = next(o for o, (i, _) in latest.items() if i < evolved_at)
    failed = Verification(0, 0, 0, 0)
    check_coupons(failed, events, evolved_at, {**right, old: COUPON})
    assert failed.mismatch_count == 1 and failed.mismatches[0].key == old


def test_the_registry_credentials_are_hidden_in_the_pipeline_config() -> None:
    from millrace.spark.pipeline.config import SourceConfig

    source = SourceConfig("127.0.0.1:9092", "orders", options={
        "schema.registry.basic.auth.user.info": "user:s3cr3t", "subject": "orders-value"})
    assert "s3cr3t" not in repr(source) and "orders-value" in repr(source)


def test_keys_decode_with_their_own_subject(fake: FakeRegistry) -> None:
    key_id = fake.register_schema("orders-key", avro_schema("string"))
    v1 = fake.register_schema("orders-value", avro_schema(ORDER_V1))
    key_spec = spec("orders-key")
    decoding = Decoding(key=RegistryDecoder(key_spec, resolve_reader(key_spec)),
                        value=RegistryDecoder(spec(), resolve_reader(spec())), permissive=True)
    value_type = avro_spark_type(fastavro.parse_schema(ORDER_V1))[0]
    builder = _BatchBuilder(arrow_schema(source_schema(False, StringType(), value_type,
                                                       permissive=True)), "orders", 1,
                            decoding)

    class Record:
        def __init__(self, offset: int, key: bytes) -> None:
            self.key, self.value, self.offset = key, avro_frame(v1, ORDER_V1, order(offset)), offset
            self.timestamp, self.timestamp_type, self.headers = 0, 0, None

    builder.add([Record(0, avro_frame(key_id, "string", "o0")), Record(1, b"\x00\x00")])
    rows = builder.build().to_pylist()
    assert rows[0]["key"] == "o0" and rows[0]["value"]["order_id"] == "o0"
    assert rows[1]["key"] is None and rows[1]["value"] is None
    assert rows[1]["decodeError"]["reason"].startswith("key does not decode: 2 bytes is too "
                                                        "short")


def test_a_top_level_bytes_schema_is_the_bytes_as_they_are(fake: FakeRegistry) -> None:
    schema_id = fake.register_schema("raw-value", avro_schema("bytes"))
    s = spec("raw-value")
    decoder = RegistryDecoder(s, resolve_reader(s))
    # as Confluent's AvroSerializer writes it: no Avro length prefix
    assert decoder.decode(struct.pack(">bI", 0, schema_id) + b"\x01\x02abc", where) == \
        b"\x01\x02abc"


def test_dates_and_timestamps_of_every_kind_reach_arrow_right(fake: FakeRegistry) -> None:
    def times(ts_kind: str) -> dict[str, Any]:
        return {"type": "record", "name": "T", "fields": [
            {"name": "id", "type": "string"},
            {"name": "ts", "type": ["null", {"type": "long", "logicalType": ts_kind}],
             "default": None},
            {"name": "day", "type": {"type": "int", "logicalType": "date"}},
            {"name": "local", "type": {"type": "long",
                                       "logicalType": "local-timestamp-micros"}}]}

    micros_id = fake.register_schema("t-value", avro_schema(times("timestamp-micros")))
    millis_id = fake.register_schema("t-value", avro_schema(times("timestamp-millis")))
    decoder = RegistryDecoder(spec("t-value"), resolve_reader(spec("t-value")))
    at = dt.datetime(2026, 3, 1, 12, 30, 15, 250_000, tzinfo=dt.UTC)
    datum = {"id": "a", "ts": at, "day": dt.date(2026, 3, 1),
             "local": dt.datetime(2026, 3, 1, 8, 0, 0, 1)}
    # same kinds as the reader (read as numbers), and a writer whose ts is in micros
    # (read as a datetime and made the reader's number): the same values either way
    for schema_id, kind in ((millis_id, "timestamp-millis"), (micros_id, "timestamp-micros")):
        assert decoded(decoder, avro_frame(schema_id, times(kind), datum)) == datum, kind
    assert decoded(decoder, avro_frame(millis_id, times("timestamp-millis"),
                                       {**datum, "ts": None}))["ts"] is None
