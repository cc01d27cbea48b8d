"""Partitions at scale: ingest into 1,000 partitions versus 1, and the broker's memory
with 10,000 partitions.

    .venv/bin/python bench/partitions.py [--quick] [--repeat 3] [--json out.json] [--profile]

1. **ingest** -- one confluent-kafka producer (``_common``'s throughput settings, acks=1)
   sends N x 100 B records (default 600,000) to a fresh topic of 1 partition and to a fresh
   topic of ``--partitions`` (default 1,000), against one ``millrace broker`` process.  The
   records go round-robin over the partitions (``partition = i % P``, given explicitly:
   librdkafka's keyless sticky partitioner would put a whole batch into one partition), so
   each ProduceRequest carries a small batch for many partitions and the broker's
   per-partition work per request (lookups, locks, log appends, index entries, response
   building) shows against its per-record work.  Both cases use the same produce loop; with
   ``--repeat N`` they alternate (the order flips every repeat) and the table shows medians
   and ranges.  The issue's goal (reported, never asserted): ratio >= 0.75.
2. **memory** -- on a second, fresh broker: VmRSS and VmHWM (``/proc/<pid>/status``) idle
   after start, idle after creating ``--memory-partitions`` (default 10,000, ``--quick``
   1,000; topics of up to 1,000 partitions, two topics per CreateTopics request), and while
   producing the same record count round-robin over all of them (RSS sampled every 0.2 s;
   the peak and the high-water mark).  The broker holds files open per partition: when the
   open-files limit cannot be raised far enough, the case stops at the partitions that fit
   and says so (RSS per partition is reported for scaling).  ``--no-memory`` skips it.
3. ``--profile`` -- runs ``py-spy record`` on the broker during one extra ``--partitions``
   ingest run (after the timed ones and left out of the table: py-spy's sampling takes
   CPU) and prints the functions with the most self time, the files, and the functions
   with the most total time (where the per-partition cost goes); the raw stacks are
   written next to the JSON (or to ``--profile-out``).  py-spy is not a project dependency: ``.venv/bin/pip install py-spy``.

It exits 1 only when something is functionally wrong (delivery errors, records missing
from the partitions' end offsets).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import (
    CLIENT_QUIET,
    BenchFailure,
    CpuMeter,
    MillraceTarget,
    Result,
    main_guard,
    parse_overrides,
    print_table,
    produce_round_robin,
    write_json,
)
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as TP
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

GOAL = 0.75
RECORD_BYTES = 100
TOPIC_MAX_PARTITIONS = 1000  # the memory case's topics hold at most this many partitions
TOPICS_PER_REQUEST = 2  # CreateTopics batches in the memory case
CASE = "100B acks=1"


def target_name(partitions: int) -> str:
    return f"P={partitions}"


# --------------------------------------------------------------------------- topics


def create_topics(bootstrap: str, topics: dict[str, int], per_request: int = TOPICS_PER_REQUEST
                  ) -> float:
    """Create ``{topic: partitions}`` (RF 1), ``per_request`` topics per CreateTopics, and
    wait until the metadata shows a leader for every partition; returns the seconds taken."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **CLIENT_QUIET})
    t0 = time.perf_counter()
    names = list(topics)
    for i in range(0, len(names), per_request):
        batch = [NewTopic(n, num_partitions=topics[n], replication_factor=1)
                 for n in names[i:i + per_request]]
        for name, fut in admin.create_topics(batch, operation_timeout=60,
                                             request_timeout=120).items():
            try:
                fut.result(timeout=180)
            except KafkaException as e:
                if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise BenchFailure(f"creating {name}: {e}") from e
    deadline = time.monotonic() + 120
    pending = set(names)
    while pending:
        md = admin.list_topics(timeout=30)
        for name in list(pending):
            t = md.topics.get(name)
            if (t is not None and t.error is None and len(t.partitions) == topics[name]
                    and all(p.leader >= 0 for p in t.partitions.values())):
                pending.discard(name)
        if pending and time.monotonic() > deadline:
            raise BenchFailure(f"no leaders for every partition of {sorted(pending)[:3]}")
        if pending:
            time.sleep(0.2)
    return time.perf_counter() - t0


def stored_records(bootstrap: str, tps: Sequence[tuple[str, int]]) -> int:
    """The sum of the partitions' end offsets (fresh topics: the records they hold)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **CLIENT_QUIET})
    total = 0
    for i in range(0, len(tps), 2000):
        futs = admin.list_offsets({TP(t, p): OffsetSpec.latest() for t, p in tps[i:i + 2000]},
                                  request_timeout=60)
        total += sum(f.result(timeout=60).offset for f in futs.values())
    return total


# --------------------------------------------------------------------------- producing


# --------------------------------------------------------------------------- profile


class Profiler:
    """``py-spy record`` on one process, stopped with SIGINT (py-spy then writes its
    output); raw format: one line per distinct stack, ``frame;frame;...;leaf count``."""

    def __init__(self, pid: int, out: Path, rate: int = 200) -> None:
        exe = shutil.which("py-spy", path=os.path.dirname(sys.executable)) or \
            shutil.which("py-spy")
        if exe is None:
            raise BenchFailure("--profile needs py-spy: .venv/bin/pip install py-spy")
        self.out = out
        out.parent.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [exe, "record", "--pid", str(pid), "--format", "raw", "--rate", str(rate),
             "--nonblocking", "--output", str(out)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(1.0)  # py-spy attaches before the case starts
        if self.proc.poll() is not None:
            err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
            raise BenchFailure(f"py-spy exited at once: {err.strip()[:300]}")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# Entry frames every broker stack runs through: left out of the total-time list.
TRUNK = ("<module> (millrace/cli/", "main (millrace/cli/", "_broker (millrace/cli/",
         "run (millrace/broker/metrics/loop_idle.py)")


def _function(frame: str) -> str:
    """``handle (millrace/broker/x.py:12)`` -> ``handle (millrace/broker/x.py)``: one row
    per function, whatever line the sample was on; site-packages and the stdlib are cut
    to the file's tail."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rpartition(":")[0] or where.rstrip(")")
    for marker in ("/millrace/", "/site-packages/", "/lib/python3"):
        cut = path.rfind(marker)
        if cut >= 0:
            path = path[cut + 1:] if marker == "/millrace/" else path[cut + len(marker):]
            break
    return f"{name} ({path})"


def summarize_profile(raw: Path, top: int = 25) -> dict[str, Any]:
    """Self and total sample counts per function from py-spy's raw output."""
    self_n: Counter[str] = Counter()
    total_n: Counter[str] = Counter()
    by_file: Counter[str] = Counter()
    samples = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, n_s = line.rpartition(" ")
        if not stack or not n_s.isdigit():
            continue
        n = int(n_s)
        frames = [_function(f) for f in stack.split(";")]
        # py-spy puts a "process"/"thread" frame first; the leaf is last
        samples += n
        self_n[frames[-1]] += n
        by_file[frames[-1].partition(" (")[2].rstrip(")")] += n
        for f in set(frames):
            if "(millrace/" in f and not f.startswith(TRUNK):
                total_n[f] += n
    return {"samples": samples,
            "self": [(f, n, round(100 * n / samples, 1)) for f, n in self_n.most_common(top)]
            if samples else [],
            "total": [(f, n, round(100 * n / samples, 1)) for f, n in total_n.most_common(top)]
            if samples else [],
            "file": [(f, n, round(100 * n / samples, 1)) for f, n in by_file.most_common(top)]
            if samples else []}


def print_profile(summary: dict[str, Any], raw: Path) -> None:
    print(f"\nbroker profile during the ingest at many partitions "
          f"({summary['samples']} samples, py-spy, raw stacks in {raw})")
    for kind, title in (("self", "self time by function"),
                        ("file", "self time by file"),
                        ("total", "total time by function (the broker's, below its event loop)")):
        print(f"\n  {title}")
        for f, _n, pct in summary[kind]:
            print(f"  {pct:5.1f}%  {f}")


# --------------------------------------------------------------------------- memory


def memory_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of ``pid`` in KiB (Linux ``/proc/<pid>/status``)."""
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def raise_open_files(want: int) -> int:
    """Raise this process's open-files limit (the broker child inherits it) towards
    ``want`` as far as allowed (the hard limit, unless we may raise that); returns it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= want:
        return soft
    try:  # raising the hard limit needs CAP_SYS_RESOURCE
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, max(want, hard)))
        return want
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        return hard


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def topic_sizes(total: int, start: int = 0) -> dict[str, int]:
    """``total`` partitions as topics of at most TOPIC_MAX_PARTITIONS, named from ``start``."""
    return {f"bench-mem-{start + i}": min(TOPIC_MAX_PARTITIONS, total - k)
            for i, k in enumerate(range(0, total, TOPIC_MAX_PARTITIONS))}


def memory_case(args: argparse.Namespace, count: int) -> dict[str, Any]:
    """A fresh broker: memory idle, idle with ``args.memory_partitions``, under load.

    The broker holds files open per partition, so the open-files limit (inherited from
    this process) bounds the partitions one broker can host: after the first CreateTopics
    the files per partition are measured, and when the rest would not fit the case stops
    at what does, says so, and reports the RSS per partition so the figure can be scaled."""
    wanted = args.memory_partitions
    limit = raise_open_files(4 * wanted + 4096)
    t = MillraceTarget(args.overrides)
    try:
        pid = t.broker_pid
        assert pid is not None
        time.sleep(1.0)
        idle = memory_kib(pid)
        fds0 = open_fds(pid)
        print(f"\nmemory: broker idle, no topics: RSS {idle['VmRSS'] / 1024:.0f} MiB, "
              f"{fds0} open files (limit {limit:,})", flush=True)
        plan = topic_sizes(wanted)
        first = dict(list(plan.items())[:TOPICS_PER_REQUEST])
        create_s = create_topics(t.bootstrap, first)
        done = sum(first.values())
        per_partition = (open_fds(pid) - fds0) / done
        total = wanted
        if done < wanted:
            fit = done + int((limit - open_fds(pid) - 1024) / max(per_partition, 1e-9))
            total = min(wanted, fit)
            if total < wanted:
                print(f"memory: the broker holds {per_partition:.1f} files per partition and "
                      f"may open {limit:,}: {total:,} partitions fit, not {wanted:,} (run as a "
                      f"user allowed a higher 'ulimit -n' for the full count)", flush=True)
            rest = topic_sizes(total - done, start=len(first))
            create_s += create_topics(t.bootstrap, rest)
        else:
            rest = {}
        topics = {**first, **rest}
        print(f"memory: created {total:,} partitions in {len(topics)} topics "
              f"in {create_s:.1f}s", flush=True)
        time.sleep(2.0)
        created = memory_kib(pid)
        fds = open_fds(pid)
        per_kib = (created["VmRSS"] - idle["VmRSS"]) / total
        print(f"memory: idle with {total:,} partitions: RSS {created['VmRSS'] / 1024:.0f} MiB "
              f"({per_kib:.1f} KiB per partition), {fds:,} open files", flush=True)
        tps = [(name, p) for name, n in topics.items() for p in range(n)]
        peak = [0]
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.2):
                peak[0] = max(peak[0], memory_kib(pid)["VmRSS"])

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            n, secs = produce_round_robin(t.bootstrap, tps, bytes(RECORD_BYTES), count,
                                          args.budget)
        finally:
            stop.set()
            sampler.join()
        loaded = memory_kib(pid)
        stored = stored_records(t.bootstrap, tps)
        if stored != n:
            raise BenchFailure(f"memory case: produced {n}, partitions hold {stored}")
        peak_kib = max(peak[0], loaded["VmRSS"])
        print(f"memory: producing {n:,} records round-robin over {total:,} partitions "
              f"({n / secs:,.0f} rec/s): peak RSS {peak_kib / 1024:.0f} MiB, "
              f"VmHWM {loaded['VmHWM'] / 1024:.0f} MiB", flush=True)
        t0 = time.perf_counter()
        t.broker.stop(timeout=600)  # a clean shutdown closes every partition's files
        shutdown_s = time.perf_counter() - t0
        print(f"memory: clean shutdown (SIGTERM to exit) took {shutdown_s:.1f}s", flush=True)
        return {"partitions": total, "partitions_wanted": wanted, "topics": len(topics),
                "create_s": round(create_s, 2), "open_files_limit": limit,
                "open_files": fds, "files_per_partition": round(per_partition, 2),
                "idle_start_kib": idle["VmRSS"], "idle_partitions_kib": created["VmRSS"],
                "idle_kib_per_partition": round(per_kib, 2),
                "load_peak_rss_kib": peak_kib, "load_hwm_kib": loaded["VmHWM"],
                "load_records": n, "load_rec_s": round(n / secs),
                "shutdown_s": round(shutdown_s, 2)}
    finally:
        t.close()


# --------------------------------------------------------------------------- ingest


def ingest(t: MillraceTarget, partitions: int, topic: str, count: int,
           args: argparse.Namespace, profile_to: Path | None) -> Result:
    create_topics(t.bootstrap, {topic: partitions})
    tps = [(topic, p) for p in range(partitions)]
    assert t.broker_pid is not None
    profiler = Profiler(t.broker_pid, profile_to) if profile_to is not None else None
    meter = CpuMeter(t)
    try:
        n, secs = produce_round_robin(t.bootstrap, tps, bytes(RECORD_BYTES), count, args.budget)
    finally:
        if profiler is not None:
            profiler.stop()
    r = Result("partitions", CASE, target_name(partitions), n, RECORD_BYTES, secs,
               *meter.read(secs))
    stored = stored_records(t.bootstrap, tps)
    if stored != n:
        raise BenchFailure(f"{partitions} partitions: produced {n}, partitions hold {stored}")
    print(f"  {r.target:<7} {n:>9} rec in {secs:6.2f}s = {r.rec_s:>10,.0f} rec/s", flush=True)
    return r


def cpu_us_per_record(runs: list[Result]) -> float | None:
    """The broker's CPU microseconds per record over ``runs`` (median)."""
    per = [r.broker_cpu * r.seconds / r.records * 1e6 for r in runs
           if r.broker_cpu is not None and r.records]
    return round(statistics.median(per), 3) if per else None


def run() -> None:
    args = parse_args()
    count = max(1000, int(args.records * (0.1 if args.quick else 1.0)))
    cases = [1, args.partitions]
    results: list[Result] = []
    profile_raw: Path | None = None
    if args.profile:
        profile_raw = Path(args.profile_out) if args.profile_out else (
            Path(args.json).with_suffix(".profile.txt") if args.json
            else Path("/tmp") / f"millrace-partitions-profile-{os.getpid()}.txt")
    t = MillraceTarget(args.overrides)
    try:
        create_topics(t.bootstrap, {"bench-part-warmup": 1})  # untimed: first connections
        produce_round_robin(t.bootstrap, [("bench-part-warmup", 0)], bytes(RECORD_BYTES),
                            100_000, args.budget)
        for rep in range(args.repeat):
            order = cases if rep % 2 == 0 else cases[::-1]
            for p in order:
                results.append(ingest(t, p, f"bench-part-{p}-{rep}", count, args, None))
        if profile_raw is not None:  # an extra run: py-spy's CPU stays out of the figures
            print("  profiled run (py-spy on the broker; not in the table):", flush=True)
            ingest(t, args.partitions, f"bench-part-{args.partitions}-profiled", count, args,
                   profile_raw)
    finally:
        t.close()

    def goal(mine: Result, base: Result | None) -> str:
        ratio = mine.rec_s / base.rec_s if base and base.rec_s else 0.0
        return ("met" if ratio >= GOAL else "NOT met") + f" (>= {GOAL})"

    mine, base = target_name(args.partitions), target_name(1)
    rows = print_table(f"ingest, 1 partition vs {args.partitions:,} (confluent-kafka, "
                       f"{RECORD_BYTES} B, round-robin over explicit partitions)",
                       results, {CASE: goal}, mine=mine, base=base)
    by = {r.target: r for r in results if r.target in (mine, base)}
    med = {k: statistics.median(x.rec_s for x in results if x.target == k) for k in by}
    ratio = med[mine] / med[base] if med.get(base) else None
    runs = [a.rec_s / b.rec_s for a, b in zip([r for r in results if r.target == mine],
                                              [r for r in results if r.target == base],
                                              strict=True) if b.rec_s]
    if ratio is not None:
        span = f" (runs {min(runs):.2f}..{max(runs):.2f})" if len(runs) > 1 else ""
        print(f"\nratio {args.partitions:,} partitions / 1 partition: {ratio:.2f}{span}, "
              f"goal >= {GOAL}: {'met' if ratio >= GOAL else 'NOT met'}")
    cost = {k: cpu_us_per_record([r for r in results if r.target == k]) for k in (base, mine)}
    if None not in cost.values():
        print(f"broker CPU per record: {cost[base]:.2f} us at 1 partition, "
              f"{cost[mine]:.2f} us at {args.partitions:,}")
    extra: dict[str, Any] = {
        "broker_cpu_us_per_record": cost,
        "partitions": args.partitions, "records": count,
        "ratio": None if ratio is None else round(ratio, 3),
        "ratio_runs": [round(x, 3) for x in runs], "goal": GOAL}
    if profile_raw is not None and profile_raw.exists():
        summary = summarize_profile(profile_raw)
        print_profile(summary, profile_raw)
        extra["profile"] = {"raw": str(profile_raw), **summary}
    if not args.no_memory:
        extra["memory"] = memory_case(args, count)
    write_json(args.json, "partitions", rows, **extra)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a tenth of the records")
    ap.add_argument("--records", type=int, default=600_000, metavar="N",
                    help="records per run (default 600,000)")
    ap.add_argument("--partitions", type=int, default=1000, metavar="P",
                    help="the many-partitions case (default 1,000)")
    ap.add_argument("--memory-partitions", type=int, default=None, metavar="P",
                    help="partitions in the memory case (default 10,000; --quick: 1,000)")
    ap.add_argument("--no-memory", action="store_true", help="skip the memory case")
    ap.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="run both cases N times, alternating; medians and ranges")
    ap.add_argument("--budget", type=float, default=60.0, metavar="SECONDS",
                    help="a run stops producing after this long (default 60)")
    ap.add_argument("--profile", action="store_true",
                    help="py-spy the broker during the first many-partitions run")
    ap.add_argument("--profile-out", metavar="PATH", help="where py-spy's raw stacks go")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="broker config override (repeatable)")
    args = ap.parse_args()
    if args.memory_partitions is None:
        args.memory_partitions = 1000 if args.quick else 10_000
    if min(args.records, args.partitions, args.memory_partitions, args.repeat) < 1:
        ap.error("--records, --partitions, --memory-partitions and --repeat must be positive")
    if args.partitions < 2:
        ap.error("--partitions wants at least 2 (it is compared with 1)")
    args.overrides = parse_overrides(ap, args.override)
    return args


if __name__ == "__main__":
    main_guard(run)
