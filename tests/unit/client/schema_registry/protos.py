"""Protobuf message classes built at run time from a FileDescriptorProto (no protoc).

``shop/order.proto``, package ``shop``::

    import "shop/money.proto";          (only in order_file(with_import=True))
    message Order { int64 id = 1; string customer = 2; double amount = 3;
                    message Line { string sku = 1; int32 qty = 2; }
                    repeated Line lines = 4;  shop.Money total = 5 (with the import) }
    message Refund { int64 order_id = 1; }

Message indexes: Order [0], Refund [1], Order.Line [0, 0].
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto


def _field(message: Any, name: str, number: int, kind: int, type_name: str = "",
           repeated: bool = False) -> None:
    field = message.field.add(name=name, number=number, type=kind,
                              label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL)
    if type_name:
        field.type_name = type_name


def money_file() -> descriptor_pb2.FileDescriptorProto:
    fdp = descriptor_pb2.FileDescriptorProto(name="shop/money.proto", package="shop",
                                             syntax="proto3")
    money = fdp.message_type.add(name="Money")
    _field(money, "currency", 1, _F.TYPE_STRING)
    _field(money, "cents", 2, _F.TYPE_INT64)
    return fdp


def order_file(with_import: bool = False) -> descriptor_pb2.FileDescriptorProto:
    fdp = descriptor_pb2.FileDescriptorProto(name="shop/order.proto", package="shop",
                                             syntax="proto3")
    order = fdp.message_type.add(name="Order")
    _field(order, "id", 1, _F.TYPE_INT64)
    _field(order, "customer", 2, _F.TYPE_STRING)
    _field(order, "amount", 3, _F.TYPE_DOUBLE)
    line = order.nested_type.add(name="Line")
    _field(line, "sku", 1, _F.TYPE_STRING)
    _field(line, "qty", 2, _F.TYPE_INT32)
    _field(order, "lines", 4, _F.TYPE_MESSAGE, ".shop.Order.Line", repeated=True)
    if with_import:
        fdp.dependency.append("shop/money.proto")
        _field(order, "total", 5, _F.TYPE_MESSAGE, ".shop.Money")
    refund = fdp.message_type.add(name="Refund")
    _field(refund, "order_id", 1, _F.TYPE_INT64)
    return fdp


def classes(with_import: bool = False) -> SimpleNamespace:
    """Order, Order.Line (as Line), Refund (and Money) in a pool of their own."""
    pool = descriptor_pool.DescriptorPool()
    found: dict[str, Any] = {}
    if with_import:
        pool.Add(money_file())
        found["Money"] = message_factory.GetMessageClass(
            pool.FindMessageTypeByName("shop.Money"))
    pool.Add(order_file(with_import))
    for name, full in (("Order", "shop.Order"), ("Line", "shop.Order.Line"),
                       ("Refund", "shop.Refund")):
        found[name] = message_factory.GetMessageClass(pool.FindMessageTypeByName(full))
    return SimpleNamespace(**found)
