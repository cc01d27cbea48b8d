"""Broker-side idempotence against a real ``millrace broker`` process.

Raw protocol (``ClientConnection`` over a socket, batches from ``RecordBatchBuilder``):
InitProducerId, the same Produce twice answers the same base offset and the log holds the
records once, a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER (45), a stale epoch
INVALID_PRODUCER_EPOCH (47).  The producer state survives a clean restart (SIGTERM: the
snapshot written at close) and a crash (SIGKILL: a roll snapshot plus a replay of the log
after it).  Finally librdkafka's idempotent producer writes 1000 records that read back
exactly once, in order.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from millrace.protocol import (
    CreateTopicsRequest,
    FetchRequest,
    InitProducerIdRequest,
    ProduceRequest,
)
from millrace.record.batch import RecordBatch, RecordBatchBuilder, iter_batches
from millrace.testing.broker_process import BrokerProcess
from millrace.testing.raw_connection import RawConnection

pytestmark = pytest.mark.integration

HOST = "127.0.0.1"
TOPIC = "idem"
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47


class RawClient(RawConnection):
    """One connection, one request at a time, with this test's requests."""

    def __init__(self, port: int) -> None:
        super().__init__(port, client_id="idem-test", timeout_s=10)

    # -------------------------------------------------------------- requests
    def create_topic(self, name: str, configs: dict[str, str]) -> None:
        cfg = CreateTopicsRequest.CreatableTopic.CreatableTopicConfig
        body = CreateTopicsRequest(timeout_ms=10000, topics=[CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=1, replication_factor=1, assignments=[],
            configs=[cfg(name=k, value=v) for k, v in configs.items()])])
        (result,) = self.call(body, 5).topics
        assert result.error_code == 0, result.error_message

    def init_producer_id(self) -> tuple[int, int]:
        resp = self.call(InitProducerIdRequest(transactional_id=None,
                                               transaction_timeout_ms=60000), 4)
        assert resp.error_code == 0
        return resp.producer_id, resp.producer_epoch

    def produce(self, records: bytes) -> tuple[int, int]:
        body = ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
            ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[
                ProduceRequest.TopicProduceData.PartitionProduceData(index=0,
                                                                     records=records)])])
        (topic,) = self.call(body, 9).responses
        (part,) = topic.partition_responses
        return part.error_code, part.base_offset

    def fetch_all(self) -> list[tuple[int, bytes]]:
        """(offset, value) of every record of the partition, from offset 0."""
        out: list[tuple[int, bytes]] = []
        offset = 0
        while True:
            body = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 24, topics=[
                FetchRequest.FetchTopic(topic=TOPIC, partitions=[
                    FetchRequest.FetchTopic.FetchPartition(
                        partition=0, fetch_offset=offset, partition_max_bytes=1 << 24)])],
                forgotten_topics_data=[])
            (part,) = self.call(body, 12).responses[0].partitions
            assert part.error_code == 0
            data = bytes(part.records or b"")
            if not data:
                return out
            for pos, h in iter_batches(data):
                for rec in RecordBatch(data, pos).records():
                    assert rec.value is not None
                    out.append((rec.offset, rec.value))
                offset = h.next_offset
            if offset >= part.high_watermark:
                return out


def idem_batch(pid: int, epoch: int, seq: int, values: list[str]) -> bytes:
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    now = int(time.time() * 1000)
    for v in values:
        b.append(now, None, v.encode())
    return b.build()


def test_duplicates_gaps_and_restarts(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path).start()
    try:
        port = broker.port
        with RawClient(port) as c:
            # small segments: rolls (and their snapshots) happen along the way
            c.create_topic(TOPIC, {"segment.bytes": "600"})
            pid, epoch = c.init_producer_id()
            assert pid >= 0 and epoch == 0
            batches: list[tuple[bytes, int]] = []  # (batch, original base offset)
            seq = 0
            for i in range(8):
                values = [f"r{i}-{j}" for j in range(1 + i % 3)]
                b = idem_batch(pid, epoch, seq, values)
                err, base = c.produce(b)
                assert err == 0
                batches.append((b, base))
                seq += len(values)
            # the same Produce again: the original base offset, nothing written
            for b, base in batches[-5:]:
                assert c.produce(b) == (0, base)
            # a gap
            assert c.produce(idem_batch(pid, epoch, seq + 1, ["gap"]))[0] == \
                OUT_OF_ORDER_SEQUENCE_NUMBER
            records = c.fetch_all()
        expected_count = seq
        assert [o for o, _ in records] == list(range(expected_count))
        assert len({v for _, v in records}) == expected_count

        # ---- SIGTERM + restart: the state comes from the snapshot written at close
        assert broker.stop() == 0
        part_dir = tmp_path / "logs" / f"{TOPIC}-0"
        assert any(n.endswith(".snapshot") for n in (p.name for p in part_dir.iterdir()))
        broker = BrokerProcess(tmp_path, port=port).start()
        with RawClient(port) as c:
            for b, base in batches[-5:]:
                assert c.produce(b) == (0, base)
            assert c.produce(idem_batch(pid, epoch, seq + 1, ["gap"]))[0] == \
                OUT_OF_ORDER_SEQUENCE_NUMBER
            # more data after the restart, which only a replay of the log can restore
            for i in range(8, 14):
                values = [f"r{i}-{j}" for j in range(1 + i % 3)]
                b = idem_batch(pid, epoch, seq, values)
                err, base = c.produce(b)
                assert err == 0 and base == seq
                batches.append((b, base))
                seq += len(values)
            # a new epoch fences the old one; its first batch must start at sequence 0
            assert c.produce(idem_batch(pid, epoch + 1, 5, ["x"]))[0] == \
                OUT_OF_ORDER_SEQUENCE_NUMBER

        # ---- SIGKILL + restart: the latest snapshot is older than the log end
        broker.kill()
        broker = BrokerProcess(tmp_path, port=port).start()
        assert f"{TOPIC}-0: rebuilding producer state from offset" in broker.logs()
        with RawClient(port) as c:
            for b, base in batches[-5:]:
                assert c.produce(b) == (0, base)
            assert c.produce(idem_batch(pid, epoch, seq + 1, ["gap"]))[0] == \
                OUT_OF_ORDER_SEQUENCE_NUMBER
            # the next in-order batch is appended at the log end
            b = idem_batch(pid, epoch, seq, ["last"])
            assert c.produce(b) == (0, seq)
            assert c.produce(b) == (0, seq)
            seq += 1
            # an epoch bump, then the old epoch is stale
            assert c.produce(idem_batch(pid, epoch + 1, 0, ["bumped"])) == (0, seq)
            seq += 1
            assert c.produce(idem_batch(pid, epoch, seq, ["stale"]))[0] == \
                INVALID_PRODUCER_EPOCH
            records = c.fetch_all()
        assert [o for o, _ in records] == list(range(seq))
        stored = [v for _, v in records]
        assert len(set(stored)) == len(stored) == seq  # every record exactly once
        assert stored[-2:] == [b"last", b"bumped"]
    finally:
        broker.kill()


def test_confluent_kafka_idempotent_producer_exactly_once_in_order(tmp_path: Path) -> None:
    ck = pytest.importorskip("confluent_kafka")
    ck_admin = pytest.importorskip("confluent_kafka.admin")
    n, partitions = 1000, 3
    topic = f"idem-ck-{uuid.uuid4().hex[:6]}"
    with BrokerProcess(tmp_path) as broker:
        admin = ck_admin.AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([ck_admin.NewTopic(topic, partitions, 1)])[topic].result(20)
        errors: list[object] = []

        def on_delivery(err: object, _msg: object) -> None:
            if err is not None:
                errors.append(err)

        producer = ck.Producer({"bootstrap.servers": broker.bootstrap,
                                "enable.idempotence": True, "acks": "all", "linger.ms": 2,
                                "batch.num.messages": 50, "message.timeout.ms": 30000})
        for i in range(n):
            producer.produce(topic, key=f"k{i % 17}".encode(), value=str(i).encode(),
                             on_delivery=on_delivery)
            producer.poll(0)
        assert producer.flush(30) == 0
        assert not errors, errors
        consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap,
                                "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                                "enable.auto.commit": False})
        got: dict[int, list[tuple[int, int]]] = {p: [] for p in range(partitions)}
        try:
            consumer.subscribe([topic])
            deadline = time.monotonic() + 30
            count = 0
            while count < n and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                assert msg.error() is None, msg.error()
                got[msg.partition()].append((msg.offset(), int(msg.value())))
                count += 1
            extra = consumer.poll(1.0)
            assert extra is None or extra.error() is not None
        finally:
            consumer.close()
    values = sorted(v for recs in got.values() for _, v in recs)
    assert values == list(range(n))  # exactly once
    for recs in got.values():
        assert [o for o, _ in recs] == list(range(len(recs)))  # dense offsets
        assert [v for _, v in recs] == sorted(v for _, v in recs)  # send order kept
