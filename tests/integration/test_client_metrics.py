"""millrace's producer and consumer metrics against a real ``millrace broker`` process:
record-send-total and records-consumed-total equal what was produced, records-lag-max is 0
once everything was read, the Prometheus exposition served by ``serve_client_metrics`` is
scraped over HTTP and parsed with prometheus_client's own parser, and ``millrace perf
produce/consume --print-metrics`` print the table (child processes, as a user runs them)."""

from __future__ import annotations

import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from millrace.client.admin import KafkaAdminClient, NewTopic
from millrace.client.consumer import KafkaConsumer, TopicPartition
from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.client.prometheus import serve_client_metrics
from millrace.testing.broker_process import BrokerProcess

pytestmark = pytest.mark.integration

N = 500
FETCH = "consumer-fetch-manager-metrics"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data: Path = tmp_path_factory.mktemp("client-metrics-broker")
    with BrokerProcess(data) as b:
        yield b
    assert b.proc is not None and b.proc.returncode == 0, b.logs()


def create_topic(broker: BrokerProcess, partitions: int) -> str:
    name = f"metrics-{uuid.uuid4().hex[:8]}"
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)
    return name


def scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert response.status == 200
        text = response.read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def poll_until(consumer: KafkaConsumer[Any, Any], done: Any, timeout_s: float = 30) -> int:
    got = 0
    deadline = time.monotonic() + timeout_s
    while not done(got):
        assert time.monotonic() < deadline, "condition not reached"
        got += consumer.poll(200).count()
    return got


def test_counts_lag_and_the_http_exposition(broker: BrokerProcess) -> None:
    topic = create_topic(broker, 3)
    with KafkaProducer({"bootstrap.servers": broker.bootstrap, "client.id": "mp",
                        "linger.ms": 5}) as producer:
        for i in range(N):
            producer.send(ProducerRecord(topic, f"v{i}".encode()))
        producer.flush(30)
        m = producer.metrics()
        assert m["producer-metrics"]["record-send-total"] == N
        assert m["producer-metrics"]["record-error-total"] == 0
        assert m[f"producer-topic-metrics.{topic}"]["record-send-total"] == N
        assert m["producer-metrics"]["requests-in-flight"] == 0
        assert m["producer-metrics"]["request-latency-max"] > 0

        server, port = serve_client_metrics(producer)
        try:
            series = scrape(port)
        finally:
            server.shutdown()
            server.server_close()
    assert series["kafka_producer_producer_metrics_record_send_total"] == \
        [({"client_id": "mp"}, float(N))]
    assert series["kafka_producer_producer_topic_metrics_record_send_total"] == \
        [({"client_id": "mp", "topic": topic}, float(N))]
    assert all(labels["node_id"].startswith("node-") for labels, _ in
               series["kafka_producer_producer_node_metrics_request_latency_avg"])

    # a short metrics window, so records-lag-max forgets the lag of the first fetches
    config = {"bootstrap.servers": broker.bootstrap, "client.id": "mc", "group.id": "mg",
              "auto.offset.reset": "earliest", "metrics.sample.window.ms": 200,
              "metrics.num.samples": 2}
    with KafkaConsumer(topic, config=config) as consumer:
        assert poll_until(consumer, lambda got: got >= N) == N
        m = consumer.metrics()
        assert m[FETCH]["records-consumed-total"] == N
        assert m["consumer-coordinator-metrics"]["assigned-partitions"] == 3
        assert m["consumer-coordinator-metrics"]["rebalance-total"] >= 1
        assert m["consumer-metrics"]["last-poll-seconds-ago"] >= 0
        # a partition's own metrics appear with its first fetch handed to poll (Java's
        # too); one the producer's sticky partitioner left empty may come after the rest
        groups = [f"{FETCH}.{topic}-{p}" for p in range(3)]
        poll_until(consumer, lambda _: all(g in consumer.metrics() for g in groups))
        m = consumer.metrics()
        for group in groups:
            assert m[group]["records-lag"] == 0
        # keep polling (empty fetches still measure the lag) until the window moved on
        poll_until(consumer, lambda _: consumer.metrics()[FETCH]["records-lag-max"] == 0)
        consumer.commit_sync()
        assert consumer.metrics()["consumer-coordinator-metrics"]["commit-total"] >= 1

        server, port = serve_client_metrics(consumer)
        try:
            series = scrape(port)
        finally:
            server.shutdown()
            server.server_close()
    assert series["kafka_consumer_consumer_fetch_manager_metrics_records_consumed_total"] == \
        [({"client_id": "mc"}, float(N))]
    lags = series["kafka_consumer_consumer_fetch_manager_metrics_records_lag"]
    assert sorted((labels["topic"], labels["partition"], value) for labels, value in lags) == \
        [(topic, str(p), 0.0) for p in range(3)]
    assert series["kafka_consumer_consumer_coordinator_metrics_assigned_partitions"] == \
        [({"client_id": "mc"}, 3.0)]


def test_lag_shows_what_is_left_to_read(broker: BrokerProcess) -> None:
    """The negative control of the lag check: with records unread, the lag is theirs."""
    topic = create_topic(broker, 1)
    with KafkaProducer({"bootstrap.servers": broker.bootstrap}) as producer:
        for _ in range(100):
            producer.send(ProducerRecord(topic, b"v"))
        producer.flush(30)
    config = {"bootstrap.servers": broker.bootstrap, "max.poll.records": 10,
              "enable.auto.commit": False}
    with KafkaConsumer(config=config) as consumer:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning([tp])
        got = poll_until(consumer, lambda got: got > 0)
        lag = consumer.metrics()[f"{FETCH}.{topic}-0"]["records-lag"]
        assert lag == 100 - got > 0
        assert consumer.metrics()[FETCH]["records-lag-max"] >= lag
