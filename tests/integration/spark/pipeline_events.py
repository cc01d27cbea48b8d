"""The pipeline tests' own order stream, the tables it must produce, and the comparison.

``events(n, seed)`` is a deterministic stream over a small pool of order ids, so most keys
are updated many times; event times advance 20 ms per event with up to 30 s of disorder,
far inside the 10-minute watermark (no event is ever late).  ``fold`` computes the
tables in plain Python: the last event produced per order id (one key lives in one
partition, so that is the highest offset), and per product and one-minute window of event
time the paid revenue and order count.  ``assert_tables`` compares them with the rows a
pipeline wrote.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from millrace.client.admin import KafkaAdminClient, NewTopic
from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.spark.sinks import open_database

VALUE_SCHEMA = ("order_id STRING, customer STRING, product STRING, quantity INT, "
                "price DOUBLE, status STRING, event_time TIMESTAMP")
ORDER_COLUMNS = ("order_id", "customer", "product", "quantity", "price", "status",
                 "event_time")
PRODUCTS = {"anvil": 49.5, "bellows": 12.25, "chisel": 7.75, "dowel": 0.35, "easel": 89.0}
STATUSES = ("created", "paid", "paid", "shipped", "cancelled")
EPOCH_MS = 1_767_261_600_000  # 2026-01-01 10:00:00 UTC
WINDOW_MS = 60_000


@dataclass(frozen=True)
class Event:
    order_id: str
    customer: str
    product: str
    quantity: int
    price: float
    status: str
    event_time_ms: int

    def to_json(self) -> bytes:
        stamp = dt.datetime.fromtimestamp(self.event_time_ms / 1000, dt.UTC)
        return json.dumps({
            "order_id": self.order_id, "customer": self.customer, "product": self.product,
            "quantity": self.quantity, "price": self.price, "status": self.status,
            "event_time": stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z",
        }).encode()


def events(count: int, seed: int = 7, keys: int = 250, start: int = 0) -> list[Event]:
    """Events ``start`` .. ``start + count - 1`` of the stream for ``seed``."""
    rng = random.Random(seed)
    out = []
    for i in range(start + count):
        product = rng.choice(list(PRODUCTS))
        event = Event(
            order_id=f"order-{rng.randrange(keys):04d}", customer=f"c{rng.randrange(40)}",
            product=product, quantity=rng.randint(1, 5),
            price=round(PRODUCTS[product] * rng.uniform(0.9, 1.1), 2),
            status=rng.choice(STATUSES),
            event_time_ms=EPOCH_MS + i * 20 - rng.randrange(30_000))
        if i >= start:
            out.append(event)
    return out


def create_topic(bootstrap: str, topic: str, partitions: int,
                 client: dict[str, str] | None = None) -> None:
    """``client``: more client settings (security) for the admin client."""
    with KafkaAdminClient({**(client or {}), "bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=partitions)]).all()


def produce(bootstrap: str, topic: str, stream: Iterable[Event],
            client: dict[str, str] | None = None) -> None:
    failures: list[BaseException] = []

    def on_completion(_metadata: Any, error: BaseException | None) -> None:
        if error is not None:
            failures.append(error)

    producer: KafkaProducer[bytes, bytes] = KafkaProducer(
        {**(client or {}), "bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    with producer:
        for event in stream:
            producer.send(ProducerRecord(topic, event.to_json(), key=event.order_id.encode()),
                          on_completion)
        producer.flush()
    assert not failures, failures[:3]


@dataclass
class Expected:
    orders: dict[str, Event]
    revenue: dict[tuple[int, str], tuple[float, int]]  # (window start ms, product)


def fold(stream: Iterable[Event]) -> Expected:
    orders: dict[str, Event] = {}
    revenue: dict[tuple[int, str], tuple[float, int]] = {}
    for e in stream:
        orders[e.order_id] = e
        if e.status == "paid":
            key = (e.event_time_ms - e.event_time_ms % WINDOW_MS, e.product)
            total, n = revenue.get(key, (0.0, 0))
            revenue[key] = (total + e.quantity * e.price, n + 1)
    return Expected(orders, revenue)


def epoch_ms(value: Any) -> int:
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    assert isinstance(value, dt.datetime), value
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return round(value.timestamp() * 1000)


def assert_tables(database: str, expected: Expected, orders_table: str = "orders",
                  revenue_table: str = "revenue_per_minute") -> None:
    """The tables hold exactly the fold: every key once with its last event, every
    (window, product) once with its sums."""
    db = open_database(database)
    try:
        orders = db.query(f"SELECT {', '.join(ORDER_COLUMNS)} FROM {orders_table}")
        revenue = db.query("SELECT window_start, window_end, product, revenue, orders "
                           f"FROM {revenue_table}")
    finally:
        db.close()
    got_orders = {}
    for order_id, customer, product, quantity, price, status, event_time in orders:
        got_orders[order_id] = Event(order_id, customer, product, quantity, price, status,
                                     epoch_ms(event_time))
    assert len(got_orders) == len(orders)
    assert got_orders == expected.orders
    got_revenue: dict[tuple[int, str], tuple[float, int]] = {}
    for start, end, product, total, n in revenue:
        assert epoch_ms(end) - epoch_ms(start) == WINDOW_MS
        got_revenue[(epoch_ms(start), product)] = (float(total), n)
    assert len(got_revenue) == len(revenue)
    assert got_revenue.keys() == expected.revenue.keys()
    for key, (total, n) in expected.revenue.items():
        got_total, got_n = got_revenue[key]
        assert got_n == n, (key, got_n, n)
        assert math.isclose(got_total, total, rel_tol=1e-9, abs_tol=1e-6), (key, got_total,
                                                                             total)


def pipeline_args(bootstrap: str, topic: str, name: str, database: str, checkpoint: Path,
                  batch: int, trigger: str = "available-now", orders_table: str = "orders",
                  revenue_table: str = "revenue_per_minute") -> list[str]:
    """``millrace pipeline run``'s flags for the order pipeline these events feed: the
    latest state per order and paid revenue per product and minute (one shared query),
    ``batch`` records per micro-batch, JSON lines on stdout."""
    return ["--bootstrap-server", bootstrap, "--topic", topic, "--name", name,
            "--option", "startingOffsets=earliest",
            "--option", f"maxOffsetsPerTrigger={batch}",
            "--value-format", "json", "--value-schema", VALUE_SCHEMA,
            "--state-table", orders_table, "--key", "order_id",
            "--aggregate-table", revenue_table, "--event-time", "event_time",
            "--window", "1 minute", "--watermark", "10 minutes", "--group-by", "product",
            "--aggregate", "revenue=sum(quantity * price)", "--aggregate", "orders=count(*)",
            "--where", "status = 'paid'", "--database", database,
            "--checkpoint", str(checkpoint), "--trigger", trigger, "--output", "json"]


class PipelineChild:
    """One ``millrace pipeline run`` child process in its own process group."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.log = log
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "millrace.cli.main", "pipeline", "run", *args],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL to the whole group, and wait until every member is gone."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.killpg(self.proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
        raise AssertionError("the pipeline's process group outlived SIGKILL")

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"pipeline did not finish in {timeout}s:\n"
                                 f"{self.output()}") from None
