"""Ingest benchmark: one confluent-kafka producer against millrace and the mock cluster.

    .venv/bin/python bench/broker_ingest.py [--quick] [--json out.json]

Cases: 100 B and 1 KiB records with acks=1, and 100 B with acks=all; every case runs
against both targets in this process run. Issue target (reported, never asserted):
millrace ingests >= 500k rec/s of 100 B and >= 50% of the mock cluster's rate.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from _common import (
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

BUDGET_S = 6.0  # a case stops producing after this long; the rate stays records/time


@dataclass(frozen=True)
class Case:
    name: str
    size: int
    acks: str
    records: int  # full-size count; capped by BUDGET_S on a slow target


CASES = (
    Case("100B acks=1", 100, "1", 3_000_000),
    Case("1KiB acks=1", 1024, "1", 1_000_000),
    Case("100B acks=all", 100, "all", 3_000_000),
)


def goal_100b(mine: Result, mock: Result | None) -> str:
    ratio = mine.rec_s / mock.rec_s if mock and mock.rec_s else None
    ok = mine.rec_s >= 500_000 and (ratio is None or ratio >= 0.5)
    return ("met" if ok else "NOT met") + " (>=500k rec/s, >=50% of mock)"


GOALS: dict[str, Goal] = {"100B acks=1": goal_100b}


def payload_for(size: int) -> bytes:
    return bytes(range(256)) * (size // 256) + bytes(size % 256)


def ingest(t: Target, case: Case, topic: str, count: int,
           config: dict[str, Any] | None = None) -> Result:
    """Produce ``count`` records of ``case`` to a new ``topic`` on ``t`` and check that
    the partition holds them all; ``config``: extra client settings (security)."""
    t.create_topic(topic)
    meter = CpuMeter(t)
    n, secs = produce_records(t.bootstrap, topic, payload_for(case.size), count,
                              extra={"acks": case.acks, **(config or {})}, budget_s=BUDGET_S)
    _low, stored = watermarks(t.bootstrap, topic, config)
    if stored != n:
        raise BenchFailure(f"{t.name}: {case.name}: produced {n} records, "
                           f"partition end offset is {stored}")
    r = Result("ingest", case.name, t.name, n, case.size, secs, *meter.read(secs))
    print(f"  {case.name:<14} {t.name:<9} {n:>9} rec in {secs:5.2f}s "
          f"= {r.rec_s:>11,.0f} rec/s", flush=True)
    return r


def ingest_on_off(targets: Sequence[Target], cases: Iterable[Case], prefix: str,
                  args: argparse.Namespace) -> list[Result]:
    """The A/B runs of a feature benchmark (two builds or settings of one broker): a
    warm-up on each target (first connections, topic creation paths, allocator:
    untimed), then every case on both, the targets' order alternating between repeats
    so that neither always runs on a warmer machine."""
    for t in targets:
        t.create_topic(f"{prefix}warmup")
        produce_records(t.bootstrap, f"{prefix}warmup", bytes(100), 100_000)
    results: list[Result] = []
    for rep, case in itertools.product(range(args.repeat), cases):
        order = targets if rep % 2 == 0 else targets[::-1]
        topic = f"{prefix}{case.size}-acks{case.acks}-{rep}"
        results += [ingest(t, case, topic, scaled(args, case.records)) for t in order]
    return results


def run() -> None:
    args = parse_args(__doc__ or "")
    results: list[Result] = []
    with open_targets(args.target_names, args.overrides) as targets:
        for t in targets:  # first connections, topic creation paths, allocator: untimed
            t.create_topic("bench-ingest-warmup")
            produce_records(t.bootstrap, "bench-ingest-warmup", bytes(100), 100_000)
        for rep, case in itertools.product(range(args.repeat), CASES):
            topic = f"bench-ingest-{case.size}-acks{case.acks}-{rep}"  # fresh log every run
            results += [ingest(t, case, topic, scaled(args, case.records)) for t in targets]
    rows = print_table("ingest (confluent-kafka Producer, 1 partition, no compression)",
                       results, GOALS)
    write_json(args.json, "ingest", rows)


if __name__ == "__main__":
    main_guard(run)
