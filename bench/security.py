"""Security benchmark: ingest and fetch over SASL_SSL against PLAINTEXT on one broker.

    .venv/bin/python bench/security.py [--quick] [--repeat N] [--json out.json]
    .venv/bin/python bench/security.py --profile broker.prof [--listeners sasl_ssl]

One ``millrace broker`` child process listens twice: PLAINTEXT and SASL_SSL (TLS with a
certificate from a throw-away CA, SASL/SCRAM-SHA-512 for a user created through
AlterUserScramCredentials). Each case runs over both listeners of that one broker, in
this process run, with the methods and settings of ``broker_ingest.py`` and
``broker_fetch.py`` (their functions, imported): ingest of 100 B and 1 KiB records
(acks=1), and window fetch of 100 B and 1 KiB records (one window per size, pre-loaded
once through PLAINTEXT and read through each listener). Listener order alternates
between repeats. The TLS handshake and the SCRAM exchange happen when a client
connects, before the clock starts (a client's metadata request); the ``connect`` lines
time that on its own: a new producer up to its first metadata answer.

The ratio is SASL_SSL rec/s over PLAINTEXT rec/s. Goal (reported, never asserted):
>= 0.5 in every case.

``--profile PATH`` runs the broker under ``python -m cProfile -o PATH`` and only the
1 KiB case of ``--profile-bench`` (ingest by default; the warm-up too), on the
``--listeners`` given; the profile is written when the broker stops (SIGTERM, its clean
exit), and its top entries are printed.
"""

from __future__ import annotations

import argparse
import itertools
import pstats
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from _common import (
    CLIENT_QUIET,
    BenchFailure,
    Goal,
    Result,
    Target,
    main_guard,
    parse_overrides,
    print_table,
    produce_records,
    scaled,
    write_json,
)
from broker_fetch import CASES as FETCH_CASES
from broker_fetch import preload, read
from broker_ingest import CASES as INGEST_CASES
from broker_ingest import ingest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from millrace.security.certs import CertificateAuthority, write_pem
from millrace.testing.broker_process import BrokerProcess, free_port

LISTENERS = ("plaintext", "sasl_ssl")
BASE, SECURED = LISTENERS
MECHANISM = "SCRAM-SHA-512"
SCRAM_ITERATIONS = 8192
USER, PASSWORD = "bench", "bench-secret"
CONNECTS = 10  # new connections timed per listener

# The acks=1 cases of broker_ingest and the window cases of broker_fetch.
INGEST = tuple(c for c in INGEST_CASES if c.acks == "1")
FETCH = tuple(c for c in FETCH_CASES if c.window is not None)
PROFILED_SIZE = 1024  # --profile runs the 1 KiB case only


def goal(mine: Result, base: Result | None) -> str:
    ratio = mine.rec_s / base.rec_s if base and base.rec_s else None
    if ratio is None:
        return ""
    return ("met" if ratio >= 0.5 else "NOT met") + " (>=0.5 of plaintext)"


# --------------------------------------------------------------------------- the broker


class ListenerTarget(Target):
    """One listener of the shared broker, with the client settings it needs."""

    def __init__(self, name: str, port: int, broker_pid: int | None,
                 config: dict[str, Any]) -> None:
        self.name = name
        self.bootstrap = f"127.0.0.1:{port}"
        self.broker_pid = broker_pid
        self.config = config

    def create_topic(self, topic: str) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap, **CLIENT_QUIET, **self.config})
        futures = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)],
                                      operation_timeout=10)
        try:
            futures[topic].result(timeout=15)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise

    def close(self) -> None:  # the broker is closed by secured_broker()
        pass


class ProfiledBroker(BrokerProcess):
    """The broker under ``python -m cProfile -o <out>`` (main thread only: the event loop).
    cProfile writes the file when the broker exits, which SIGTERM (``stop``) makes clean."""

    def __init__(self, *args: Any, profile_out: Path, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.profile_out = profile_out

    def launch(self, args: list[str], env: Mapping[str, str], ready: Callable[[], bool],
               cwd: Path | None = None) -> None:
        # args: [python, -m, millrace.cli.main, broker, ...]
        super().launch([args[0], "-m", "cProfile", "-o", str(self.profile_out), *args[1:]],
                       env, ready, cwd)


def create_scram_user(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **CLIENT_QUIET})
    upsert = UserScramCredentialUpsertion(
        USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, SCRAM_ITERATIONS),
        PASSWORD.encode())
    for user, future in admin.alter_user_scram_credentials([upsert]).items():
        if future.result(15) is not None:
            raise BenchFailure(f"could not create SCRAM user {user}")


@contextmanager
def secured_broker(overrides: dict[str, str], profile: Path | None
                   ) -> Iterator[dict[str, ListenerTarget]]:
    """One broker with a PLAINTEXT and a SASL_SSL listener; yields a target for each."""
    with tempfile.TemporaryDirectory(prefix="millrace-bench-sec-") as tmp:
        d = Path(tmp)
        ca = CertificateAuthority.generate()
        leaf = ca.issue("localhost", hosts=["localhost", "127.0.0.1"])
        write_pem(d / "ca.pem", ca.cert_pem)
        write_pem(d / "broker.pem", leaf.key_pem + leaf.chain_pem, private=True)
        ports = {name: free_port() for name in LISTENERS}
        settings = {
            "listeners": ",".join(f"{n.upper()}://127.0.0.1:{p}" for n, p in ports.items()),
            "sasl.enabled.mechanisms": MECHANISM,
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(d / "broker.pem"),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(d / "ca.pem"),
            **overrides,
        }
        broker = (BrokerProcess(d / "broker", port=ports[BASE], overrides=settings)
                  if profile is None else
                  ProfiledBroker(d / "broker", port=ports[BASE], overrides=settings,
                                 profile_out=profile.resolve()))
        broker.start()
        try:
            create_scram_user(broker.bootstrap)
            secured = {"security.protocol": "SASL_SSL", "ssl.ca.location": str(d / "ca.pem"),
                       "sasl.mechanisms": MECHANISM, "sasl.username": USER,
                       "sasl.password": PASSWORD}
            yield {BASE: ListenerTarget(BASE, ports[BASE], broker.pid, {}),
                   SECURED: ListenerTarget(SECURED, ports[SECURED], broker.pid, secured)}
        except BaseException:
            broker.kill()
            raise
        broker.stop()


# --------------------------------------------------------------------------- measurements


def connect_ms(t: ListenerTarget, n: int) -> list[float]:
    """Milliseconds from a new producer to its first metadata answer (connect, TLS
    handshake, SASL), ``n`` times. Read the minimum: most runs also hold a ~50 ms wait
    inside librdkafka, on either listener."""
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        p = Producer({"bootstrap.servers": t.bootstrap, **CLIENT_QUIET, **t.config})
        p.list_topics(timeout=10)
        out.append((time.perf_counter() - t0) * 1000)
        del p
    return out


# Where the broker's self time goes, by kind: (label, test on (file, line, function)).
# The first match counts; builtins have file "~" and a function like
# "<method 'read' of '_ssl._SSLSocket' objects>" (SSLObject's C object is an _SSLSocket).
PROFILE_GROUPS: tuple[tuple[str, Callable[[str, int, str], bool]], ...] = (
    ("TLS decrypt: SSLObject.read (C)", lambda f, _l, fn: "'read' of '_ssl._SSLSocket'" in fn),
    ("TLS encrypt: SSLObject.write (C)", lambda f, _l, fn: "'write' of '_ssl._SSLSocket'" in fn),
    ("MemoryBIO write/read (copies)", lambda f, _l, fn: "_ssl.MemoryBIO" in fn),
    ("asyncio sslproto.py + ssl.py (Python)",
     lambda f, _l, fn: f.endswith(("asyncio/sslproto.py", "/ssl.py"))),
    ("bytes.join (sslproto joins decrypted chunks)", lambda f, _l, fn: "'join' of 'bytes'" in fn),
    ("socket recv / recv_into", lambda f, _l, fn: "'recv" in fn and "_socket.socket" in fn),
    ("socket send", lambda f, _l, fn: "'send' of '_socket.socket'" in fn),
    ("framing: FrameDecoder + memoryview.tobytes",
     lambda f, _l, fn: f.endswith("protocol/framing.py") or "'tobytes' of 'memoryview'" in fn),
    ("request decode (millrace/protocol)", lambda f, _l, fn: "/millrace/protocol/" in f),
    ("log append: os.pwrite", lambda f, _l, fn: "posix.pwrite" in fn),
    ("fsync / fdatasync", lambda f, _l, fn: "posix.fsync" in fn or "posix.fdatasync" in fn),
    ("event loop: epoll + asyncio", lambda f, _l, fn: "epoll" in fn or "/asyncio/" in f
     or f.endswith("/selectors.py")),
    ("rest of millrace", lambda f, _l, fn: "/millrace/" in f),
    ("other (start-up imports, compile, ...)", lambda f, _l, fn: True),
)


def print_profile(path: Path, top: int = 30) -> None:
    stats = pstats.Stats(str(path))
    entries = stats.stats  # type: ignore[attr-defined]  # {(file, line, fn): (cc, nc, tt, ...)}
    total = sum(v[2] for v in entries.values())
    print(f"\nbroker profile {path} (main thread, {total:.2f} s of self time):")
    stats.sort_stats("tottime").print_stats(top)
    sums: dict[str, list[float]] = {label: [0.0, 0] for label, _ in PROFILE_GROUPS}
    for (f, line, fn), v in entries.items():
        label = next(lb for lb, test in PROFILE_GROUPS if test(f, line, fn))
        sums[label][0] += v[2]
        sums[label][1] += v[1]
    print("self time by kind (whole broker run: start-up, warm-up and the case):")
    for label, (secs, calls) in sorted(sums.items(), key=lambda kv: -kv[1][0]):
        print(f"  {secs:7.2f} s {100 * secs / total:5.1f}%  {int(calls):>9} calls  {label}")


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="about a tenth of the records")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    ap.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="run every case N times, listeners interleaved (their order "
                         "alternates); the table shows the median run and the range")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiply every record count by this (default 1)")
    ap.add_argument("--listeners", default=",".join(LISTENERS),
                    help="comma-separated subset of: plaintext,sasl_ssl (default both)")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="broker config override (repeatable)")
    ap.add_argument("--profile", metavar="PATH", type=Path,
                    help="run the broker under cProfile, writing PATH; only the 1 KiB case "
                         "of --profile-bench runs")
    ap.add_argument("--profile-bench", choices=("ingest", "fetch"), default="ingest",
                    help="with --profile: profile the 1 KiB ingest (default) or fetch case")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat wants N >= 1")
    args.listener_names = [x.strip() for x in args.listeners.split(",") if x.strip()]
    bad = [x for x in args.listener_names if x not in LISTENERS]
    if bad or not args.listener_names:
        ap.error(f"unknown listener(s) {bad}; choose from {LISTENERS}")
    args.overrides = parse_overrides(ap, args.override)
    return args


def run() -> None:
    args = parse_args()
    ingest_cases, fetch_cases = INGEST, FETCH
    if args.profile is not None:  # only the 1 KiB case of one bench
        ingest_cases = tuple(c for c in INGEST
                             if args.profile_bench == "ingest" and c.size == PROFILED_SIZE)
        fetch_cases = tuple(c for c in FETCH
                            if args.profile_bench == "fetch" and c.size == PROFILED_SIZE)
    results: list[Result] = []
    connects: dict[str, list[float]] = {}
    with secured_broker(args.overrides, args.profile) as by_name:
        targets = [by_name[n] for n in args.listener_names]
        for t in targets:  # first connections, topic creation paths, allocator: untimed
            t.create_topic("bench-sec-warmup")
            produce_records(t.bootstrap, "bench-sec-warmup", bytes(100), 100_000, t.config)
        if args.profile is None:
            for t in targets:
                connects[t.name] = connect_ms(t, CONNECTS)
                ms = connects[t.name]
                print(f"  connect        {t.name:<9} min {min(ms):5.1f} ms, median "
                      f"{statistics.median(ms):5.1f} ms of {CONNECTS}", flush=True)
        for rep, case in itertools.product(range(args.repeat), ingest_cases):
            topic = f"bench-sec-ingest-{case.size}-{rep}"  # a fresh log for each run
            order = targets if rep % 2 == 0 else targets[::-1]
            results += [ingest(t, case, f"{topic}-{t.name}", scaled(args, case.records), t.config)
                        for t in order]
        # Pre-loaded once (through PLAINTEXT, untimed), then read through each listener.
        loaded = [preload(by_name[BASE], case, scaled(args, case.records))
                  for case in fetch_cases]
        for rep, ld in itertools.product(range(args.repeat), loaded):
            order = targets if rep % 2 == 0 else targets[::-1]
            results += [read(replace(ld, target=t), t.config) for t in order]
    if args.profile is not None:
        print_profile(args.profile)
    goals: dict[str, Goal] = {}
    goals.update((c.name, goal) for c in INGEST)
    goals.update((c.name, goal) for c in FETCH)
    rows: list[dict[str, Any]] = []
    if ingest_cases:
        rows += print_table("ingest over each listener (confluent-kafka Producer, as "
                            "broker_ingest)",
                            [r for r in results if r.bench == "ingest"], goals, SECURED, BASE)
    if fetch_cases:
        rows += print_table("fetch over each listener (confluent-kafka Consumer, as broker_fetch)",
                            [r for r in results if r.bench == "fetch"], goals, SECURED, BASE)
    for name, ms in connects.items():
        rows.append({"bench": "connect", "case": "new producer to first metadata",
                     "target": name, "runs_ms": [round(x, 2) for x in ms],
                     "min_ms": round(min(ms), 2), "median_ms": round(statistics.median(ms), 2)})
    if connects:
        print("\nconnect (new producer to its first metadata answer): " + ", ".join(
            f"{n} min {min(ms):.1f} ms, median {statistics.median(ms):.1f} ms"
            for n, ms in connects.items()))
    write_json(args.json, "security", rows)


if __name__ == "__main__":
    main_guard(run)
