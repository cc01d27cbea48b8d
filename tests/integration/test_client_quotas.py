"""Client quotas against a real broker process: a client id limited to 1 MiB/s through
AlterClientQuotas is held near that rate by the broker (KIP-219: answer at once, then
mute the connection), measured by the broker's own log end offsets, while an unthrottled
client on the same broker at the same time keeps moving much more.

Clients: confluent-kafka (librdkafka ignores ``throttle_time_ms``, so only the broker's
mute holds it; its throttle callback shows the broker reported the throttle), kafka-python
(which also backs off itself), and a confluent-kafka consumer under
``consumer_byte_rate`` (throttled fetches come back without data); and raw Metadata
requests under ``request_percentage`` (the answer says how long, the next request waits
that long on the broker).  In a two-broker ZooKeeper cluster, a quota set through one
broker throttles on the other.  Rates are asserted
with wide margins only (<= 2x and >= 0.3x the quota over 10 s; the unthrottled client
>= 5x the throttled one); the ratio is measured in ``bench/quotas.py``.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from millrace.broker.quota.entity import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
)
from millrace.launcher.local_cluster import LocalCluster
from millrace.protocol.types import AlterClientQuotasRequest, MetadataRequest, ProduceRequest
from millrace.record import RecordBatchBuilder
from millrace.testing.broker_process import BrokerProcess
from millrace.testing.raw_connection import RawConnection

with warnings.catch_warnings():  # kafka-python's schema loading uses a deprecated call
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaProducer as KpProducer
    from kafka.errors import KafkaTimeoutError

pytestmark = [pytest.mark.integration, pytest.mark.slow]

QUIET: dict[str, Any] = {"log_level": 3, "log.connection.close": False}
QUOTA = 1024 * 1024  # bytes/s
RUN_S = 10.0
RECORD = bytes(1024)
FREE_CAP = 150 * 1024 * 1024  # the unthrottled producer stops here (disk, not speed)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data: Path = tmp_path_factory.mktemp("client-quotas")
    with BrokerProcess(data) as b:
        yield b
    assert b.proc is not None and b.proc.returncode == 0, b.logs()


def set_quota(broker: BrokerProcess, client_id: str, key: str, value: float) -> None:
    """AlterClientQuotas v1 for ``clients/<client_id>``, as kafka-configs sends it."""
    req = AlterClientQuotasRequest(validate_only=False, entries=[
        AlterClientQuotasRequest.EntryData(
            entity=[AlterClientQuotasRequest.EntryData.EntityData(
                entity_type="client-id", entity_name=client_id)],
            ops=[AlterClientQuotasRequest.EntryData.OpData(key=key, value=value,
                                                           remove=False)])])
    with RawConnection(broker.port) as conn:
        resp = conn.call(req, 1)
    assert [e.error_code for e in resp.entries] == [0], resp


def create_topics(broker: BrokerProcess, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    futures = admin.create_topics([NewTopic(n, 1, 1) for n in names], operation_timeout=10)
    for f in futures.values():
        f.result(15)


def end_offset(broker: BrokerProcess, topic: str) -> int:
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "quota-test", **QUIET})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    finally:
        c.close()


def produce_for(bootstrap: str, client_id: str, topic: str, seconds: float,
                cap_records: int, throttles: list[int], ready: threading.Barrier) -> None:
    """librdkafka producing 1 KiB records to ``topic`` as fast as it can for ``seconds``;
    what is still queued then is purged (only what the broker took counts)."""
    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "acks": "1",
                  "linger.ms": 5, "compression.type": "none", "enable.idempotence": False,
                  "queue.buffering.max.kbytes": 16 * 1024,
                  "throttle_cb": lambda event: throttles.append(event.throttle_time),
                  **QUIET})
    p.list_topics(topic, timeout=10)
    ready.wait(10)
    deadline = time.monotonic() + seconds
    sent = 0
    while time.monotonic() < deadline and sent < cap_records:
        try:
            p.produce(topic, RECORD, partition=0)
            sent += 1
        except BufferError:
            p.poll(0.01)
            continue
        if sent % 1000 == 0:
            p.poll(0)
    p.poll(0)
    p.purge()
    p.flush(5)


def run_side_by_side(broker: BrokerProcess, throttled: str, free: str,
                     rdk_throttles: list[int]) -> tuple[int, int]:
    ready = threading.Barrier(3)
    threads = [
        threading.Thread(target=produce_for, args=(broker.bootstrap, throttled, throttled,
                                                   RUN_S, 1 << 40, rdk_throttles, ready)),
        threading.Thread(target=produce_for, args=(broker.bootstrap, free, free, RUN_S,
                                                   FREE_CAP // len(RECORD), [], ready)),
    ]
    for t in threads:
        t.start()
    ready.wait(15)
    time.sleep(RUN_S)
    # what the broker accepted within the run: read now, before the purge reaches it
    counted = end_offset(broker, throttled) * len(RECORD), end_offset(broker, free) * len(RECORD)
    for t in threads:
        t.join(30)
    return counted


def test_librdkafka_producer_held_to_its_quota_while_another_is_not(
        broker: BrokerProcess) -> None:
    throttled, free = "rdk-throttled", "rdk-free"
    create_topics(broker, throttled, free)
    set_quota(broker, throttled, PRODUCER_BYTE_RATE, QUOTA)
    throttles: list[int] = []
    held, moved = run_side_by_side(broker, throttled, free, throttles)
    rate = held / RUN_S
    assert 0.3 * QUOTA <= rate <= 2 * QUOTA, f"{rate / QUOTA:.2f}x the quota"
    assert moved >= 5 * held, f"unthrottled {moved} B vs throttled {held} B"
    # librdkafka saw throttle_time_ms in the responses (it reports, does not back off)
    assert throttles and max(throttles) > 0


def test_kafka_python_producer_held_to_its_quota(broker: BrokerProcess) -> None:
    client_id = "kp-throttled"
    create_topics(broker, client_id)
    set_quota(broker, client_id, PRODUCER_BYTE_RATE, QUOTA)
    p = KpProducer(bootstrap_servers=broker.bootstrap, client_id=client_id, acks=1,
                   linger_ms=5, batch_size=256 * 1024)
    pending: deque[Any] = deque()  # kafka-python's buffer is unbounded: keep 4 MiB queued
    try:
        deadline = time.monotonic() + RUN_S
        while time.monotonic() < deadline:
            if len(pending) >= 4096:
                try:
                    pending.popleft().get(timeout=max(deadline - time.monotonic(), 0.01))
                except KafkaTimeoutError:
                    break
                continue
            pending.append(p.send(client_id, RECORD, partition=0))
        held = end_offset(broker, client_id) * len(RECORD)
    finally:
        p.close(timeout=30)  # what is still queued (4 MiB at most) drains at the quota
    rate = held / RUN_S
    assert 0.3 * QUOTA <= rate <= 2 * QUOTA, f"{rate / QUOTA:.2f}x the quota"


def consume_for(bootstrap: str, client_id: str, topic: str, seconds: float) -> int:
    """Bytes of record values a librdkafka consumer reads from ``topic`` in ``seconds``."""
    c = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id,
                  "group.id": client_id, "enable.auto.commit": False, **QUIET})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got = 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for msg in c.consume(1000, 0.2):
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                got += len(msg.value() or b"")
        return got
    finally:
        c.close()


def test_librdkafka_consumer_held_to_its_fetch_quota(broker: BrokerProcess) -> None:
    topic, throttled, free = "fetched", "rdk-slow-reader", "rdk-fast-reader"
    create_topics(broker, topic)
    loaded = 32 * 1024  # 32 MiB of 1 KiB records: three quota windows' worth
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, **QUIET})
    for _ in range(loaded):
        while True:
            try:
                p.produce(topic, RECORD, partition=0)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(60) == 0
    set_quota(broker, throttled, CONSUMER_BYTE_RATE, QUOTA)
    result: dict[str, int] = {}

    def read(client_id: str) -> None:
        result[client_id] = consume_for(broker.bootstrap, client_id, topic, RUN_S)

    threads = [threading.Thread(target=read, args=(c,)) for c in (throttled, free)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(RUN_S + 30)
    rate = result[throttled] / RUN_S
    assert 0.3 * QUOTA <= rate <= 2 * QUOTA, f"{rate / QUOTA:.2f}x the quota"
    assert result[free] == loaded * len(RECORD)  # the other reader got everything


def test_request_percentage_throttles_and_mutes_a_busy_client(broker: BrokerProcess) -> None:
    set_quota(broker, "rq-busy", REQUEST_PERCENTAGE, 0.001)  # 10 us of handler time / s

    def throttles(client_id: str, n: int) -> list[tuple[int, float]]:
        """(throttle_time_ms, seconds waited) of up to ``n`` Metadata requests, stopping
        one request after the first throttled answer."""
        out: list[tuple[int, float]] = []
        with RawConnection(broker.port, client_id=client_id) as conn:
            for _ in range(n):
                started = time.monotonic()
                resp = conn.call(MetadataRequest(topics=None), 9)
                out.append((resp.throttle_time_ms, time.monotonic() - started))
                if len(out) >= 2 and out[-2][0] > 0:
                    break
        return out

    busy = throttles("rq-busy", 200)
    assert busy[-2][0] > 0, busy
    assert busy[-2][0] <= 1000  # the request quota's throttle is capped at one window
    # the request after a throttled answer waited out the mute on the broker's side
    assert busy[-1][1] >= busy[-2][0] / 1000 / 2, busy[-2:]
    assert all(ms == 0 for ms, _ in throttles("rq-free", 50))  # no quota, never throttled


def test_a_quota_set_through_one_broker_throttles_on_another(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """In a ZooKeeper cluster the quota travels as a config change notification: set
    through broker 1, broker 2 charges a produce against it (bytes count even when the
    partitions fail, as Kafka's)."""
    directory: Path = tmp_path_factory.mktemp("quota-cluster")
    with LocalCluster(directory, 2, overrides={"zookeeper.session.timeout.ms": "6000",
                                              "offsets.topic.replication.factor": "2",
                                              "transaction.state.log.replication.factor": "2",
                                              "transaction.state.log.min.isr": "1"}) as c:
        set_quota(c.brokers[1], "zk-throttled", PRODUCER_BYTE_RATE, 1024)
        records = RecordBatchBuilder()
        records.append(0, None, bytes(12 * 1024))  # 12 kB: 1.2x a 10 s window's 10 kB
        produce = ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
            ProduceRequest.TopicProduceData(name="no-such-topic", partition_data=[
                ProduceRequest.TopicProduceData.PartitionProduceData(
                    index=0, records=records.build())])])

        def throttle_on_broker_2(client_id: str) -> int:
            with RawConnection(c.brokers[2].port, client_id=client_id) as conn:
                return int(conn.call(produce, 9).throttle_time_ms)

        deadline = time.monotonic() + 15
        while (throttle := throttle_on_broker_2("zk-throttled")) == 0 and \
                time.monotonic() < deadline:
            time.sleep(0.5)  # the notification is on its way
        assert throttle > 0
        assert throttle_on_broker_2("zk-free") == 0  # another client id: no quota
