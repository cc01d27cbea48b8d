"""Transactions on a real ``millrace broker`` process, driven by hand: transactional
batches (``RecordBatchBuilder`` with is_transactional, producer ids from InitProducerId)
and WriteTxnMarkers sent with our protocol client stand in for the coordinator.

confluent-kafka's and kafka-python's ``read_committed`` consumers never see an aborted
record, see committed ones, and wait at an open transaction's first offset; a kill -9 with
a transaction open keeps the LSO at its first offset, and the aborted-transaction index
is what it was.
"""

from __future__ import annotations

import time
import uuid
import warnings
from pathlib import Path
from typing import Any

import pytest

from millrace.protocol import FetchRequest, ListOffsetsRequest, WriteTxnMarkersRequest
from millrace.record.batch import RecordBatchBuilder
from millrace.testing.broker_process import BrokerProcess
from tests.integration.test_idempotent_dedup import RawClient

pytestmark = pytest.mark.integration

TOPIC = "idem"  # RawClient.produce writes here


def txn_batch(pid: int, seq: int, values: list[str]) -> bytes:
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=seq,
                           is_transactional=True)
    now = int(time.time() * 1000)
    for v in values:
        b.append(now, None, v.encode())
    return b.build()


def plain_batch(values: list[str]) -> bytes:
    b = RecordBatchBuilder()
    now = int(time.time() * 1000)
    for v in values:
        b.append(now, None, v.encode())
    return b.build()


def write_marker(c: RawClient, pid: int, committed: bool) -> int:
    cls = WriteTxnMarkersRequest
    body = cls(markers=[cls.WritableTxnMarker(
        producer_id=pid, producer_epoch=0, transaction_result=committed, coordinator_epoch=0,
        topics=[cls.WritableTxnMarker.WritableTxnMarkerTopic(name=TOPIC,
                                                              partition_indexes=[0])])])
    (marker,) = c.call(body, 1).markers
    return int(marker.topics[0].partitions[0].error_code)


def committed_state(c: RawClient) -> tuple[int, int, list[tuple[int, int]]]:
    """(high watermark, last stable offset, aborted transactions) of a read_committed
    fetch from offset 0."""
    body = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=1,
                        topics=[FetchRequest.FetchTopic(topic=TOPIC, partitions=[
                            FetchRequest.FetchTopic.FetchPartition(
                                partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])],
                        forgotten_topics_data=[])
    (part,) = c.call(body, 12).responses[0].partitions
    assert part.error_code == 0
    return (part.high_watermark, part.last_stable_offset,
            [(a.producer_id, a.first_offset) for a in part.aborted_transactions or ()])


def latest(c: RawClient, isolation: int) -> int:
    cls = ListOffsetsRequest
    body = cls(replica_id=-1, isolation_level=isolation, topics=[cls.ListOffsetsTopic(
        name=TOPIC, partitions=[cls.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=0, timestamp=-1)])])
    return int(c.call(body, 7).topics[0].partitions[0].offset)


def confluent_values(port: int, isolation: str, want: int, wait_s: float) -> list[str]:
    from confluent_kafka import Consumer, TopicPartition

    consumer: Any = Consumer({"bootstrap.servers": f"127.0.0.1:{port}",
                              "group.id": f"g-{uuid.uuid4().hex[:6]}",
                              "isolation.level": isolation, "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        out: list[str] = []
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and len(out) < want:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                out.append(msg.value().decode())
        return out
    finally:
        consumer.close()


def kafka_python_values(port: int, want: int) -> list[str]:
    with warnings.catch_warnings():  # kafka-python 3 loads its schemas with read_text
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}",
                             isolation_level="read_committed", enable_auto_commit=False)
    try:
        tp = TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        out: list[str] = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and len(out) < want:
            for recs in consumer.poll(timeout_ms=300).values():
                out.extend(r.value.decode() for r in recs)
        return out
    finally:
        consumer.close()


def test_read_committed_consumers_and_kill_during_open_transaction(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path).start()
    try:
        port = broker.port
        with RawClient(port) as c:
            c.create_topic(TOPIC, {})
            a, _ = c.init_producer_id()
            b, _ = c.init_producer_id()
            assert c.produce(txn_batch(a, 0, ["a1", "a2"])) == (0, 0)
            assert c.produce(txn_batch(b, 0, ["b1"])) == (0, 2)
            assert c.produce(plain_batch(["p1"])) == (0, 3)
            assert write_marker(c, a, committed=False) == 0          # 4
            assert committed_state(c) == (5, 2, [(a, 0)])
            assert latest(c, 1) == 2 and latest(c, 0) == 5
        # read_committed waits at b's open transaction: a's records are aborted
        assert confluent_values(port, "read_committed", 1, 4.0) == []
        assert confluent_values(port, "read_uncommitted", 4, 15.0) == ["a1", "a2", "b1", "p1"]
        with RawClient(port) as c:
            assert write_marker(c, b, committed=True) == 0           # 5
            assert committed_state(c) == (6, 6, [(a, 0)])
        assert confluent_values(port, "read_committed", 2, 15.0) == ["b1", "p1"]
        assert kafka_python_values(port, 2) == ["b1", "p1"]

        # a transaction left open, then kill -9
        with RawClient(port) as c:
            assert c.produce(txn_batch(a, 2, ["c1"])) == (0, 6)
            assert c.produce(plain_batch(["p2"])) == (0, 7)
            assert committed_state(c)[:2] == (8, 6)
        index = tmp_path / "logs" / f"{TOPIC}-0" / "00000000000000000000.txnindex"
        before = index.read_bytes()
        assert len(before) == 34
        broker.kill()
        broker = BrokerProcess(tmp_path, port=port).start()
        with RawClient(port) as c:
            assert committed_state(c) == (8, 6, [(a, 0)])
            assert latest(c, 1) == 6
            assert index.read_bytes() == before
            assert write_marker(c, a, committed=True) == 0           # 8
            assert committed_state(c) == (9, 9, [(a, 0)])
        assert confluent_values(port, "read_committed", 4, 15.0) == ["b1", "p1", "c1", "p2"]
    finally:
        broker.stop()
