"""Producer benchmark: millrace, kafka-python, aiokafka and confluent-kafka send the same
records to one millrace broker in one run.

    .venv/bin/python bench/producers.py [--records 1000000] [--budget 8] [--repeat N]
    .venv/bin/python bench/producers.py --records 50000          # a quick run

Cases: 100 B and 1 KiB records, acks=1 and acks=all.  Per (case, client): a new
one-partition topic; the client connects and fetches the topic's metadata (untimed),
then sends ``--records`` copies of one payload to partition 0 in a plain loop, no
per-record callback, and flushes; the clock runs from the first send to the end of the
flush.  A run stops sending after ``--budget`` seconds (its rate stays records/time).
Afterwards the partition's end offset must equal the records sent (exit 1 otherwise).

Same settings for every client where it has them: linger.ms=5, batch.size=256 KiB,
no compression, idempotence explicitly off (the default of kafka-python 3 and millrace is
on), max.request.size and buffer memory at each client's default.  confluent-kafka reports
delivery errors only (``delivery.report.only.error``), so no client runs Python code per
acknowledged record.

Issue target (reported, never asserted): on 100 B records millrace sends >= 5x
kafka-python's rate and >= 0.5x confluent-kafka's.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from _common import (
    BenchFailure,
    CpuMeter,
    Result,
    main_guard,
    open_target,
    produce_records,
    watermarks,
    write_json,
)
from _compare import (
    RESULTS_DIR,
    Goal,
    goal_5x_kafka_python_half_confluent,
    parse_args,
    print_table,
    write_chart,
)

LINGER_MS = 5
BATCH_SIZE = 256 * 1024
CHUNK = 10_000  # records between budget checks
WARMUP_RECORDS = 20_000


@dataclass(frozen=True)
class Case:
    name: str
    size: int
    acks: str  # "1" or "all"


CASES = (
    Case("100B acks=1", 100, "1"),
    Case("100B acks=all", 100, "all"),
    Case("1KiB acks=1", 1024, "1"),
    Case("1KiB acks=all", 1024, "all"),
)

GOALS: dict[str, Goal] = {"100B acks=1": goal_5x_kafka_python_half_confluent,
                          "100B acks=all": goal_5x_kafka_python_half_confluent}

# (bootstrap, topic, payload, count, acks, budget_s) -> (records sent, seconds)
Runner = Callable[[str, str, bytes, int, str, float], tuple[int, float]]


def _chunks(count: int, budget_s: float) -> tuple[float, list[int]]:
    deadline = time.perf_counter() + budget_s
    return deadline, [min(CHUNK, count - i) for i in range(0, count, CHUNK)]


def _timed_sends(send_chunk: Callable[[int], None], flush: Callable[[], object], count: int,
                 budget_s: float) -> tuple[int, float]:
    """The clock of a synchronous client: ``send_chunk(n)`` sends n records (its own loop,
    so the per-record cost is the client's alone) until ``count`` or the budget, then
    ``flush()``; returns (records sent, seconds)."""
    t0 = time.perf_counter()
    deadline, chunks = _chunks(count, budget_s)
    sent = 0
    for chunk in chunks:
        send_chunk(chunk)
        sent += chunk
        if time.perf_counter() > deadline:
            break
    flush()
    return sent, time.perf_counter() - t0


def run_millrace(bootstrap: str, topic: str, payload: bytes, count: int, acks: str,
                 budget_s: float) -> tuple[int, float]:
    from millrace.client.producer import KafkaProducer, ProducerRecord

    p = KafkaProducer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": LINGER_MS,
                       "batch.size": BATCH_SIZE, "compression.type": "none",
                       "enable.idempotence": False})
    try:
        p.partitions_for(topic)
        send = p.send

        def send_chunk(n: int) -> None:
            for _ in range(n):
                send(ProducerRecord(topic, payload, partition=0))

        return _timed_sends(send_chunk, p.flush, count, budget_s)
    finally:
        p.close()


def run_kafka_python(bootstrap: str, topic: str, payload: bytes, count: int, acks: str,
                     budget_s: float) -> tuple[int, float]:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all" if acks == "all" else int(acks),
                      linger_ms=LINGER_MS, batch_size=BATCH_SIZE, compression_type=None,
                      enable_idempotence=False)
    try:
        p.partitions_for(topic)
        send = p.send

        def send_chunk(n: int) -> None:
            for _ in range(n):
                send(topic, payload, partition=0)

        return _timed_sends(send_chunk, p.flush, count, budget_s)
    finally:
        p.close()


def run_aiokafka(bootstrap: str, topic: str, payload: bytes, count: int, acks: str,
                 budget_s: float) -> tuple[int, float]:
    from aiokafka import AIOKafkaProducer

    async def go() -> tuple[int, float]:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap,
                             acks="all" if acks == "all" else int(acks), linger_ms=LINGER_MS,
                             max_batch_size=BATCH_SIZE, compression_type=None,
                             enable_idempotence=False)
        await p.start()
        try:
            await p.partitions_for(topic)
            send = p.send
            t0 = time.perf_counter()
            deadline, chunks = _chunks(count, budget_s)
            sent = 0
            for chunk in chunks:
                for _ in range(chunk):
                    await send(topic, payload, partition=0)  # queued; not waiting for acks
                sent += chunk
                if time.perf_counter() > deadline:
                    break
            await p.flush()
            return sent, time.perf_counter() - t0
        finally:
            await p.stop()

    return asyncio.run(go())


def run_confluent(bootstrap: str, topic: str, payload: bytes, count: int, acks: str,
                  budget_s: float) -> tuple[int, float]:
    return produce_records(bootstrap, topic, payload, count, budget_s=budget_s, extra={
        "acks": acks, "linger.ms": LINGER_MS, "batch.size": BATCH_SIZE})


RUNNERS: dict[str, Runner] = {
    "millrace": run_millrace,
    "kafka-python": run_kafka_python,
    "aiokafka": run_aiokafka,
    "confluent-kafka": run_confluent,
}


def payload_of(size: int) -> bytes:
    return bytes(range(256)) * (size // 256) + bytes(size % 256)


def run() -> None:
    args = parse_args(__doc__ or "", default_records=1_000_000, default_budget=8.0)
    results: list[Result] = []
    with open_target("millrace", args.overrides) as target:
        for client in args.client_names:  # imports, first connections: untimed
            target.create_topic(f"bench-producers-warmup-{client}")
            RUNNERS[client](target.bootstrap, f"bench-producers-warmup-{client}",
                            payload_of(100), min(WARMUP_RECORDS, args.records), "1", 60.0)
        for rep, case in itertools.product(range(args.repeat), CASES):
            payload = payload_of(case.size)
            for client in args.client_names:
                topic = f"bench-producers-{case.size}-acks{case.acks}-{client}-{rep}"
                target.create_topic(topic)
                meter = CpuMeter(target)
                n, secs = RUNNERS[client](target.bootstrap, topic, payload, args.records,
                                          case.acks, args.budget)
                _low, stored = watermarks(target.bootstrap, topic)
                if stored != n:
                    raise BenchFailure(f"{client}: {case.name}: sent {n} records, the "
                                       f"partition's end offset is {stored}")
                r = Result("producers", case.name, client, n, case.size, secs,
                           *meter.read(secs))
                print(f"  {case.name:<14} {client:<16} {n:>9} rec in {secs:5.2f}s "
                      f"= {r.rec_s:>11,.0f} rec/s", flush=True)
                results.append(r)
    title = (f"producers -> one millrace broker (1 partition, linger.ms={LINGER_MS}, "
             f"batch.size={BATCH_SIZE // 1024} KiB, idempotence off)")
    rows = print_table(title, results, GOALS)
    write_chart(Path(args.png) if args.png else RESULTS_DIR / "producers.png", title, results)
    write_json(args.json, "producers", rows)


if __name__ == "__main__":
    main_guard(run)
