"""Partition reassignment (KIP-455) on a real cluster while a producer writes.

ZooKeeper and three ``millrace broker`` processes (``LocalCluster``); a topic with one
partition on brokers [1, 2] (1 leads).  confluent-kafka produces numbered values with
``acks=all`` and idempotence all along, while ``millrace reassign-partitions --execute``
moves the partition to [3, 2]: broker 3 is added, catches up, joins the ISR, the leader
moves from the departing broker 1 to 3 (the first in-sync target replica), and broker 1's
replica is deleted.  Proven:

* the reassignment completes: nothing listed in progress, ``--verify`` says completed, the
  metadata shows replicas [3, 2] led by 3;
* broker 1's log directory for the partition is gone (StopReplica with delete);
* every acknowledged record is read back at the offset it was acknowledged at.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from millrace.client.admin import KafkaAdminClient, NewTopic, TopicPartition
from millrace.launcher.local_cluster import LocalCluster
from millrace.launcher.zookeeper_process import ZOOKEEPER_JAR

pytestmark = [pytest.mark.integration, pytest.mark.slow]

if not ZOOKEEPER_JAR.exists() or shutil.which("java") is None:
    pytest.skip("needs Debian's zookeeper package and java (scripts/system-deps.sh)",
                allow_module_level=True)

TOPIC = "moving"
TP = TopicPartition(TOPIC, 0)
WAIT_S = 30.0


def wait_for(what: str, condition: Callable[[], bool], timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.1)


def cli(bootstrap: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "millrace.cli.main", *args,
                           "--bootstrap-server", bootstrap],
                          capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items()
                               if k != "MILLRACE_BOOTSTRAP"})
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def replicas_and_leader(admin: KafkaAdminClient) -> tuple[list[int], int | None, list[int]]:
    p = admin.describe_topics([TOPIC], timeout_ms=5000).all()[TOPIC].partitions[0]
    return ([n.id for n in p.replicas], p.leader.id if p.leader else None,
            sorted(n.id for n in p.isr))


class Producing(threading.Thread):
    """confluent-kafka, acks=all, idempotent: numbered values until stopped; keeps every
    acknowledgement (offset, value) and every error."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(name="producing", daemon=True)
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 5,
                                  "message.timeout.ms": 60_000})
        self.stop = threading.Event()
        self.acked: list[tuple[int, bytes]] = []
        self.errors: list[str] = []

    def on_delivery(self, error: object, message: object) -> None:
        if error is not None:
            self.errors.append(str(error))
        else:
            self.acked.append((message.offset(), message.value()))  # type: ignore[attr-defined]

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            self.producer.produce(TOPIC, value=f"v{n}".encode(), partition=0,
                                  on_delivery=self.on_delivery)
            n += 1
            self.producer.poll(0.005)
        self.producer.flush(60)


def read_all(bootstrap: str, end: int) -> dict[int, bytes]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer
    from confluent_kafka import TopicPartition as CkTopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reassign-check",
                         "enable.auto.commit": False})
    try:
        consumer.assign([CkTopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        read: dict[int, bytes] = {}
        deadline = time.monotonic() + WAIT_S
        while len(read) < end and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                read[msg.offset()] = msg.value()
        return read
    finally:
        consumer.close()


def test_reassignment_moves_replicas_and_leader_while_producing(tmp_path: Path) -> None:
    # no controlled shutdown at the end: the RF 1 offsets partitions would hold each stop
    # for its retries (3 x 5 s), and shutting down is not what this test is about
    with LocalCluster(tmp_path / "cluster", 3, overrides={
            "offsets.topic.replication.factor": "1",
            "controlled.shutdown.enable": "false"}) as cluster:
        admin = KafkaAdminClient({"bootstrap.servers": cluster.bootstrap})
        producing: Producing | None = None
        try:
            admin.create_topics([NewTopic(TOPIC, replica_assignment={0: [1, 2]})],
                                timeout_ms=30_000).all()
            wait_for("both replicas in sync",
                     lambda: replicas_and_leader(admin) == ([1, 2], 1, [1, 2]))
            old_dir = cluster.broker(1).data_dir / "logs" / f"{TOPIC}-0"
            assert old_dir.is_dir()

            producing = Producing(cluster.bootstrap)
            producing.start()
            wait_for("records acknowledged", lambda: len(producing.acked) > 200)

            plan = tmp_path / "plan.json"
            plan.write_text(json.dumps({"version": 1, "partitions": [
                {"topic": TOPIC, "partition": 0, "replicas": [3, 2]}]}))
            out = cli(cluster.bootstrap, "reassign-partitions", "--execute",
                      "--reassignment-json-file", str(plan))
            assert f"Successfully started partition reassignment(s) for {TOPIC}-0" in out
            assert '"replicas":[1,2]' in out               # the rollback plan

            wait_for("the reassignment to finish",
                     lambda: admin.list_partition_reassignments([TP]) == {})
            wait_for("metadata with the new replicas",
                     lambda: replicas_and_leader(admin) == ([3, 2], 3, [2, 3]))
            wait_for("broker 1's replica deleted", lambda: not old_dir.exists())
            assert (cluster.broker(3).data_dir / "logs" / f"{TOPIC}-0").is_dir()
            verified = cli(cluster.bootstrap, "reassign-partitions", "--verify",
                           "--reassignment-json-file", str(plan))
            assert f"Reassignment of partition {TOPIC}-0 is completed." in verified
            assert "No partition reassignments found." in cli(
                cluster.bootstrap, "reassign-partitions", "--list")

            acked_before = len(producing.acked)
            wait_for("records acknowledged by the new leader",
                     lambda: len(producing.acked) > acked_before + 200)
        finally:
            if producing is not None:
                producing.stop.set()
                producing.join(90)
            admin.close()

        assert producing.errors == []
        acked = dict(producing.acked)
        read = read_all(cluster.bootstrap, max(acked) + 1)
        missing = {o: v for o, v in acked.items() if read.get(o) != v}
        assert missing == {}, f"{len(missing)} acknowledged records not read back"
        assert [read[o] for o in sorted(read)] == [f"v{n}".encode() for n in range(len(read))]
