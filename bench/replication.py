"""Replication benchmark: what acks=all on RF 3 costs, and how long a leader is missed.

Runs one ``LocalCluster`` (ZooKeeper + 3 ``millrace broker`` processes on loopback) and
drives it with confluent-kafka, all in one run on one machine:

1. **ingest** -- N x 100 B records to a one-partition topic, ``acks=1`` on RF 1 versus
   ``acks=all`` on RF 3 with ``min.insync.replicas=2`` (every record waits for a
   follower's fetch); reported as rec/s and their ratio (target >= 0.5); then the same
   with ``--records-1kib`` x 1 KiB records (target >= 0.7: follower fetches and the
   leader's ISR bookkeeping on the byte path).  The two settings alternate which runs
   first from one repeat to the next;
2. **latency** -- ``acks=all`` RF 3 at a light fixed rate, after one warm-up record: each
   record's end-to-end time from ``produce()`` to a consumer seeing it (the consumer reads
   only committed records, so this includes replication); p50 / p99 / max (target p99 <=
   10 ms);
3. **failover** -- an idempotent ``acks=all`` producer writing a record every 20 ms to a
   partition whose leader is then killed (SIGKILL) or stopped (SIGTERM: controlled
   shutdown); the time from the signal to the first acknowledged record written after it
   (target <= zookeeper.session.timeout.ms + 2 s after kill -9, and well under it with
   controlled shutdown).  Every record acknowledged in the run is then read back: none may
   be missing or duplicated.

This is a benchmark, not a test: the goals are reported, never asserted; it exits 1 only
when something is functionally wrong (lost or duplicated records, delivery errors in the
ingest).  Run on an otherwise idle machine::

    .venv/bin/python bench/replication.py [--records 300000] [--repeat 3] [--json out.json]
    .venv/bin/python bench/replication.py --quick [--ingest-only]    # a check in ~1 min

``--quick``: a tenth of the records, one repeat, a 3 s latency run and the SIGTERM
failover only (kill -9 waits out the ZooKeeper session); ``--ingest-only``: the ingest
cases alone.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from millrace.launcher.local_cluster import LocalCluster

QUIET: dict[str, Any] = {"log.connection.close": False, "log_level": 3}
INGEST: dict[str, Any] = {
    **QUIET, "linger.ms": 10, "batch.size": 1_000_000, "batch.num.messages": 100_000,
    "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576,
    "compression.type": "none", "delivery.report.only.error": True,
}
SESSION_TIMEOUT_MS = 18_000  # Kafka's default zookeeper.session.timeout.ms


class BenchFailure(Exception):
    pass


def create(admin: AdminClient, name: str, rf: int, configs: dict[str, str] | None = None
           ) -> None:
    for f in admin.create_topics([NewTopic(name, 1, rf, config=configs or {})]).values():
        f.result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        p = admin.list_topics(name, timeout=10).topics[name].partitions.get(0)
        if p is not None and p.leader >= 0 and len(p.isrs) == rf:
            return
        time.sleep(0.1)
    raise BenchFailure(f"topic {name} has no full ISR after 30 s")


def ingest(bootstrap: str, topic: str, acks: str, n: int, size: int = 100) -> float:
    errors: list[Any] = []
    p = Producer({**INGEST, "bootstrap.servers": bootstrap, "acks": acks,
                  "error_cb": errors.append})
    value = b"x" * size
    failed = []
    t0 = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value, partition=0,
                          on_delivery=lambda e, _m: failed.append(e) if e else None)
                break
            except BufferError:
                p.poll(0.005)
    p.flush(120)
    elapsed = time.perf_counter() - t0
    if failed:
        raise BenchFailure(f"{len(failed)} delivery errors, first: {failed[0]}")
    return n / elapsed


def latency(bootstrap: str, topic: str, rate: int, seconds: float) -> list[float]:
    c = Consumer({**QUIET, "bootstrap.servers": bootstrap, "group.id": "lat",
                  "fetch.wait.max.ms": 100, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, -1)])  # from the end
    c.poll(0.5)
    got: list[float] = []
    stop = threading.Event()

    def consume() -> None:
        while not stop.is_set():
            m = c.poll(0.05)
            value = m.value() if m is not None and not m.error() else None
            if value is not None and value != b"warm-up":
                got.append(time.perf_counter() - float(value))

    reader = threading.Thread(target=consume)
    reader.start()
    p = Producer({**QUIET, "bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                  "enable.idempotence": True})
    # The first record pays for the connections, the metadata and the producer id
    # (InitProducerId, a ZooKeeper write for a new id block): not replication latency.
    p.produce(topic, b"warm-up", partition=0)
    p.flush(30)
    n = int(rate * seconds)
    t0 = time.perf_counter()
    for i in range(n):
        while time.perf_counter() < t0 + i / rate:
            p.poll(0.0005)
        p.produce(topic, repr(time.perf_counter()).encode(), partition=0)
        p.poll(0)
    p.flush(30)
    deadline = time.monotonic() + 10
    while len(got) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    reader.join()
    c.close()
    if len(got) < n:
        raise BenchFailure(f"latency: consumed {len(got)} of {n} records")
    return sorted(x * 1000 for x in got)


def failover(cluster: LocalCluster, admin: AdminClient, topic: str, how: str
             ) -> tuple[float, list[tuple[int, bytes]]]:
    """Seconds from killing/stopping the leader to the first acknowledged record that was
    produced after it; and every (offset, value) acknowledged."""
    leader = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
    acked: list[tuple[int, bytes, float]] = []
    p = Producer({**QUIET, "bootstrap.servers": cluster.bootstrap, "acks": "all",
                  "enable.idempotence": True, "linger.ms": 0,
                  "message.timeout.ms": 120_000})

    def delivered(err: Any, m: Any) -> None:
        if err is None:
            acked.append((m.offset(), m.value(), time.perf_counter()))

    seq = 0

    def send(n: int) -> None:
        nonlocal seq
        for _ in range(n):
            p.produce(topic, f"{how}-{seq}-{time.perf_counter()!r}".encode(), partition=0,
                      on_delivery=delivered)
            seq += 1
            p.poll(0.02)

    send(50)
    p.flush(30)
    t_signal = time.perf_counter()
    signaller = threading.Thread(
        target=(cluster.kill_broker if how == "kill" else cluster.stop_broker), args=(leader,))
    signaller.start()
    first = None
    deadline = time.monotonic() + SESSION_TIMEOUT_MS / 1000 * 3
    while first is None and time.monotonic() < deadline:
        send(1)
        after = [t for _, v, t in acked if float(v.split(b"-", 2)[2]) > t_signal]
        if after:
            first = min(after) - t_signal
    send(50)
    p.flush(60)
    time.sleep(1)
    signaller.join()
    if first is None:
        raise BenchFailure(f"no acknowledged write within {deadline} s after {how}")
    cluster.restart_broker(leader)
    return first, [(o, v) for o, v, _ in acked]


def check_read_back(bootstrap: str, topic: str, acked: list[tuple[int, bytes]]) -> None:
    c = Consumer({**QUIET, "bootstrap.servers": bootstrap, "group.id": "verify",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    seen: dict[int, bytes] = {}
    want = max(o for o, _ in acked) + 1
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(seen) < want:
        m = c.poll(0.2)
        if m is not None and not m.error():
            offset, value = m.offset(), m.value()
            if offset is not None and value is not None:
                seen[offset] = value
    c.close()
    missing = [o for o, v in acked if seen.get(o) != v]
    values = list(seen.values())
    dups = len(values) - len(set(values))
    if missing or dups:
        raise BenchFailure(f"{topic}: {len(missing)} acknowledged records missing or changed, "
                           f"{dups} duplicated")


def run(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"records": args.records, "runs": [],
                           "records_1kib": args.records_1kib, "runs_1kib": []}
    base = Path(tempfile.mkdtemp(prefix="millrace-repl-"))
    try:
        with LocalCluster(base, 3, overrides={
                "offsets.topic.replication.factor": "3",
                "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                "log.flush.interval.messages": "9223372036854775807"}) as cluster:
            admin = AdminClient({**QUIET, "bootstrap.servers": cluster.bootstrap})
            for rep in range(args.repeat):
                for size, key, n in ((100, "runs", args.records),
                                     (1024, "runs_1kib", args.records_1kib)):
                    suffix = "" if size == 100 else "-1kib"
                    create(admin, f"rf1-{rep}{suffix}", 1)
                    create(admin, f"rf3-{rep}{suffix}", 3, {"min.insync.replicas": "2"})
                    rates: dict[str, float] = {}
                    order = ("rf1", "rf3") if rep % 2 == 0 else ("rf3", "rf1")
                    for rf in order:  # alternating: neither always on a warmer cluster
                        rates[rf] = ingest(cluster.bootstrap, f"{rf}-{rep}{suffix}",
                                           "1" if rf == "rf1" else "all", n, size)
                    r1, r3 = rates["rf1"], rates["rf3"]
                    out[key].append({"acks1_rf1": r1, "acksall_rf3": r3, "ratio": r3 / r1})
                    label = "" if size == 100 else " 1 KiB"
                    print(f"run {rep + 1}{label}: acks=1 RF1 {r1:,.0f} rec/s, acks=all RF3 "
                          f"{r3:,.0f} rec/s, ratio {r3 / r1:.2f}", flush=True)
            if args.ingest_only:
                return finish(out)
            create(admin, "latency", 3, {"min.insync.replicas": "2"})
            lat = latency(cluster.bootstrap, "latency", args.rate, args.seconds)
            out["latency_ms"] = {"p50": statistics.median(lat),
                                 "p99": lat[int(len(lat) * 0.99) - 1], "max": lat[-1],
                                 "rate": args.rate, "n": len(lat)}
            out["latency_samples_ms"] = lat
            print("latency acks=all RF3 at {rate}/s: p50 {p50:.2f} ms, p99 {p99:.2f} ms, "
                  "max {max:.2f} ms".format(**out["latency_ms"]), flush=True)
            out["failover_s"] = {}
            for how in ("sigterm",) if args.quick else ("kill", "sigterm"):
                topic = f"failover-{how}"
                create(admin, topic, 3, {"min.insync.replicas": "2"})
                seconds, acked = failover(cluster, admin, topic, how)
                check_read_back(cluster.bootstrap, topic, acked)
                out["failover_s"][how] = seconds
                print(f"failover after {how}: first acks=all write {seconds:.2f} s later; "
                      f"{len(acked)} acknowledged, all read back once", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return finish(out)


def finish(out: dict[str, Any]) -> dict[str, Any]:
    """The median ratios of the ingest runs."""
    out["ratio_median"] = statistics.median(r["ratio"] for r in out["runs"])
    out["ratio_median_1kib"] = statistics.median(r["ratio"] for r in out["runs_1kib"])
    return out


def report(out: dict[str, Any]) -> None:
    session = SESSION_TIMEOUT_MS / 1000
    rows = [
        ("acks=all RF3 / acks=1 RF1 ingest", f"{out['ratio_median']:.2f}", ">= 0.5",
         out["ratio_median"] >= 0.5),
        ("... 1 KiB records", f"{out['ratio_median_1kib']:.2f}", ">= 0.7",
         out["ratio_median_1kib"] >= 0.7),
    ]
    if "latency_ms" in out:
        lat = out["latency_ms"]
        rows.append(("p99 latency acks=all RF3", f"{lat['p99']:.2f} ms", "<= 10 ms",
                     lat["p99"] <= 10))
    fo = out.get("failover_s", {})
    if "kill" in fo:
        rows.append(("failover after kill -9", f"{fo['kill']:.2f} s", f"<= {session + 2:.0f} s",
                     fo["kill"] <= session + 2))
    if "sigterm" in fo:
        rows.append(("failover after SIGTERM", f"{fo['sigterm']:.2f} s",
                     f"well under {session:.0f} s", fo["sigterm"] <= session / 3))
    print()
    for name, value, goal, met in rows:
        print(f"{name:36} {value:>12}  goal {goal:16} {'met' if met else 'NOT met'}")


def plot(out: dict[str, Any], path: str) -> None:
    """Ingest rates per run (100 B and 1 KiB) and the latency distribution, side by side."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    has_latency = "latency_samples_ms" in out
    fig, axes = plt.subplots(1, 2 if has_latency else 1, figsize=(10 if has_latency else 6, 3.6),
                             squeeze=False)
    left = axes[0][0]
    width = 0.2
    bars = (("runs", "acks1_rf1", "100 B, acks=1, RF 1"),
            ("runs", "acksall_rf3", "100 B, acks=all, RF 3, min ISR 2"),
            ("runs_1kib", "acks1_rf1", "1 KiB, acks=1, RF 1"),
            ("runs_1kib", "acksall_rf3", "1 KiB, acks=all, RF 3, min ISR 2"))
    for i, (key, rate, label) in enumerate(bars):
        runs = out.get(key, [])
        xs = [x + (i - 1.5) * width for x in range(1, len(runs) + 1)]
        left.bar(xs, [r[rate] / 1000 for r in runs], width, label=label)
    left.set_xlabel("run")
    left.set_ylabel("thousand records/s")
    left.set_xticks(list(range(1, len(out["runs"]) + 1)))
    left.set_title(f"ingest acks=all RF 3 / acks=1 RF 1: 100 B {out['ratio_median']:.2f}, "
                   f"1 KiB {out['ratio_median_1kib']:.2f}", fontsize=9)
    left.legend(loc="lower right", fontsize=7)
    if has_latency:
        right = axes[0][1]
        samples = out["latency_samples_ms"]
        right.hist(samples, bins=50)
        lat = out["latency_ms"]
        right.axvline(lat["p99"], color="k", linestyle="--", label=f"p99 {lat['p99']:.1f} ms")
        right.set_xlabel("end-to-end latency, ms")
        right.set_ylabel("records")
        right.set_title(f"acks=all RF 3 at {lat['rate']}/s: p50 {lat['p50']:.1f} ms")
        right.legend(fontsize=8)
    fo = out.get("failover_s", {})
    if fo:
        after = ", ".join(f"after {'kill -9' if how == 'kill' else 'SIGTERM'}: {s:.2f} s"
                          for how, s in fo.items())
        fig.suptitle(f"3 brokers on loopback; first acks=all write {after}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=300_000,
                    help="records per 100 B ingest run (default 300,000)")
    ap.add_argument("--records-1kib", type=int, default=100_000,
                    help="records per 1 KiB ingest run (default 100,000)")
    ap.add_argument("--repeat", type=int, default=None,
                    help="ingest runs (median ratio; default 3, --quick 1)")
    ap.add_argument("--rate", type=int, default=200, help="latency run: records/s")
    ap.add_argument("--seconds", type=float, default=None,
                    help="latency run: duration (default 10, --quick 3)")
    ap.add_argument("--quick", action="store_true",
                    help="a tenth of the records, one repeat, 3 s of latency, no kill -9")
    ap.add_argument("--ingest-only", action="store_true",
                    help="only the ingest cases (no latency, no failover)")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    ap.add_argument("--plot", metavar="PATH", help="also draw the figures as a PNG")
    args = ap.parse_args()
    if args.quick:
        args.records = max(1000, args.records // 10)
        args.records_1kib = max(1000, args.records_1kib // 10)
    if args.repeat is None:
        args.repeat = 1 if args.quick else 3
    if args.seconds is None:
        args.seconds = 3.0 if args.quick else 10.0
    if min(args.records, args.records_1kib, args.repeat) < 1 or args.seconds <= 0:
        ap.error("--records, --records-1kib, --repeat and --seconds must be positive")
    try:
        out = run(args)
    except BenchFailure as e:
        print(f"FAILED: {e}", file=sys.stderr)
        sys.exit(1)
    report(out)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
        print(f"wrote {args.json}")
    if args.plot:
        plot(out, args.plot)


if __name__ == "__main__":
    main()
