"""A broker killed (SIGKILL) and restarted in the middle of a stream loses no acknowledged
record (acks=all), and the idempotent producer keeps each partition's order.

The producer keeps sending while the broker is down: its requests fail (disconnects,
timeouts), the batches are retried with their sequence numbers once the broker is back.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CTopicPartition

from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.testing.broker_process import BrokerProcess, free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]

QUIET = {"log_level": 3, "log.connection.close": False}
PARTITIONS = 3
RECORDS = 20_000


def read_all(bootstrap: str, topic: str, expected: int) -> dict[int, list[int]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}",
                         "enable.auto.commit": False, **QUIET})
    out: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    try:
        consumer.assign([CTopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 60
        count = 0
        idle = 0
        while time.monotonic() < deadline and (count < expected or idle < 3):
            msg = consumer.poll(0.5)
            if msg is None:
                idle += 1
                continue
            idle = 0
            assert msg.error() is None, msg.error()
            out[msg.partition()].append(int(msg.value()))
            count += 1
    finally:
        consumer.close()
    return out


def test_kill_and_restart_mid_stream(tmp_path: Path) -> None:
    port = free_port()
    overrides = {"num.partitions": str(PARTITIONS)}
    topic = "restart"
    acked: dict[int, tuple[int, int]] = {}
    failed: dict[int, Exception] = {}
    lock = threading.Lock()

    def callback(i: int) -> Any:
        def done(metadata: Any, error: Exception | None) -> None:
            with lock:
                if error is None:
                    acked[i] = (metadata.partition, metadata.offset)
                else:
                    failed[i] = error
        return done

    brokers = [BrokerProcess(tmp_path, port=port, overrides=overrides).start()]

    half_sent = threading.Event()
    killed = threading.Event()
    acked_at_kill: list[int] = []

    def kill_and_restart() -> None:
        # Deterministic, not timed: the broker dies once half the stream has been handed to
        # the producer (some of it still queued or in flight); the rest is sent while it
        # is down and must be delivered after the restart.
        half_sent.wait(60)
        brokers[0].kill()
        with lock:
            acked_at_kill.append(len(acked))
        killed.set()
        time.sleep(0.5)
        brokers.append(BrokerProcess(tmp_path, port=port, overrides=overrides).start())

    config = {"bootstrap.servers": brokers[0].bootstrap, "acks": "all", "linger.ms": 5,
              "request.timeout.ms": 3000, "delivery.timeout.ms": 60000,
              "reconnect.backoff.max.ms": 200, "batch.size": 4096}
    killer = threading.Thread(target=kill_and_restart)
    try:
        with KafkaProducer(config) as producer:
            killer.start()
            for i in range(RECORDS):
                if i == RECORDS // 2:
                    half_sent.set()
                    assert killed.wait(60)
                producer.send(ProducerRecord(topic, str(i).encode(), partition=i % PARTITIONS),
                              callback(i))
                if i % 100 == 99:
                    time.sleep(0.005)  # a stream over about a second, not one burst
            killer.join()
            producer.flush(90)
        assert failed == {}
        assert len(acked) == RECORDS
        assert acked_at_kill and acked_at_kill[0] < RECORDS  # the kill came mid-stream
        got = read_all(brokers[-1].bootstrap, topic, RECORDS)
    finally:
        killer.join()
        brokers[-1].stop()
    everything = [v for values in got.values() for v in values]
    assert set(everything) == set(range(RECORDS))  # nothing acknowledged was lost
    for partition, values in got.items():
        first_seen: list[int] = []
        seen: set[int] = set()
        for v in values:
            if v not in seen:
                seen.add(v)
                first_seen.append(v)
        assert first_seen == sorted(first_seen), f"partition {partition} out of order"
        assert all(v % PARTITIONS == partition for v in first_seen)
    duplicates = len(everything) - len(set(everything))
    assert duplicates == 0, f"{duplicates} duplicates after the restart"
