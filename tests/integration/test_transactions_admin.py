"""The admin side of transactions, judged by kafka-python 3's admin client (which speaks
DescribeTransactions, ListTransactions, DescribeProducers and the admin's own
WriteTxnMarkers for abort_transaction) against transactions librdkafka left on a real
broker: one open, one committed."""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from millrace.testing.broker_process import BrokerProcess

with warnings.catch_warnings():  # kafka-python 3 loads its schemas with a deprecated API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.admin import AbortTransactionSpec, TransactionState

pytestmark = [pytest.mark.integration]

TOPIC = "txn-admin"


def _open_and_committed(bootstrap: str) -> Producer:
    """Leave 'open-1' with an open transaction on partition 0 (one record flushed) and
    commit one record of 'done-1'; returns the open producer (kept alive)."""
    opened = Producer({"bootstrap.servers": bootstrap, "transactional.id": "open-1",
                       "transaction.timeout.ms": 600_000})
    opened.init_transactions(30)
    opened.begin_transaction()
    opened.produce(TOPIC, b"pending", partition=0)
    assert opened.flush(30) == 0
    done = Producer({"bootstrap.servers": bootstrap, "transactional.id": "done-1"})
    done.init_transactions(30)
    done.begin_transaction()
    done.produce(TOPIC, b"committed", partition=0)
    done.commit_transaction(30)
    return opened


def _read_committed(bootstrap: str, wait_s: float) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rc-{time.monotonic_ns()}",
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    c.assign([CkTopicPartition(TOPIC, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        got += [m.value() for m in c.consume(10, 0.5) if m.error() is None]
    c.close()
    return got


def test_list_describe_producers_and_abort(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "b") as broker, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        opened = _open_and_committed(broker.bootstrap)
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            listed = admin.list_transactions()
            assert {(t.transactional_id, t.state) for t in listed[0]} == {
                ("open-1", TransactionState.ONGOING), ("done-1", TransactionState.COMPLETE_COMMIT)}
            only_open = admin.list_transactions(state_filters=["Ongoing"])
            assert [t.transactional_id for t in only_open[0]] == ["open-1"]
            by_pattern = admin.list_transactions(transactional_id_pattern="done-.*")
            assert [t.transactional_id for t in by_pattern[0]] == ["done-1"]

            described = admin.describe_transactions(["open-1", "done-1"])
            assert described["open-1"].state == TransactionState.ONGOING
            assert described["open-1"].topic_partitions == {TopicPartition(TOPIC, 0)}
            assert described["open-1"].transaction_timeout_ms == 600_000
            assert described["done-1"].state == TransactionState.COMPLETE_COMMIT
            assert described["done-1"].topic_partitions == set()
            open_pid = described["open-1"].producer_id

            [state] = admin.describe_producers([TopicPartition(TOPIC, 0)]).values()
            producers = {p.producer_id: p for p in state.active_producers}
            assert producers[open_pid].current_transaction_start_offset == 0
            assert producers[described["done-1"].producer_id] \
                .current_transaction_start_offset == -1

            # The open transaction holds the LSO at offset 0: read_committed sees nothing.
            assert _read_committed(broker.bootstrap, 3) == []
            # An operator aborts it by hand (Kafka's kafka-transactions.sh abort).
            admin.abort_transaction(AbortTransactionSpec(
                TopicPartition(TOPIC, 0), open_pid, described["open-1"].producer_epoch,
                producers[open_pid].coordinator_epoch))
            assert _read_committed(broker.bootstrap, 3) == [b"committed"]
        finally:
            admin.close()
            del opened
