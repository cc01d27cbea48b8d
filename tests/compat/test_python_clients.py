"""kafka-python and aiokafka against our broker."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from millrace.testing.broker_process import BrokerProcess

pytestmark = [pytest.mark.compat, pytest.mark.integration]


def test_kafka_python_produce_consume_group(broker: BrokerProcess) -> None:
    kafka = pytest.importorskip("kafka")
    topic = f"kp-{uuid.uuid4().hex[:6]}"
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all",
                                   compression_type="gzip", linger_ms=5)
    futures = [producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
               for i in range(100)]
    producer.flush(30)
    offsets = sorted(f.get(timeout=10).offset for f in futures)
    producer.close()
    assert offsets == list(range(100))
    consumer = kafka.KafkaConsumer(topic, bootstrap_servers=broker.bootstrap,
                                   group_id=f"kpg-{uuid.uuid4().hex[:6]}",
                                   auto_offset_reset="earliest", consumer_timeout_ms=15000)
    try:
        values = []
        for msg in consumer:
            values.append(msg.value)
            if len(values) == 100:
                break
        consumer.commit()
    finally:
        consumer.close()
    assert sorted(values) == sorted(f"v{i}".encode() for i in range(100))


def test_kafka_python_admin(broker: BrokerProcess) -> None:
    kafka = pytest.importorskip("kafka")
    from kafka.admin import NewTopic
    admin = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        name = f"kpa-{uuid.uuid4().hex[:6]}"
        admin.create_topics([NewTopic(name, num_partitions=2, replication_factor=1)])
        assert name in admin.list_topics()
        admin.delete_topics([name])
        assert name not in admin.list_topics()
    finally:
        admin.close()


def test_kafka_python_describe_log_dirs(broker: BrokerProcess) -> None:
    """kafka-python's ``describe_log_dirs`` (the kafka-log-dirs of Python tools): the
    version it picks decodes, and a topic written to shows its size on disk."""
    kafka = pytest.importorskip("kafka")
    topic = f"kpl-{uuid.uuid4().hex[:6]}"
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    for _ in range(50):
        producer.send(topic, partition=0, value=b"x" * 100)
    producer.flush(30)
    producer.close()
    admin = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        (answer,) = admin.describe_log_dirs()
    finally:
        admin.close()
    (log_dir,) = answer["log_dirs"]
    assert log_dir["error_code"] == 0 and log_dir["log_dir"].endswith("logs")
    sizes = {(t["name"], p["partition_index"]): p["partition_size"]
             for t in log_dir["topics"] for p in t["partitions"]}
    assert sizes[(topic, 0)] > 50 * 100
    assert log_dir["total_bytes"] >= log_dir["usable_bytes"] > 0  # it asks v4


def test_aiokafka_produce_consume_group(broker: BrokerProcess) -> None:
    aiokafka = pytest.importorskip("aiokafka")
    topic = f"aio-{uuid.uuid4().hex[:6]}"

    async def run() -> list[bytes]:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
        await producer.start()
        try:
            for i in range(50):
                await producer.send_and_wait(topic, f"a{i}".encode(), key=b"k")
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap,
                                             group_id=f"aiog-{uuid.uuid4().hex[:6]}",
                                             auto_offset_reset="earliest")
        await consumer.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(30):
                async for msg in consumer:
                    got.append(msg.value)
                    if len(got) == 50:
                        break
            await consumer.commit()
        finally:
            await consumer.stop()
        return got

    got = asyncio.run(run())
    assert got == [f"a{i}".encode() for i in range(50)]
