"""Shared pieces of the broker benchmarks: targets, client settings, the result table.

A *target* is a Kafka cluster the benchmark talks to through confluent-kafka:

- ``millrace``: ``millrace broker`` started by :class:`BrokerProcess` in a temporary
  directory on a free loopback port;
- ``mock``: librdkafka's built-in mock cluster (``test.mock.num.brokers``), an in-memory
  C broker living in this process; it is the yardstick the issue's ratios use.

Both get the same client settings and the same topics (one partition, produced to
partition 0 explicitly, since the mock auto-creates topics with 4 partitions).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from millrace.testing.broker_process import BrokerProcess

TARGETS = ("millrace", "mock")

# Quiet clients: no connection-close chatter on stderr, warnings and errors only.
CLIENT_QUIET: dict[str, Any] = {"log.connection.close": False, "log_level": 4}

PRODUCER_THROUGHPUT: dict[str, Any] = {
    **CLIENT_QUIET,
    "acks": "1",
    "linger.ms": 10,
    "batch.size": 1_000_000,
    "batch.num.messages": 100_000,
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "compression.type": "none",
    "enable.idempotence": False,
    # Python callbacks per record would dominate the run; only failures are reported.
    "delivery.report.only.error": True,
}

CONSUMER_THROUGHPUT: dict[str, Any] = {
    **CLIENT_QUIET,
    "group.id": "millrace-bench",
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "auto.offset.reset": "earliest",
    "fetch.min.bytes": 1,
    "fetch.wait.max.ms": 5,  # short: a re-assign waits for an in-flight long poll
    "max.partition.fetch.bytes": 8 * 1024 * 1024,
    "fetch.max.bytes": 64 * 1024 * 1024,
    "queued.min.messages": 1_000_000,
    "queued.max.messages.kbytes": 256 * 1024,
}


class BenchFailure(Exception):
    """Something is functionally wrong (records missing, delivery errors): exit 1."""


# --------------------------------------------------------------------------- targets


class Target:
    name: str
    bootstrap: str
    broker_pid: int | None = None  # None: the broker runs inside this process (mock)

    def create_topic(self, topic: str) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class MillraceTarget(Target):
    name = "millrace"

    def __init__(self, overrides: dict[str, str], env: dict[str, str] | None = None) -> None:
        """A ``millrace broker`` child with ``overrides``; ``env`` added to its
        environment (``builds.py``: an earlier commit's tree on ``PYTHONPATH``)."""
        self._tmp = tempfile.TemporaryDirectory(prefix="millrace-bench-")
        self.broker = BrokerProcess(Path(self._tmp.name), overrides=overrides, env=env)
        try:
            self.broker.start()
        except BaseException:
            self.broker.kill()
            self._tmp.cleanup()
            raise
        self.bootstrap = self.broker.bootstrap
        self.broker_pid = self.broker.proc.pid if self.broker.proc else None

    def create_topic(self, topic: str) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap, **CLIENT_QUIET})
        futures = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)],
                                      operation_timeout=10)
        try:
            futures[topic].result(timeout=15)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise

    def close(self) -> None:
        try:
            try:
                self.broker.stop()
            except BaseException:
                self.broker.kill()
                raise
        finally:
            self._tmp.cleanup()


class MockTarget(Target):
    """librdkafka's mock cluster; it lives as long as the producer that started it."""

    name = "mock"

    def __init__(self) -> None:
        self._holder: Producer | None = Producer(
            {"test.mock.num.brokers": 1, "bootstrap.servers": "unused", **CLIENT_QUIET,
             "log_level": 3})  # level 3: hide the "Mock cluster enabled" notice
        md = self._holder.list_topics(timeout=10)
        self.bootstrap = ",".join(f"{b.host}:{b.port}" for b in md.brokers.values())

    def create_topic(self, topic: str) -> None:
        # The mock has no CreateTopics; a metadata request for the topic auto-creates it.
        assert self._holder is not None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            md = self._holder.list_topics(topic, timeout=5)
            t = md.topics.get(topic)
            if t is not None and t.error is None and 0 in t.partitions:
                return
            time.sleep(0.05)
        raise BenchFailure(f"mock cluster did not create topic {topic!r}")

    def close(self) -> None:
        if self._holder is not None:
            self._holder.flush(5)
            self._holder = None  # the mock cluster is destroyed with its producer


@contextmanager
def open_target(name: str, overrides: dict[str, str]) -> Iterator[Target]:
    target: Target = MillraceTarget(overrides) if name == "millrace" else MockTarget()
    try:
        yield target
    finally:
        target.close()


@contextmanager
def open_targets(names: list[str], overrides: dict[str, str]) -> Iterator[list[Target]]:
    with ExitStack() as stack:
        yield [stack.enter_context(open_target(n, overrides)) for n in names]


# --------------------------------------------------------------------------- CPU use


def cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU seconds of process ``pid`` (default: this one, all threads)."""
    if pid is None:
        t = os.times()
        return t.user + t.system
    try:  # Linux: utime and stime are fields 14 and 15 of /proc/<pid>/stat
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


class CpuMeter:
    """CPU used by the broker process and by this (client) process over a run, as a
    fraction of one core. For the mock, the broker's threads count as client CPU."""

    def __init__(self, target: Target) -> None:
        self.pid = target.broker_pid
        self.broker0 = cpu_seconds(self.pid) if self.pid else 0.0
        self.client0 = cpu_seconds()

    def read(self, seconds: float) -> tuple[float | None, float]:
        """(broker, client) CPU over ``seconds`` of wall time."""
        broker = (cpu_seconds(self.pid) - self.broker0) / seconds if self.pid else None
        return broker, (cpu_seconds() - self.client0) / seconds


# --------------------------------------------------------------------------- client ops


def produce_records(bootstrap: str, topic: str, payload: bytes, count: int,
                    extra: dict[str, Any] | None = None,
                    budget_s: float | None = None) -> tuple[int, float]:
    """Produce up to ``count`` copies of ``payload`` to ``topic`` partition 0 (see
    ``produce_round_robin``)."""
    return produce_round_robin(bootstrap, [(topic, 0)], payload, count, budget_s, extra)


def produce_round_robin(bootstrap: str, tps: Sequence[tuple[str, int]], payload: bytes,
                        count: int, budget_s: float | None = None,
                        extra: dict[str, Any] | None = None) -> tuple[int, float]:
    """Produce up to ``count`` copies of ``payload``, record i to ``tps[i % len(tps)]``.

    Returns (records delivered, seconds from the first produce to the end of ``flush``).
    Stops producing early once ``budget_s`` has passed (the rate stays honest: it is
    records delivered over time taken). Raises BenchFailure on any delivery error.
    Connecting and the partition leaders' metadata happen before the clock starts; one
    partition takes a loop without the modulo, so the client's cost per record is what
    it always was.
    """
    errors: list[str] = []

    def on_error(err: KafkaError | None, _msg: Any) -> None:
        if err is not None and len(errors) < 5:
            errors.append(str(err))

    p = Producer({"bootstrap.servers": bootstrap, **PRODUCER_THROUGHPUT, **(extra or {}),
                  "on_delivery": on_error})
    n_tps = len(tps)
    try:
        for topic in dict.fromkeys(t for t, _ in tps):
            p.list_topics(topic, timeout=30)
        produce, poll = p.produce, p.poll

        def send(topic: str, part: int) -> None:
            try:
                produce(topic, payload, partition=part)
            except BufferError:  # local queue full: serve events until there is room
                while True:
                    poll(0.005)
                    try:
                        produce(topic, payload, partition=part)
                        return
                    except BufferError:
                        continue

        deadline = float("inf") if budget_s is None else time.perf_counter() + budget_s
        sent = 0
        t0 = time.perf_counter()
        while sent < count:
            chunk = min(10_000, count - sent)
            if n_tps == 1:
                topic, part = tps[0]
                for _ in range(chunk):
                    try:
                        produce(topic, payload, partition=part)
                    except BufferError:
                        send(topic, part)
            else:
                for i in range(sent, sent + chunk):
                    topic, part = tps[i % n_tps]
                    try:
                        produce(topic, payload, partition=part)
                    except BufferError:
                        send(topic, part)
            sent += chunk
            poll(0)
            if time.perf_counter() > deadline:
                break
        remaining = p.flush(120)
        elapsed = time.perf_counter() - t0
    finally:
        p.flush(5)
    if remaining:
        raise BenchFailure(f"{remaining} records still undelivered after flush")
    if errors:
        raise BenchFailure(f"delivery errors, e.g. {errors}")
    return sent, elapsed


def watermarks(bootstrap: str, topic: str,
               config: dict[str, Any] | None = None) -> tuple[int, int]:
    """(log start offset, end offset) of ``topic`` partition 0; ``config``: extra client
    settings (security)."""
    c = Consumer({"bootstrap.servers": bootstrap, **CLIENT_QUIET, "group.id": "millrace-bench",
                  **(config or {})})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return int(low), int(high)
    finally:
        c.close()


# --------------------------------------------------------------------------- results


@dataclass
class Result:
    bench: str
    case: str
    target: str
    records: int
    record_bytes: int
    seconds: float
    broker_cpu: float | None = None  # fraction of one core; None: in-process (mock)
    client_cpu: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rec_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_s(self) -> float:
        """Record values only, MB = 10**6 bytes (no keys, headers or protocol overhead)."""
        return self.records * self.record_bytes / self.seconds / 1e6 if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "rec_s": round(self.rec_s), "mb_s": round(self.mb_s, 2)}


def median_runs(results: list[Result]) -> list[Result]:
    """One result per (case, target), in first-seen order: the median run by rec/s (the
    upper median for an even count), with every run's rate kept in ``extra["runs_rec_s"]``."""
    groups: dict[tuple[str, str], list[Result]] = {}
    for r in results:
        groups.setdefault((r.case, r.target), []).append(r)
    out: list[Result] = []
    for runs in groups.values():
        ranked = sorted(runs, key=lambda r: r.rec_s)
        rep = ranked[len(ranked) // 2]
        rep.extra["runs_rec_s"] = [round(r.rec_s) for r in runs]
        out.append(rep)
    return out


def _range(r: Result) -> str:
    rates = r.extra.get("runs_rec_s", [])
    return f"{min(rates) / 1e3:.0f}..{max(rates) / 1e3:.0f}k" if len(rates) > 1 else ""


def _cpu(r: Result) -> str:
    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.0f}%"
    return f"{pct(r.broker_cpu)}/{pct(r.client_cpu)}"


# A goal check: (case, millrace result, mock result or None) -> "met" / "NOT met" text.
Goal = Callable[[Result, Result | None], str]


def print_table(title: str, results: list[Result], goals: dict[str, Goal],
                mine: str = "millrace", base: str = "mock") -> list[dict[str, Any]]:
    """Print one row per (case, target) (the median of repeated runs) and return rows
    for --json. The ratio column is ``mine``'s rec/s over ``base``'s."""
    results = median_runs(results)
    label = f"{mine}/{base}"
    w = max(13, len(label))
    print(f"\n{title}")
    header = (f"{'case':<17} {'target':<9} {'records':>9} {'secs':>6} {'rec/s':>11} "
              f"{'runs':>12} {'MB/s':>7} {'cpu brk/cli':>11} {label:>{w}}  goal")
    print(header)
    print("-" * len(header))
    rows: list[dict[str, Any]] = []
    cases = list(dict.fromkeys(r.case for r in results))
    for case in cases:
        by_target = {r.target: r for r in results if r.case == case}
        ours, yard = by_target.get(mine), by_target.get(base)
        ratio = ours.rec_s / yard.rec_s if ours and yard and yard.rec_s else None
        goal = goals[case](ours, yard) if ours and case in goals else ""
        for r in results:
            if r.case != case:
                continue
            is_mine = r.target == mine
            ratio_s = f"{ratio:.2f}" if ratio is not None and is_mine else ""
            print(f"{case:<17} {r.target:<9} {r.records:>9} {r.seconds:>6.2f} {r.rec_s:>11,.0f} "
                  f"{_range(r):>12} {r.mb_s:>7.1f} {_cpu(r):>11} {ratio_s:>{w}}  "
                  f"{goal if is_mine else ''}")
            rows.append({**r.as_dict(),
                         f"ratio_vs_{base}": round(ratio, 3) if ratio and is_mine else None,
                         "goal": goal if is_mine else None})
    return rows


# --------------------------------------------------------------------------- CLI


def parse_args(description: str) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--quick", action="store_true", help="about a tenth of the records")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    ap.add_argument("--targets", default=",".join(TARGETS),
                    help="comma-separated subset of: millrace,mock (default both)")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="broker config override for the millrace target (repeatable)")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiply every record count by this (default 1)")
    ap.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="run every case N times, targets interleaved; the table shows the "
                         "median run (the better one of two) and the range (default 1)")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat wants N >= 1")
    args.target_names = [t.strip() for t in args.targets.split(",") if t.strip()]
    bad = [t for t in args.target_names if t not in TARGETS]
    if bad:
        ap.error(f"unknown target(s) {bad}; choose from {TARGETS}")
    args.overrides = parse_overrides(ap, args.override)
    return args


def parse_overrides(ap: argparse.ArgumentParser, items: list[str]) -> dict[str, str]:
    """``--override KEY=VALUE`` arguments as a dict (a malformed one is a usage error)."""
    overrides: dict[str, str] = {}
    for kv in items:
        k, sep, v = kv.partition("=")
        if not sep:
            ap.error(f"--override wants KEY=VALUE, got {kv!r}")
        overrides[k] = v
    return overrides


def scaled(args: argparse.Namespace, full: int) -> int:
    n = full * args.scale * (0.1 if args.quick else 1.0)
    return max(1000, int(n))


def write_json(path: str | None, bench: str, rows: list[dict[str, Any]],
               **extra: Any) -> None:
    """Write the rows (and ``extra`` top-level keys, e.g. a summary ratio) to ``path``."""
    if not path:
        return
    doc = {"bench": bench, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "python": sys.version.split()[0], "results": rows, **extra}
    Path(path).write_text(json.dumps(doc, indent=2) + "\n")
    print(f"\nwrote {path}")


def main_guard(run: Callable[[], None]) -> None:
    """Run a benchmark; functional failures exit 1, timing never does."""
    try:
        run()
    except BenchFailure as e:
        print(f"\nFAILED: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
