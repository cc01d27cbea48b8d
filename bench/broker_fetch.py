"""Fetch benchmark: one confluent-kafka consumer against millrace and the mock cluster.

    .venv/bin/python bench/broker_fetch.py [--quick] [--json out.json]

librdkafka's mock cluster keeps only the newest ~5 MiB of each partition (hard-coded),
so the comparison reads a *window*: a one-partition topic is pre-loaded with W records
(~4 MB, untimed) and a consumer reads offsets 0..W-1 again and again (re-``assign`` from
offset 0 per pass) until N records have been read; the clock runs from the first
``assign`` to the last record. Same method on both targets, 100 B and 1 KiB records.

``100B sequential`` (millrace only; the mock cannot hold it) pre-loads N records and
reads them once front to back: the figure a catching-up consumer sees.

Issue target (reported, never asserted): millrace serves >= 900k rec/s of 100 B.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from _common import (
    CONSUMER_THROUGHPUT,
    BenchFailure,
    CpuMeter,
    Goal,
    Result,
    Target,
    main_guard,
    open_targets,
    parse_args,
    print_table,
    produce_records,
    scaled,
    watermarks,
    write_json,
)
from confluent_kafka import Consumer, TopicPartition

STALL_S = 15.0  # no record for this long while records are missing: functional failure


@dataclass(frozen=True)
class Case:
    name: str
    size: int
    records: int  # records read in total (full size)
    window: int | None  # records pre-loaded and re-read; None: pre-load `records`, read once
    targets: tuple[str, ...] = ("millrace", "mock")


CASES = (
    Case("100B", 100, 3_000_000, window=40_000),
    Case("1KiB", 1024, 1_500_000, window=4_000),
    Case("100B sequential", 100, 3_000_000, window=None, targets=("millrace",)),
)


def goal_100b(mine: Result, _mock: Result | None) -> str:
    return ("met" if mine.rec_s >= 900_000 else "NOT met") + " (>=900k rec/s)"


GOALS: dict[str, Goal] = {"100B": goal_100b, "100B sequential": goal_100b}


def consume_passes(bootstrap: str, topic: str, window: int, passes: int, size: int,
                   config: dict[str, Any] | None = None) -> float:
    """Read offsets 0..window-1 of partition 0 ``passes`` times; return the seconds taken.

    Checked per batch: offsets contiguous from 0 in each pass, value length ``size``.
    ``config``: extra client settings (security).
    """
    c = Consumer({"bootstrap.servers": bootstrap, **CONSUMER_THROUGHPUT, **(config or {})})
    try:
        c.list_topics(topic, timeout=10)  # connect before the clock starts
        consume = c.consume
        t0 = time.perf_counter()
        for p in range(passes):
            c.assign([TopicPartition(topic, 0, 0)])
            expected = 0
            last_progress = time.perf_counter()
            while expected < window:
                # consume() returns when it has num_messages or at the timeout: ask for
                # no more than are left, or the last call of a pass would sit out the timeout.
                msgs = consume(num_messages=min(10_000, window - expected), timeout=0.5)
                if not msgs:
                    if time.perf_counter() - last_progress > STALL_S:
                        raise BenchFailure(f"{topic}: pass {p}: stalled {STALL_S:.0f}s at "
                                           f"offset {expected} of {window}")
                    continue
                # Offsets in a partition only grow, so first and last offset plus the count
                # prove the batch contiguous (an error event would break the arithmetic);
                # checking every record in Python would cost more than the broker does.
                first, last = msgs[0], msgs[-1]
                if (first.offset() != expected or last.offset() != expected + len(msgs) - 1
                        or len(first) != size or len(last) != size):
                    bad = next((m for m in msgs if m.error() is not None), None)
                    what = (f"consumer error {bad.error()}" if bad is not None else
                            f"offsets {first.offset()}..{last.offset()} in {len(msgs)} records "
                            f"of {len(first)}..{len(last)} B")
                    raise BenchFailure(f"{topic}: pass {p}: expected {len(msgs)} records of "
                                       f"{size} B from offset {expected}, got {what}")
                expected += len(msgs)
                last_progress = time.perf_counter()
        elapsed = time.perf_counter() - t0
    finally:
        c.close()
    return elapsed


@dataclass
class Loaded:
    case: Case
    target: Target
    topic: str
    window: int
    passes: int
    preload_s: float


def preload(t: Target, case: Case, total: int) -> Loaded:
    payload = bytes(range(256)) * (case.size // 256) + bytes(case.size % 256)
    topic = f"bench-fetch-{case.name.replace(' ', '-')}"
    window = min(case.window, total) if case.window else total
    t.create_topic(topic)
    loaded, load_s = produce_records(t.bootstrap, topic, payload, window)
    low, high = watermarks(t.bootstrap, topic)
    if (low, high) != (0, loaded) or loaded != window:
        raise BenchFailure(f"{t.name}: {topic}: pre-loaded {loaded} of {window} records but "
                           f"the partition holds offsets {low}..{high - 1}")
    print(f"  {case.name:<16} {t.name:<9} pre-loaded {window} records in {load_s:5.2f}s",
          flush=True)
    return Loaded(case, t, topic, window, max(1, total // window), load_s)


def read(ld: Loaded, config: dict[str, Any] | None = None) -> Result:
    meter = CpuMeter(ld.target)
    secs = consume_passes(ld.target.bootstrap, ld.topic, ld.window, ld.passes, ld.case.size,
                          config)
    r = Result("fetch", ld.case.name, ld.target.name, ld.window * ld.passes, ld.case.size, secs,
               *meter.read(secs), extra={"window": ld.window, "passes": ld.passes,
                                          "preload_s": round(ld.preload_s, 3)})
    print(f"  {ld.case.name:<16} {ld.target.name:<9} read {ld.passes} x {ld.window} in "
          f"{secs:5.2f}s = {r.rec_s:>11,.0f} rec/s", flush=True)
    return r


def run() -> None:
    args = parse_args(__doc__ or "")
    results: list[Result] = []
    with open_targets(args.target_names, args.overrides) as targets:
        loaded = [preload(t, case, scaled(args, case.records))
                  for case in CASES for t in targets if t.name in case.targets]
        for _rep in range(args.repeat):
            results += [read(ld) for ld in loaded]
    rows = print_table("fetch (confluent-kafka Consumer, partition 0 assigned from offset 0)",
                       results, GOALS)
    write_json(args.json, "fetch", rows)


if __name__ == "__main__":
    main_guard(run)
