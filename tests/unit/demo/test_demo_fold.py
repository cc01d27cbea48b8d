"""The expected tables from hand-made events, and the comparison with rows read back."""

from __future__ import annotations

import datetime as dt

import pytest

from millrace.demo.fold import ExpectedTables, epoch_ms, fold, iso_ms, verify
from millrace.demo.orders import EPOCH_MS, OrderEvent

MIN = 60_000


def ev(order_id: str, status: str, at_ms: int, product: str = "scale", quantity: int = 1,
       price: float = 10.0) -> OrderEvent:
    return OrderEvent(order_id, "c1", product, quantity, price, status, EPOCH_MS + at_ms)


EVENTS = [
    ev("a", "created", 0, quantity=2, price=2.5),
    ev("b", "created", 1_000, product="tamper"),
    ev("a", "paid", 59_999, quantity=2, price=2.5),     # window 09:00
    ev("b", "paid", 60_000, product="tamper"),          # window 09:01
    ev("c", "created", 61_000),
    ev("c", "paid", 62_000, quantity=3, price=1.25),    # window 09:01, scale
    ev("a", "shipped", 200_000, quantity=2, price=2.5),
    ev("d", "paid", 30_000, quantity=4, price=0.5),     # late, window 09:00
    ev("b", "cancelled", 300_000, product="tamper"),
]


def test_latest_event_per_order_wins() -> None:
    tables = fold(EVENTS)
    assert tables.events == len(EVENTS)
    assert {k: v.status for k, v in tables.orders.items()} == {
        "a": "shipped", "b": "cancelled", "c": "paid", "d": "paid"}
    assert tables.orders["a"].event_time_ms == EPOCH_MS + 200_000


def test_paid_revenue_per_product_and_minute() -> None:
    revenue = fold(EVENTS).revenue
    summary = {(start - EPOCH_MS, product): (agg.revenue, agg.orders)
               for (start, product), agg in revenue.items()}
    assert summary == {(0, "scale"): (5.0 + 2.0, 2), (MIN, "tamper"): (10.0, 1),
                       (MIN, "scale"): (3.75, 1)}


def test_folding_in_parts_equals_folding_at_once() -> None:
    parts = fold(EVENTS[5:], into=fold(EVENTS[:5]))
    whole = fold(EVENTS)
    assert parts.orders == whole.orders and parts.events == whole.events
    assert {k: (v.revenue, v.orders) for k, v in parts.revenue.items()} == \
        {k: (v.revenue, v.orders) for k, v in whole.revenue.items()}


def order_rows(tables: ExpectedTables) -> list[tuple[object, ...]]:
    return [(e.order_id, e.customer, e.product, e.quantity, e.price, e.status,
             iso_ms(e.event_time_ms)) for e in tables.orders.values()]


def revenue_rows(tables: ExpectedTables) -> list[tuple[object, ...]]:
    return [(dt.datetime.fromtimestamp(start / 1000, dt.UTC).replace(tzinfo=None),
             iso_ms(start + MIN), product, agg.revenue, agg.orders)
            for (start, product), agg in tables.revenue.items()]


def test_matching_rows_pass() -> None:
    tables = fold(EVENTS)
    result = verify(tables, order_rows(tables), revenue_rows(tables))
    assert result.passed, result.mismatches
    assert (result.orders_actual, result.windows_actual) == (4, 3)


def test_each_kind_of_difference_is_reported() -> None:
    tables = fold(EVENTS)
    orders = order_rows(tables)
    orders[0] = (*orders[0][:5], "paid", orders[0][6])          # a: stale status
    del orders[1]                                                # b: missing
    orders.append(("zz", "c1", "scale", 1, 1.0, "paid", iso_ms(EPOCH_MS)))  # extra
    revenue = revenue_rows(tables)
    start, end, product, total, count = revenue[0]
    revenue[0] = (start, end, product, total + 0.01, count + 1)  # off by a cent and one
    result = verify(tables, orders, revenue)
    assert not result.passed
    described = [m.describe() for m in result.mismatches]
    assert result.mismatch_count == 5, described
    assert "orders a: status is 'paid', expected 'shipped'" in described
    assert any(d.startswith("orders b: missing") for d in described)
    assert any(d.startswith("orders zz: unexpected row") for d in described)
    assert any("revenue is" in d for d in described)
    assert any("orders is 3, expected 2" in d for d in described)


def test_sums_added_in_another_order_still_match_but_a_wrong_window_does_not() -> None:
    tables = fold(EVENTS)
    revenue = revenue_rows(tables)
    start, end, product, total, count = revenue[0]
    revenue[0] = (start, end, product, total * (1 + 1e-13), count)
    assert verify(tables, order_rows(tables), revenue).passed
    revenue[0] = (start, iso_ms(EPOCH_MS + 2 * MIN), product, total, count)
    result = verify(tables, order_rows(tables), revenue)
    assert [m.column for m in result.mismatches] == ["window_end"]


def test_mismatch_list_is_capped_but_counted() -> None:
    tables = fold(EVENTS)
    result = verify(tables, [], [], limit=2)
    assert result.mismatch_count == 7 and len(result.mismatches) == 2


@pytest.mark.parametrize("cell", [
    dt.datetime(2026, 1, 1, 9, 0, 1, 5000),
    dt.datetime(2026, 1, 1, 10, 0, 1, 5000, tzinfo=dt.timezone(dt.timedelta(hours=1))),
    "2026-01-01 09:00:01.005", "2026-01-01T09:00:01.005Z", "2026-01-01T09:00:01.005+00:00",
    1_767_258_001.005,
])
def test_timestamp_cells_in_the_forms_databases_return(cell: object) -> None:
    assert epoch_ms(cell) == EPOCH_MS + 1_005
