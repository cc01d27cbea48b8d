"""Avro benchmark: serialize + produce with millrace's ``AvroSerializer`` and producer
against confluent-kafka's ``AvroSerializer`` and ``Producer``, same broker, same registry,
same run.

    .venv/bin/python bench/avro_produce.py [--records 300000] [--budget 8] [--repeat N]
    .venv/bin/python bench/avro_produce.py --quick            # under a minute

One ``millrace broker`` (``BrokerProcess``) and one ``millrace schema-registry`` on it
(``SchemaRegistryProcess``).  The records are orders of 7 fields (long, string, double,
int, boolean, an optional string and a timestamp-millis long), 1,000 distinct dicts made
before the clock starts and sent in turn (about 50 bytes of Avro each).

Cases, each client in turn (interleaved with ``--repeat``):

- **serialize**: the serializer alone, ``--records`` calls in a plain loop (no producer).
- **serialize+produce**: the producer sends ``--records`` records to partition 0 of a new
  one-partition topic, each value serialized on the way -- millrace's
  ``KafkaProducer(value_serializer=AvroSerializer(...))`` and ``send(ProducerRecord(...))``;
  confluent-kafka's ``produce(topic, serializer(value, ctx))`` -- then flushes.  The clock
  runs from the first send to the end of the flush.

Warm caches for both: before the clock starts each serializer has registered its schema
(the subject of the run's topic) and the producer has the topic's metadata, so the timed
loop does no HTTP.  Same producer settings where both have them: acks=1, linger.ms=5,
batch.size=256 KiB, no compression, idempotence off, delivery reports for errors only.

Checks (exit 1 on failure; timing never fails a run): the two serializers write the same
bytes for the same record (same registry, same schema: the same id); every topic's end
offset is the number of records sent; the last record of each run decodes with the other
client's deserializer.  Goal (reported, never asserted): serialize+produce, millrace >=
1.0x confluent-kafka.
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import (
    CLIENT_QUIET,
    BenchFailure,
    CpuMeter,
    Result,
    main_guard,
    median_runs,
    open_target,
    watermarks,
    write_json,
)
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer as ConfluentAvroDeserializer
from confluent_kafka.schema_registry.avro import AvroSerializer as ConfluentAvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.client.schema_registry.avro import AvroDeserializer, AvroSerializer
from millrace.client.schema_registry.client import SchemaRegistryClient
from millrace.testing.schema_registry import SchemaRegistryProcess

CLIENTS = ("millrace", "confluent-kafka")
LINGER_MS = 5
BATCH_SIZE = 256 * 1024
DISTINCT = 1_000
WARMUP = DISTINCT  # records sent before the clock starts

ORDER_SCHEMA = json.dumps({
    "type": "record", "name": "Order", "namespace": "bench.shop", "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "items", "type": "int"},
        {"name": "express", "type": "boolean"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "created", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ]})


def make_records() -> list[dict[str, Any]]:
    import datetime as dt

    t0 = dt.datetime(2026, 11, 29, tzinfo=dt.UTC)
    return [{"id": 1_000_000 + i, "customer": f"customer-{i % 97:03d}",
             "amount": round(5 + (i % 500) * 0.37, 2), "items": 1 + i % 9,
             "express": i % 3 == 0, "note": None if i % 4 else f"ring twice #{i}",
             "created": t0 + dt.timedelta(milliseconds=i)} for i in range(DISTINCT)]


# --------------------------------------------------------------------------- the runs

# (bootstrap, registry url, topic, records, count, budget) -> (records sent, seconds, last bytes)
Runner = Callable[[str, str, str, list[dict[str, Any]], int, float], tuple[int, float, bytes]]


def _loop(send: Callable[[dict[str, Any]], Any], records: list[dict[str, Any]], count: int,
          budget_s: float) -> int:
    """Send ``count`` records cycling through ``records``, checking the budget every
    10,000; the number sent."""
    deadline = time.perf_counter() + budget_s
    sent = 0
    while sent < count:
        n = min(10_000, count - sent)
        for i in range(n):
            send(records[(sent + i) % DISTINCT])
        sent += n
        if time.perf_counter() > deadline:
            break
    return sent


def millrace_serialize(bootstrap: str, url: str, topic: str, records: list[dict[str, Any]],
                       count: int, budget_s: float) -> tuple[int, float, bytes]:
    serializer = AvroSerializer(SchemaRegistryClient({"url": url}), ORDER_SCHEMA)
    serialize = serializer.serialize
    for r in records:
        serialize(topic, r)
    t0 = time.perf_counter()
    sent = _loop(lambda r: serialize(topic, r), records, count, budget_s)
    secs = time.perf_counter() - t0
    return sent, secs, serialize(topic, records[(sent - 1) % DISTINCT]) or b""


def confluent_serialize(bootstrap: str, url: str, topic: str, records: list[dict[str, Any]],
                        count: int, budget_s: float) -> tuple[int, float, bytes]:
    serializer = ConfluentAvroSerializer(ConfluentRegistryClient({"url": url}), ORDER_SCHEMA)
    ctx = SerializationContext(topic, MessageField.VALUE)
    for r in records:
        serializer(r, ctx)
    t0 = time.perf_counter()
    sent = _loop(lambda r: serializer(r, ctx), records, count, budget_s)
    secs = time.perf_counter() - t0
    return sent, secs, serializer(records[(sent - 1) % DISTINCT], ctx) or b""


def millrace_produce(bootstrap: str, url: str, topic: str, records: list[dict[str, Any]],
                     count: int, budget_s: float) -> tuple[int, float, bytes]:
    serializer = AvroSerializer(SchemaRegistryClient({"url": url}), ORDER_SCHEMA)
    p: KafkaProducer[Any, Any] = KafkaProducer(
        {"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": LINGER_MS,
         "batch.size": BATCH_SIZE, "compression.type": "none", "enable.idempotence": False},
        value_serializer=serializer)
    try:
        send = p.send
        for r in records[:WARMUP]:  # registers the schema; metadata for the topic
            send(ProducerRecord(topic, r, partition=0))
        p.flush()
        t0 = time.perf_counter()
        sent = _loop(lambda r: send(ProducerRecord(topic, r, partition=0)), records, count,
                     budget_s)
        p.flush()
        secs = time.perf_counter() - t0
    finally:
        p.close()
    return sent, secs, serializer.serialize(topic, records[(sent - 1) % DISTINCT]) or b""


def confluent_produce(bootstrap: str, url: str, topic: str, records: list[dict[str, Any]],
                      count: int, budget_s: float) -> tuple[int, float, bytes]:
    serializer = ConfluentAvroSerializer(ConfluentRegistryClient({"url": url}), ORDER_SCHEMA)
    ctx = SerializationContext(topic, MessageField.VALUE)
    errors: list[Any] = []
    p = Producer({"bootstrap.servers": bootstrap, **CLIENT_QUIET, "acks": "1",
                  "linger.ms": LINGER_MS, "batch.size": BATCH_SIZE,
                  "batch.num.messages": 100_000, "queue.buffering.max.messages": 1_000_000,
                  "queue.buffering.max.kbytes": 1_048_576, "compression.type": "none",
                  "enable.idempotence": False, "delivery.report.only.error": True})
    produce, poll = p.produce, p.poll

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    def send(r: dict[str, Any]) -> None:
        value = serializer(r, ctx)
        while True:
            try:
                produce(topic, value, partition=0, on_delivery=on_delivery)
                return
            except BufferError:
                poll(0.005)

    for r in records[:WARMUP]:
        send(r)
    p.flush(30)
    t0 = time.perf_counter()
    sent = _loop(send, records, count, budget_s)
    remaining = p.flush(60)
    secs = time.perf_counter() - t0
    if remaining or errors:
        raise BenchFailure(f"confluent-kafka: {remaining} records unsent, delivery errors "
                           f"{errors[:3]}")
    return sent, secs, serializer(records[(sent - 1) % DISTINCT], ctx) or b""


RUNNERS: dict[str, dict[str, Runner]] = {
    "serialize": {"millrace": millrace_serialize, "confluent-kafka": confluent_serialize},
    "serialize+produce": {"millrace": millrace_produce, "confluent-kafka": confluent_produce},
}


# --------------------------------------------------------------------------- checks


def check_same_bytes(url: str, records: list[dict[str, Any]]) -> None:
    """The two serializers agree byte for byte on every distinct record."""
    topic = "bench-avro-bytes"
    ours = AvroSerializer(SchemaRegistryClient({"url": url}), ORDER_SCHEMA)
    theirs = ConfluentAvroSerializer(ConfluentRegistryClient({"url": url}), ORDER_SCHEMA)
    ctx = SerializationContext(topic, MessageField.VALUE)
    for i, r in enumerate(records):
        a, b = ours.serialize(topic, r), theirs(r, ctx)
        if a != b:
            raise BenchFailure(f"record {i}: millrace wrote {a!r}, confluent-kafka {b!r}")


def check_decodes(url: str, topic: str, client: str, data: bytes,
                  expected: dict[str, Any]) -> None:
    """The other client's deserializer reads what ``client`` wrote."""
    if client == "millrace":
        value = ConfluentAvroDeserializer(ConfluentRegistryClient({"url": url}))(
            data, SerializationContext(topic, MessageField.VALUE))
    else:
        value = AvroDeserializer(SchemaRegistryClient({"url": url})).deserialize(topic, data)
    if value != expected:
        raise BenchFailure(f"{client}: {topic}: the last record read back as {value!r}")


def check_stored(bootstrap: str, topic: str, client: str, expected: int, url: str,
                 sample: dict[str, Any]) -> None:
    _low, stored = watermarks(bootstrap, topic)
    if stored != expected:
        raise BenchFailure(f"{client}: {topic}: sent {expected} records, the end offset is "
                           f"{stored}")
    c = Consumer({"bootstrap.servers": bootstrap, **CLIENT_QUIET, "group.id": "bench-avro",
                  "enable.auto.commit": False})
    try:  # the last record as stored, decoded by the other client's deserializer
        c.assign([TopicPartition(topic, 0, stored - 1)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = c.poll(1.0)
            if msg is not None and msg.error() is None:
                check_decodes(url, topic, client, msg.value(), sample)
                return
        raise BenchFailure(f"{client}: {topic}: could not read the last record back")
    finally:
        c.close()


# --------------------------------------------------------------------------- main


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=300_000, metavar="N",
                    help="records per run (default 300,000)")
    ap.add_argument("--budget", type=float, default=8.0, metavar="SECONDS",
                    help="a run stops after this long; its rate stays records/time (default 8)")
    ap.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="run every case N times, clients interleaved; the table shows the "
                         "median run (default 1)")
    ap.add_argument("--quick", action="store_true", help="a tenth of the records")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = ap.parse_args()
    if args.records < 1 or args.repeat < 1 or args.budget <= 0:
        ap.error("--records, --repeat and --budget must be positive")
    if args.quick:
        args.records = max(10_000, args.records // 10)
    return args


def print_table(results: list[Result]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    print(f"\nAvro serialize (+ produce to one millrace broker: acks=1, linger.ms={LINGER_MS},"
          f" batch.size={BATCH_SIZE // 1024} KiB, idempotence off), warm caches")
    header = (f"{'case':<18} {'client':<16} {'records':>9} {'secs':>6} {'rec/s':>11} "
              f"{'runs':>14} {'cpu brk/cli':>11} {'millrace/ck':>11}  goal")
    print(header)
    print("-" * len(header))
    for case in RUNNERS:
        by_client = {r.target: r for r in results if r.case == case}
        ours, theirs = by_client.get("millrace"), by_client.get("confluent-kafka")
        ratio = ours.rec_s / theirs.rec_s if ours and theirs and theirs.rec_s else None
        goal = ""
        if case == "serialize+produce" and ratio is not None:
            goal = ("met" if ratio >= 1.0 else "NOT met") + " (>= 1.0x confluent-kafka)"
        for client in CLIENTS:
            r = by_client.get(client)
            if r is None:
                continue
            runs = r.extra.get("runs_rec_s", [])
            span = f"{min(runs) / 1e3:.0f}..{max(runs) / 1e3:.0f}k" if len(runs) > 1 else ""
            brk = "-" if r.broker_cpu is None else f"{100 * r.broker_cpu:.0f}%"
            cli = "-" if r.client_cpu is None else f"{100 * r.client_cpu:.0f}%"
            mine = client == "millrace"
            print(f"{case:<18} {client:<16} {r.records:>9} {r.seconds:>6.2f} "
                  f"{r.rec_s:>11,.0f} {span:>14} {brk + '/' + cli:>11} "
                  f"{f'{ratio:.2f}' if mine and ratio else '':>11}  {goal if mine else ''}")
            rows.append({**r.as_dict(), "ratio_vs_confluent_kafka":
                         round(ratio, 3) if mine and ratio else None,
                         "goal": goal if mine else None})
    return rows


def run() -> None:
    args = parse_args()
    records = make_records()
    results: list[Result] = []
    with open_target("millrace", {}) as target, \
            tempfile.TemporaryDirectory(prefix="millrace-bench-registry-") as tmp, \
            SchemaRegistryProcess(target.bootstrap, Path(tmp)) as registry:
        url = registry.url
        check_same_bytes(url, records)
        print(f"broker {target.bootstrap}, registry {url}: the serializers agree byte for "
              f"byte on {len(records)} records", flush=True)
        for rep, (case, runners) in itertools.product(range(args.repeat), RUNNERS.items()):
            for client, runner in runners.items():
                topic = f"bench-avro-{case.replace('+', '-')}-{client}-{rep}"
                produces = case == "serialize+produce"
                if produces:
                    target.create_topic(topic)
                meter = CpuMeter(target)
                n, secs, last = runner(target.bootstrap, url, topic, records, args.records,
                                       args.budget)
                if produces:
                    check_stored(target.bootstrap, topic, client, WARMUP + n, url,
                                 records[(n - 1) % DISTINCT])
                else:
                    check_decodes(url, topic, client, last, records[(n - 1) % DISTINCT])
                r = Result("avro_produce", case, client, n, len(last) - 5, secs,
                           *meter.read(secs))
                if not produces:
                    r.broker_cpu = None
                print(f"  {case:<18} {client:<16} {n:>9} rec in {secs:5.2f}s "
                      f"= {r.rec_s:>11,.0f} rec/s", flush=True)
                results.append(r)
    rows = print_table(median_runs(results))
    write_json(args.json, "avro_produce", rows)


if __name__ == "__main__":
    main_guard(run)
