"""A seeded stream of order events: the demo's input, and the bench's.

Each order is keyed by its id and moves through a small life cycle, one event per step::

    created -> paid -> shipped -> delivered
       |         |
       +---------+--> cancelled        (before shipping only)

Theory of operation.  The generator is a discrete-event simulation on a virtual clock
that starts at ``EPOCH_MS``: new orders arrive with exponential gaps, and every order has
its next step scheduled at a later instant in a heap.  The next event emitted is whichever
comes first -- an arrival or the earliest scheduled step -- so events come out in the
order they happen, like a shop's outbox.  Each event's ``event_time`` is the instant it
happened; a minority of events is *delivered late* (a phone that was offline): their
event time lies up to ``MAX_LATENESS_MS`` before the emission instant.  That bound is
far inside the pipeline's 10-minute watermark, so no event is ever too late to count.
Steps of one order are at least ``MIN_STEP_MS`` apart (more than the lateness bound), so
an order's event times increase along its life.

Everything is drawn from one ``random.Random(seed)``: the same seed gives the same
stream, and the first N events do not depend on how many are taken afterwards, so a
later run can continue a stream by skipping what an earlier run produced.
"""

from __future__ import annotations

import heapq
import json
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice

EPOCH_MS = 1_767_258_000_000  # 2026-01-01T09:00:00Z: the virtual clock's start
MAX_LATENESS_MS = 60_000      # a late event's time is at most this far behind its emission
MIN_STEP_MS = 90_000          # the least time between two steps of one order
LATE_SHARE = 0.1              # share of events delivered late
MEAN_ARRIVAL_GAP_MS = 250.0   # 4 new orders per virtual second, ~13 events per second
CUSTOMERS = 5_000

STATUSES = ("created", "paid", "shipped", "delivered", "cancelled")

# product -> list price; an order's price is this less a per-order discount of 0-20 %
CATALOG: dict[str, float] = {
    "espresso-beans": 14.90, "pour-over-kettle": 39.00, "burr-grinder": 129.00,
    "french-press": 29.50, "milk-frother": 24.99, "travel-mug": 19.95,
    "ceramic-cup": 8.50, "paper-filters": 4.99, "scale": 54.00,
    "cold-brew-jar": 22.00, "tamper": 17.25, "descaler": 9.99,
}
PRODUCTS = tuple(CATALOG)

# (from status) -> [(to status, weight, least delay ms, most delay ms)]
_TRANSITIONS: dict[str, list[tuple[str, float, int, int]]] = {
    "created": [("paid", 0.85, MIN_STEP_MS, 300_000),
                ("cancelled", 0.15, MIN_STEP_MS, 900_000)],
    "paid": [("shipped", 0.95, 300_000, 1_800_000),
             ("cancelled", 0.05, MIN_STEP_MS, 1_800_000)],
    "shipped": [("delivered", 1.0, 600_000, 3_600_000)],
}


@dataclass(frozen=True, slots=True)
class OrderEvent:
    """One change of an order; the record value is its JSON (``to_json``), the key its id."""

    order_id: str
    customer: str
    product: str
    quantity: int
    price: float
    status: str
    event_time_ms: int

    @property
    def key(self) -> bytes:
        return self.order_id.encode()

    @property
    def revenue(self) -> float:
        return self.quantity * self.price

    def to_dict(self) -> dict[str, object]:
        return {"order_id": self.order_id, "customer": self.customer, "product": self.product,
                "quantity": self.quantity, "price": self.price, "status": self.status,
                "event_time": format_event_time(self.event_time_ms)}

    def to_json(self) -> bytes:
        return json.dumps(self.to_dict(), separators=(",", ":")).encode()


def format_event_time(ms: int) -> str:
    """``2026-01-01T09:00:00.125Z``: ISO 8601 in UTC with milliseconds, which Spark's JSON
    reader parses as a TIMESTAMP with its default format."""
    seconds, millis = divmod(ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


@dataclass(slots=True)
class _Order:
    order_id: str
    customer: str
    product: str
    quantity: int
    price: float
    status: str
    last_event_ms: int


class OrderEventGenerator:
    """An endless, seeded stream of ``OrderEvent``: ``islice(OrderEventGenerator(7), n)``."""

    def __init__(self, seed: int = 42, epoch_ms: int = EPOCH_MS) -> None:
        self.seed = seed
        self.epoch_ms = epoch_ms

    def __iter__(self) -> Iterator[OrderEvent]:
        rng = random.Random(self.seed)
        rand, uniform, expovariate = rng.random, rng.uniform, rng.expovariate
        # (due ms, tie-breaker, order, its status from then on); the tie-breaker is a
        # counter, so equal due times come out in a reproducible order
        pending: list[tuple[int, int, _Order, str]] = []
        next_arrival = float(self.epoch_ms)
        seq = scheduled = 0
        while True:
            if pending and pending[0][0] <= next_arrival:
                emitted_ms, _, order, status = heapq.heappop(pending)
                order.status = status
            else:
                emitted_ms = int(next_arrival)
                next_arrival += expovariate(1.0 / MEAN_ARRIVAL_GAP_MS)
                seq += 1
                product = PRODUCTS[int(rand() * len(PRODUCTS))]
                discount = int(rand() * 5) * 0.05  # 0, 5, 10, 15 or 20 % off
                bulk = rand() < 0.05
                order = _Order(order_id=f"o{seq:08d}",
                               customer=f"c{int(rand() * CUSTOMERS):05d}",
                               product=product,
                               quantity=1 + int(rand() * (10 if bulk else 3)),
                               price=round(CATALOG[product] * (1 - discount), 2),
                               status="created", last_event_ms=0)
            event_ms = emitted_ms
            if rand() < LATE_SHARE:
                event_ms -= int(uniform(0, MAX_LATENESS_MS))
            # an order's steps are MIN_STEP_MS > MAX_LATENESS_MS apart, so this only holds
            # the line against rounding: event times never go back along one order
            event_ms = max(event_ms, order.last_event_ms + 1)
            order.last_event_ms = event_ms
            yield OrderEvent(order.order_id, order.customer, order.product, order.quantity,
                             order.price, order.status, event_ms)
            steps = _TRANSITIONS.get(order.status)
            if steps:
                to, low, high = _pick_step(steps, rand())
                scheduled += 1
                heapq.heappush(pending,
                               (emitted_ms + int(uniform(low, high)), scheduled, order, to))

    def take(self, count: int, skip: int = 0) -> Iterator[OrderEvent]:
        """Events ``skip`` .. ``skip + count - 1`` of the stream."""
        return islice(iter(self), skip, skip + count)


def _pick_step(steps: list[tuple[str, float, int, int]], r: float) -> tuple[str, int, int]:
    """The step whose weight band holds ``r`` in [0, 1): (to status, least, most delay)."""
    for to, weight, low, high in steps:
        r -= weight
        if r < 0:
            return to, low, high
    to, _, low, high = steps[-1]
    return to, low, high
