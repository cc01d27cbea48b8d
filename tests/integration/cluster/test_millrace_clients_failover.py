"""millrace's own producer and consumer riding through a leader kill on a real cluster.

ZooKeeper and three ``millrace broker`` processes (``LocalCluster``); a topic of three
partitions, replication factor 3, ``min.insync.replicas=2``.  An idempotent ``acks=all``
millrace producer sends numbered values, in order per partition, while the leader of
partition 0 is killed with SIGKILL; a millrace consumer in a group reads the topic all
along and commits what it handed out.  The producer's retries go to the new leader
(NOT_LEADER_OR_FOLLOWER, disconnects), the consumer fetches with leader epochs and
validates its positions after the change (KIP-320).  Proven from what came back:

* every acknowledged record was read, exactly once, at the offset it was acknowledged at;
* per partition, the records read are in offset order and the values in send order:
  no retry duplicated or reordered anything;
* the producer got no error at all: every failure during the failover was retried.

ZooKeeper sessions time out after 3 s here (Kafka's default is 18 s) and a dead
follower leaves the ISR after 5 s, so the test stays well under a minute.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from millrace.client.admin import KafkaAdminClient, NewTopic
from millrace.client.consumer import KafkaConsumer
from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.launcher.local_cluster import LocalCluster
from millrace.launcher.zookeeper_process import ZOOKEEPER_JAR

pytestmark = [pytest.mark.integration, pytest.mark.slow]

if not ZOOKEEPER_JAR.exists() or shutil.which("java") is None:
    pytest.skip("needs Debian's zookeeper package and java (scripts/system-deps.sh)",
                allow_module_level=True)

TOPIC = "failover"
PARTITIONS = 3
BROKER_SETTINGS = {
    "zookeeper.session.timeout.ms": "3000",
    "replica.lag.time.max.ms": "5000",
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "min.insync.replicas": "2",
}
PRODUCE_BEFORE_KILL_S = 2.0
PRODUCE_AFTER_KILL_S = 8.0
WAIT_S = 30.0


def wait_for(what: str, condition: Callable[[], bool], timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.1)


def fully_replicated(admin: KafkaAdminClient) -> bool:
    try:
        description = admin.describe_topics([TOPIC], timeout_ms=5000).all()[TOPIC]
    except Exception:
        return False
    return len(description.partitions) == PARTITIONS and all(
        p.leader is not None and len(p.isr) == 3 for p in description.partitions)


def leader_of(admin: KafkaAdminClient, partition: int) -> int:
    description = admin.describe_topics([TOPIC], timeout_ms=5000).all()[TOPIC]
    leader = description.partitions[partition].leader
    assert leader is not None
    return leader.id


class Producing(threading.Thread):
    """Sends ``"<partition>-<n>"`` round-robin over the partitions until stopped; keeps
    every acknowledgement (partition, offset, value) and every error."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(name="producing", daemon=True)
        self.producer: KafkaProducer[bytes, bytes] = KafkaProducer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 5, "request.timeout.ms": 5000, "delivery.timeout.ms": 60_000,
            "retry.backoff.ms": 100})
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.acked: list[tuple[int, int, bytes]] = []
        self.errors: list[BaseException] = []
        self.sent = 0

    def on_completion(self, metadata: Any, error: BaseException | None, value: bytes) -> None:
        with self.lock:
            if error is not None:
                self.errors.append(error)
            else:
                self.acked.append((metadata.partition, metadata.offset, value))

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            partition = n % PARTITIONS
            value = f"{partition}-{n // PARTITIONS}".encode()
            self.producer.send(
                ProducerRecord(TOPIC, value, partition=partition),
                callback=lambda m, e, v=value: self.on_completion(m, e, v))
            n += 1
            self.sent = n
            time.sleep(0.002)
        self.producer.flush(60_000)
        self.producer.close()


def test_idempotent_producer_and_group_consumer_ride_through_a_leader_kill(
        tmp_path: Path) -> None:
    with LocalCluster(tmp_path / "cluster", 3, overrides=BROKER_SETTINGS) as cluster:
        admin = KafkaAdminClient({"bootstrap.servers": cluster.bootstrap})
        try:
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)], timeout_ms=30_000).all()
            wait_for("the topic fully replicated", lambda: fully_replicated(admin))
            victim = leader_of(admin, 0)

            consumer: KafkaConsumer[bytes, bytes] = KafkaConsumer(TOPIC, {
                "bootstrap.servers": cluster.bootstrap, "group.id": "failover-readers",
                "auto.offset.reset": "earliest", "enable.auto.commit": False,
                "request.timeout.ms": 10_000})
            read: dict[int, list[tuple[int, bytes]]] = defaultdict(list)

            def poll_once() -> None:
                records = consumer.poll(200)
                for tp in records.partitions():
                    read[tp.partition].extend((r.offset, r.value)
                                              for r in records.records(tp))
                if records.count():
                    consumer.commit_sync()

            producing = Producing(cluster.bootstrap)
            producing.start()
            started = time.monotonic()
            while time.monotonic() - started < PRODUCE_BEFORE_KILL_S:
                poll_once()
            cluster.kill_broker(victim)
            killed = time.monotonic()
            while time.monotonic() - killed < PRODUCE_AFTER_KILL_S:
                poll_once()
            producing.stop.set()
            producing.join(90)
            assert not producing.is_alive()

            acked = producing.acked
            wanted = {(p, o) for p, o, _ in acked}

            def all_read() -> bool:
                poll_once()
                return wanted <= {(p, o) for p, rs in read.items() for o, _ in rs}

            wait_for("the consumer to read every acknowledged record", all_read)
            consumer.close()
        finally:
            admin.close()

    assert producing.errors == []
    assert len(acked) == producing.sent
    per_partition_acks = defaultdict(list)
    for p, o, v in acked:
        per_partition_acks[p].append((o, v))
    # the failover happened in the middle of the run, on partition 0
    assert len(per_partition_acks[0]) > 100
    for p in range(PARTITIONS):
        offsets = [o for o, _ in read[p]]
        assert offsets == sorted(set(offsets)), f"partition {p}: re-read or out of order"
        log = dict(read[p])
        for o, v in per_partition_acks[p]:
            assert log.get(o) == v, f"partition {p} offset {o}: acknowledged {v!r}"
        values = [v for _, v in read[p]]
        assert len(values) == len(set(values)), f"partition {p}: a value written twice"
        numbers = [int(v.split(b"-")[1]) for v in values]
        assert numbers == sorted(numbers), f"partition {p}: values out of send order"
