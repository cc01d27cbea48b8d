"""Topic administration on a real three-broker cluster, judged by confluent-kafka.

CreateTopics, CreatePartitions and DeleteTopics go through confluent-kafka's AdminClient
to whichever broker it picks; the controller (one of the three) assigns replicas with
Kafka's algorithm, writes the znodes and tells every broker through LeaderAndIsr and
UpdateMetadata.  The tests check what each broker then says on its own (a client
bootstrapped with that broker only) and what is on each broker's disk.  These tests share
one cluster with other modules (conftest's ``shared_cluster``), each with topics of its
own, and leave it as they found it.
"""

from __future__ import annotations

from collections import Counter

import pytest
from cluster_support import (
    admin,
    broker_admin,
    create_topic,
    partitions,
    wait_in_sync,
    wait_until,
)
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import NewPartitions
from kazoo.client import KazooClient

from millrace.launcher.local_cluster import CHROOT, LocalCluster

pytestmark = pytest.mark.integration

BROKERS = (1, 2, 3)


def topic_dirs(cluster: LocalCluster, broker_id: int, topic: str) -> list[str]:
    logs = cluster.broker(broker_id).data_dir / "logs"
    return sorted(p.name for p in logs.iterdir() if p.name.startswith(f"{topic}-"))


def produce_one(bootstrap: str, topic: str, partition: int, value: bytes) -> int:
    """acks=all; returns the record's offset."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    out: list[int] = []

    def done(err: object, msg: object) -> None:
        assert err is None, err
        out.append(msg.offset())  # type: ignore[attr-defined]
    p.produce(topic, value=value, partition=partition, on_delivery=done)
    assert p.flush(30) == 0
    return out[0]


def test_created_topic_is_described_alike_by_every_broker(shared_cluster: LocalCluster) -> None:
    cluster = shared_cluster
    client = admin(cluster.bootstrap)
    view = create_topic(client, "spread", 6, 2)

    # Kafka's assignment: replicas on distinct brokers, the preferred (first) replicas
    # walking round the brokers, and a new partition led by its preferred replica.
    assert sorted(view) == list(range(6))
    for p in view.values():
        assert len(set(p.replicas)) == 2 and set(p.replicas) <= set(BROKERS)
        assert p.leader == p.replicas[0]
        assert sorted(p.isr) == sorted(p.replicas)
    assert Counter(p.leader for p in view.values()) == {1: 2, 2: 2, 3: 2}

    for b in BROKERS:
        own = broker_admin(cluster, b)
        wait_until(f"broker {b} to describe the topic like the others",
                   lambda own=own: partitions(own, "spread") == view)
        md = own.list_topics(timeout=10)
        assert sorted(md.brokers) == list(BROKERS)
        assert {n.port for n in md.brokers.values()} == {
            cluster.broker(i).port for i in BROKERS}
        # a log on exactly the brokers that hold a replica
        assert topic_dirs(cluster, b, "spread") == sorted(
            f"spread-{i}" for i, p in view.items() if b in p.replicas)


def test_create_partitions_adds_replicated_partitions(shared_cluster: LocalCluster) -> None:
    cluster = shared_cluster
    client = admin(cluster.bootstrap)
    before = create_topic(client, "grow", 2, 3)
    futures = client.create_partitions([NewPartitions("grow", 5)], operation_timeout=30)
    futures["grow"].result(timeout=60)

    after = wait_in_sync(client, "grow", 5)
    assert {i: after[i] for i in before} == before  # the old partitions are untouched
    for i in (2, 3, 4):
        assert sorted(after[i].replicas) == [1, 2, 3]
        assert after[i].leader == after[i].replicas[0]
    for b in BROKERS:
        assert topic_dirs(cluster, b, "grow") == [f"grow-{i}" for i in range(5)]

    # the new partition takes acks=all writes, replicated to all three
    assert produce_one(cluster.bootstrap, "grow", 4, b"into the new partition") == 0
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "grow-reader",
                         "enable.auto.commit": False})
    consumer.assign([CkTopicPartition("grow", 4, 0)])
    try:
        msg = wait_until("the record in grow-4", lambda: consumer.poll(0.5))
        assert msg.error() is None and msg.value() == b"into the new partition"
    finally:
        consumer.close()


def test_deleted_topic_leaves_no_log_and_no_znode(shared_cluster: LocalCluster) -> None:
    cluster = shared_cluster
    client = admin(cluster.bootstrap)
    create_topic(client, "doomed", 3, 3)
    for i in range(3):
        produce_one(cluster.bootstrap, "doomed", i, b"soon gone")
    for b in BROKERS:
        assert topic_dirs(cluster, b, "doomed") == ["doomed-0", "doomed-1", "doomed-2"]

    client.delete_topics(["doomed"], operation_timeout=30)["doomed"].result(timeout=60)

    for b in BROKERS:
        own = broker_admin(cluster, b)
        wait_until(f"broker {b} to forget the topic",
                   lambda own=own: partitions(own, "doomed") is None)
        wait_until(f"broker {b} to remove the topic's logs",
                   lambda b=b: topic_dirs(cluster, b, "doomed") == [])
    zk = KazooClient(hosts=cluster.zookeeper.connect_string, timeout=10)
    zk.start(timeout=10)
    try:
        paths = ("/brokers/topics/doomed", "/admin/delete_topics/doomed",
                 "/config/topics/doomed")
        wait_until("the controller to remove the topic's znodes", lambda: [
            p for p in paths if zk.exists(CHROOT + p)] == [], diagnostics=lambda: str([
                p for p in paths if zk.exists(CHROOT + p)]))
    finally:
        zk.stop()
        zk.close()

    # the name is free again, for a new, empty topic
    create_topic(client, "doomed", 2, 3)
    assert produce_one(cluster.bootstrap, "doomed", 1, b"reborn") == 0
