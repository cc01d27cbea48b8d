"""Transactions on a real three-broker cluster with partition verification (KIP-890
part 1): the leaders of a topic's partitions are spread over the brokers, so most first
batches are verified with a transaction coordinator on another broker (AddPartitionsToTxn
v5 over the inter-broker connection).  librdkafka's transactional producer commits and
aborts across every partition; a read_committed consumer sees exactly the committed
records."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from cluster_support import WAIT, admin, create_topic
from confluent_kafka import Consumer, Producer, TopicPartition

from millrace.launcher.local_cluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.compat]


def test_transactions_verified_across_brokers(shared_cluster: LocalCluster) -> None:
    cluster = shared_cluster
    topic = "txn-verified"
    view = create_topic(admin(cluster.bootstrap), topic, 3, 3)
    assert sorted(v.leader for v in view.values()) == [1, 2, 3]
    p = Producer({"bootstrap.servers": cluster.bootstrap,
                  "transactional.id": f"tx-{uuid.uuid4().hex[:8]}",
                  "transaction.timeout.ms": 60_000})
    p.init_transactions(WAIT)
    expected: dict[int, list[str]] = {0: [], 1: [], 2: []}
    for i, commit in enumerate((True, False, True)):
        p.begin_transaction()
        for part in range(3):
            p.produce(topic, f"v{i}-{part}".encode(), partition=part)
        assert p.flush(WAIT) == 0
        if commit:
            p.commit_transaction(WAIT)
            for part in range(3):
                expected[part].append(f"v{i}-{part}")
        else:
            p.abort_transaction(WAIT)
    consumer: Any = Consumer({"bootstrap.servers": cluster.bootstrap,
                              "group.id": "g-verified", "isolation.level": "read_committed",
                              "enable.auto.commit": False})
    seen: dict[int, list[str]] = {0: [], 1: [], 2: []}
    try:
        consumer.assign([TopicPartition(topic, part, 0) for part in range(3)])
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline and sum(map(len, seen.values())) < 6:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                seen[msg.partition()].append(msg.value().decode())
    finally:
        consumer.close()
    assert seen == expected
