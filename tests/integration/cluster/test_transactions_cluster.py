"""Transactions on a real three-broker cluster lose nothing and show nothing aborted:
Kafka's system test ``transactions_test.py`` (and ``TransactionsTest``) for millrace,
with librdkafka (confluent-kafka) as the client and kafka-python 3's admin as the
second judge.

* **Copy under bounces.**  An input topic (3 partitions, RF 3, min ISR 2) is seeded with
  unique values by an idempotent producer; two ``millrace.testing.txn_copier`` processes
  (one group, their own transactional ids) copy it to an output topic in transactions of
  a few records, while the test, at every 20 % of progress, kill -9s a copier and
  restarts it, kill -9s the broker coordinating a copier's transactions and restarts it,
  or stops a broker cleanly (SIGTERM) and restarts it.  Then a fresh ``read_committed``
  consumer reads the output: partition by partition it holds exactly the input's values
  in the input's order.  A ``read_committed`` consumer reading all along saw no value
  twice and only records of that final log (never an aborted copy); a
  ``read_uncommitted`` one saw the final log too, plus the aborted copies.
  ``MILLRACE_TXN_LONG=1`` (``scripts/transactions-soak.sh``) copies more records through
  more rounds.  librdkafka can block in ``send_offsets_to_transaction`` past its timeout
  when its cached group coordinator leaves the metadata (librdkafka#5456, #5511); the
  copier then ends itself with status 3 (``txn_copier``'s "Stalls") and is restarted
  like a killed copier -- but only a stall whose call overlapped a broker's absence (or
  the ``STALL_WINDOW_S`` after it) is taken for that client bug: any other fails the
  test.
* **Zombie.**  Producer A (transactional id X, its own process) writes in a transaction
  and is frozen (SIGSTOP); producer B with id X initialises -- fencing A and aborting its
  transaction -- and commits.  A, resumed (SIGCONT), produces and commits: it fails
  fatally (fenced), and ``read_committed`` never shows any of A's records.
* **Dead producer.**  A producer with ``transaction.timeout.ms`` 5000 writes in a
  transaction and is killed (-9).  Until the coordinator aborts it at the timeout the
  partition's last stable offset stays at its first record, so ``read_committed``
  consumers wait there; afterwards they see the records committed behind it and never
  the dead one's; DescribeTransactions shows CompleteAbort at the next epoch.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from cluster_support import (
    TXN,
    WAIT,
    ClusterFactory,
    admin,
    create_topic,
    log_tails,
    wait_in_sync,
    wait_until,
)
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from millrace.launcher.local_cluster import LocalCluster
from millrace.testing.txn_copier import EXIT_STALLED

with warnings.catch_warnings():  # kafka-python 3 loads its schemas with a deprecated API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KpTopicPartition
    from kafka.admin import TransactionState
    from kafka.errors import KafkaError as KafkaPythonError

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LONG = os.environ.get("MILLRACE_TXN_LONG") == "1"
# a copier stall that began this long after a bounced broker was back is not the client
# bug that a broker leaving the metadata sets off (module docstring): it fails the test
STALL_WINDOW_S = 30.0
RECORDS = 20_000 if LONG else 3000
ROUNDS = 9 if LONG else 3
PER_TXN = 25
BOUNCES = ("copier kill -9", "coordinator kill -9", "broker SIGTERM")
PARTITIONS = 3
HERE = Path(__file__).parent
QUIET: dict[str, Any] = {"log_level": 0, "log.connection.close": False}
Triple = tuple[int, int, bytes]   # (partition, offset, value)


# ---------------------------------------------------------------------- helpers
def seed(bootstrap: str, topic: str, count: int) -> dict[int, list[bytes]]:
    """``count`` unique values, value i to partition i % 3, by an idempotent producer."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 20, **QUIET})
    expected: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    failed: list[object] = []
    for i in range(count):
        value = f"v{i:06d}".encode()
        expected[i % PARTITIONS].append(value)
        while True:
            try:
                producer.produce(topic, value, partition=i % PARTITIONS,
                                 on_delivery=lambda e, m: failed.extend([e] if e else []))
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(WAIT) == 0 and failed == []
    return expected


class CopierProcess:
    """One ``python -m millrace.testing.txn_copier`` child; restartable after a kill."""

    def __init__(self, bootstrap: str, tid: str, group: str, directory: Path) -> None:
        self.tid = tid
        self.args = [sys.executable, "-m", "millrace.testing.txn_copier",
                     "--bootstrap", bootstrap, "--input", "input", "--output", "output",
                     "--group", group, "--transactional-id", tid,
                     "--max-txn", str(PER_TXN),
                     "--debug", os.environ.get("MILLRACE_TXN_DEBUG", "")]
        self.log = directory / f"{tid}.log"
        self.exit_codes: list[int] = []
        self.stalls: list[dict[str, Any]] = []
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> CopierProcess:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT,
                                         env={**os.environ, "PYTHONPATH": os.getcwd()})
        return self

    def kill(self) -> None:
        assert self.proc is not None
        code = self.proc.poll()     # running, or done; anything else is no kill to hide
        assert code in (None, 0), (f"copier {self.tid} had ended with status {code}:\n"
                                   + self.log.read_text()[-3000:])
        self.proc.kill()
        self.exit_codes.append(self.proc.wait(WAIT))

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(WAIT)
            pytest.fail(f"copier {self.tid} did not finish in {timeout:.0f}s:\n"
                        + self.log.read_text()[-3000:])
        self.exit_codes.append(code)
        return code

    def supervise(self, bounces: BrokerBounces) -> None:
        """Between bounces a copier is running or done (0: everything copied); one that
        ended with ``EXIT_STALLED`` is restarted if a broker bounce explains its stall.
        Any other end fails the test."""
        code = None if self.proc is None else self.proc.poll()
        if code is None or code == 0:
            return
        self.exit_codes.append(code)
        assert code == EXIT_STALLED, (f"copier {self.tid} ended with status {code}:\n"
                                      + self.log.read_text()[-3000:])
        self.restart_after_stall(bounces)

    def restart_after_stall(self, bounces: BrokerBounces) -> None:
        stall = self.events()[-1]
        assert stall["event"] == "stalled", self.log.read_text()[-3000:]
        assert bounces.explains(stall), (
            f"copier {self.tid} stalled in {stall['call']} at {stall['started']:.1f}, "
            f"outside every broker bounce {bounces.windows}:\n" + self.log.read_text()[-3000:])
        self.stalls.append(stall)
        self.start()

    def events(self) -> list[dict[str, Any]]:
        out = []
        for line in self.log.read_text().splitlines():
            if line.startswith("{"):
                out.append(json.loads(line))
        return out


class BrokerBounces:
    """When brokers were away: ``(left, back)`` wall-clock windows, ``back`` once the
    restarted broker is in sync again."""

    def __init__(self) -> None:
        self.windows: list[tuple[float, float]] = []
        self._left: float | None = None

    def leave(self) -> None:
        self._left = time.time()

    def back(self) -> None:
        assert self._left is not None
        self.windows.append((self._left, time.time()))
        self._left = None

    def explains(self, stall: dict[str, Any]) -> bool:
        """Whether the stalled call (``started`` .. ``started + timeout_s``) overlaps a
        broker's absence (up to ``STALL_WINDOW_S`` after it was back)."""
        now = [(self._left, time.time())] if self._left is not None else []
        start, end = stall["started"], stall["started"] + stall["timeout_s"]
        return any(left <= end and start <= back + STALL_WINDOW_S
                   for left, back in self.windows + now)


class Reader:
    """A thread reading every output partition from offset 0 (assign, no group) with the
    given isolation level; keeps (partition, offset, value) of every record."""

    def __init__(self, bootstrap: str, topic: str, isolation: str) -> None:
        self.seen: list[Triple] = []
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                                   "isolation.level": isolation, "enable.auto.commit": False,
                                   **QUIET})
        self._consumer.assign([CkTopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"reader-{isolation}",
                                        daemon=True)

    def start(self) -> Reader:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            for m in self._consumer.consume(100, 0.2):
                if m.error() is None:
                    self.seen.append((m.partition() or 0, m.offset() or 0, m.value() or b""))

    def stop(self) -> list[Triple]:
        self._stop.set()
        self._thread.join(WAIT)
        self._consumer.close()
        return self.seen


def read_to_end(bootstrap: str, topic: str, isolation: str, want: int) -> list[Triple]:
    reader = Reader(bootstrap, topic, isolation).start()
    wait_until(f"{want} {isolation} records of {topic}", lambda: len(reader.seen) >= want)
    time.sleep(2)          # anything more (a duplicate) would arrive now
    return reader.stop()


def group_progress(bootstrap: str, group: str) -> int:
    """Input records behind the group's committed (stable) offsets."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "isolation.level": "read_committed", **QUIET})
    try:
        tps = c.committed([CkTopicPartition("input", p) for p in range(PARTITIONS)], 10)
        return sum(max(tp.offset, 0) for tp in tps)
    except Exception:
        return -1
    finally:
        c.close()


def kafka_admin(bootstrap: str) -> KafkaAdminClient:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return KafkaAdminClient(bootstrap_servers=bootstrap)


def coordinator_of(bootstrap: str, tid: str) -> int:
    """The broker coordinating ``tid`` (DescribeTransactions via FindCoordinator), asked
    again while the coordinator is moving (NOT_COORDINATOR, loading)."""
    client = kafka_admin(bootstrap)
    try:
        def ask() -> int | None:
            try:
                return int(client.describe_transactions([tid])[tid].coordinator_id)
            except KafkaPythonError:
                return None
        return wait_until(f"the coordinator of {tid}", ask)
    finally:
        client.close()


def kill_in_transaction(bootstrap: str, copier: CopierProcess, tries: int = 200) -> bool:
    """Freeze the copier (SIGSTOP) until DescribeTransactions shows its transaction
    Ongoing and DescribeProducers shows records of it in the output, then kill -9 it
    (True); else let it run a moment and try again.  After ``tries`` it is killed
    wherever it is (False)."""
    client = kafka_admin(bootstrap)
    output = [KpTopicPartition("output", p) for p in range(PARTITIONS)]
    assert copier.proc is not None
    try:
        for _ in range(tries):
            copier.proc.send_signal(signal.SIGSTOP)
            try:
                txn = client.describe_transactions([copier.tid])[copier.tid]
                caught = txn.state == TransactionState.ONGOING and any(
                    p.producer_id == txn.producer_id and p.current_transaction_start_offset >= 0
                    for state in client.describe_producers(output).values()
                    for p in state.active_producers)
            except KafkaPythonError:     # a coordinator or leader moving: look again
                caught = False
            if caught:
                copier.kill()
                return True
            copier.proc.send_signal(signal.SIGCONT)
            time.sleep(0.01)
        copier.kill()
        return False
    finally:
        client.close()


def wait_progress(cluster: LocalCluster, group: str, records: int, when: str,
                  copiers: list[CopierProcess], bounces: BrokerBounces) -> None:
    def copied() -> bool:
        for copier in copiers:
            copier.supervise(bounces)
        return group_progress(live_bootstrap(cluster), group) >= records
    wait_until(f"{records} records copied {when}", copied,
               timeout=4 * WAIT, diagnostics=lambda: log_tails(cluster))


def wait_done(copier: CopierProcess, bounces: BrokerBounces, timeout: float) -> int:
    """The copier's exit status once it has ended other than by a stall."""
    deadline = time.monotonic() + timeout
    while True:
        code = copier.wait(max(deadline - time.monotonic(), 1.0))
        if code != EXIT_STALLED:
            return code
        copier.restart_after_stall(bounces)


def live_bootstrap(cluster: LocalCluster) -> str:
    return ",".join(b.bootstrap for _, b in sorted(cluster.brokers.items()) if b.running())


# ---------------------------------------------------------------------- copy under bounces
def test_copier_copies_exactly_once_through_bounces(fresh_cluster: ClusterFactory,
                                                    tmp_path: Path) -> None:
    cluster = fresh_cluster(overrides=TXN)
    client = admin(cluster.bootstrap)
    for topic in ("input", "output"):
        create_topic(client, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    expected = seed(cluster.bootstrap, "input", RECORDS)
    group = f"copy-{uuid.uuid4().hex[:6]}"
    copiers = [CopierProcess(cluster.bootstrap, f"copier-{i}", group, tmp_path).start()
               for i in (1, 2)]
    committed_reader = Reader(cluster.bootstrap, "output", "read_committed").start()
    uncommitted_reader = Reader(cluster.bootstrap, "output", "read_uncommitted").start()
    bounced: list[str] = []
    bounces = BrokerBounces()
    try:
        for r in range(ROUNDS):
            step = RECORDS * (r + 1) // (ROUNDS + 2)
            wait_progress(cluster, group, step, f"before round {r + 1}", copiers, bounces)
            kind = BOUNCES[r % len(BOUNCES)]
            victim = copiers[r % 2]
            if kind == "copier kill -9":
                # in the middle of a transaction when DescribeTransactions catches one
                # open (its records may be written already: they must never be read)
                victim.supervise(bounces)
                caught = kill_in_transaction(live_bootstrap(cluster), victim)
                kind += " (in a transaction)" if caught else ""
                victim.start()
                bounced.append(f"{kind} {victim.tid}")
                continue
            broker = coordinator_of(live_bootstrap(cluster), victim.tid)
            bounced.append(f"{kind} broker {broker} (coordinator of {victim.tid})")
            before = group_progress(live_bootstrap(cluster), group)
            bounces.leave()
            if kind == "coordinator kill -9":
                cluster.kill_broker(broker)
            else:
                cluster.stop_broker(broker)
            # the copiers go on without it (another broker takes its partitions)
            wait_progress(cluster, group, min(before + 1, RECORDS), f"without broker {broker}",
                          copiers, bounces)
            cluster.restart_broker(broker)
            for topic in ("input", "output"):
                wait_in_sync(client, topic, PARTITIONS)
            bounces.back()
        for copier in copiers:
            assert wait_done(copier, bounces, 6 * WAIT) == 0, copier.log.read_text()[-3000:]
    finally:
        committed_concurrent = committed_reader.stop()
        for copier in copiers:
            if copier.proc is not None and copier.proc.poll() is None:
                copier.proc.kill()
    assert len(bounced) == ROUNDS, bounced
    assert all(c.events()[-1]["event"] == "done" for c in copiers)

    final = read_to_end(cluster.bootstrap, "output", "read_committed", RECORDS)
    by_partition = {p: [v for q, _, v in final if q == p] for p in range(PARTITIONS)}
    assert {p: len(v) for p, v in by_partition.items()} == \
        {p: len(v) for p, v in expected.items()}
    assert by_partition == expected            # exactly once, in the input's order

    duplicates = [v for v, n in Counter(v for _, _, v in committed_concurrent).items() if n > 1]
    assert duplicates == []
    assert set(committed_concurrent) <= set(final)   # no aborted copy, nothing torn

    wait_until("the read_uncommitted reader at the end of the output",
               lambda: set(final) <= set(uncommitted_reader.seen))
    uncommitted = uncommitted_reader.stop()
    aborted = set(uncommitted) - set(final)
    assert {v for _, _, v in aborted} <= {v for _, _, v in final}   # copies, nothing else
    print(f"bounces: {bounced}; aborted copies seen by read_uncommitted: {len(aborted)}; "
          f"exit codes: {[c.exit_codes for c in copiers]}; librdkafka stalls (restarted): "
          f"{[(c.tid, s['call']) for c in copiers for s in c.stalls]}")


# ---------------------------------------------------------------------- zombie, dead producer
@pytest.fixture
def txn_cluster(shared_cluster: LocalCluster) -> LocalCluster:
    """The cluster the zombie and dead-producer tests share with other modules'
    (conftest's ``shared_cluster``, with ``TXN``): they kill only their own producers."""
    return shared_cluster


class ProducerProcess:
    """``txn_producer_process.py``: one command per line, one JSON answer per line."""

    def __init__(self, bootstrap: str, tid: str, timeout_ms: int = 60_000) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "txn_producer_process.py"), bootstrap, tid,
             str(timeout_ms)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def __call__(self, command: str) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"producer process gone after {command!r}"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(WAIT)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


OK = {"ok": True}


def test_fenced_zombie_never_becomes_visible(txn_cluster: LocalCluster) -> None:
    client = admin(txn_cluster.bootstrap)
    create_topic(client, "zombie", 1, 3, {"min.insync.replicas": "2"})
    tid = f"zombie-{uuid.uuid4().hex[:6]}"
    a = ProducerProcess(txn_cluster.bootstrap, tid)
    b = ProducerProcess(txn_cluster.bootstrap, tid)
    try:
        assert [a(c) for c in ("init", "begin", "produce zombie 0 a1",
                               "produce zombie 0 a2", "flush")] == [OK] * 5
        a.proc.send_signal(signal.SIGSTOP)
        try:
            assert [b(c) for c in ("init", "begin", "produce zombie 0 b1", "commit")] \
                == [OK] * 4
        finally:
            a.proc.send_signal(signal.SIGCONT)
        produced = a("produce zombie 0 a3")
        outcome = a("commit") if produced == OK else produced
        assert outcome["ok"] is False and outcome["fatal"] is True, outcome
    finally:
        a.close()
        b.close()
    seen = read_to_end(txn_cluster.bootstrap, "zombie", "read_committed", 1)
    assert [v for _, _, v in seen if v[:1] == b"a"] == []
    assert [(o, v) for _, o, v in seen] == [(3, b"b1")]   # a1, a2, A's abort marker first
    everything = read_to_end(txn_cluster.bootstrap, "zombie", "read_uncommitted", 3)
    assert [v for _, _, v in everything] == [b"a1", b"a2", b"b1"]


def last_stable_offset(bootstrap: str, topic: str) -> int:
    """ListOffsets latest with read_committed: the last stable offset of partition 0."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "lso",
                  "isolation.level": "read_committed", **QUIET})
    try:
        [tp] = c.offsets_for_times([CkTopicPartition(topic, 0, -1)], 10)
        return int(tp.offset)
    finally:
        c.close()


def test_dead_producers_transaction_is_aborted_at_its_timeout(
        txn_cluster: LocalCluster) -> None:
    client = admin(txn_cluster.bootstrap)
    create_topic(client, "orphan", 1, 3, {"min.insync.replicas": "2"})
    tid = f"dead-{uuid.uuid4().hex[:6]}"
    dead = ProducerProcess(txn_cluster.bootstrap, tid, timeout_ms=5000)
    live = ProducerProcess(txn_cluster.bootstrap, f"live-{uuid.uuid4().hex[:6]}")
    kp = kafka_admin(txn_cluster.bootstrap)
    try:
        assert [dead(c) for c in ("init", "begin", "produce orphan 0 d1", "flush")] == [OK] * 4
        open_txn = kp.describe_transactions([tid])[tid]
        assert open_txn.state == TransactionState.ONGOING
        dead.proc.kill()
        assert [live(c) for c in ("init", "begin", "produce orphan 0 c1", "commit")] \
            == [OK] * 4
        lso = last_stable_offset(txn_cluster.bootstrap, "orphan")
        still_open = kp.describe_transactions([tid])[tid].state == TransactionState.ONGOING
        print(f"last stable offset {lso} while the dead transaction was open: {still_open}")
        if still_open:
            # still open after the ListOffsets: the reading was taken while it was open
            assert lso == 0
            assert open_txn.topic_partitions == {KpTopicPartition("orphan", 0)}
        seen = read_to_end(txn_cluster.bootstrap, "orphan", "read_committed", 1)
        assert [(o, v) for _, o, v in seen] == [(1, b"c1")]
        aborted = wait_until("CompleteAbort of the dead producer's transaction",
                             lambda: (d := kp.describe_transactions([tid])[tid]).state
                             == TransactionState.COMPLETE_ABORT and d)
        assert (aborted.producer_id, aborted.producer_epoch) == \
            (open_txn.producer_id, open_txn.producer_epoch + 1)
        assert last_stable_offset(txn_cluster.bootstrap, "orphan") == 4  # d1 c1 C A
    finally:
        kp.close()
        dead.close()
        live.close()
