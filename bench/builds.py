"""Two builds of the broker side by side: ingest on this checkout's broker against the
broker of an earlier commit, in one run (a hot-path change's before/after).

    .venv/bin/python bench/builds.py --base <commit> [--quick] [--repeat N] [--json out.json]

The base commit is checked out into a temporary ``git worktree``; its broker runs as a
``millrace broker`` child process with that tree first on ``PYTHONPATH`` (ahead of the
editable install of this checkout; both brokers start in a directory holding no
``millrace/``, which Python would otherwise put first), and the compiled C accelerators of this checkout are
copied into it when their sources are the same at both commits (else the base runs its
pure-Python paths and the run says so).  Each side gets a fresh log dir.  The cases are
broker_ingest's (confluent-kafka Producer, one partition), every case on both brokers,
their order alternating between repeats.  The ratio is this build's rec/s over the base's;
no goal: it says what a change did.  ``--partitions P`` adds ``partitions.py``'s many-partition
case (100 B round-robin over a fresh P-partition topic) on both builds, with each broker's CPU
per record, which a busy machine skews less than the rate.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import broker_fetch
import partitions
from _common import (
    BenchFailure,
    MillraceTarget,
    Result,
    Target,
    main_guard,
    print_table,
    produce_records,
    produce_round_robin,
    scaled,
    write_json,
)
from broker_ingest import CASES, ingest_on_off

ROOT = Path(__file__).resolve().parents[1]
HEAD, BASE = "this_build", "base_build"
ACCELERATORS = ("millrace/record/_speedups", "millrace/client/producer/_internals/_speedups")


def parse() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--base", required=True, help="the commit to compare against")
    ap.add_argument("--quick", action="store_true", help="a tenth of the records")
    ap.add_argument("--repeat", type=int, default=3, metavar="N")
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument("--fetch", action="store_true",
                    help="also broker_fetch's window cases (pre-loaded, then read)")
    ap.add_argument("--cost", action="store_true",
                    help="also the broker's CPU and minor page faults per MB of 1 KiB ingest "
                         "(figures a busy machine does not skew much, unlike rates)")
    ap.add_argument("--partitions", type=int, default=0, metavar="P",
                    help="also 100 B ingest round-robin over a P-partition topic (partitions.py)")
    args = ap.parse_args()
    args.scale = 1.0  # scaled() applies --quick
    if args.json:  # the brokers run from another directory (targets())
        args.json = os.path.abspath(args.json)
    return args


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout.strip()


def copy_accelerators(tree: Path, base: str) -> list[str]:
    """Copy this checkout's compiled accelerators into ``tree`` where the C sources are
    unchanged since ``base``; the modules left to run in pure Python."""
    missing = []
    for module in ACCELERATORS:
        source = f"{module}.c"
        built = sorted(ROOT.glob(f"{module}.cpython-*.so"))
        same = filecmp.cmp(ROOT / source, tree / source, shallow=False) \
            if (tree / source).exists() else False
        if built and same:
            shutil.copy2(built[0], tree / built[0].relative_to(ROOT))
        else:
            missing.append(module)
    return missing


class BaseTarget(MillraceTarget):
    """The broker of the base commit, from its worktree."""

    name = BASE

    def __init__(self, tree: Path) -> None:
        super().__init__({}, env={"PYTHONPATH": str(tree)})


class HeadTarget(MillraceTarget):
    name = HEAD


@contextmanager
def targets(base: str) -> Iterator[list[Target]]:
    with ExitStack() as stack:
        holder = Path(stack.enter_context(tempfile.TemporaryDirectory(
            prefix="millrace-bench-worktree-")))
        tree = holder / "tree"
        git("worktree", "add", "--detach", str(tree), base)
        stack.callback(git, "worktree", "remove", "--force", str(tree))
        # the brokers run from here: with no millrace/ in the working directory (which
        # Python puts first on sys.path) the base's PYTHONPATH wins over the editable install
        os.chdir(holder)
        found = subprocess.run([sys.executable, "-c", "import millrace; print(millrace.__file__)"],
                               env={**os.environ, "PYTHONPATH": str(tree)}, check=True,
                               capture_output=True, text=True).stdout.strip()
        if not found.startswith(str(tree)):
            raise BenchFailure(f"{BASE}: imports millrace from {found}, not from {tree}")
        pure = copy_accelerators(tree, base)
        if pure:
            print(f"  {BASE}: pure Python for {', '.join(pure)} (C sources differ)")
        head = HeadTarget({})
        stack.callback(head.close)
        other = BaseTarget(tree)
        stack.callback(other.close)
        yield [head, other]


def broker_stat(pid: int) -> tuple[int, float]:
    """(minor page faults, CPU seconds) of a process so far, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[7]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def interleaved(ts: list[Target], repeat: int, prepare: Callable[[Target, int], Any],
                produce: Callable[[Target, Any], tuple[int, float]],
                row: Callable[[int, float, float, int], dict[str, Any]],
                show: Callable[[dict[str, Any]], str]) -> list[dict[str, Any]]:
    """Each build ``repeat`` times, the order flipping every repeat.  ``prepare(t, rep)``
    (untimed) gives what ``produce(t, it)`` sends to; that returns (records, seconds), and
    ``row(records, seconds, broker CPU seconds, minor faults)`` the figures over the
    produce alone, printed with ``show`` as they come."""
    rows: list[dict[str, Any]] = []
    for rep in range(repeat):
        for t in (ts if rep % 2 == 0 else ts[::-1]):
            assert t.broker_pid is not None
            it = prepare(t, rep)
            faults0, cpu0 = broker_stat(t.broker_pid)
            sent, secs = produce(t, it)
            faults1, cpu1 = broker_stat(t.broker_pid)
            rows.append({"target": t.name, "records": sent, "seconds": round(secs, 3),
                         **row(sent, secs, cpu1 - cpu0, faults1 - faults0)})
            print(f"  {show(rows[-1])}", flush=True)
    return rows


def median_of(rows: list[dict[str, Any]], name: str, key: str) -> float:
    return statistics.median(r[key] for r in rows if r["target"] == name)


def byte_cost(ts: list[Target], repeat: int, records: int) -> list[dict[str, Any]]:
    """What 1 MB of 1 KiB records costs each broker: CPU milliseconds and minor faults."""
    def prepare(t: Target, rep: int) -> str:
        topic = f"bench-builds-cost-{rep}"
        t.create_topic(topic)
        return topic

    def row(sent: int, secs: float, cpu: float, faults: int) -> dict[str, Any]:
        mb = sent * 1024 / 1e6
        return {"broker_cpu_ms_per_mb": round(1000 * cpu / mb, 3),
                "minor_faults_per_mb": round(faults / mb, 1)}

    rows = interleaved(
        ts, repeat, prepare,
        lambda t, topic: produce_records(t.bootstrap, topic, bytes(1024), records), row,
        lambda r: (f"cost 1KiB       {r['target']:<11} {r['records']} rec: broker "
                   f"{r['broker_cpu_ms_per_mb']:.2f} CPU ms/MB, "
                   f"{r['minor_faults_per_mb']:.0f} minor faults/MB"))
    for name in (HEAD, BASE):
        print(f"cost {name:<11} median {median_of(rows, name, 'broker_cpu_ms_per_mb'):.2f} "
              f"CPU ms/MB, {median_of(rows, name, 'minor_faults_per_mb'):.0f} minor faults/MB")
    return rows


def partition_cost(ts: list[Target], repeat: int, records: int, count: int
                   ) -> list[dict[str, Any]]:
    """100 B records round-robin over ``count`` partitions on each build: rec/s and the
    broker's CPU microseconds per record."""
    def prepare(t: Target, rep: int) -> list[tuple[str, int]]:
        topic = f"bench-builds-parts-{rep}"
        partitions.create_topics(t.bootstrap, {topic: count})
        return [(topic, i) for i in range(count)]

    rows = interleaved(
        ts, repeat, prepare,
        lambda t, tps: produce_round_robin(t.bootstrap, tps, bytes(partitions.RECORD_BYTES),
                                           records),
        lambda sent, secs, cpu, _faults: {
            "rate": round(sent / secs),
            "broker_cpu_us_per_record": round(1e6 * cpu / sent, 3)},
        lambda r: (f"P={count:<13} {r['target']:<11} {r['rate']:,} rec/s, broker "
                   f"{r['broker_cpu_us_per_record']:.2f} CPU us/record"))
    for name in (HEAD, BASE):
        print(f"P={count} {name:<11} median {median_of(rows, name, 'rate'):,.0f} rec/s, "
              f"{median_of(rows, name, 'broker_cpu_us_per_record'):.2f} broker CPU us/record")
    return rows


def run() -> None:
    args = parse()
    base = git("rev-parse", "--short", args.base)
    print(f"this build {git('rev-parse', '--short', 'HEAD')} vs base {base}", flush=True)
    fetched: list[Result] = []
    cost: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    with targets(base) as ts:
        results: list[Result] = ingest_on_off(ts, CASES, "bench-builds-", args)
        if args.cost:
            cost = byte_cost(ts, args.repeat, scaled(args, 400_000))
        if args.partitions:
            parts = partition_cost(ts, args.repeat, scaled(args, 600_000), args.partitions)
        if args.fetch:
            loaded = [broker_fetch.preload(t, case, scaled(args, case.records))
                      for case in broker_fetch.CASES if case.window for t in ts]
            for rep in range(args.repeat):
                fetched += [broker_fetch.read(ld)
                            for ld in (loaded if rep % 2 == 0 else loaded[::-1])]
    rows: list[dict[str, Any]] = print_table(
        f"ingest: this build vs {base} (confluent-kafka Producer, as broker_ingest)",
        results, {}, HEAD, BASE)
    if fetched:
        rows += print_table(f"fetch: this build vs {base} (as broker_fetch)", fetched, {},
                            HEAD, BASE)
    write_json(args.json, "builds", rows, cost=cost, partitions=parts)


if __name__ == "__main__":
    main_guard(run)
