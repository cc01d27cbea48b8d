"""Transactions with the three peer clients against a millrace broker: each one's
transactional producer commits and aborts, and each one's read_committed consumer sees
exactly the committed records (the aborted ones were really written: read_uncommitted sees
them).  librdkafka also runs a consume-transform-produce loop with
``send_offsets_to_transaction``: the group's offsets move only with committed transactions.
"""

from __future__ import annotations

import asyncio
import time
import warnings

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from millrace.testing.broker_process import BrokerProcess
from millrace.testing.confluent_admin import create_topic

with warnings.catch_warnings():  # kafka-python 3 loads its schemas with a deprecated API
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka

pytestmark = [pytest.mark.integration]

COMMITTED = [b"c0", b"c1", b"c2", b"c3"]
ABORTED = [b"a0", b"a1", b"a2"]


def _create(broker: BrokerProcess, *topics: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for t in topics:
        create_topic(admin, NewTopic(t, partitions, 1))


def _read(broker: BrokerProcess, topic: str, isolation: str, expected: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"judge-{time.time_ns()}",
                  "isolation.level": isolation, "enable.auto.commit": False})
    c.assign([CkTopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < expected and time.monotonic() < deadline:
            got += [m.value() for m in c.consume(100, 0.5) if m.error() is None]
        got += [m.value() for m in c.consume(100, 1.0) if m.error() is None]  # no extras
    finally:
        c.close()
    return got


def _check(broker: BrokerProcess, topic: str) -> None:
    assert _read(broker, topic, "read_committed", len(COMMITTED)) == COMMITTED
    assert sorted(_read(broker, topic, "read_uncommitted", 7)) == sorted(COMMITTED + ABORTED)


def test_kafka_python(broker: BrokerProcess) -> None:
    _create(broker, "txn-kp")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        p = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kp-1")
        p.init_transactions()
        p.begin_transaction()
        for v in COMMITTED[:3]:
            p.send("txn-kp", v, partition=0)
        p.commit_transaction()
        p.begin_transaction()
        for v in ABORTED:
            p.send("txn-kp", v, partition=0)
        p.flush()
        p.abort_transaction()
        p.begin_transaction()
        p.send("txn-kp", COMMITTED[3], partition=0)
        p.commit_transaction()
        p.close()
        c = kafka.KafkaConsumer("txn-kp", bootstrap_servers=broker.bootstrap,
                                isolation_level="read_committed",
                                auto_offset_reset="earliest", consumer_timeout_ms=5000)
        assert [m.value for m in c] == COMMITTED
        c.close()
    _check(broker, "txn-kp")


def test_aiokafka(broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    _create(broker, "txn-aio")

    async def run() -> list[bytes]:
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="aio-1")
        await p.start()
        try:
            async with p.transaction():
                for v in COMMITTED[:3]:
                    await p.send("txn-aio", v, partition=0)
            await p.begin_transaction()
            for v in ABORTED:
                await (await p.send("txn-aio", v, partition=0))
            await p.abort_transaction()
            async with p.transaction():
                await p.send("txn-aio", COMMITTED[3], partition=0)
        finally:
            await p.stop()
        c = AIOKafkaConsumer("txn-aio", bootstrap_servers=broker.bootstrap,
                             isolation_level="read_committed", auto_offset_reset="earliest")
        await c.start()
        got: list[bytes] = []
        try:
            deadline = time.monotonic() + 20
            while len(got) < len(COMMITTED) and time.monotonic() < deadline:
                for records in (await c.getmany(timeout_ms=500)).values():
                    got += [r.value for r in records]
        finally:
            await c.stop()
        return got

    assert asyncio.run(run()) == COMMITTED
    _check(broker, "txn-aio")


def test_librdkafka_copier_commits_offsets_with_its_output(broker: BrokerProcess) -> None:
    _create(broker, "txn-in", "txn-out", partitions=3)
    seed = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    for i in range(300):
        seed.produce("txn-in", b"v%03d" % i, partition=i % 3)
    assert seed.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "copier",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["txn-in"])
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "copier-1"})
    producer.init_transactions(30)
    copied, transactions = 0, 0
    deadline = time.monotonic() + 90
    try:
        while copied < 300 and time.monotonic() < deadline:
            batch = [m for m in consumer.consume(50, 1.0) if m.error() is None]
            if not batch:
                continue
            producer.begin_transaction()
            for m in batch:
                producer.produce("txn-out", m.value(), partition=m.partition())
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()), consumer.consumer_group_metadata(),
                30)
            if transactions % 3 == 2:  # every third transaction is aborted and redone
                assert producer.flush(30) == 0
                producer.abort_transaction(30)
                for tp in consumer.committed(consumer.assignment(), 30):
                    consumer.seek(CkTopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))
            else:
                producer.commit_transaction(30)
                copied += len(batch)
            transactions += 1
        committed = consumer.committed([CkTopicPartition("txn-in", p) for p in range(3)], 30)
    finally:
        consumer.close()
    assert copied == 300 and transactions >= 3
    assert sorted((tp.partition, tp.offset) for tp in committed) == [(0, 100), (1, 100),
                                                                     (2, 100)]
    out = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "judge-out",
                    "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    out.subscribe(["txn-out"])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 300 and time.monotonic() < deadline:
        got += [m.value() for m in out.consume(200, 0.5) if m.error() is None]
    out.close()
    assert sorted(got) == sorted(b"v%03d" % i for i in range(300))
