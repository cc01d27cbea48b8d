"""Helpers of the cluster tests: fast-failure broker settings, polling, partition views
through confluent-kafka's metadata, a producer that keeps producing unique values, and
reading back what the cluster holds.

Everything a test asserts is seen through a third-party client (confluent-kafka), through
the raw znodes (kazoo reading Kafka's JSON) or through the log files the brokers left on
disk; none of it goes through millrace's own client.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from millrace.launcher.local_cluster import CHROOT, LocalCluster
from millrace.storage import Log, LogConfig
from millrace.testing.confluent_admin import create_topic as create_admin_topic

T = TypeVar("T")

# Failures are noticed in seconds instead of Kafka's defaults (18 s sessions, 30 s lag):
# fast enough for a CI budget, slow enough for a loaded 2-core machine.  The ZooKeeper
# server of LocalCluster accepts session timeouts of 1 s to 18 s.
FAST = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "6000",
    "controlled.shutdown.retry.backoff.ms": "500",
    "replica.fetch.backoff.ms": "200",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
}
# A bound on every wait; tests assert outcomes, never speed.
# Transactions on a cluster: the transaction log replicated 3 times (min ISR 2), in fewer
# partitions than Kafka's 50 (each one a coordinator to load), and a transaction left open
# past its timeout aborted within half a second of it
TXN = {
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": "10",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
}

WAIT = 60.0


@dataclass(frozen=True)
class PartitionView:
    """One partition as a client's Metadata response shows it."""

    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @property
    def in_sync(self) -> bool:
        return self.leader >= 0 and set(self.isr) == set(self.replicas)


def wait_until(what: str, condition: Callable[[], T | None], timeout: float = WAIT,
               diagnostics: Callable[[], str] | None = None) -> T:
    """Poll ``condition`` until it returns a truthy value, which is returned."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = condition()
        if last:
            return last
        time.sleep(0.1)
    details = diagnostics() if diagnostics is not None else ""
    pytest.fail(f"gave up after {timeout:.0f}s waiting for {what} (last: {last!r})\n{details}")


def admin(bootstrap: str, config: dict[str, str] | None = None) -> AdminClient:
    """``config``: client security settings (a secured cluster's ``client_properties``)."""
    return AdminClient({"bootstrap.servers": bootstrap, **(config or {})})


def partitions(client: AdminClient, topic: str) -> dict[int, PartitionView] | None:
    """The topic's partitions from one Metadata request, or None if it is not known.
    The request asks for every topic: one naming the topic would let librdkafka's
    producer-type handle create it (AllowAutoTopicCreation) and revive a deleted one.
    A request that times out is None too: librdkafka sends Metadata to any broker it
    has learnt of, a paused or dead one included, even from a client bootstrapped at
    another; the caller's wait_until asks again."""
    try:
        md = client.list_topics(timeout=10)
    except KafkaException as e:
        if e.args[0].code() != KafkaError._TIMED_OUT:
            raise
        return None
    t = md.topics.get(topic)
    if t is None or t.error is not None or not t.partitions:
        return None
    return {p.id: PartitionView(p.leader, tuple(p.replicas), tuple(p.isrs))
            for p in t.partitions.values()}


def broker_admin(cluster: LocalCluster, broker_id: int) -> AdminClient:
    """A client that talks to this one broker only (its Metadata answers are its own)."""
    return admin(cluster.broker(broker_id).bootstrap)


def wait_in_sync(client: AdminClient, topic: str, count: int,
                 timeout: float = WAIT) -> dict[int, PartitionView]:
    """Wait until the topic has ``count`` partitions, each led and with ISR == replicas."""
    def ready() -> dict[int, PartitionView] | None:
        view = partitions(client, topic)
        if view is None or len(view) != count or not all(p.in_sync for p in view.values()):
            return None
        return view
    return wait_until(f"{topic}: {count} partitions led and fully in sync", ready, timeout)


def create_topic(client: AdminClient, topic: str, count: int, rf: int,
                 config: dict[str, str] | None = None) -> dict[int, PartitionView]:
    """Create (``millrace.testing.confluent_admin``: retried once when librdkafka never
    finds the controller) and wait until in sync."""
    create_admin_topic(client, NewTopic(topic, count, rf, config=config or {}))
    return wait_in_sync(client, topic, count)


def log_bytes(directory: Path, scratch: Path) -> tuple[int, bytes]:
    """(log end offset, every byte) of a partition dir, read from a copy so the broker's
    own files stay as they were."""
    copy = scratch / f"{directory.parent.parent.name}-{directory.name}"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(directory, copy)
    log = Log(str(copy), LogConfig(), had_clean_shutdown=True)
    try:
        return log.log_end_offset, log.read_all_bytes()
    finally:
        log.close()


def controller_id(client: AdminClient) -> int:
    return int(client.list_topics(timeout=10).controller_id)


def log_tails(cluster: LocalCluster, lines: int = 30) -> str:
    """The end of every broker's log, for failure messages."""
    out = []
    for broker_id, b in sorted(cluster.brokers.items()):
        tail = b.logs().splitlines()[-lines:]
        out.append(f"--- broker {broker_id} ---\n" + "\n".join(tail))
    return "\n".join(out)


def zk_partition_state(cluster: LocalCluster, topic: str, partition: int) -> dict[str, object]:
    """``/brokers/topics/<t>/partitions/<p>/state`` as Kafka's JSON, read with kazoo."""
    zk = KazooClient(hosts=cluster.zookeeper.connect_string, timeout=10)
    zk.start(timeout=10)
    try:
        data, _ = zk.get(f"{CHROOT}/brokers/topics/{topic}/partitions/{partition}/state")
    finally:
        zk.stop()
        zk.close()
    state: dict[str, object] = json.loads(data)
    return state


@dataclass
class ContinuousProducer:
    """A confluent-kafka producer thread appending unique values ("0", "1", ...) to a topic
    until stopped; keeps what was acknowledged, per partition in offset order."""

    bootstrap: str
    topic: str
    config: dict[str, object] = field(default_factory=dict)
    acked: dict[int, list[tuple[int, bytes]]] = field(default_factory=dict)
    errors: list[tuple[bytes, KafkaError]] = field(default_factory=list)
    sent: int = 0

    def __post_init__(self) -> None:
        self._producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all",
                                   "enable.idempotence": True, "linger.ms": 5,
                                   "message.timeout.ms": 90_000, **self.config})
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="producer", daemon=True)

    def start(self) -> ContinuousProducer:
        self._thread.start()
        return self

    @property
    def acked_count(self) -> int:
        with self._lock:
            return sum(len(v) for v in self.acked.values())

    def _on_delivery(self, err: KafkaError | None, msg: object) -> None:
        with self._lock:
            if err is not None:
                self.errors.append((msg.value(), err))  # type: ignore[attr-defined]
            else:
                self.acked.setdefault(msg.partition(), []).append(  # type: ignore[attr-defined]
                    (msg.offset(), msg.value()))  # type: ignore[attr-defined]

    def _run(self) -> None:
        while not self._stop.is_set():
            value = str(self.sent).encode()
            try:
                self._producer.produce(self.topic, value=value, key=value,
                                       on_delivery=self._on_delivery)
                self.sent += 1
            except BufferError:
                pass
            self._producer.poll(0.003)

    def stop(self, timeout: float = WAIT) -> None:
        """Stop producing and wait until every record is acknowledged or failed."""
        self._stop.set()
        self._thread.join(10)
        left = self._producer.flush(timeout)
        assert left == 0, f"{left} records neither acknowledged nor failed after {timeout}s"

    def by_partition(self) -> dict[int, list[bytes]]:
        """Acknowledged values per partition, in offset order (offsets checked unique)."""
        out = {}
        for p, entries in self.acked.items():
            entries = sorted(entries)
            offsets = [o for o, _ in entries]
            assert len(set(offsets)) == len(offsets), f"partition {p}: an offset acked twice"
            out[p] = [v for _, v in entries]
        return out


def consume_all(bootstrap: str, topic: str, count: int, expected: int,
                timeout: float = WAIT, config: dict[str, str] | None = None
                ) -> dict[int, list[bytes]]:
    """Read every partition from the beginning with a fresh assign()-ed consumer until
    ``expected`` records arrived and nothing more comes; values per partition in order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         **(config or {})})
    consumer.assign([CkTopicPartition(topic, p, 0) for p in range(count)])
    got: dict[int, list[bytes]] = {p: [] for p in range(count)}
    seen = 0
    deadline = time.monotonic() + timeout
    quiet_until = None
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                if seen >= expected:
                    if quiet_until is None:
                        quiet_until = time.monotonic() + 1.0
                    elif time.monotonic() > quiet_until:
                        break
                continue
            if msg.error() is not None:
                continue
            got[msg.partition() or 0].append(msg.value() or b"")
            seen += 1
    finally:
        consumer.close()
    return got


def partition_dir(cluster: LocalCluster, broker_id: int, topic: str, partition: int) -> Path:
    return cluster.broker(broker_id).data_dir / "logs" / f"{topic}-{partition}"


# fresh_cluster's value: a factory of started clusters, e.g. fresh_cluster(brokers=3)
ClusterFactory = Callable[..., LocalCluster]


def survivor(cluster: LocalCluster, dead: int) -> int:
    return min(b for b in cluster.brokers if b != dead)


def acked_across_a_leader_kill(cluster: LocalCluster, topic: str, leader: int,
                               config: dict[str, str] | None = None, count: int = 300
                               ) -> dict[int, list[bytes]]:
    """An idempotent acks=all producer writes ``topic`` while its partition-0 ``leader``
    is killed (-9) after ``count`` acknowledgements; it stops ``count`` acknowledgements
    after a new leader took over, with no delivery error.  The acknowledged values per
    partition, in offset order.  ``config``: client settings (security)."""
    producer = ContinuousProducer(cluster.bootstrap, topic, config=dict(config or {}))
    producer.start()
    try:
        wait_until(f"{count} acknowledged records", lambda: producer.acked_count >= count,
                   diagnostics=lambda: log_tails(cluster))
        cluster.kill_broker(leader)
        other = admin(cluster.broker(survivor(cluster, leader)).bootstrap, config)
        wait_until(f"a new leader for {topic}-0 (broker {leader} was killed)",
                   lambda: (p := partitions(other, topic)) and p[0].leader not in (
                       -1, leader), diagnostics=lambda: log_tails(cluster))
        before = producer.acked_count
        wait_until(f"{count} more acknowledged records on the new leaders",
                   lambda: producer.acked_count >= before + count,
                   diagnostics=lambda: log_tails(cluster))
    finally:
        producer.stop()
    assert producer.errors == []
    return producer.by_partition()

