"""The producer's per-record path, step by step: ns per record of each step of ``send()``.

    .venv/bin/python bench/producer_steps.py            # C speedups and pure Python
    .venv/bin/python bench/producer_steps.py --quick    # fewer records (a few seconds)

In one process, without a broker or a Sender thread: a ``KafkaProducer`` whose metadata
holds a one-partition topic, sending 100 B values (no key unless the step says so) to
partition 0, as ``bench/producers.py`` does.  Each step is timed alone over chunks of
records; the accumulator's batches are thrown away between chunks, untimed, so memory
never runs out.  Steps:

- ``ProducerRecord``: the constructor, ``ProducerRecord(topic, value, partition=0)``;
- ``serializer (str)``: ``StringSerializer.serialize`` of a 100-char value (bytes values
  skip the serializer: ``send`` checks the type inline);
- ``partitioner (key)``: ``partition_for_key`` of a 16 B key (murmur2), over 12 partitions;
- ``interceptors (1 no-op)``: ``ProducerInterceptors.on_send`` with one interceptor that
  returns the record (``send`` skips the step when there is none);
- ``future``: ``FutureRecordMetadata(...)`` made directly;
- ``batch try_append``: ``ProducerBatch.try_append`` alone (encode + future);
- ``accumulator append``: ``RecordAccumulator.append`` (lock, deque, try_append);
- ``send()``: ``producer.send(record)`` with the record made beforehand;
- ``record + send()``: the benchmark's loop body, ``send(ProducerRecord(...))``.

The same steps run in a child process with ``MILLRACE_NO_SPEEDUPS=1`` (the pure-Python
reference classes) and both columns are printed.  Figures are medians of ``--repeat``
runs of this thread's CPU time (``time.thread_time_ns``: other processes on a busy
machine move it less than the wall clock, though they still do -- compare columns from
one run).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

TOPIC = "steps"
VALUE = b"x" * 100
CHUNK = 10_000


def _producer(extra: dict[str, Any] | None = None) -> Any:
    from millrace.client.cluster import Cluster, Node, PartitionInfo
    from millrace.client.producer import KafkaProducer

    node = Node(0, "127.0.0.1", 1)
    config = {"bootstrap.servers": "127.0.0.1:1", "acks": "1", "linger.ms": 5,
              "batch.size": 256 * 1024, "enable.idempotence": False,
              "buffer.memory": 256 * 1024 * 1024, **(extra or {})}
    p: Any = KafkaProducer(config, _start_thread=False)
    parts = [PartitionInfo(TOPIC, i, node, (0,), (0,)) for i in range(12)]
    p._metadata._cluster = Cluster([node], parts)
    p._metadata._topics[TOPIC] = 2**62
    return p


def _reset(p: Any) -> None:
    """Drop every queued batch (untimed): their memory goes back to the pool."""
    acc = p._accumulator
    acc.abort_undrained_batches(RuntimeError("bench reset"))


def _time_chunks(body: Callable[[int], None], records: int, reset: Callable[[], None]
                 ) -> float:
    """ns per record of ``body(n)`` over ``records`` records in chunks of CHUNK."""
    total = 0
    done = 0
    while done < records:
        n = min(CHUNK, records - done)
        gc_was = gc.isenabled()
        t0 = time.thread_time_ns()
        body(n)
        total += time.thread_time_ns() - t0
        if gc_was:
            gc.enable()
        reset()
        done += n
    return total / records


def _steps(records: int) -> dict[str, float]:
    from millrace.client.cluster import TopicPartition
    from millrace.client.producer import ProducerInterceptor, ProducerRecord
    from millrace.client.producer._internals.built_in_partitioner import partition_for_key
    from millrace.client.producer._internals.future_record_metadata import (
        FutureRecordMetadata,
        ProduceRequestResult,
    )
    from millrace.client.producer._internals.producer_batch import ProducerBatch
    from millrace.client.producer._internals.producer_interceptors import ProducerInterceptors
    from millrace.client.serialization import StringSerializer

    out: dict[str, float] = {}
    p = _producer()
    reset = lambda: _reset(p)  # noqa: E731
    nothing = lambda: None  # noqa: E731
    rec: Any = ProducerRecord(TOPIC, VALUE, partition=0)

    def records_only(n: int) -> None:
        for _ in range(n):
            ProducerRecord(TOPIC, VALUE, partition=0)
    out["ProducerRecord"] = _time_chunks(records_only, records, nothing)

    ser = StringSerializer()
    text = "x" * 100

    def serialize(n: int) -> None:
        s = ser.serialize
        for _ in range(n):
            s(TOPIC, text, None)
    out["serializer (str)"] = _time_chunks(serialize, records, nothing)

    key = b"k" * 16

    def partition(n: int) -> None:
        for _ in range(n):
            partition_for_key(key, 12)
    out["partitioner (key)"] = _time_chunks(partition, records, nothing)

    class Noop(ProducerInterceptor):
        def on_send(self, record: Any) -> Any:
            return record

        def on_acknowledgement(self, metadata: Any, exception: Any) -> None:
            pass

    chain = ProducerInterceptors([Noop()])

    def intercept(n: int) -> None:
        on_send = chain.on_send
        for _ in range(n):
            on_send(rec)
    out["interceptors (1 no-op)"] = _time_chunks(intercept, records, nothing)

    tp = TopicPartition(TOPIC, 0)
    result = ProduceRequestResult(tp)

    def futures(n: int) -> None:
        for i in range(n):
            FutureRecordMetadata(result, i, 0, -1, 100, None)
    out["future"] = _time_chunks(futures, records, nothing)

    def try_append(n: int) -> None:
        batch = ProducerBatch(tp, 0, 1 << 30)
        append = batch.try_append
        now = int(time.time() * 1000)
        for _ in range(n):
            append(now, None, VALUE, (), None, now)
    out["batch try_append"] = _time_chunks(try_append, records, nothing)

    acc_append = p._accumulator.append
    cluster = p._metadata._cluster

    def accumulate(n: int) -> None:
        now = int(time.time() * 1000)
        for _ in range(n):
            acc_append(TOPIC, 0, now, None, VALUE, (), None, 60000.0, now, cluster)
    out["accumulator append"] = _time_chunks(accumulate, records, reset)

    send = p.send

    def sends(n: int) -> None:
        for _ in range(n):
            send(rec)
    out["send()"] = _time_chunks(sends, records, reset)

    def record_and_send(n: int) -> None:
        for _ in range(n):
            send(ProducerRecord(TOPIC, VALUE, partition=0))
    out["record + send()"] = _time_chunks(record_and_send, records, reset)

    def keyed(n: int) -> None:
        for _ in range(n):
            send(ProducerRecord(TOPIC, VALUE, key=key))
    out["record + send() keyed"] = _time_chunks(keyed, records, reset)

    def sticky(n: int) -> None:
        for _ in range(n):
            send(ProducerRecord(TOPIC, VALUE))
    out["record + send() sticky"] = _time_chunks(sticky, records, reset)
    p.close(0)
    return out


def _measure(records: int, repeat: int) -> dict[str, float]:
    runs = [_steps(records) for _ in range(repeat)]
    return {name: statistics.median(r[name] for r in runs) for name in runs[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="50,000 records, 1 run")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.quick:
        args.records, args.repeat = 50_000, 1
    if args.child:
        print(json.dumps(_measure(args.records, args.repeat)))
        return
    from millrace.client.producer._internals import batch_core
    from millrace.record import default_record

    if not (batch_core.SPEEDUPS and default_record.SPEEDUPS):
        sys.exit("the C speedups are not built (or MILLRACE_NO_SPEEDUPS is set)")
    fast = _measure(args.records, args.repeat)
    env = {**os.environ, "MILLRACE_NO_SPEEDUPS": "1"}
    child = subprocess.run([sys.executable, __file__, "--child", "--records",
                            str(args.records), "--repeat", str(args.repeat)],
                           env=env, capture_output=True, text=True, check=True)
    slow = json.loads(child.stdout)
    print(f"{args.records:,} records x {args.repeat} runs, 100 B values, ns per record "
          "(median)")
    print(f"{'step':<26}{'C speedups':>12}{'pure Python':>13}")
    for name in fast:
        print(f"{name:<26}{fast[name]:>12.0f}{slow[name]:>13.0f}")


if __name__ == "__main__":
    main()
