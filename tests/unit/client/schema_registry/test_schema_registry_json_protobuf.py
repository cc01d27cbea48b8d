"""JsonSchemaSerializer / ProtobufSerializer and their deserializers against the in-memory
registry: the bytes, validation, message indexes, references, caches and bad records."""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

import pytest

from millrace.client.errors import SerializationError
from millrace.client.schema_registry.json_schema import (
    JsonSchemaDeserializer,
    JsonSchemaSerializer,
)
from millrace.client.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from millrace.client.schema_registry.schemas import JSON, Schema
from millrace.client.serialization import resolve_deserializer, resolve_serializer
from tests.unit.client.schema_registry import protos
from tests.unit.client.schema_registry.fake_registry import FakeRegistry

ORDER_JSON: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "shop.Order",
    "type": "object", "required": ["id"],
    "properties": {"id": {"type": "integer"}, "customer": {"type": "string"}}}


@pytest.fixture
def registry() -> FakeRegistry:
    return FakeRegistry()


# ---------------------------------------------------------------------------- JSON Schema


def test_json_bytes_are_compact_utf8(registry: FakeRegistry) -> None:
    serializer = JsonSchemaSerializer(registry.client(), json.dumps(ORDER_JSON))
    data = serializer.serialize("orders", {"id": 1, "customer": "zoë"})
    assert data == b"\x00\x00\x00\x00\x01" + '{"id":1,"customer":"zoë"}'.encode()
    assert JsonSchemaDeserializer(registry.client()).deserialize("orders", data) == \
        {"id": 1, "customer": "zoë"}


def test_json_is_validated_on_write(registry: FakeRegistry) -> None:
    serializer = JsonSchemaSerializer(registry.client(), json.dumps(ORDER_JSON))
    with pytest.raises(SerializationError, match="at /customer: 3 is not of type 'string'"):
        serializer.serialize("orders", {"id": 1, "customer": 3})
    with pytest.raises(SerializationError, match="'id' is a required property"):
        serializer.serialize("orders", {"customer": "x"})
    unchecked = JsonSchemaSerializer(registry.client(), json.dumps(ORDER_JSON),
                                     conf={"validate": False})
    assert unchecked.serialize("orders", {"customer": 3})  # control: not validated


def test_json_validation_on_read_is_optional(registry: FakeRegistry) -> None:
    unchecked = JsonSchemaSerializer(registry.client(), json.dumps(ORDER_JSON),
                                     conf={"validate": False})
    data = unchecked.serialize("orders", {"customer": 3})
    assert JsonSchemaDeserializer(registry.client()).deserialize("orders", data) == \
        {"customer": 3}
    strict = JsonSchemaDeserializer(registry.client(), conf={"validate": True})
    with pytest.raises(SerializationError, match=r"schema id 1.*'id' is a required property"):
        strict.deserialize("orders", data)


def test_json_validation_against_the_latest_version(registry: FakeRegistry) -> None:
    data = JsonSchemaSerializer(registry.client(), json.dumps(ORDER_JSON)).serialize(
        "orders", {"id": 1})
    stricter = {**ORDER_JSON, "required": ["id", "customer"]}
    registry.client().register_schema("orders-value", Schema(json.dumps(stricter), JSON))
    latest = JsonSchemaDeserializer(registry.client(), conf={"validate": True,
                                                             "use.latest.version": True})
    with pytest.raises(SerializationError, match="'customer' is a required property"):
        latest.deserialize("orders", data)
    writer = JsonSchemaDeserializer(registry.client(), conf={"validate": True})
    assert writer.deserialize("orders", data) == {"id": 1}  # control: the writer's schema


def test_json_record_name_is_the_title(registry: FakeRegistry) -> None:
    serializer = JsonSchemaSerializer(registry.client(), json.dumps(ORDER_JSON),
                                      conf={"subject.name.strategy": "TopicRecordNameStrategy"})
    serializer.serialize("orders", {"id": 1})
    assert list(registry.subjects) == ["orders-shop.Order"]


def test_json_caches(registry: FakeRegistry) -> None:
    serializer = JsonSchemaSerializer(registry.client(), json.dumps(ORDER_JSON))
    records = [serializer.serialize("orders", {"id": i}) for i in range(200)]
    deserializer = JsonSchemaDeserializer(registry.client(), conf={"validate": True})
    assert [deserializer.deserialize("orders", r)["id"] for r in records] == list(range(200))
    assert (registry.count("POST"), registry.count("GET")) == (1, 1)


def test_json_bad_records(registry: FakeRegistry) -> None:
    good = JsonSchemaSerializer(registry.client(), json.dumps(ORDER_JSON)).serialize(
        "orders", {"id": 1})
    deserializer = JsonSchemaDeserializer(registry.client())
    assert deserializer.deserialize("orders", good) == {"id": 1}  # control
    with pytest.raises(SerializationError, match="unknown magic byte 0x7b"):
        deserializer.deserialize("orders", b'{"id":1}')
    with pytest.raises(SerializationError, match="schema id 77 is not known"):
        deserializer.deserialize("orders", struct.pack(">bI", 0, 77) + good[5:])
    with pytest.raises(SerializationError, match=r"the payload \(schema id 1\) is not JSON"):
        deserializer.deserialize("orders", good[:-2])


def test_json_by_name(registry: FakeRegistry, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("millrace.client.schema_registry.serdes.SchemaRegistryClient",
                        registry.client)
    configs = {"schema.registry.url": "http://registry.test:8081",
               "key.serializer.schema": json.dumps(ORDER_JSON),
               "json.fail.invalid.schema": "true"}
    serializer = resolve_serializer("json-schema", "key.serializer", configs, True)
    data = serializer.serialize("orders", {"id": 5})
    assert list(registry.subjects) == ["orders-key"]
    deserializer = resolve_deserializer("json-schema", "key.deserializer", configs, True)
    assert isinstance(deserializer, JsonSchemaDeserializer)
    assert deserializer.deserialize("orders", data) == {"id": 5}


# ---------------------------------------------------------------------------- Protobuf


def test_protobuf_bytes_index_and_schema(registry: FakeRegistry) -> None:
    shop = protos.classes()
    serializer = ProtobufSerializer(registry.client())
    order = shop.Order(id=7, customer="bob")
    order.lines.add(sku="x", qty=2)
    assert serializer.serialize("orders", order) == \
        b"\x00\x00\x00\x00\x01\x00" + order.SerializeToString()
    assert serializer.serialize("orders", shop.Refund(order_id=3)) == \
        b"\x00\x00\x00\x00\x01\x02\x02" + shop.Refund(order_id=3).SerializeToString()
    assert serializer.serialize("orders", shop.Line(sku="q")) == \
        b"\x00\x00\x00\x00\x01\x04\x00\x00" + shop.Line(sku="q").SerializeToString()
    # the registered schema is the file, base64 of its serialized descriptor
    schema = registry.schemas[1]
    assert schema.schema_type == "PROTOBUF"
    assert base64.b64decode(schema.schema_str) == shop.Order.DESCRIPTOR.file.serialized_pb
    assert registry.count("POST") == 1


def test_protobuf_reads_without_generated_code(registry: FakeRegistry) -> None:
    shop = protos.classes()
    serializer = ProtobufSerializer(registry.client())
    order = shop.Order(id=7, customer="bob", amount=1.5)
    order.lines.add(sku="x", qty=2)
    values = [order, shop.Refund(order_id=3), shop.Line(sku="q", qty=1)]
    records = [serializer.serialize("orders", v) for v in values]
    deserializer = ProtobufDeserializer(registry.client())
    decoded = [deserializer.deserialize("orders", r) for r in records]
    assert [d.DESCRIPTOR.full_name for d in decoded] == \
        ["shop.Order", "shop.Refund", "shop.Order.Line"]
    assert [d.SerializeToString() for d in decoded] == [v.SerializeToString() for v in values]
    assert decoded[0].lines[0].sku == "x"
    typed = ProtobufDeserializer(registry.client(), shop.Order)
    assert typed.deserialize("orders", records[0]) == order


def test_protobuf_imports_become_references(registry: FakeRegistry) -> None:
    shop = protos.classes(with_import=True)
    order = shop.Order(id=1, total=shop.Money(currency="EUR", cents=250))
    data = ProtobufSerializer(registry.client()).serialize("orders", order)
    assert sorted(registry.subjects) == ["orders-value", "shop/money.proto"]
    main = registry.schemas[registry.subjects["orders-value"][0]["id"]]
    assert [(r.name, r.subject, r.version) for r in main.references] == \
        [("shop/money.proto", "shop/money.proto", 1)]
    decoded = ProtobufDeserializer(registry.client()).deserialize("orders", data)
    assert decoded.total.currency == "EUR" and decoded.total.cents == 250


def test_protobuf_record_name_is_the_message_full_name(registry: FakeRegistry) -> None:
    shop = protos.classes()
    serializer = ProtobufSerializer(registry.client(),
                                    conf={"subject.name.strategy": "RecordNameStrategy"})
    serializer.serialize("orders", shop.Order(id=1))
    serializer.serialize("orders", shop.Refund(order_id=1))
    assert sorted(registry.subjects) == ["shop.Order", "shop.Refund"]


def test_protobuf_rejects_what_is_not_its_message(registry: FakeRegistry) -> None:
    shop = protos.classes()
    with pytest.raises(SerializationError, match="expected a protobuf Message, got a dict"):
        ProtobufSerializer(registry.client()).serialize("orders", {"id": 1})
    with pytest.raises(SerializationError, match="expected a Order, got a Refund"):
        ProtobufSerializer(registry.client(), shop.Order).serialize("orders", shop.Refund())


def test_protobuf_caches(registry: FakeRegistry) -> None:
    shop = protos.classes()
    serializer = ProtobufSerializer(registry.client())
    records = [serializer.serialize("orders", shop.Order(id=i)) for i in range(200)]
    deserializer = ProtobufDeserializer(registry.client())
    assert [deserializer.deserialize("orders", r).id for r in records] == list(range(200))
    assert (registry.count("POST"), registry.count("GET")) == (1, 1)


def test_protobuf_bad_records(registry: FakeRegistry) -> None:
    shop = protos.classes()
    good = ProtobufSerializer(registry.client()).serialize(
        "orders", shop.Order(id=1, customer="a long enough name"))
    deserializer = ProtobufDeserializer(registry.client())
    assert deserializer.deserialize("orders", good).id == 1  # control
    with pytest.raises(SerializationError, match="unknown magic byte 0x02"):
        deserializer.deserialize("orders", b"\x02" + good[1:])
    with pytest.raises(SerializationError, match="schema id 99 is not known"):
        deserializer.deserialize("orders", struct.pack(">bI", 0, 99) + good[5:])
    with pytest.raises(SerializationError, match=r"does not decode as shop.Order \(schema id 1"):
        deserializer.deserialize("orders", good[:-4])
    with pytest.raises(SerializationError, match="no message at index path"):
        deserializer.deserialize("orders", good[:5] + b"\x02\x08" + good[6:])  # index [4]
    with pytest.raises(SerializationError, match="message-index array is truncated"):
        deserializer.deserialize("orders", good[:5] + b"\x04\x02")
    with pytest.raises(SerializationError, match="ends before its message-index array"):
        deserializer.deserialize("orders", good[:5])


def test_protobuf_by_name_with_a_specific_type(registry: FakeRegistry,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    shop = protos.classes()
    monkeypatch.setattr("millrace.client.schema_registry.serdes.SchemaRegistryClient",
                        registry.client)
    configs = {"schema.registry.url": "http://registry.test:8081",
               "specific.protobuf.value.type": shop.Order}
    data = resolve_serializer("protobuf", "value.serializer", configs, False).serialize(
        "orders", shop.Order(id=9))
    deserializer = resolve_deserializer("protobuf", "value.deserializer", configs, False)
    value = deserializer.deserialize("orders", data)
    assert type(value) is shop.Order and value.id == 9
    # a message class and no registry: decoded without checking the id
    offline = resolve_deserializer(
        "io.confluent.kafka.serializers.protobuf.KafkaProtobufDeserializer",
        "value.deserializer", {"specific.protobuf.value.type": shop.Order}, False)
    assert offline.deserialize("orders", data).id == 9
