"""Transactions benchmark: what a transaction costs a producer, per client, against one
millrace broker in one run.

    .venv/bin/python bench/transactions.py [--records 100000] [--budget 3] [--repeat N]
    .venv/bin/python bench/transactions.py --quick          # under a minute

Clients: millrace, kafka-python, aiokafka and confluent-kafka, each with its own
transactional producer (``transactional.id``; ``init_transactions`` untimed, then
``begin_transaction`` -> sends -> ``commit_transaction`` per transaction).

Cases, each on one partition and on three: **idempotent** (idempotence on, no
transactional id: the baseline) and transactions of 1, 10, 100, 1,000 and 10,000
records.  Records are 100 B, numbered, sent round-robin to the topic's partitions
(record i to partition i mod P, so every transaction of 3 or more records spans all
three).  A run sends ``--records`` records (whole transactions: at least one) and stops
at the first transaction boundary after ``--budget`` seconds; its rate is committed
records over the time from the first send to the end of the last commit (the flush,
for idempotent).  The time of a transaction is mostly fixed -- AddPartitionsToTxn, the
produce round trip, EndTxn, and the markers the coordinator writes before answering
the next transaction -- so the ratio to idempotent climbs with the transaction's size.

Check (exit 1 when it fails; timing never fails a run): after each transactional run
the producer also writes one small transaction and aborts it; a read_committed
confluent-kafka consumer then reads every partition from the start and must see each
committed record exactly once and none of the aborted ones.  Idempotent runs are read
back the same way.

Settings, the same for every client where it has them: acks=all, linger.ms=5,
batch.size=256 KiB, no compression, idempotence on.  Reported, never asserted: the
ratio transactional/idempotent per client, and millrace's rate against the peers'.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
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
    write_json,
)
from _compare import CLIENTS, RESULTS_DIR, parse_args, write_chart
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

RECORD_BYTES = 100
LINGER_MS = 5
BATCH_SIZE = 256 * 1024
ABORTED_RECORDS = 10  # the aborted transaction written after each transactional run
TXN_SIZES = (1, 10, 100, 1_000, 10_000)
PARTITIONS = (1, 3)
QUICK_RECORDS = 10_000
QUICK_BUDGET = 0.5


@dataclass(frozen=True)
class Case:
    partitions: int
    txn_size: int | None  # None: idempotent, no transactions

    @property
    def name(self) -> str:
        kind = "idempotent" if self.txn_size is None else f"txn {self.txn_size:,}"
        return f"P{self.partitions} {kind}"


CASES = tuple(Case(p, s) for p in PARTITIONS for s in (None, *TXN_SIZES))


@dataclass(frozen=True)
class Workload:
    """What one run sends: ``values[i]`` to partition ``i % partitions``, ``txn_size``
    records per transaction (None: no transactions), until ``count`` or the budget.
    The producer id is obtained before the clock starts: by ``init_transactions``, or
    for idempotent runs by one record sent to ``pid_topic`` and flushed."""

    bootstrap: str
    topic: str
    partitions: int
    values: list[bytes]
    count: int
    txn_size: int | None
    budget_s: float
    transactional_id: str
    pid_topic: str  # idempotent runs first send one record here: the producer id, untimed


# (workload) -> (records committed, seconds)
Runner = Callable[[Workload], tuple[int, float]]


def record_values(count: int) -> list[bytes]:
    """``count`` distinct 100 B values: the record number in 10 digits, then padding."""
    pad = bytes(range(32, 32 + RECORD_BYTES - 10))
    return [b"%010d" % i + pad for i in range(count)]


def _transactions(w: Workload) -> list[range]:
    """The runs' transactions as ranges of record numbers (one range without
    transactions); the last may be cut short only when it is also the only one."""
    size = w.txn_size or w.count
    count = max(size, w.count - w.count % size)
    return [range(i, min(i + size, count)) for i in range(0, count, size)]


class _Clock:
    """The clock of one run, for synchronous and asyncio clients alike: iterating it
    yields the run's transactions (one range for idempotent) and stops at the first
    transaction boundary after the budget; then ``done`` is the records sent in them and
    ``seconds`` the time from the first yield to the end of the last transaction."""

    def __init__(self, w: Workload) -> None:
        self._w = w
        self.done = 0
        self.seconds = 0.0

    def __iter__(self) -> Iterator[range]:
        t0 = time.perf_counter()
        deadline = t0 + self._w.budget_s
        for txn in _transactions(self._w):
            yield txn
            self.done = txn.stop
            if time.perf_counter() > deadline:
                break
        self.seconds = time.perf_counter() - t0


def _abort_range(w: Workload, done: int) -> range:
    return range(done, done + ABORTED_RECORDS)


def _run_case(w: Workload, send_range: Callable[[range], None], flush: Callable[[], object],
              begin: Callable[[], object], commit: Callable[[], object],
              abort: Callable[[], object]) -> tuple[int, float]:
    """A synchronous client's timed run, idempotent or transactional: per transaction
    ``begin`` -> ``send_range`` -> ``commit`` (idempotent: one range, then ``flush``);
    after a transactional run, untimed, the aborted transaction the check reads past."""
    txn = w.txn_size is not None
    start, end = (begin, commit) if txn else (lambda: None, flush)
    clock = _Clock(w)
    for r in clock:
        start()
        send_range(r)
        end()
    if txn:
        begin()
        send_range(_abort_range(w, clock.done))
        flush()
        abort()
    return clock.done, clock.seconds


def run_millrace(w: Workload) -> tuple[int, float]:
    from millrace.client.producer import KafkaProducer, ProducerRecord

    txn = w.txn_size is not None
    p: KafkaProducer[bytes, bytes] = KafkaProducer({
        "bootstrap.servers": w.bootstrap, "acks": "all", "linger.ms": LINGER_MS,
        "batch.size": BATCH_SIZE, "compression.type": "none", "enable.idempotence": True,
        **({"transactional.id": w.transactional_id} if txn else {})})
    try:
        p.partitions_for(w.topic)
        if txn:
            p.init_transactions()
        else:
            p.send(ProducerRecord(w.pid_topic, w.values[0], partition=0))
            p.flush()
        send, topic, values, parts = p.send, w.topic, w.values, w.partitions

        def send_range(r: range) -> None:
            for i in r:
                send(ProducerRecord(topic, values[i], partition=i % parts))

        return _run_case(w, send_range, p.flush, p.begin_transaction, p.commit_transaction,
                         p.abort_transaction)
    finally:
        p.close()


def run_kafka_python(w: Workload) -> tuple[int, float]:
    from kafka import KafkaProducer

    txn = w.txn_size is not None
    p = KafkaProducer(bootstrap_servers=w.bootstrap, acks="all", linger_ms=LINGER_MS,
                      batch_size=BATCH_SIZE, compression_type=None, enable_idempotence=True,
                      transactional_id=w.transactional_id if txn else None)
    try:
        p.partitions_for(w.topic)
        if txn:
            p.init_transactions()
        else:
            p.send(w.pid_topic, w.values[0], partition=0)
            p.flush()
        send, topic, values, parts = p.send, w.topic, w.values, w.partitions

        def send_range(r: range) -> None:
            for i in r:
                send(topic, values[i], partition=i % parts)

        return _run_case(w, send_range, p.flush, p.begin_transaction, p.commit_transaction,
                         p.abort_transaction)
    finally:
        p.close()


def run_aiokafka(w: Workload) -> tuple[int, float]:
    from aiokafka import AIOKafkaProducer

    txn = w.txn_size is not None

    async def go() -> tuple[int, float]:
        p = AIOKafkaProducer(bootstrap_servers=w.bootstrap, acks="all", linger_ms=LINGER_MS,
                             max_batch_size=BATCH_SIZE, compression_type=None,
                             enable_idempotence=True,
                             transactional_id=w.transactional_id if txn else None)
        await p.start()  # aiokafka's start() also initialises the transactional id
        try:
            await p.partitions_for(w.topic)
            if not txn:
                await p.send_and_wait(w.pid_topic, w.values[0], partition=0)
            send, topic, values, parts = p.send, w.topic, w.values, w.partitions

            async def send_range(r: range) -> None:
                for i in r:
                    await send(topic, values[i], partition=i % parts)  # queued, no ack wait

            clock = _Clock(w)
            for r in clock:
                if txn:
                    await p.begin_transaction()
                await send_range(r)
                await (p.commit_transaction() if txn else p.flush())
            if txn:
                await p.begin_transaction()
                await send_range(_abort_range(w, clock.done))
                await p.flush()
                await p.abort_transaction()
            return clock.done, clock.seconds
        finally:
            await p.stop()

    return asyncio.run(go())


def run_confluent(w: Workload) -> tuple[int, float]:
    txn = w.txn_size is not None
    errors: list[str] = []

    def on_error(err: KafkaError | None, _msg: Any) -> None:
        if err is not None and len(errors) < 5:
            errors.append(str(err))

    p = Producer({"bootstrap.servers": w.bootstrap, **CLIENT_QUIET, "acks": "all",
                  "linger.ms": LINGER_MS, "batch.size": BATCH_SIZE,
                  "batch.num.messages": 100_000, "queue.buffering.max.messages": 1_000_000,
                  "compression.type": "none", "enable.idempotence": True,
                  "delivery.report.only.error": True, "on_delivery": on_error,
                  **({"transactional.id": w.transactional_id} if txn else {})})
    try:
        p.list_topics(w.topic, timeout=10)
        if txn:
            p.init_transactions(30)
        else:
            p.produce(w.pid_topic, w.values[0], partition=0)
            p.flush(30)
        produce, poll, topic, values, parts = p.produce, p.poll, w.topic, w.values, w.partitions

        def send_range(r: range) -> None:
            for i in r:
                try:
                    produce(topic, values[i], partition=i % parts)
                except BufferError:  # local queue full: serve events until there is room
                    while True:
                        poll(0.005)
                        try:
                            produce(topic, values[i], partition=i % parts)
                            break
                        except BufferError:
                            continue
                if i % 10_000 == 0:
                    poll(0)

        def flush() -> None:
            if p.flush(60):
                raise BenchFailure("confluent-kafka: records undelivered after flush")

        result = _run_case(w, send_range, flush, p.begin_transaction,
                           lambda: p.commit_transaction(60), lambda: p.abort_transaction(60))
    finally:
        p.flush(5)
    if errors:
        raise BenchFailure(f"confluent-kafka: delivery errors, e.g. {errors}")
    return result


RUNNERS: dict[str, Runner] = {
    "millrace": run_millrace,
    "kafka-python": run_kafka_python,
    "aiokafka": run_aiokafka,
    "confluent-kafka": run_confluent,
}


# --------------------------------------------------------------------------- checks


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **CLIENT_QUIET})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
        operation_timeout=10)
    try:
        futures[topic].result(timeout=15)
    except KafkaException as e:
        if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def verify_committed(bootstrap: str, topic: str, partitions: int, committed: int,
                     who: str) -> None:
    """A read_committed consumer must see records 0..committed-1, each once and on its
    partition, and nothing else.  It reads until its position reaches every partition's
    end offset: past the aborted transaction's records and marker, which it can only
    pass once the abort is complete, so an aborted record that leaked would be seen."""
    c = Consumer({"bootstrap.servers": bootstrap, **CLIENT_QUIET,
                  "group.id": f"bench-txn-verify-{uuid.uuid4()}",
                  "enable.auto.commit": False, "isolation.level": "read_committed",
                  "fetch.wait.max.ms": 20})
    seen = bytearray(committed)
    extra: list[str] = []
    got = 0
    try:
        tps = [TopicPartition(topic, p, 0) for p in range(partitions)]
        positions: list[int] = []
        ends = [c.get_watermark_offsets(tp, timeout=10)[1] for tp in tps]
        c.assign(tps)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for msg in c.consume(10_000, 0.1):
                got += _check(msg, partitions, seen, extra)
            positions = [tp.offset for tp in c.position(tps)]
            if got >= committed and all(p >= e for p, e in zip(positions, ends, strict=True)):
                break
        else:
            extra.append(f"positions {positions} never reached the end offsets {ends}")
    finally:
        c.close()
    missing = committed - sum(1 for b in seen if b)
    if extra or missing or got != committed:
        raise BenchFailure(f"{who}: {topic}: committed {committed} records; read_committed "
                           f"read {got}, {missing} missing, unexpected: {extra[:5]}")


def _check(msg: Any, partitions: int, seen: bytearray, extra: list[str]) -> int:
    if msg.error() is not None:
        if msg.error().code() == KafkaError._PARTITION_EOF:
            return 0
        raise BenchFailure(f"read_committed consumer: {msg.error()}")
    value = msg.value()
    i = int(value[:10])
    if i >= len(seen) or seen[i] or msg.partition() != i % partitions \
            or len(value) != RECORD_BYTES:
        extra.append(f"record {i} at partition {msg.partition()} offset {msg.offset()}")
    else:
        seen[i] = 1
    return 1


# --------------------------------------------------------------------------- table


def print_table(title: str, results: list[Result]) -> list[dict[str, Any]]:
    """One row per (case, client), the median of repeated runs, with the ratio to the
    same client's idempotent run on the same partitions and millrace's ratio to each
    peer; returns rows for --json."""
    results = median_runs(results)
    by_key = {(r.case, r.target): r for r in results}
    print(f"\n{title}")
    header = (f"{'case':<16} {'client':<16} {'records':>8} {'secs':>6} {'rec/s':>10} "
              f"{'txn/s':>8} {'cpu brk/cli':>11} {'x idempotent':>12}  millrace x client")
    print(header)
    print("-" * len(header))
    rows: list[dict[str, Any]] = []
    for case in CASES:
        base_case = Case(case.partitions, None).name
        for client in CLIENTS:
            r = by_key.get((case.name, client))
            if r is None:
                continue
            base = by_key.get((base_case, client))
            vs_idem = r.rec_s / base.rec_s if base and base.rec_s else None
            mine = by_key.get((case.name, "millrace"))
            vs_mine = mine.rec_s / r.rec_s if mine and r.rec_s and client != "millrace" \
                else None
            txn_s = r.extra.get("transactions", 0) / r.seconds if r.seconds else 0.0
            brk = "-" if r.broker_cpu is None else f"{100 * r.broker_cpu:.0f}%"
            cli = "-" if r.client_cpu is None else f"{100 * r.client_cpu:.0f}%"
            print(f"{case.name:<16} {client:<16} {r.records:>8} {r.seconds:>6.2f} "
                  f"{r.rec_s:>10,.0f} {txn_s if case.txn_size else 0:>8,.0f} "
                  f"{brk + '/' + cli:>11} "
                  f"{'' if vs_idem is None else f'{vs_idem:.3f}':>12}  "
                  f"{'' if vs_mine is None else f'{vs_mine:.2f}'}")
            rows.append({**r.as_dict(), "partitions": case.partitions,
                         "txn_size": case.txn_size,
                         "ratio_vs_idempotent": None if vs_idem is None else round(vs_idem, 4),
                         "millrace_vs_client": None if vs_mine is None else round(vs_mine, 3)})
    return rows


# --------------------------------------------------------------------------- main


def _add_options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--quick", action="store_true",
                    help=f"--records {QUICK_RECORDS:,} --budget {QUICK_BUDGET:g} "
                         "(about a minute in all)")


def run() -> None:
    args = parse_args(__doc__ or "", default_records=100_000, default_budget=3.0,
                      add_options=_add_options)
    if args.quick:
        args.records, args.budget = QUICK_RECORDS, QUICK_BUDGET
    values = record_values(max(args.records, max(TXN_SIZES)) + ABORTED_RECORDS)
    results: list[Result] = []
    t_start = time.monotonic()
    with open_target("millrace", args.overrides) as target:
        bootstrap = target.bootstrap
        pid_topic = "bench-txn-producer-ids"
        create_topic(bootstrap, pid_topic, 1)
        for client in args.client_names:  # imports, connections, the txn log: untimed
            topic = f"bench-txn-warmup-{client}"
            create_topic(bootstrap, topic, 1)
            n, _ = RUNNERS[client](Workload(bootstrap, topic, 1, values, 1_000, 100, 60.0,
                                            f"bench-warmup-{client}", pid_topic))
            verify_committed(bootstrap, topic, 1, n, client)
        for rep, case in itertools.product(range(args.repeat), CASES):
            for client in args.client_names:
                kind = "idem" if case.txn_size is None else f"txn{case.txn_size}"
                topic = f"bench-txn-p{case.partitions}-{kind}-{client}-{rep}"
                create_topic(bootstrap, topic, case.partitions)
                w = Workload(bootstrap, topic, case.partitions, values, args.records,
                             case.txn_size, args.budget, f"bench-{topic}", pid_topic)
                meter = CpuMeter(target)
                n, secs = RUNNERS[client](w)
                cpu = meter.read(secs)
                verify_committed(bootstrap, topic, case.partitions, n, client)
                txns = 0 if case.txn_size is None else -(-n // case.txn_size)
                r = Result("transactions", case.name, client, n, RECORD_BYTES, secs, *cpu,
                           extra={"transactions": txns})
                print(f"  {case.name:<16} {client:<16} {n:>8} rec in {secs:5.2f}s "
                      f"= {r.rec_s:>10,.0f} rec/s", flush=True)
                results.append(r)
    title = (f"transactional vs idempotent producers -> one millrace broker "
             f"({RECORD_BYTES} B, acks=all, linger.ms={LINGER_MS}, "
             f"batch.size={BATCH_SIZE // 1024} KiB; {args.records:,} records or "
             f"{args.budget:g} s per run)")
    rows = print_table(title, results)
    print(f"\n{len(results)} runs checked with a read_committed consumer "
          f"in {time.monotonic() - t_start:.0f} s")
    write_chart(Path(args.png) if args.png else RESULTS_DIR / "transactions.png", title,
                results)
    write_json(args.json, "transactions", rows)


if __name__ == "__main__":
    main_guard(run)
