"""parse_schema: the three schema types, references, canonical identity, and the errors
(each names the problem; the registry answers them as 42201)."""

from __future__ import annotations

import base64
import json

import pytest
from google.protobuf import descriptor_pb2

from millrace.client.schema_registry.schemas import (
    JSON,
    PROTOBUF,
    AvroSchema,
    InvalidSchemaError,
    ProtobufSchema,
    Schema,
    SchemaReference,
    parse_schema,
)

ADDRESS = json.dumps({"type": "record", "name": "Address", "namespace": "shop",
                      "fields": [{"name": "city", "type": "string"}]})


def resolve_address(ref: SchemaReference) -> Schema:
    assert (ref.subject, ref.version) == ("address", 1)
    return Schema(ADDRESS)


def test_avro_references_load_the_named_types_of_another_subject() -> None:
    order = Schema(json.dumps({"type": "record", "name": "Order", "namespace": "shop",
                               "fields": [{"name": "to", "type": "shop.Address"}]}),
                   references=(SchemaReference("shop.Address", "address", 1),))
    parsed = parse_schema(order, resolve_address)
    assert isinstance(parsed, AvroSchema) and parsed.name() == "shop.Order"
    assert "shop.Address" in parsed.named
    with pytest.raises(InvalidSchemaError, match=r"shop\.Address"):
        parse_schema(Schema(order.schema_str))  # the same text without its reference


def test_canonical_text_ignores_key_order_and_spaces_but_not_defaults() -> None:
    a = parse_schema(Schema('{"type": "record", "name": "R", "fields": '
                            '[{"name": "x", "type": "int", "default": 1}]}'))
    b = parse_schema(Schema('{"fields":[{"default":1,"type":"int","name":"x"}],'
                            '"name":"R","type":"record"}'))
    c = parse_schema(Schema('{"type": "record", "name": "R", "fields": '
                            '[{"name": "x", "type": "int", "default": 2}]}'))
    assert a.canonical() == b.canonical() != c.canonical()
    assert a == b and a != c


def test_json_schema_references_resolve_by_name() -> None:
    person = Schema(json.dumps({"title": "Person", "type": "object", "properties": {
        "age": {"$ref": "age.json"}}}), JSON, (SchemaReference("age.json", "age", 1),))
    parsed = parse_schema(person, lambda ref: Schema('{"type": "integer", "minimum": 0}', JSON))
    assert parsed.name() == "Person"
    assert [e.message for e in parsed.validator.iter_errors({"age": -1})]  # type: ignore[attr-defined]
    assert not list(parsed.validator.iter_errors({"age": 3}))  # type: ignore[attr-defined]


def order_descriptor() -> descriptor_pb2.FileDescriptorProto:
    fdp = descriptor_pb2.FileDescriptorProto(name="order.proto", package="shop",
                                             syntax="proto3")
    order = fdp.message_type.add(name="Order")
    order.field.add(name="id", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    order.nested_type.add(name="Line")
    fdp.message_type.add(name="Refund")
    return fdp


def test_protobuf_as_confluents_base64_descriptor_and_message_indexes() -> None:
    text = base64.b64encode(order_descriptor().SerializeToString()).decode()
    parsed = parse_schema(Schema(text, PROTOBUF))
    assert isinstance(parsed, ProtobufSchema) and parsed.name() == "shop.Order"
    assert parsed.message([0]).full_name == "shop.Order"
    assert parsed.message([0, 0]).full_name == "shop.Order.Line"
    assert parsed.message([1]).full_name == "shop.Refund"
    assert parsed.indexes_of("shop.Order.Line") == [0, 0]
    with pytest.raises(InvalidSchemaError, match="index path"):
        parsed.message([5])


def test_protobuf_as_proto_text_is_compiled_with_protoc() -> None:
    pytest.importorskip("grpc_tools")  # the proto-text extra; the test extra installs it
    text = ('syntax = "proto3";\npackage shop;\nimport "google/protobuf/timestamp.proto";\n'
            "message Order { int64 id = 1; google.protobuf.Timestamp at = 2; }\n")
    parsed = parse_schema(Schema(text, PROTOBUF))
    assert parsed.name() == "shop.Order"
    with pytest.raises(InvalidSchemaError, match=r"schema.proto:1:\d+"):
        parse_schema(Schema('syntax = "proto3"; message { oops', PROTOBUF))


@pytest.mark.parametrize("schema, message", [
    (Schema('{"type": "record", "name": "R"}'), "fields"),
    (Schema('{"type": "enum", "name": "E"}'), "symbols"),
    (Schema('{"type": "record", "name": "R", "fields": [{"name": "f", "type": '
            '{"type": "fixed", "name": "F"}}]}'), "size"),
    (Schema("{"), "not valid JSON"),
    (Schema('{"type": "object", "properties": 7}', JSON), "invalid JSON Schema"),
    (Schema('{"type": "string"}', JSON, (SchemaReference("x", "avro-subject", 1),)),
     "JSON Schemas only"),
])
def test_invalid_schemas_name_the_problem(schema: Schema, message: str) -> None:
    with pytest.raises(InvalidSchemaError, match=message):
        parse_schema(schema, lambda ref: Schema('"string"'))


def test_references_nested_too_deep_are_refused() -> None:
    loop = Schema('"string"', references=(SchemaReference("x", "s", 1),))
    with pytest.raises(InvalidSchemaError, match="deeper"):
        parse_schema(loop, lambda ref: loop)


def test_the_rest_bodies_are_checked() -> None:
    assert Schema.from_json({"schema": '"int"'}) == Schema('"int"')
    for body, message in (({}, "non-empty"), ({"schema": '"int"', "schemaType": "XML"}, "XML"),
                          ({"schema": '"int"', "references": [{"name": "a"}]}, "subject"),
                          ([], "object")):
        with pytest.raises(InvalidSchemaError, match=message):
            Schema.from_json(body)
