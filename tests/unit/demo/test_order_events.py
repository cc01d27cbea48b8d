"""The order-event generator: reproducible, resumable, and within its promises."""

from __future__ import annotations

import json

from millrace.demo.orders import (
    CATALOG,
    EPOCH_MS,
    MAX_LATENESS_MS,
    OrderEvent,
    OrderEventGenerator,
    format_event_time,
)

ALLOWED_NEXT = {"created": {"paid", "cancelled"}, "paid": {"shipped", "cancelled"},
                "shipped": {"delivered"}, "delivered": set(), "cancelled": set()}


def test_same_seed_same_stream_other_seed_other_stream() -> None:
    a = list(OrderEventGenerator(7).take(5_000))
    assert a == list(OrderEventGenerator(7).take(5_000))
    assert a != list(OrderEventGenerator(8).take(5_000))


def test_a_stream_continues_where_an_earlier_take_stopped() -> None:
    whole = list(OrderEventGenerator(3).take(3_000))
    first = list(OrderEventGenerator(3).take(1_000))
    rest = list(OrderEventGenerator(3).take(2_000, skip=1_000))
    assert first + rest == whole


def test_orders_follow_the_life_cycle_and_keep_their_attributes() -> None:
    last: dict[str, OrderEvent] = {}
    for event in OrderEventGenerator(11).take(20_000):
        before = last.get(event.order_id)
        if before is None:
            assert event.status == "created"
            assert event.product in CATALOG
            assert 1 <= event.quantity <= 10
            assert 0.8 * CATALOG[event.product] - 0.01 <= event.price <= CATALOG[event.product]
        else:
            assert event.status in ALLOWED_NEXT[before.status], (before, event)
            assert (event.customer, event.product, event.quantity, event.price) == (
                before.customer, before.product, before.quantity, before.price)
            assert event.event_time_ms > before.event_time_ms
        last[event.order_id] = event
    statuses = {e.status for e in last.values()}
    assert statuses == {"created", "paid", "shipped", "delivered", "cancelled"}


def test_event_time_advances_with_lateness_inside_the_bound() -> None:
    newest = EPOCH_MS
    late = 0
    for event in OrderEventGenerator(5).take(20_000):
        assert event.event_time_ms >= newest - MAX_LATENESS_MS
        if event.event_time_ms < newest:
            late += 1
        newest = max(newest, event.event_time_ms)
    assert late > 100  # some events really are late
    assert newest - EPOCH_MS > 5 * 60_000  # and time moves on: several windows


def test_json_value_and_key() -> None:
    event = OrderEvent("o00000042", "c00007", "scale", 2, 48.6, "paid", EPOCH_MS + 61_005)
    assert event.key == b"o00000042"
    assert json.loads(event.to_json()) == {
        "order_id": "o00000042", "customer": "c00007", "product": "scale", "quantity": 2,
        "price": 48.6, "status": "paid", "event_time": "2026-01-01T09:01:01.005Z"}
    assert format_event_time(0) == "1970-01-01T00:00:00.000Z"
