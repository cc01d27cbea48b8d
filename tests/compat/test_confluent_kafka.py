"""librdkafka (confluent-kafka) against our broker: produce every codec and acks, consume,
admin operations, and a consumer group that rebalances."""

from __future__ import annotations

import time
import uuid

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # noqa: E402

from millrace.testing.broker_process import BrokerProcess  # noqa: E402

pytestmark = [pytest.mark.compat, pytest.mark.integration]


def _produce(broker: BrokerProcess, topic: str, n: int, **conf: object) -> list[tuple[int, int]]:
    delivered: list[tuple[int, int]] = []
    errors: list[object] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append((msg.partition(), msg.offset()))  # type: ignore[attr-defined]

    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5,
                  "message.timeout.ms": 20000, **conf})
    for i in range(n):
        p.produce(topic, key=f"k{i}".encode(), value=f"value-{i}".encode() * 3,
                  headers=[("h", f"{i}".encode())], on_delivery=on_delivery)
        p.poll(0)
    remaining = p.flush(30)
    assert remaining == 0, "producer could not flush"
    assert not errors, errors
    return delivered


def _consume_all(broker: BrokerProcess, topic: str, expected: int,
                 group: str | None = None, timeout: float = 30.0) -> list[object]:
    c = Consumer({"bootstrap.servers": broker.bootstrap,
                  "group.id": group or f"g-{uuid.uuid4().hex[:8]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    out: list[object] = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out.append(msg)
        if out:
            c.commit(asynchronous=False)
    finally:
        c.close()
    return out


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_and_consume_every_codec(broker: BrokerProcess, codec: str) -> None:
    topic = f"codec-{codec}"
    delivered = _produce(broker, topic, 200, **{"compression.type": codec})
    assert len(delivered) == 200
    msgs = _consume_all(broker, topic, 200)
    assert len(msgs) == 200
    values = sorted(m.value() for m in msgs)  # type: ignore[attr-defined]
    assert values == sorted(f"value-{i}".encode() * 3 for i in range(200))
    m0 = msgs[0]
    assert m0.headers()[0][0] == "h"  # type: ignore[attr-defined]
    offsets = [m.offset() for m in msgs]  # type: ignore[attr-defined]
    assert offsets == list(range(200))  # one partition, offsets dense from 0


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_produce_acks(broker: BrokerProcess, acks: str) -> None:
    topic = f"acks-{acks}"
    delivered = _produce(broker, topic, 50, acks=acks)
    assert len(delivered) == 50
    if acks != "0":  # acks=0 gets no response, so librdkafka reports offset -1001
        assert sorted(off for _, off in delivered) == list(range(50))
    assert len(_consume_all(broker, topic, 50)) == 50


def test_admin_create_describe_delete(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    name = f"admin-{uuid.uuid4().hex[:6]}"
    fs = admin.create_topics([NewTopic(name, num_partitions=3, replication_factor=1,
                                       config={"retention.ms": "3600000"})])
    fs[name].result(15)
    md = admin.list_topics(timeout=10)
    assert name in md.topics and len(md.topics[name].partitions) == 3
    again = admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])
    with pytest.raises(KafkaException) as e:
        again[name].result(15)
    assert e.value.args[0].name() == "TOPIC_ALREADY_EXISTS"
    res = ConfigResource(ConfigResource.Type.TOPIC, name)
    configs = admin.describe_configs([res])[res].result(15)
    assert configs["retention.ms"].value == "3600000"
    assert configs["cleanup.policy"].value == "delete"
    admin.delete_topics([name])[name].result(15)
    md = admin.list_topics(timeout=10)
    assert name not in md.topics


def test_offsets_committed_and_listed(broker: BrokerProcess) -> None:
    topic = "committed"
    _produce(broker, topic, 10)
    group = "committer"
    assert len(_consume_all(broker, topic, 10, group=group)) == 10
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        committed = c.committed([TopicPartition(topic, 0)], timeout=10)
        assert committed[0].offset == 10
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        assert (lo, hi) == (0, 10)
    finally:
        c.close()


def test_group_rebalances_when_a_member_leaves(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = f"rebalance-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=1)])[topic] \
        .result(15)
    group = f"grp-{uuid.uuid4().hex[:6]}"
    conf = {"bootstrap.servers": broker.bootstrap, "group.id": group,
            "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500}
    a, b = Consumer(conf), Consumer(conf)
    try:
        a.subscribe([topic])
        b.subscribe([topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            a.poll(0.2)
            b.poll(0.2)
            if len(a.assignment()) + len(b.assignment()) == 4 and a.assignment() \
                    and b.assignment():
                break
        pa = {p.partition for p in a.assignment()}
        pb = {p.partition for p in b.assignment()}
        assert pa and pb and not (pa & pb) and pa | pb == {0, 1, 2, 3}
        b.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(a.assignment()) != 4:
            a.poll(0.2)
        assert {p.partition for p in a.assignment()} == {0, 1, 2, 3}
    finally:
        a.close()


def test_admin_lists_and_describes_groups(broker: BrokerProcess) -> None:
    topic = "listed"
    _produce(broker, topic, 5)
    group = f"listed-{uuid.uuid4().hex[:6]}"
    assert len(_consume_all(broker, topic, 5, group=group)) == 5
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = admin.list_consumer_groups().result(15)
    ids = {g.group_id for g in listed.valid}
    assert group in ids
    desc = admin.describe_consumer_groups([group])[group].result(15)
    assert desc.group_id == group
    assert desc.state.name == "EMPTY"  # the consumer closed
    offsets = admin.list_consumer_group_offsets(
        [confluent_kafka.ConsumerGroupTopicPartitions(group)])[group].result(15)
    assert [(tp.topic, tp.partition, tp.offset) for tp in offsets.topic_partitions] == [
        (topic, 0, 5)]
