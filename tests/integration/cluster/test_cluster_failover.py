"""Crashes (SIGKILL) on a real three-broker cluster, judged by confluent-kafka.

A killed broker's ZooKeeper session expires after ``zookeeper.session.timeout.ms`` (6 s
here); its ephemeral ``/brokers/ids/<id>`` (and ``/controller``, if it was the
controller) vanishes, and the controller elects new leaders from the ISR.

* An idempotent ``acks=all`` producer (RF 3, ``min.insync.replicas=2``) keeps producing
  while the leader of a partition is killed: every acknowledged record is read back
  exactly once and in order; the restarted broker truncates what it alone had (KIP-101)
  and rejoins the ISR, and once the cluster is stopped every replica's log holds the same
  bytes, exactly the acknowledged records.
* The controller's broker killed: another broker becomes controller (Metadata's
  controller id and ``/controller_epoch`` move) and topics can still be created.
* A consumer group keeps consuming while the broker leading its ``__consumer_offsets``
  partition (its group coordinator) is killed.

Every test starts its own cluster.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from cluster_support import (
    ClusterFactory,
    acked_across_a_leader_kill,
    admin,
    broker_admin,
    consume_all,
    controller_id,
    create_topic,
    log_bytes,
    log_tails,
    partition_dir,
    partitions,
    survivor,
    wait_in_sync,
    wait_until,
)
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from kazoo.client import KazooClient

from millrace.launcher.local_cluster import CHROOT

pytestmark = [pytest.mark.integration, pytest.mark.slow]



def test_acked_records_survive_a_leader_kill9(fresh_cluster: ClusterFactory,
                                              tmp_path: Path) -> None:
    cluster = fresh_cluster()
    client = admin(cluster.bootstrap)
    view = create_topic(client, "ledger", 3, 3, {"min.insync.replicas": "2"})
    victim = view[0].leader
    acked = acked_across_a_leader_kill(cluster, "ledger", victim)
    total = sum(len(v) for v in acked.values())

    cluster.restart_broker(victim)
    wait_in_sync(client, "ledger", 3)

    got = consume_all(cluster.bootstrap, "ledger", 3, total)
    assert got == acked  # exactly once and in order, partition by partition
    assert sorted(int(v) for vs in got.values() for v in vs) == list(range(total))

    # Stopped cleanly, every replica holds the same bytes: the acknowledged records.
    cluster.stop()
    for p in range(3):
        logs = {b: log_bytes(partition_dir(cluster, b, "ledger", p), tmp_path / f"{b}-{p}")
                for b in view[p].replicas}
        for b, (end, data) in logs.items():
            assert end == len(acked[p]), f"ledger-{p} on broker {b}"
            assert data == logs[view[p].leader][1], f"ledger-{p} on broker {b}"


def test_another_broker_takes_over_when_the_controller_is_killed(
        fresh_cluster: ClusterFactory) -> None:
    cluster = fresh_cluster()
    client = admin(cluster.bootstrap)
    create_topic(client, "before", 1, 3)
    old = controller_id(client)
    zk = KazooClient(hosts=cluster.zookeeper.connect_string, timeout=10)
    zk.start(timeout=10)
    try:
        epoch = int(zk.get(f"{CHROOT}/controller_epoch")[0])
        cluster.kill_broker(old)
        other = broker_admin(cluster, survivor(cluster, old))
        new = wait_until("a new controller",
                         lambda: (c := controller_id(other)) not in (old, -1) and c,
                         diagnostics=lambda: log_tails(cluster))
        assert json.loads(zk.get(f"{CHROOT}/controller")[0])["brokerid"] == new
        assert int(zk.get(f"{CHROOT}/controller_epoch")[0]) == epoch + 1
    finally:
        zk.stop()
        zk.close()

    # The new controller creates topics on the live brokers...
    view = create_topic(other, "after", 2, 2)
    assert all(old not in p.replicas for p in view.values())
    # ...and one led by the killed broker has a new leader.
    assert partitions(other, "before")[0].leader not in (-1, old)

    cluster.restart_broker(old)
    wait_in_sync(other, "before", 1)
    create_topic(other, "everywhere", 1, 3)
    assert controller_id(broker_admin(cluster, old)) == new


def test_consumer_group_keeps_consuming_across_a_coordinator_kill9(
        fresh_cluster: ClusterFactory) -> None:
    cluster = fresh_cluster()
    client = admin(cluster.bootstrap)
    create_topic(client, "work", 2, 3)
    # the group's coordinator must exist and be replicated before the kill
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "enable.idempotence": True, "message.timeout.ms": 90_000})

    def produce(first: int, count: int) -> None:
        for i in range(first, first + count):
            producer.produce("work", value=str(i).encode(), key=str(i).encode())
        assert producer.flush(90) == 0

    produce(0, 200)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "workers",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "session.timeout.ms": 30_000})
    consumer.subscribe(["work"])
    seen: list[int] = []

    def consume_until(count: int) -> None:
        def progress() -> bool:
            for msg in consumer.consume(100, 0.5):
                if msg.error() is None:
                    seen.append(int(msg.value() or b"-1"))
                    # a commit refused while the coordinator moves is covered by a later one
                    with contextlib.suppress(KafkaException):
                        consumer.commit(message=msg, asynchronous=False)
            return len(set(seen)) >= count
        wait_until(f"{count} distinct records consumed", progress,
                   diagnostics=lambda: log_tails(cluster))

    try:
        consume_until(100)
        group = client.describe_consumer_groups(["workers"])["workers"].result(timeout=30)
        coordinator = group.coordinator.id
        wait_in_sync(client, "__consumer_offsets", 4)
        cluster.kill_broker(coordinator)
        produce(200, 200)
        consume_until(400)

        other = broker_admin(cluster, survivor(cluster, coordinator))
        moved = other.describe_consumer_groups(["workers"])["workers"].result(timeout=30)
        assert moved.coordinator.id != coordinator
        assert sorted(set(seen)) == list(range(400))

        def committed_to_the_end() -> bool:
            try:  # the positions, in case the last per-record commit hit the move
                consumer.commit(offsets=consumer.position(consumer.assignment()),
                                asynchronous=False)
            except KafkaException:
                return False
            done = consumer.committed([CkTopicPartition("work", p) for p in (0, 1)], 10)
            ends = [consumer.get_watermark_offsets(CkTopicPartition("work", p), 10)[1]
                    for p in (0, 1)]
            return [tp.offset for tp in done] == ends and sum(ends) == 400
        wait_until("the group's offsets committed at the end of the topic",
                   committed_to_the_end)
    finally:
        consumer.close()
