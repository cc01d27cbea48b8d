"""Keyed placement equals librdkafka's ``murmur2_random`` (documented as Java's default).

Both producers write the same 10,000 keys to the same topic; every key must land in the
same partition.  librdkafka's mock cluster only has 4-partition topics (it has no
CreateTopics), so other partition counts are checked on our broker.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.testing.broker_process import BrokerProcess

pytestmark = pytest.mark.integration

QUIET = {"log_level": 3, "log.connection.close": False}
KEYS = 10_000


@pytest.fixture(scope="module")
def mock_cluster() -> Iterator[str]:
    handle = Producer({"test.mock.num.brokers": 3, "bootstrap.servers": "unused", **QUIET})
    metadata = handle.list_topics(timeout=10)
    yield ",".join(f"{b.host}:{b.port}" for b in metadata.brokers.values())
    handle.flush(5)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("placement")) as b:
        yield b


def confluent_placement(bootstrap: str, topic: str, keys: list[bytes]) -> dict[bytes, int]:
    placed: dict[bytes, int] = {}

    def delivered(err: object, msg: object) -> None:
        assert err is None, err
        placed[msg.key()] = msg.partition()  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random",
                         "linger.ms": 5, **QUIET})
    for key in keys:
        producer.produce(topic, b"v", key=key, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(30) == 0
    return placed


def our_placement(bootstrap: str, topic: str, keys: list[bytes]) -> dict[bytes, int]:
    with KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
        futures = [(key, producer.send(ProducerRecord(topic, b"v", key=key))) for key in keys]
        producer.flush(30)
    return {key: future.get(0).partition for key, future in futures}


def check_placement(bootstrap: str, topic: str, partitions: int) -> None:
    rng = random.Random(partitions)
    keys = list({rng.randbytes(rng.randrange(1, 33)) for _ in range(KEYS)})
    theirs = confluent_placement(bootstrap, topic, keys)
    ours = our_placement(bootstrap, topic, keys)
    assert len(ours) == len(theirs) == len(keys)
    mismatches = [k for k in keys if ours[k] != theirs[k]]
    assert mismatches == []
    assert len(set(ours.values())) == partitions


def test_placement_on_the_mock_cluster(mock_cluster: str) -> None:
    check_placement(mock_cluster, f"placement-{uuid.uuid4().hex[:6]}", 4)


@pytest.mark.parametrize("partitions", [7, 32])
def test_placement_on_our_broker(broker: BrokerProcess, partitions: int) -> None:
    topic = f"placement-{partitions}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)
    check_placement(broker.bootstrap, topic, partitions)
