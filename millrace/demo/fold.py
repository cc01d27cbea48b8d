"""The tables the pipeline must produce, computed in plain Python, and the comparison.

``fold(events)`` replays the events in the order they were produced and keeps what the
two sinks keep:

- ``orders``: the latest event per ``order_id`` -- the last one produced for that key
  (one key lives in one partition, so "last produced" is "highest offset");
- ``revenue_per_minute``: for events with status ``paid``, the sum of ``quantity * price``
  and the count per product and one-minute window of event time (windows aligned on the
  minute in UTC, like Spark's tumbling ``window(event_time, "1 minute")``).

``verify(expected, orders_rows, revenue_rows)`` compares that with the rows read back from
the database and lists every difference (up to a limit): missing rows, extra rows and
cells that differ.  Revenues are sums of doubles added in a different order, so they are
compared with a tolerance; everything else must be equal.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from millrace.demo.orders import OrderEvent

WINDOW_MS = 60_000
REVENUE_STATUS = "paid"
ORDER_COLUMNS = ("order_id", "customer", "product", "quantity", "price", "status",
                 "event_time")
REVENUE_COLUMNS = ("window_start", "window_end", "product", "revenue", "orders")
REL_TOLERANCE = 1e-9
ABS_TOLERANCE = 1e-6


@dataclass
class WindowAggregate:
    revenue: float = 0.0
    orders: int = 0


@dataclass
class ExpectedTables:
    orders: dict[str, OrderEvent] = field(default_factory=dict)
    # (window start ms, product) -> aggregate
    revenue: dict[tuple[int, str], WindowAggregate] = field(default_factory=dict)
    events: int = 0


def fold(events: Iterable[OrderEvent], into: ExpectedTables | None = None) -> ExpectedTables:
    """Apply ``events`` (in production order) to ``into`` (default: empty tables)."""
    tables = into if into is not None else ExpectedTables()
    orders, revenue = tables.orders, tables.revenue
    count = 0
    for event in events:
        count += 1
        orders[event.order_id] = event
        if event.status == REVENUE_STATUS:
            start = event.event_time_ms - event.event_time_ms % WINDOW_MS
            agg = revenue.get((start, event.product))
            if agg is None:
                agg = revenue[(start, event.product)] = WindowAggregate()
            agg.revenue += event.quantity * event.price
            agg.orders += 1
    tables.events += count
    return tables


# ------------------------------------------------------------------ reading rows back


def epoch_ms(value: Any) -> int:
    """A timestamp cell as epoch milliseconds (UTC): a ``datetime`` (naive means UTC), an
    ISO 8601 string (``T`` or space, optional ``Z``/offset) or a number of seconds."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return round(value.timestamp() * 1000)
    if isinstance(value, str):
        text = value.strip().replace(" ", "T", 1)
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        return epoch_ms(dt.datetime.fromisoformat(text))
    if isinstance(value, int | float) and not isinstance(value, bool):
        return round(value * 1000)
    raise TypeError(f"not a timestamp: {value!r}")


def iso_ms(ms: int) -> str:
    """``2026-01-01 09:00:00`` (seconds) or with ``.125`` when there are milliseconds."""
    text = dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
    return text if ms % 1000 == 0 else f"{text}.{ms % 1000:03d}"


# ------------------------------------------------------------------ verification


@dataclass(frozen=True)
class Mismatch:
    table: str
    key: str
    column: str  # "" for a missing or extra row
    expected: Any
    actual: Any

    def describe(self) -> str:
        if self.actual is None and not self.column:
            return f"{self.table} {self.key}: missing (expected {self.expected})"
        if self.expected is None and not self.column:
            return f"{self.table} {self.key}: unexpected row {self.actual}"
        return (f"{self.table} {self.key}: {self.column} is {self.actual!r}, "
                f"expected {self.expected!r}")


@dataclass
class Verification:
    orders_expected: int
    orders_actual: int
    windows_expected: int
    windows_actual: int
    mismatch_count: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)  # the first ``limit``

    @property
    def passed(self) -> bool:
        return self.mismatch_count == 0


class _Collector:
    def __init__(self, result: Verification, limit: int) -> None:
        self.result, self.limit = result, limit

    def add(self, table: str, key: str, column: str, expected: Any, actual: Any) -> None:
        self.result.mismatch_count += 1
        if len(self.result.mismatches) < self.limit:
            self.result.mismatches.append(Mismatch(table, key, column, expected, actual))


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL_TOLERANCE, abs_tol=ABS_TOLERANCE)


def verify(expected: ExpectedTables, orders_rows: Sequence[Sequence[Any]],
           revenue_rows: Sequence[Sequence[Any]], limit: int = 20) -> Verification:
    """Compare the expected tables with rows read back in ``ORDER_COLUMNS`` and
    ``REVENUE_COLUMNS`` order."""
    result = Verification(len(expected.orders), len(orders_rows), len(expected.revenue),
                          len(revenue_rows))
    out = _Collector(result, limit)
    seen: set[str] = set()
    for row in orders_rows:
        order_id, customer, product, quantity, price, status, event_time = row
        order_id = str(order_id)
        event = expected.orders.get(order_id)
        if event is None or order_id in seen:
            out.add("orders", order_id, "", None, tuple(row))
            continue
        seen.add(order_id)
        cells = (("customer", event.customer, customer), ("product", event.product, product),
                 ("quantity", event.quantity, quantity), ("status", event.status, status))
        for column, want, got in cells:
            if want != got:
                out.add("orders", order_id, column, want, got)
        if price is None or not _close(event.price, float(price)):
            out.add("orders", order_id, "price", event.price, price)
        try:
            got_ms: int | None = epoch_ms(event_time)
        except (TypeError, ValueError):
            got_ms = None
        if got_ms != event.event_time_ms:
            out.add("orders", order_id, "event_time", iso_ms(event.event_time_ms), event_time)
    for order_id, event in expected.orders.items():
        if order_id not in seen:
            out.add("orders", order_id, "", event.to_dict(), None)

    found: set[tuple[int, str]] = set()
    for row in revenue_rows:
        window_start, window_end, product, revenue, orders = row
        try:
            start = epoch_ms(window_start)
        except (TypeError, ValueError):
            out.add("revenue_per_minute", f"{window_start} {product}", "", None, tuple(row))
            continue
        key = (start, str(product))
        label = f"{iso_ms(start)} {product}"
        agg = expected.revenue.get(key)
        if agg is None or key in found:
            out.add("revenue_per_minute", label, "", None, tuple(row))
            continue
        found.add(key)
        try:
            end_ok = epoch_ms(window_end) == start + WINDOW_MS
        except (TypeError, ValueError):
            end_ok = False
        if not end_ok:
            out.add("revenue_per_minute", label, "window_end", iso_ms(start + WINDOW_MS),
                    window_end)
        if revenue is None or not _close(agg.revenue, float(revenue)):
            out.add("revenue_per_minute", label, "revenue", round(agg.revenue, 2), revenue)
        if orders != agg.orders:
            out.add("revenue_per_minute", label, "orders", agg.orders, orders)
    for (start, product), agg in expected.revenue.items():
        if (start, product) not in found:
            out.add("revenue_per_minute", f"{iso_ms(start)} {product}", "",
                    {"revenue": round(agg.revenue, 2), "orders": agg.orders}, None)
    return result
