"""The demo with Avro-encoded orders: the schema, its one evolution, and the coupon check.

``millrace demo --value-format avro`` registers ``ORDER_V1`` under ``<topic>-value`` and
produces orders in Confluent's wire format (magic byte, schema id, Avro binary).  Half-way
through the first Avro run it registers ``ORDER_V2`` -- ``ORDER_V1`` plus an optional
``coupon`` (``["null", "string"]``, default null), a BACKWARD-compatible change -- and
writes the rest with it; ``DemoState.avro_evolved_at`` records the first event written
with version 2.  The pipeline reads the topic with the subject's latest version, so the
records of version 1 read ``coupon`` as null and the ``orders`` table gains the column.

``check_coupons`` verifies the column against the events: an order's coupon is that of
its latest event when that event was written with version 2 (``coupon_for``), else null.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from millrace.demo.fold import Mismatch, Verification
from millrace.demo.orders import OrderEvent

ORDER_V1: dict[str, Any] = {
    "type": "record", "name": "Order", "namespace": "millrace.demo", "fields": [
        {"name": "order_id", "type": "string"},
        {"name": "customer", "type": "string"},
        {"name": "product", "type": "string"},
        {"name": "quantity", "type": "int"},
        {"name": "price", "type": "double"},
        {"name": "status", "type": "string"},
        {"name": "event_time", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ]}
ORDER_V2: dict[str, Any] = {**ORDER_V1, "fields": [
    *ORDER_V1["fields"], {"name": "coupon", "type": ["null", "string"], "default": None}]}
COUPON = "WELCOME10"


def coupon_for(event: OrderEvent) -> str | None:
    """The coupon a version-2 event carries: every third order has one."""
    return COUPON if int(event.order_id[1:]) % 3 == 0 else None


def datum(event: OrderEvent, version: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "order_id": event.order_id, "customer": event.customer, "product": event.product,
        "quantity": event.quantity, "price": event.price, "status": event.status,
        "event_time": event.event_time_ms}
    if version >= 2:
        out["coupon"] = coupon_for(event)
    return out


class OrderEncoder:
    """Events -> Confluent-framed Avro values, by millrace's ``AvroSerializer`` (one per
    schema version; each registers its schema under ``<topic>-value`` on first use)."""

    def __init__(self, registry_url: str, topic: str) -> None:
        from millrace.client.schema_registry.avro import AvroSerializer
        from millrace.client.schema_registry.client import SchemaRegistryClient

        self.client = SchemaRegistryClient({"url": registry_url})
        self.topic = topic
        self._serializers = {version: AvroSerializer(self.client, json.dumps(schema))
                             for version, schema in ((1, ORDER_V1), (2, ORDER_V2))}

    def register(self, version: int) -> int:
        """Register version ``version``'s schema now (the serializer's first record finds
        it registered: the same id); its id."""
        from millrace.client.schema_registry.schemas import Schema

        schema = ORDER_V2 if version >= 2 else ORDER_V1
        return self.client.register_schema(f"{self.topic}-value", Schema(json.dumps(schema)))

    def encode(self, event: OrderEvent, version: int) -> bytes:
        value = self._serializers[version].serialize(self.topic, datum(event, version))
        assert value is not None
        return value


def check_coupons(verification: Verification, events: Iterable[OrderEvent], evolved_at: int,
                  coupons: Mapping[str, str | None], limit: int = 20) -> None:
    """Add to ``verification`` every order whose ``coupon`` cell is not the one its latest
    event carries (``events`` in production order; the events from index ``evolved_at`` on
    were written with version 2)."""
    latest: dict[str, tuple[int, OrderEvent]] = {}
    for index, event in enumerate(events):
        latest[event.order_id] = (index, event)
    for order_id, (index, event) in latest.items():
        want = coupon_for(event) if index >= evolved_at else None
        got = coupons.get(order_id)
        if order_id in coupons and got != want:
            verification.mismatch_count += 1
            if len(verification.mismatches) < limit:
                verification.mismatches.append(Mismatch("orders", order_id, "coupon", want,
                                                        got))
