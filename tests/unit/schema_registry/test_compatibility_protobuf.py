"""Protobuf compatibility: files built with descriptor_pb2 and sent as confluent-kafka sends
them (base64 of the serialized FileDescriptorProto), each pair checked both ways."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from millrace.client.schema_registry.schemas import ProtobufSchema, Schema, parse_schema
from millrace.schema_registry.compatibility import CompatibilityLevel, check
from tests.unit.schema_registry.compat_helpers import assert_levels, assert_verdict

T = descriptor_pb2.FieldDescriptorProto
OPTIONAL, REPEATED, REQUIRED = T.LABEL_OPTIONAL, T.LABEL_REPEATED, T.LABEL_REQUIRED


def fld(name: str, number: int, type_: int = T.TYPE_STRING, label: int = OPTIONAL,
        type_name: str = "", oneof: int | None = None, proto3_optional: bool = False) -> Any:
    field = T(name=name, number=number, type=type_, label=label)
    if type_name:
        field.type_name = type_name
    if oneof is not None:
        field.oneof_index = oneof
    if proto3_optional:
        field.proto3_optional = True
    return field


def msg(name: str, *fields: Any, oneofs: tuple[str, ...] = (), nested: tuple[Any, ...] = (),
        enums: tuple[Any, ...] = (), map_entry: bool = False) -> Any:
    message = descriptor_pb2.DescriptorProto(name=name)
    message.field.extend(fields)
    for oneof in oneofs:
        message.oneof_decl.add(name=oneof)
    message.nested_type.extend(nested)
    message.enum_type.extend(enums)
    if map_entry:
        message.options.map_entry = True
    return message


def file(*messages: Any, package: str = "shop", syntax: str = "proto3",
         enums: tuple[Any, ...] = ()) -> Any:
    fdp = descriptor_pb2.FileDescriptorProto(name="order.proto", package=package, syntax=syntax)
    fdp.message_type.extend(messages)
    fdp.enum_type.extend(enums)
    return fdp


def proto(fdp: Any) -> ProtobufSchema:
    text = base64.standard_b64encode(fdp.SerializeToString()).decode("ascii")
    parsed = parse_schema(Schema(text, "PROTOBUF"))
    assert isinstance(parsed, ProtobufSchema)
    return parsed


def order(*fields: Any, **kw: Any) -> Any:
    return file(msg("Order", fld("id", 1, T.TYPE_INT64), *fields, **kw),
                msg("Address", fld("street", 1)))


STATUS = descriptor_pb2.EnumDescriptorProto(name="Status", value=[
    descriptor_pb2.EnumValueDescriptorProto(name="NEW", number=0),
    descriptor_pb2.EnumValueDescriptorProto(name="PAID", number=1)])
STATUS_3 = descriptor_pb2.EnumDescriptorProto(name="Status", value=[*STATUS.value,
    descriptor_pb2.EnumValueDescriptorProto(name="SHIPPED", number=2)])


def line(qty_type: int) -> Any:
    return file(msg("Order", fld("lines", 2, T.TYPE_MESSAGE, REPEATED, ".shop.Order.Line"),
                    nested=(msg("Line", fld("qty", 1, qty_type)),)))


def with_map(value_type: int) -> Any:
    entry = msg("TagsEntry", fld("key", 1), fld("value", 2, value_type), map_entry=True)
    return file(msg("Order", fld("tags", 3, T.TYPE_MESSAGE, REPEATED, ".shop.Order.TagsEntry"),
                    nested=(entry,)))


# (id, writer, reader, reader reads writer's data, writer reads reader's data, reason)
CASES: list[tuple[str, Any, Any, bool, bool, str | None]] = [
    ("identical", order(fld("note", 2)), order(fld("note", 2)), True, True, None),
    ("field added", order(), order(fld("note", 2)), True, True, None),
    ("field removed", order(fld("note", 2)), order(), True, True, None),
    ("field renamed", order(fld("note", 2)), order(fld("comment", 2)), True, True, None),
    ("int32 -> int64 (both varint)", order(fld("n", 2, T.TYPE_INT32)),
     order(fld("n", 2, T.TYPE_INT64)), True, True, None),
    ("uint64 -> bool (both varint)", order(fld("n", 2, T.TYPE_UINT64)),
     order(fld("n", 2, T.TYPE_BOOL)), True, True, None),
    ("int32 -> sint32 (zigzag)", order(fld("n", 2, T.TYPE_INT32)),
     order(fld("n", 2, T.TYPE_SINT32)), False, False,
     "/Order.n (2): type changed from int32 to sint32 (incompatible wire encodings)"),
    ("string -> bytes", order(fld("note", 2)), order(fld("note", 2, T.TYPE_BYTES)), True, True,
     None),
    ("fixed32 -> sfixed32", order(fld("n", 2, T.TYPE_FIXED32)),
     order(fld("n", 2, T.TYPE_SFIXED32)), True, True, None),
    ("fixed32 -> fixed64", order(fld("n", 2, T.TYPE_FIXED32)),
     order(fld("n", 2, T.TYPE_FIXED64)), False, False, None),
    ("float -> double", order(fld("x", 2, T.TYPE_FLOAT)), order(fld("x", 2, T.TYPE_DOUBLE)),
     False, False, None),
    ("int32 -> string", order(fld("n", 2, T.TYPE_INT32)), order(fld("n", 2)), False, False,
     None),
    ("field number reused with another type", order(fld("note", 2)),
     order(fld("count", 2, T.TYPE_INT64)), False, False,
     "/Order.count (2): type changed from string to int64"),
    ("scalar -> message", order(fld("address", 2)),
     order(fld("address", 2, T.TYPE_MESSAGE, type_name=".shop.Address")), False, False,
     "kind changed from string to message Address"),
    ("message type changed",
     file(msg("Order", fld("a", 2, T.TYPE_MESSAGE, type_name=".shop.Address")),
          msg("Address"), msg("Location")),
     file(msg("Order", fld("a", 2, T.TYPE_MESSAGE, type_name=".shop.Location")),
          msg("Address"), msg("Location")), False, False,
     "type changed from message Address to message Location"),
    ("enum -> int32", file(msg("Order", fld("s", 2, T.TYPE_ENUM, type_name=".shop.Status")),
                           enums=(STATUS,)),
     file(msg("Order", fld("s", 2, T.TYPE_INT32)), enums=(STATUS,)), False, False,
     "kind changed"),
    ("enum value added (not checked: open enums)",
     file(msg("Order", fld("s", 2, T.TYPE_ENUM, type_name=".shop.Status")), enums=(STATUS,)),
     file(msg("Order", fld("s", 2, T.TYPE_ENUM, type_name=".shop.Status")), enums=(STATUS_3,)),
     True, True, None),
    ("message removed", order(), file(msg("Order", fld("id", 1, T.TYPE_INT64))), False, True,
     "/Address: message removed or renamed"),
    ("message renamed", file(msg("Order", fld("id", 1, T.TYPE_INT64))),
     file(msg("Purchase", fld("id", 1, T.TYPE_INT64))), False, False, "/Order: message removed"),
    ("package changed", order(), file(*order().message_type, package="billing"), False, False,
     "/: package changed from 'shop' to 'billing'"),
    ("nested message field type changed", line(T.TYPE_INT32), line(T.TYPE_STRING), False,
     False, "/Order.Line.qty (1): type changed from int32 to string"),
    ("map value type changed", with_map(T.TYPE_STRING), with_map(T.TYPE_INT32), False, False,
     "/Order.TagsEntry.value (2)"),
    ("repeated <-> singular string", order(fld("note", 2, label=REPEATED)), order(fld("note", 2)),
     True, True, None),
    ("repeated <-> singular int32", order(fld("n", 2, T.TYPE_INT32, REPEATED)),
     order(fld("n", 2, T.TYPE_INT32)), False, False, "changed from repeated to singular"),
    # oneofs
    ("oneof field removed",
     order(fld("card", 2, oneof=0), fld("iban", 3, oneof=0), oneofs=("payment",)),
     order(fld("card", 2, oneof=0), oneofs=("payment",)), False, True,
     "/Order.payment: oneof fields removed: iban (3)"),
    ("fields moved out of a oneof",
     order(fld("card", 2, oneof=0), fld("iban", 3, oneof=0), oneofs=("payment",)),
     order(fld("card", 2), fld("iban", 3)), False, False, "moved out of the oneof"),
    ("one field moved into a new oneof", order(fld("card", 2)),
     order(fld("card", 2, oneof=0), oneofs=("payment",)), True, False, None),
    ("oneof split in two",
     order(fld("card", 2, oneof=0), fld("iban", 3, oneof=0), oneofs=("payment",)),
     order(fld("card", 2, oneof=0), fld("iban", 3, oneof=1), oneofs=("a", "b")), False, False,
     "split between oneofs a, b"),
    ("proto3 optional (synthetic oneof) added", order(fld("n", 2, T.TYPE_INT32)),
     order(fld("n", 2, T.TYPE_INT32, oneof=0, proto3_optional=True), oneofs=("_n",)),
     True, True, None),
    ("proto2 required field added",
     file(msg("Order", fld("id", 1, T.TYPE_INT64, REQUIRED)), syntax="proto2"),
     file(msg("Order", fld("id", 1, T.TYPE_INT64, REQUIRED), fld("n", 2, T.TYPE_INT32,
                                                                   REQUIRED)), syntax="proto2"),
     False, True, "/Order.n (2): required field added"),
]


def test_table_size() -> None:
    assert len(CASES) >= 25
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize(("writer", "reader", "backward", "forward", "reason"),
                         [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_pair_both_ways(writer: Any, reader: Any, backward: bool, forward: bool,
                        reason: str | None) -> None:
    w, r = proto(writer), proto(reader)
    assert_verdict(r, w, backward, reason if not backward else None)
    assert_verdict(w, r, forward, reason if backward and not forward else None)
    assert_verdict(r, r, True)
    assert_verdict(w, w, True)



@pytest.mark.parametrize(("writer", "reader", "backward", "forward"),
                         [pytest.param(*c[1:5], id=c[0]) for c in CASES])
def test_every_pair_at_every_level(writer: Any, reader: Any, backward: bool,
                                   forward: bool) -> None:
    assert_levels(proto(reader), proto(writer), backward, forward)

def test_negative_control() -> None:
    (_, writer, reader, backward, _, _), = [c for c in CASES if c[0] == "int32 -> sint32 (zigzag)"]
    assert backward is False
    with pytest.raises(AssertionError, match="expected compatible"):
        assert_verdict(proto(reader), proto(writer), True)


def _message_class(fdp: Any, name: str) -> Any:
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


def test_the_wire_agrees_with_the_verdicts() -> None:
    """What the rules stand for, shown with real messages: int32 -> int64 keeps the value;
    int32 -> sint32 reads a different number (zigzag), which is why it is incompatible."""
    writer = order(fld("n", 2, T.TYPE_INT32))
    data = _message_class(writer, "shop.Order")(id=1, n=7).SerializeToString()
    assert _message_class(order(fld("n", 2, T.TYPE_INT64)), "shop.Order").FromString(data).n == 7
    assert _message_class(order(fld("n", 2, T.TYPE_SINT32)), "shop.Order").FromString(data).n != 7


def test_a_schema_as_confluent_kafka_sends_it() -> None:
    """The schema string confluent-kafka's ProtobufSerializer registers: base64 of the
    generated file's serialized descriptor."""
    from confluent_kafka.schema_registry.common.protobuf import _schema_to_str

    def sent(fdp: Any) -> ProtobufSchema:
        pool = descriptor_pool.DescriptorPool()
        pool.Add(fdp)
        parsed = parse_schema(Schema(_schema_to_str(pool.FindFileByName(fdp.name)),
                                     "PROTOBUF"))
        assert isinstance(parsed, ProtobufSchema)
        return parsed

    v1, v2 = sent(order()), sent(order(fld("note", 2)))
    v3 = sent(order(fld("note", 2, T.TYPE_INT32)))
    assert check(CompatibilityLevel.BACKWARD, v2, [v1]) == []
    assert check(CompatibilityLevel.FULL_TRANSITIVE, v2, [v1]) == []
    assert check(CompatibilityLevel.BACKWARD, v3, [v1, v2]) == [
        "the latest version (the new schema reading its data): /Order.note (2): type changed "
        "from string to int32 (incompatible wire encodings)"]
    assert check(CompatibilityLevel.NONE, v3, [v1, v2]) == []
