"""The demo pipeline on ``local[2]`` and on a 2-worker Spark standalone cluster (issue 26):
throughput, and end-to-end latency from produce to database row.

    .venv/bin/python bench/pipeline_cluster.py [--records 300000] [--repeat N] [--quick]
                                               [--rate 200] [--seconds 30] [--json out.json]

Set-up (untimed).  One ``millrace broker`` (``BrokerProcess``) in a temporary directory and
one ``SparkStandaloneCluster``: a master and two workers of 1 core and 1g each, from the
``pyspark`` distribution, on loopback.  The two targets run the same job, the demo's
(``millrace.demo.run.pipeline_config``: the state sink, latest row per order id, and the
aggregate sink, paid revenue per product and minute, into SQLite), written once to a job
file:

- **local**: ``millrace pipeline run --config job.json --master local[2]``;
- **cluster**: the same with ``--master spark://...``: the child is the driver, the tasks
  run in one executor JVM per worker, which read their partitions from the broker.  The
  driver starts its queries once both executors have registered
  (``spark.scheduler.minRegisteredResourcesRatio=1.0``), so their start-up is not
  inside the pipeline's clock.

Each case is a driver child process (one JVM holds one SparkContext, and it is how users
run the job) with a fresh database and checkpoint.  Its stdout is JSON lines
(``--output json``); Spark's log goes to ``driver.log`` in the case's directory.  A
cluster case starts only once the master lists no application (the previous driver's
executors have gone).

1. **Throughput.**  ``--records`` order events (``OrderEventGenerator``, seed 42, keyed by
   order id) in a topic of ``--partitions`` partitions; ``trigger=available-now`` with
   ``maxOffsetsPerTrigger`` = ``--batch``.  The targets run ``--repeat`` times,
   interleaved (local, cluster, then cluster, local, ...).  records/s is the pipeline's own
   clock (the summary line: from starting the sink queries to the last one finishing);
   "wall" is the whole child, JVM and executors' start-up included.  The table shows each
   target's median run and the range; the ratio is cluster / local of the medians, with
   the range of the per-repeat ratios.  Every database is checked row by row against the
   plain-Python fold (``millrace.demo.fold``): a difference fails the run (exit 1).
2. **Latency.**  A fresh topic per target; the driver runs with
   ``trigger=processing-time=--trigger``.  The benchmark produces ``--rate`` events per
   second for ``--seconds`` (after ``--warmup`` events that must all be in the database
   first: the driver's start-up and the first, cold micro-batch are not measured) with the
   millrace ``KafkaProducer`` (``linger.ms=5``, ``acks=all``).  **Produce** is the instant
   just before ``send()`` is called for the record: the latency includes the producer's
   linger and request, the broker's append, the wait for the next trigger, the micro-batch
   and its database transaction, up to the commit that makes the row visible.  A poller
   thread reads ``SELECT order_id, event_time FROM orders`` every ``--poll-ms``; an event
   is in the database once its order's row has an event time at least its own (an order's
   event times increase along its life, ``millrace.demo.orders``), and it is stamped with
   the start of the first poll that sees it.  The commit happened between that poll and
   the one before, so a figure overstates the latency by up to one poll interval (half on
   average).  p50 / p99 / max over the timed events; the database is then checked against
   the fold of every event produced.

Both clocks (``time.monotonic``) are this process's.  Nothing is asserted about speed;
expected on 2 cores: cluster / local near 1 (two executors of one core each against one
JVM with two task threads; the point is that it runs).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import BenchFailure, main_guard, write_json

from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.demo.fold import ExpectedTables, epoch_ms, fold, verify
from millrace.demo.orders import OrderEvent, OrderEventGenerator
from millrace.demo.run import (
    DemoConfig,
    create_topic,
    pipeline_config,
    produce_events,
    read_tables,
)
from millrace.launcher.spark_cluster import SparkStandaloneCluster, spark_missing
from millrace.testing.broker_process import BrokerProcess

SEED = 42
TARGETS = ("local", "cluster")
LOCAL_MASTER = "local[2]"
WORKERS, WORKER_CORES, WORKER_MEMORY = 2, 1, "1g"
DRIVER_TIMEOUT_S = 900.0  # a driver that has not finished by then has hung
VISIBLE_TIMEOUT_S = 300.0  # for produced events to reach the database
LATENCY_PRODUCER: dict[str, Any] = {"linger.ms": 5, "acks": "all",
                                    "client.id": "bench-latency"}


@dataclass
class Run:
    kind: str  # "throughput" or "latency"
    target: str  # "local" or "cluster"
    master: str
    records: int
    seconds: float  # the pipeline's own clock
    wall_s: float  # the driver child from spawn to exit
    batches: int
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rec_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=300_000,
                    help="order events for the throughput cases (default 300,000)")
    ap.add_argument("--partitions", type=int, default=6, help="topic partitions (default 6)")
    ap.add_argument("--batch", type=int, default=200_000,
                    help="maxOffsetsPerTrigger of the throughput cases (default 200,000, "
                         "the demo's)")
    ap.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="throughput: run both targets N times, interleaved")
    ap.add_argument("--rate", type=float, default=200.0,
                    help="latency: events per second (default 200)")
    ap.add_argument("--seconds", type=float, default=30.0,
                    help="latency: seconds of timed producing per target (default 30)")
    ap.add_argument("--warmup", type=int, default=400,
                    help="latency: events produced and awaited before the timed ones")
    ap.add_argument("--trigger", default="500ms",
                    help="latency: the processing-time trigger interval (default 500ms)")
    ap.add_argument("--poll-ms", type=float, default=50.0,
                    help="latency: how often the poller reads the state table (default 50)")
    ap.add_argument("--targets", default=",".join(TARGETS),
                    help="comma-separated subset of: local,cluster (default both)")
    ap.add_argument("--only", choices=("throughput", "latency"),
                    help="run one of the two parts")
    ap.add_argument("--quick", action="store_true",
                    help="a fifth of --records and 10 s of latency per target")
    ap.add_argument("--keep", metavar="DIR",
                    help="work in DIR and keep it (driver logs, databases, Spark logs)")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = ap.parse_args()
    if args.quick:
        args.records = max(10_000, args.records // 5)
        args.seconds = min(args.seconds, 10.0)
        args.warmup = min(args.warmup, 200)
    args.target_names = [t.strip() for t in args.targets.split(",") if t.strip()]
    if not args.target_names or any(t not in TARGETS for t in args.target_names):
        ap.error(f"--targets: choose from {', '.join(TARGETS)}")
    if min(args.records, args.partitions, args.batch, args.repeat, args.warmup) < 1 \
            or min(args.rate, args.seconds, args.poll_ms) <= 0:
        ap.error("counts, --rate, --seconds and --poll-ms must be positive")
    return args


# --------------------------------------------------------------------------- drivers


class Driver:
    """``millrace pipeline run`` as a child process in its own process group: stdout (JSON
    lines) in ``<work>/driver.out``, stderr (Spark's log) in ``<work>/driver.log``."""

    def __init__(self, job: Path, master: str, work: Path, trigger: str,
                 database: str | None = None, extra: tuple[str, ...] = ()) -> None:
        """``database``: default a fresh SQLite file in ``work``; ``extra``: more flags."""
        self.work = work
        self.out = work / "driver.out"
        self.log = work / "driver.log"
        self.database = database or f"sqlite:///{(work / 'out.db').resolve()}"
        args = [sys.executable, "-m", "millrace.cli.main", "pipeline", "run",
                "--config", str(job), "--master", master, "--database", self.database,
                "--checkpoint", str((work / "checkpoints").resolve()),
                "--trigger", trigger, "--output", "json", *extra]
        if not master.startswith("local"):
            # start the queries only once both executors have registered (at most 120 s):
            # their JVMs' start-up is the driver's start-up, outside the pipeline's clock
            args += ["--conf", "spark.scheduler.minRegisteredResourcesRatio=1.0",
                     "--conf", "spark.scheduler.maxRegisteredResourcesWaitingTime=120s"]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYSPARK_PYTHON": sys.executable}
        self.started = time.monotonic()
        with open(self.out, "wb") as out, open(self.log, "wb") as log:
            self.proc = subprocess.Popen(args, stdout=out, stderr=log, env=env,
                                         start_new_session=True)

    @property
    def db_path(self) -> Path:
        return self.work / "out.db"

    def tail(self) -> str:
        text = self.log.read_text(errors="replace") + self.out.read_text(errors="replace")
        return text[-3000:]

    def check_running(self) -> None:
        if self.proc.poll() is not None:
            raise BenchFailure(f"the driver exited with {self.proc.returncode}:\n{self.tail()}")

    def stop(self) -> None:
        """SIGTERM: the pipeline stops its queries once their batches are reported."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        if self.proc.poll() is None:
            with suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def wait(self, timeout: float = DRIVER_TIMEOUT_S) -> tuple[dict[str, Any], float]:
        """(the summary, wall seconds from spawn to exit); BenchFailure if it failed."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise BenchFailure(f"the driver did not finish in {timeout:.0f} s:\n"
                               f"{self.tail()}") from None
        wall = time.monotonic() - self.started
        if code != 0:
            raise BenchFailure(f"the driver exited with {code}:\n{self.tail()}")
        for line in reversed(self.out.read_text().splitlines()):
            if line.startswith("{"):
                doc = json.loads(line)
                if doc.get("event") == "summary":
                    return doc, wall
        raise BenchFailure(f"the driver printed no summary:\n{self.tail()}")


@contextmanager
def driver(job: Path, master: str, work: Path, trigger: str, database: str | None = None,
           extra: tuple[str, ...] = ()) -> Iterator[Driver]:
    work.mkdir(parents=True)
    d = Driver(job, master, work, trigger, database, extra)
    try:
        yield d
    finally:
        d.kill()  # a no-op once it has exited


def write_job(path: Path, bootstrap: str, topic: str, batch: int) -> Path:
    config = DemoConfig(path.parent, topic=topic, seed=SEED, max_offsets_per_trigger=batch)
    path.write_text(json.dumps(pipeline_config(config, bootstrap).to_dict(), indent=2))
    return path


def wait_idle(cluster: SparkStandaloneCluster | None, timeout: float = 120.0) -> None:
    """Until the master lists no application: the last driver's executors are gone."""
    if cluster is None:
        return
    deadline = time.monotonic() + timeout
    while cluster.applications():
        if time.monotonic() > deadline:
            raise BenchFailure(f"the cluster still runs {cluster.applications()} after "
                               f"{timeout:.0f} s")
        time.sleep(0.2)


def check_tables(database_url: str, expected: ExpectedTables, what: str) -> None:
    orders, revenue = read_tables(database_url)
    result = verify(expected, orders, revenue)
    if not result.passed:
        raise BenchFailure(f"{what}: {result.mismatch_count} rows differ from the fold, e.g. "
                           f"{[m.describe() for m in result.mismatches[:3]]}")


# --------------------------------------------------------------------------- throughput


def throughput_case(target: str, master: str, job: Path, work: Path, records: int,
                    expected: ExpectedTables, label: str) -> Run:
    with driver(job, master, work, "available-now") as d:
        summary, wall = d.wait()
    if summary["input_rows"] != records:
        raise BenchFailure(f"{label} {target}: read {summary['input_rows']} records of "
                           f"{records}")
    check_tables(d.database, expected, f"{label} {target}")
    batches = max(summary.get("batches_by_table", {}).values(), default=0)
    return Run("throughput", target, master, summary["input_rows"], summary["elapsed_s"],
               wall, batches)


# --------------------------------------------------------------------------- latency


class Poller:
    """Reads the state table every ``interval`` s on a thread of its own and stamps each
    awaited event with the start of the first poll whose snapshot holds it.

    ``expect`` (the producing thread) and the poll thread share ``_pending`` under
    ``_lock``; the poll thread owns the SQLite connection."""

    def __init__(self, db_path: Path, interval: float) -> None:
        self.db_path = db_path
        self.interval = interval
        self._lock = threading.Lock()
        # order id -> [(event time ms, send time, index)], oldest first
        self._pending: dict[str, list[tuple[int, float, int]]] = {}
        self.visible: dict[int, float] = {}  # index -> first poll that saw it
        self.polls = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-poller", daemon=True)
        self._thread.start()

    def expect(self, event: OrderEvent, sent: float, index: int) -> None:
        with self._lock:
            self._pending.setdefault(event.order_id, []).append(
                (event.event_time_ms, sent, index))

    def pending(self) -> int:
        with self._lock:
            return sum(len(v) for v in self._pending.values())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while not self._stop.is_set():
                started = time.monotonic()
                if conn is None and self.db_path.exists():
                    conn = sqlite3.connect(self.db_path, timeout=5, check_same_thread=False)
                if conn is not None:
                    try:
                        rows = conn.execute("SELECT order_id, event_time FROM orders").fetchall()
                    except sqlite3.OperationalError:  # the sink has not created it yet
                        rows = []
                    self.polls += 1
                    self._stamp(rows, started)
                self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))
        except BaseException as e:
            self.error = e
        finally:
            if conn is not None:
                conn.close()

    def _stamp(self, rows: list[tuple[Any, Any]], at: float) -> None:
        with self._lock:
            if not self._pending:
                return
            for order_id, event_time in rows:
                waiting = self._pending.get(order_id)
                if not waiting:
                    continue
                latest = epoch_ms(event_time)
                keep = []
                for item in waiting:
                    if item[0] <= latest:
                        self.visible[item[2]] = at
                    else:
                        keep.append(item)
                if keep:
                    self._pending[order_id] = keep
                else:
                    del self._pending[order_id]


def produce_paced(bootstrap: str, topic: str, events: list[OrderEvent], first_index: int,
                  rate: float, poller: Poller, sent_at: dict[int, float]) -> float:
    """Send ``events`` at ``rate`` per second, each registered with the poller just before
    its ``send()``; returns the seconds from the first send to the end of ``flush``."""
    failures: list[BaseException] = []

    def on_completion(_metadata: Any, error: BaseException | None) -> None:
        if error is not None:
            failures.append(error)

    producer: KafkaProducer[bytes, bytes] = KafkaProducer(
        {"bootstrap.servers": bootstrap, **LATENCY_PRODUCER})
    with producer:
        producer.partitions_for(topic)
        t0 = time.monotonic()
        for i, event in enumerate(events):
            delay = t0 + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            index = first_index + i
            now = time.monotonic()
            sent_at[index] = now
            poller.expect(event, now, index)
            producer.send(ProducerRecord(topic, event.to_json(), key=event.key),
                          on_completion)
        producer.flush()
        elapsed = time.monotonic() - t0
    if failures:
        raise BenchFailure(f"{len(failures)} records not delivered, e.g. {failures[0]}")
    return elapsed


def await_visible(poller: Poller, d: Driver, what: str) -> None:
    deadline = time.monotonic() + VISIBLE_TIMEOUT_S
    while poller.pending():
        d.check_running()
        if poller.error is not None:
            raise BenchFailure(f"the poller failed: {poller.error!r}")
        if time.monotonic() > deadline:
            raise BenchFailure(f"{what}: {poller.pending()} events not in the database after "
                               f"{VISIBLE_TIMEOUT_S:.0f} s:\n{d.tail()}")
        time.sleep(0.05)


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest rank: the smallest value with at least ``q`` of the values at or below it."""
    return sorted_values[max(0, math.ceil(q * len(sorted_values)) - 1)]


def latency_case(target: str, master: str, work: Path, bootstrap: str,
                 args: argparse.Namespace) -> Run:
    topic = f"bench-latency-{target}"
    create_topic(bootstrap, topic, args.partitions)
    work.mkdir(parents=True)
    job = write_job(work / "job.json", bootstrap, topic, args.batch)
    timed = max(1, round(args.rate * args.seconds))
    events = list(OrderEventGenerator(SEED).take(args.warmup + timed))
    sent_at: dict[int, float] = {}
    with driver(job, master, work / "driver", f"processing-time={args.trigger}") as d:
        poller = Poller(d.db_path, args.poll_ms / 1000)
        try:
            say(f"  {target}: {args.warmup} warm-up events, waiting for the driver and the "
                "first micro-batch")
            produce_paced(bootstrap, topic, events[:args.warmup], 0, args.rate, poller,
                          sent_at)
            await_visible(poller, d, f"latency {target} warm-up")
            say(f"  {target}: warm-up in the database after "
                f"{time.monotonic() - d.started:.0f} s; {timed:,} events at "
                f"{args.rate:g}/s")
            produce_s = produce_paced(bootstrap, topic, events[args.warmup:], args.warmup,
                                      args.rate, poller, sent_at)
            await_visible(poller, d, f"latency {target}")
            polls = poller.polls
        finally:
            poller.stop()
        d.stop()
        summary, wall = d.wait()
    check_tables(d.database, fold(events), f"latency {target}")
    latencies = sorted(1000 * (poller.visible[i] - sent_at[i])
                       for i in range(args.warmup, args.warmup + timed))
    extra = {"events": timed, "rate": round(timed / produce_s, 1),
             "trigger": f"processing-time={args.trigger}", "poll_ms": args.poll_ms,
             "polls": polls, "p50_ms": round(percentile(latencies, 0.50), 1),
             "p99_ms": round(percentile(latencies, 0.99), 1),
             "max_ms": round(latencies[-1], 1),
             "mean_ms": round(statistics.fmean(latencies), 1)}
    batches = max(summary.get("batches_by_table", {}).values(), default=0)
    return Run("latency", target, master, summary["input_rows"], summary["elapsed_s"], wall,
               batches, extra)


# --------------------------------------------------------------------------- output


def median_run(runs: list[Run]) -> Run:
    ranked = sorted(runs, key=lambda r: r.rec_s)
    return ranked[len(ranked) // 2]


def print_throughput(runs: list[Run], args: argparse.Namespace) -> dict[str, Any]:
    print(f"\nthroughput: {args.records:,} order events, {args.partitions} partitions, "
          f"{args.batch:,} per micro-batch, available-now -> SQLite (state + aggregate)")
    header = (f"{'target':<8} {'master':<27} {'records':>9} {'batches':>7} {'secs':>7} "
              f"{'rec/s':>8} {'runs rec/s':>15} {'wall s':>7}")
    print(header)
    print("-" * len(header))
    medians: dict[str, Run] = {}
    for target in TARGETS:
        mine = [r for r in runs if r.target == target]
        if not mine:
            continue
        m = medians[target] = median_run(mine)
        rates = [r.rec_s for r in mine]
        spread = f"{min(rates):,.0f}..{max(rates):,.0f}" if len(rates) > 1 else ""
        print(f"{target:<8} {m.master:<27} {m.records:>9,} {m.batches:>7} {m.seconds:>7.2f} "
              f"{m.rec_s:>8,.0f} {spread:>15} {statistics.median(r.wall_s for r in mine):>7.1f}")
    out: dict[str, Any] = {}
    if len(medians) == 2:
        ratio = medians["cluster"].rec_s / medians["local"].rec_s
        local = [r for r in runs if r.target == "local"]
        cluster = [r for r in runs if r.target == "cluster"]
        pairs = [c.rec_s / lo.rec_s for lo, c in zip(local, cluster)]
        spread = f" (per-repeat {min(pairs):.2f}..{max(pairs):.2f})" if len(pairs) > 1 else ""
        print(f"cluster / local: {ratio:.2f}{spread}")
        out = {"ratio_cluster_local": round(ratio, 3),
               "ratio_range": [round(min(pairs), 3), round(max(pairs), 3)]}
    return out


def print_latency(runs: list[Run], args: argparse.Namespace) -> None:
    print(f"\nlatency, send() to row visible: {args.rate:g} events/s for {args.seconds:g} s "
          f"after {args.warmup} warm-up events, trigger processing-time={args.trigger}, "
          f"state table polled every {args.poll_ms:g} ms (figures overstate by up to one poll)")
    header = (f"{'target':<8} {'master':<27} {'events':>7} {'rate/s':>7} {'batches':>7} "
              f"{'p50 ms':>7} {'p99 ms':>7} {'max ms':>7}")
    print(header)
    print("-" * len(header))
    for r in runs:
        e = r.extra
        print(f"{r.target:<8} {r.master:<27} {e['events']:>7,} {e['rate']:>7.1f} "
              f"{r.batches:>7} {e['p50_ms']:>7.0f} {e['p99_ms']:>7.0f} {e['max_ms']:>7.0f}")


def as_row(r: Run) -> dict[str, Any]:
    return {"kind": r.kind, "target": r.target, "master": r.master, "records": r.records,
            "seconds": round(r.seconds, 3), "rec_s": round(r.rec_s),
            "wall_s": round(r.wall_s, 2), "batches": r.batches, **r.extra}


# --------------------------------------------------------------------------- main


def run() -> None:
    args = parse_args()
    load_start = [round(x, 1) for x in os.getloadavg()]
    reason = spark_missing()
    if reason is not None and "cluster" in args.target_names:
        raise BenchFailure(f"no Spark cluster here: {reason}")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    with work_dir(args.keep) as root, BrokerProcess(root / "broker") as broker, \
            cluster_for(args, root) as cluster:
        masters = {"local": LOCAL_MASTER}
        if cluster is not None:
            masters["cluster"] = cluster.master_url
            say(f"Spark cluster {cluster.master_url}: {WORKERS} workers x "
                f"{WORKER_CORES} core, {WORKER_MEMORY}")
        throughput: list[Run] = []
        if args.only != "latency":
            say(f"broker {broker.bootstrap}; producing {args.records:,} order events")
            topic = "bench-orders"
            create_topic(broker.bootstrap, topic, args.partitions)
            produce_events(broker.bootstrap, topic, OrderEventGenerator(SEED), 0,
                           args.records)
            expected = fold(OrderEventGenerator(SEED).take(args.records))
            job = write_job(root / "throughput-job.json", broker.bootstrap, topic,
                            args.batch)
            for rep in range(args.repeat):
                order = args.target_names if rep % 2 == 0 else args.target_names[::-1]
                for target in order:
                    wait_idle(cluster)
                    r = throughput_case(target, masters[target], job,
                                        root / f"throughput-{target}-{rep}",
                                        args.records, expected, f"run {rep + 1}")
                    say(f"  {target:<8} {r.records:,} records in {r.seconds:6.2f} s = "
                        f"{r.rec_s:>8,.0f} rec/s ({r.batches} micro-batches, driver "
                        f"{r.wall_s:.1f} s in all); database = fold")
                    throughput.append(r)
        latency: list[Run] = []
        if args.only != "throughput":
            say("latency")
            for target in args.target_names:
                wait_idle(cluster)
                r = latency_case(target, masters[target], root / f"latency-{target}",
                                 broker.bootstrap, args)
                say(f"  {target}: p50 {r.extra['p50_ms']:.0f} ms, p99 "
                    f"{r.extra['p99_ms']:.0f} ms, max {r.extra['max_ms']:.0f} ms; "
                    "database = fold")
                latency.append(r)
    load = [round(x, 1) for x in os.getloadavg()]
    summary: dict[str, Any] = {"load_average_start": load_start, "load_average_end": load}
    print(f"\nload average (1, 5, 15 min) at the start {load_start}, at the end {load} "
          f"on {os.cpu_count()} cores: above the core count, other work shared the machine")
    if throughput:
        summary.update(print_throughput(throughput, args))
    if latency:
        print_latency(latency, args)
    write_json(args.json, "pipeline_cluster", [as_row(r) for r in throughput + latency],
               **summary, cluster={"workers": WORKERS, "cores_per_worker": WORKER_CORES,
                                   "memory_per_worker": WORKER_MEMORY})


@contextmanager
def work_dir(keep: str | None) -> Iterator[Path]:
    if keep:
        path = Path(keep).resolve()
        path.mkdir(parents=True, exist_ok=False)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="millrace-bench-cluster-") as tmp:
        yield Path(tmp)


@contextmanager
def cluster_for(args: argparse.Namespace, root: Path) -> Iterator[SparkStandaloneCluster | None]:
    if "cluster" not in args.target_names:
        yield None
        return
    with SparkStandaloneCluster(root / "spark", workers=WORKERS, cores_per_worker=WORKER_CORES,
                                memory_per_worker=WORKER_MEMORY) as cluster:
        yield cluster


def say(text: str, out: Callable[..., None] = print) -> None:
    out(text, flush=True)


if __name__ == "__main__":
    main_guard(run)
