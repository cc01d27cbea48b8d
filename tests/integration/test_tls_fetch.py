"""Fetch over TLS sends file regions by reading them (no sendfile through encryption):
several consumers reading the same large log at once over SSL get every record, intact
and in order, as a plaintext consumer does (a shared file offset once made concurrent
TLS fetches send each other's bytes)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from millrace.launcher.broker_process import BrokerProcess, free_port
from millrace.security.certs import CertificateAuthority, write_pem

pytestmark = [pytest.mark.integration]

RECORDS = 20_000
VALUE = 1000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int,
                                                                          Path]]:
    data: Path = tmp_path_factory.mktemp("tls-fetch")
    ca = CertificateAuthority.generate()
    write_pem(data / "ca.pem", ca.cert_pem)
    write_pem(data / "broker.pem", ca.issue("broker", hosts=["127.0.0.1"]).key_and_chain_pem,
              private=True)
    plain, tls = free_port(), free_port()
    with BrokerProcess(data, port=plain, overrides={
            "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls}",
            "ssl.keystore.location": str(data / "broker.pem"),
            "log.segment.bytes": str(4 * 1024 * 1024)}) as b:  # regions span segments
        yield b, tls, data / "ca.pem"


def _read_all(config: dict[str, str], topic: str, out: list[bytes]) -> None:
    consumer = Consumer({**config, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "max.partition.fetch.bytes": 4 << 20,
                         "fetch.max.bytes": 16 << 20})
    consumer.assign([CkTopicPartition(topic, 0, 0)])
    try:
        misses = 0
        while len(out) < RECORDS and misses < 60:
            msg = consumer.poll(0.5)
            if msg is None:
                misses += 1
                continue
            assert msg.error() is None, msg.error()
            out.append(msg.value())
    finally:
        consumer.close()


def test_concurrent_tls_consumers_read_the_log_intact(
        broker: tuple[BrokerProcess, int, Path]) -> None:
    b, tls_port, ca = broker
    topic = f"big-{uuid.uuid4().hex[:6]}"
    producer = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5,
                         "compression.type": "none"})
    expected = [f"{i:08d}".encode() + bytes([i % 251]) * (VALUE - 8) for i in range(RECORDS)]
    for value in expected:
        while True:
            try:
                producer.produce(topic, value, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    tls = {"bootstrap.servers": f"127.0.0.1:{tls_port}", "security.protocol": "SSL",
           "ssl.ca.location": str(ca)}
    results: list[list[bytes]] = [[] for _ in range(3)]
    threads = [threading.Thread(target=_read_all, args=(tls, topic, r)) for r in results]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for got in results:
        assert len(got) == RECORDS
        assert got == expected
