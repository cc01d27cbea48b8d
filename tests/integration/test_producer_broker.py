"""Our producer against real brokers, read back by an independent client (confluent-kafka).

Two targets: our own broker (``millrace broker`` as a child process) and librdkafka's mock
cluster (three in-memory C brokers on loopback inside this process).  Every record is
checked on the way back: partition, offset, key, value, headers and timestamp.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition

from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.client.producer._internals.built_in_partitioner import partition_for_key
from millrace.testing.broker_process import BrokerProcess

pytestmark = pytest.mark.integration

QUIET = {"log_level": 3, "log.connection.close": False}
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
T0 = 1_700_000_000_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data: Path = tmp_path_factory.mktemp("producer-broker")
    with BrokerProcess(data, overrides={"num.partitions": "3"}) as b:
        yield b
    assert b.proc is not None and b.proc.returncode == 0, b.logs()


@pytest.fixture(scope="module")
def mock_cluster() -> Iterator[str]:
    """librdkafka's mock cluster lives as long as the handle that created it."""
    handle = Producer({"test.mock.num.brokers": 3, "bootstrap.servers": "unused", **QUIET})
    metadata = handle.list_topics(timeout=10)
    yield ",".join(f"{b.host}:{b.port}" for b in metadata.brokers.values())
    handle.flush(5)


def read_back(bootstrap: str, topic: str, partitions: int, expected: int,
              timeout: float = 30.0) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         **QUIET})
    try:
        consumer.assign([CTopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out.append(msg)
        time.sleep(0.2)  # nothing more may come
        while (msg := consumer.poll(0.1)) is not None:
            out.append(msg)
        return out
    finally:
        consumer.close()


def produce(bootstrap: str, topic: str, n: int, **config: Any) -> tuple[list[Any], list]:
    records = []
    for i in range(n):
        key = None if i % 7 == 0 else f"key-{i % 13}".encode()
        headers = [("i", str(i).encode()), ("empty", None)] if i % 3 else None
        records.append(ProducerRecord(topic, f"value-{i}".encode() * (1 + i % 5), key=key,
                                      timestamp=T0 + i, headers=headers))
    settings = {"bootstrap.servers": bootstrap, "linger.ms": 2, **config}
    with KafkaProducer(settings) as producer:
        futures = [producer.send(r) for r in records]
        producer.flush(30)
        metadata = [f.get(10) for f in futures]
    return records, metadata


def check(records: list, metadata: list, messages: list[Any], partitions: int,
          offsets_known: bool = True, mock: bool = False) -> None:
    assert len(messages) == len(records)
    by_value = {m.value(): m for m in messages}
    assert len(by_value) == len(records)
    for record, md in zip(records, metadata):
        msg = by_value[record.value]
        assert msg.topic() == record.topic
        assert msg.key() == record.key
        assert msg.timestamp() == (1, record.timestamp)  # CreateTime
        got_headers = [(k, v) for k, v in (msg.headers() or [])]
        assert got_headers == (record.headers or [])
        assert msg.partition() == md.partition
        if record.key is not None:
            assert md.partition == partition_for_key(record.key, partitions)
        if offsets_known:
            assert msg.offset() == md.offset
        else:
            assert md.offset == -1
        if not mock:  # the mock answers log_append_time_ms=1234 even for CreateTime topics
            assert md.timestamp == record.timestamp
        assert md.serialized_value_size == len(record.value)


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_to_our_broker(broker: BrokerProcess, codec: str) -> None:
    topic = f"codec-{codec}"
    records, metadata = produce(broker.bootstrap, topic, 300, **{"compression.type": codec})
    check(records, metadata, read_back(broker.bootstrap, topic, 3, 300), 3)


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_every_acks_setting_to_our_broker(broker: BrokerProcess, acks: str) -> None:
    topic = f"acks-{acks}"
    records, metadata = produce(broker.bootstrap, topic, 200, acks=acks)
    check(records, metadata, read_back(broker.bootstrap, topic, 3, 200), 3,
          offsets_known=acks != "0")


def test_many_records_and_big_batches(broker: BrokerProcess) -> None:
    topic = "bulk"
    with KafkaProducer({"bootstrap.servers": broker.bootstrap, "batch.size": 65536,
                        "compression.type": "lz4"}) as producer:
        futures = [producer.send(ProducerRecord(topic, i.to_bytes(4, "big") * 25))
                   for i in range(20_000)]
        producer.flush(60)
    assert all(f.exception(0) is None for f in futures)
    messages = read_back(broker.bootstrap, topic, 3, 20_000, timeout=60)
    assert sorted(int.from_bytes(m.value()[:4], "big") for m in messages) == list(range(20_000))
    m = producer.metrics()["producer-metrics"]
    assert m["record-send-total"] == 20_000 and m["record-error-total"] == 0


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_to_librdkafkas_mock_cluster(mock_cluster: str, codec: str) -> None:
    topic = f"mock-{codec}-{uuid.uuid4().hex[:6]}"
    records, metadata = produce(mock_cluster, topic, 300, **{"compression.type": codec})
    partitions = 4  # the mock creates topics with 4 partitions
    check(records, metadata, read_back(mock_cluster, topic, partitions, 300), partitions,
          mock=True)
    assert len({md.partition for md in metadata}) > 1


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_every_acks_setting_to_librdkafkas_mock_cluster(mock_cluster: str, acks: str) -> None:
    topic = f"mock-acks-{acks}-{uuid.uuid4().hex[:6]}"
    records, metadata = produce(mock_cluster, topic, 200, acks=acks)
    check(records, metadata, read_back(mock_cluster, topic, 4, 200), 4,
          offsets_known=acks != "0", mock=True)


def test_each_partition_goes_to_its_leader_on_the_mock(mock_cluster: str) -> None:
    topic = f"mock-leaders-{uuid.uuid4().hex[:6]}"
    with KafkaProducer({"bootstrap.servers": mock_cluster}) as producer:
        infos = producer.partitions_for(topic)
        futures = [producer.send(ProducerRecord(topic, b"v", partition=p.partition))
                   for p in infos]
        producer.flush(30)
        leaders = {p.leader.id for p in infos if p.leader is not None}
        assert len(leaders) >= 1 and len(infos) == 4
        # each leader got its partitions' records over its own connection
        assert all(producer._client.api_versions(node) for node in leaders)
    assert all(f.get(0).offset == 0 for f in futures)
