"""Client metrics: the windowed stats on a MockTime, Java's groups and tags, metric.reporters,
the producer's families (stepped Sender against the fake cluster) and the Prometheus
exposition parsed back with prometheus_client's own parser."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from millrace.client.cluster import TopicPartition
from millrace.client.metrics import KafkaMetric, MetricName, Metrics, MetricsReporter, Sensor
from millrace.client.producer import ProducerRecord
from millrace.client.prometheus import ClientMetricsCollector, label_name, series_name
from millrace.common.errors import ConfigError
from millrace.common.time import MockTime
from tests.unit.client.fakes import FakeCluster, make_producer, step, warm

TP0 = TopicPartition("t", 0)


# ---------------------------------------------------------------------- Sensor / Metrics
def test_sensor_stats_over_the_window() -> None:
    clock = MockTime(0)
    s = Sensor(clock, window_ms=1000, samples=2)
    assert (s.avg(), s.max(), s.min(), s.rate(), s.count_rate()) == (0, 0, 0, 0, 0)
    s.record(10)
    s.record(30)
    clock.sleep(1500)
    s.record(20)
    assert s.avg() == 20 and s.max() == 30 and s.min() == 10
    # rate: 60 over the 1500 ms since the oldest sample began
    assert s.rate() == pytest.approx(60 / 1.5)
    assert s.count_rate() == pytest.approx(3 / 1.5)
    assert s.count_rate(unit_seconds=3600) == pytest.approx(3 / 1.5 * 3600)
    assert (s.total(), s.count(), s.last_value) == (60, 3, 20)
    clock.sleep(1000)  # the first sample (started at 0) leaves the 2 x 1000 ms window
    assert s.avg() == 20 and s.max() == 20 and s.count() == 1
    clock.sleep(5000)  # everything aged out; the lifetime totals stay
    assert (s.avg(), s.max(), s.rate()) == (0, 0, 0)
    assert (s.lifetime_total, s.lifetime_count) == (60, 3)


def test_groups_raw_and_flat_views() -> None:
    m = Metrics(MockTime(), namespace="kafka.producer", tags={"client-id": "c"})
    m.add("record-send-rate", "producer-metrics", lambda: 5)
    m.add("byte-rate", "producer-topic-metrics", lambda: 7, {"topic": "t"})
    m.add("records-lag", "consumer-fetch-manager-metrics", lambda: 3,
          {"topic": "t", "partition": "0"})
    m.add("request-latency-avg", "producer-node-metrics", lambda: 2, {"node-id": "node-1"})
    assert m.snapshot() == {
        "producer-metrics": {"record-send-rate": 5.0},
        "producer-topic-metrics.t": {"byte-rate": 7.0},
        "consumer-fetch-manager-metrics.t-0": {"records-lag": 3.0},
        "producer-node-metrics.node-1": {"request-latency-avg": 2.0},
    }
    assert m.snapshot(flat=True) == {"record-send-rate": 5.0}
    raw = m.snapshot(raw=True)
    name = MetricName("byte-rate", "producer-topic-metrics", {"client-id": "c", "topic": "t"})
    assert raw[name] == 7.0 and name.tag_dict == {"client-id": "c", "topic": "t"}
    m.remove(name)
    assert "producer-topic-metrics.t" not in m.snapshot()


class Recording(MetricsReporter):
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []
        self.configs: dict[str, Any] = {}

    def configure(self, configs: Any) -> None:
        self.configs = dict(configs)

    def init(self, metrics: list[KafkaMetric]) -> None:
        self.events.append(("init", len(metrics)))

    def metric_change(self, metric: KafkaMetric) -> None:
        self.events.append(("change", metric.metric_name.name))

    def metric_removal(self, metric: KafkaMetric) -> None:
        self.events.append(("removal", metric.metric_name.name))

    def close(self) -> None:
        self.events.append(("close", None))


def test_a_reporter_hears_of_every_metric_and_of_the_close() -> None:
    reporter = Recording()
    m = Metrics(MockTime(), namespace="kafka.consumer", reporters=[reporter])
    assert reporter.namespace == "kafka.consumer"
    name = m.add("fetch-rate", "consumer-fetch-manager-metrics", lambda: 1)
    m.remove(name)
    m.close()
    assert reporter.events == [("init", 0), ("change", "fetch-rate"), ("removal", "fetch-rate"),
                               ("close", None)]


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster(nodes=2, topics={"t": 2})


def setup(cluster: FakeCluster, **config: Any) -> tuple[Any, Any, Any]:
    settings = {"linger.ms": 0, "enable.idempotence": False, "acks": "1",
                "client.id": "p1", **config}
    producer, selector, clock = make_producer(cluster, settings)
    warm(producer, "t", clock)
    return producer, selector, clock


def test_metric_reporters_config_loads_classes_by_name(cluster: FakeCluster) -> None:
    producer, _, _ = setup(cluster, **{
        "metric.reporters": "tests.unit.client.test_metrics_and_prometheus.Recording"})
    [reporter] = producer._metrics._reporters
    assert type(reporter).__name__ == "Recording"
    assert reporter.configs["client.id"] == "p1" and reporter.namespace == "kafka.producer"
    changed = {name for kind, name in reporter.events if kind == "change"}
    assert {"record-send-rate", "buffer-available-bytes", "requests-in-flight"} <= changed
    producer.close()
    assert reporter.events[-1] == ("close", None)


def test_metric_reporters_rejects_what_is_not_a_reporter(cluster: FakeCluster) -> None:
    with pytest.raises(ConfigError, match=r"metric\.reporters"):
        make_producer(cluster, {"metric.reporters": [object]})
    with pytest.raises(ConfigError, match=r"metric\.reporters"):
        make_producer(cluster, {"metric.reporters": "no.such.Reporter"})


# ---------------------------------------------------------------------- producer families
def run_until(producer: Any, clock: Any, done: Any) -> None:
    for _ in range(500):
        if done():
            return
        step(producer)
        clock.sleep(10)
    raise AssertionError("condition not reached")


def test_producer_groups_and_per_batch_counts(cluster: FakeCluster) -> None:
    producer, _, clock = setup(cluster)
    futures = [producer.send(ProducerRecord("t", b"x" * 50, partition=i % 2))
               for i in range(30)]
    run_until(producer, clock, lambda: all(f.done() for f in futures))
    m = producer.metrics()
    assert m["producer-metrics"]["record-send-total"] == 30
    assert m["producer-topic-metrics.t"]["record-send-total"] == 30
    sizes = sum(len(pd.records) for _, _, body in cluster.produce_requests()
                for topic in body.topic_data for pd in topic.partition_data)
    assert m["producer-topic-metrics.t"]["byte-total"] == sizes
    assert m["producer-metrics"]["record-error-total"] == 0
    assert m["producer-topic-metrics.t"]["record-error-total"] == 0
    requests = len(cluster.produce_requests())
    assert m["producer-metrics"]["request-total"] == requests
    assert sum(v["request-total"] for k, v in m.items()
               if k.startswith("producer-node-metrics.node-")) == requests
    assert m["producer-metrics"]["records-per-request-avg"] == pytest.approx(30 / requests)
    assert m["producer-metrics"]["record-size-max"] > 0
    assert set(m["producer-metrics"]) >= {
        "record-send-rate", "record-error-rate", "record-retry-rate", "record-retry-total",
        "batch-size-avg", "batch-size-max", "record-queue-time-avg", "record-queue-time-max",
        "request-latency-avg", "request-latency-max", "buffer-total-bytes",
        "buffer-available-bytes", "bufferpool-wait-ratio", "bufferpool-wait-time-ns-total",
        "compression-rate-avg", "requests-in-flight", "produce-throttle-time-avg",
        "produce-throttle-time-max", "record-size-avg", "metadata-age"}
    # every rate has its -total twin
    for group in m.values():
        for name in group:
            if name.endswith("-rate") and name != "compression-rate":
                assert name[:-5] + "-total" in group, name
    producer.close()


def test_requests_in_flight_and_request_latency(cluster: FakeCluster) -> None:
    producer, _, clock = setup(cluster)
    cluster.hold = True
    future = producer.send(ProducerRecord("t", b"v", partition=0))
    step(producer, 2)
    group = producer.metrics()["producer-metrics"]
    assert group["requests-in-flight"] == 1 and group["request-latency-max"] == 0
    clock.sleep(40)
    producer._sender._client._selector.release()
    cluster.hold = False
    run_until(producer, clock, future.done)
    m = producer.metrics()
    assert m["producer-metrics"]["requests-in-flight"] == 0
    assert m["producer-metrics"]["request-latency-max"] == 40
    node = f"producer-node-metrics.node-{producer._metadata.fetch().leader_for(TP0).id}"
    assert m[node]["request-latency-max"] == 40 and m[node]["response-total"] == 1
    producer.close()


def test_produce_throttle_time_from_the_response(cluster: FakeCluster) -> None:
    producer, _, clock = setup(cluster)
    plain = cluster._handle_Produce

    def throttled(node_id: int, version: int, body: Any) -> Any:
        response = plain(node_id, version, body)
        response.throttle_time_ms = 250
        return response

    future = producer.send(ProducerRecord("t", b"v", partition=0))
    run_until(producer, clock, future.done)
    assert producer.metrics()["producer-metrics"]["produce-throttle-time-max"] == 0
    cluster._handle_Produce = throttled  # type: ignore[method-assign]
    future = producer.send(ProducerRecord("t", b"v", partition=0))
    run_until(producer, clock, future.done)
    group = producer.metrics()["producer-metrics"]
    assert group["produce-throttle-time-max"] == 250
    assert group["produce-throttle-time-avg"] == 125
    producer.close()


def test_retries_and_errors_count_per_topic(cluster: FakeCluster) -> None:
    producer, _, clock = setup(cluster, retries=1)
    cluster.fail_next[TP0].extend([19, 19])  # NOT_ENOUGH_REPLICAS twice: retry, then fail
    future = producer.send(ProducerRecord("t", b"v", partition=0))
    run_until(producer, clock, future.done)
    assert future.exception(0) is not None
    m = producer.metrics()
    assert (m["producer-metrics"]["record-retry-total"],
            m["producer-metrics"]["record-error-total"]) == (1, 1)
    assert (m["producer-topic-metrics.t"]["record-retry-total"],
            m["producer-topic-metrics.t"]["record-error-total"]) == (1, 1)
    producer.close()


# ---------------------------------------------------------------------- Prometheus
def scrape(registry: CollectorRegistry) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    text = generate_latest(registry).decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def test_names_follow_the_jmx_exporter() -> None:
    assert series_name("kafka.producer", "producer-metrics", "record-send-rate") == \
        "kafka_producer_producer_metrics_record_send_rate"
    assert series_name("kafka.consumer", "consumer-fetch-manager-metrics", "records-lag-max") \
        == "kafka_consumer_consumer_fetch_manager_metrics_records_lag_max"
    assert (label_name("client-id"), label_name("node-id")) == ("client_id", "node_id")


def test_collector_exposes_groups_and_tags_as_labels(cluster: FakeCluster) -> None:
    producer, _, clock = setup(cluster)
    futures = [producer.send(ProducerRecord("t", b"v", partition=0)) for _ in range(7)]
    run_until(producer, clock, lambda: all(f.done() for f in futures))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClientMetricsCollector(producer))
    series = scrape(registry)
    assert series["kafka_producer_producer_metrics_record_send_total"] == \
        [({"client_id": "p1"}, 7.0)]
    assert series["kafka_producer_producer_topic_metrics_record_send_total"] == \
        [({"client_id": "p1", "topic": "t"}, 7.0)]
    [(labels, _)] = series["kafka_producer_producer_node_metrics_request_latency_max"]
    assert labels["client_id"] == "p1" and labels["node_id"].startswith("node-")
    assert series["kafka_producer_producer_metrics_buffer_total_bytes"] == \
        [({"client_id": "p1"}, 33554432.0)]
    producer.close()


def test_two_clients_share_one_family_per_name(cluster: FakeCluster) -> None:
    a, _, _ = setup(cluster, **{"client.id": "a"})
    b, _, _ = setup(cluster, **{"client.id": "b"})
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClientMetricsCollector(a, b))
    text = generate_latest(registry).decode()
    assert text.count("# TYPE kafka_producer_producer_metrics_record_send_total gauge") == 1
    series = scrape(registry)
    assert sorted(labels["client_id"] for labels, _ in
                  series["kafka_producer_producer_metrics_record_send_total"]) == ["a", "b"]
    a.close()
    b.close()


def test_prometheus_reporter_serves_in_the_default_registry(cluster: FakeCluster) -> None:
    from prometheus_client import REGISTRY

    producer, _, _ = setup(cluster, **{
        "client.id": "reported", "metric.reporters": "millrace.client.prometheus.PrometheusReporter"})

    def reported() -> list[Any]:
        return [labels for labels, _ in
                scrape(REGISTRY).get("kafka_producer_producer_metrics_record_send_total", [])
                if labels.get("client_id") == "reported"]

    assert reported() == [{"client_id": "reported"}]
    producer.close()
    assert reported() == []  # closed: gone from the registry


# ---------------------------------------------------------------------- perf --print-metrics
def test_the_perf_table_is_kafkas() -> None:
    from millrace.client.perf import by_display_name, format_metrics

    raw = {MetricName("record-send-rate", "producer-metrics", {"client-id": "p"}): 12.5,
           MetricName("byte-rate", "producer-topic-metrics",
                      {"client-id": "p", "topic": "t"}): 1.0}
    table = by_display_name(raw)
    assert list(table) == ["producer-metrics:record-send-rate:{client-id=p}",
                           "producer-topic-metrics:byte-rate:{client-id=p, topic=t}"]
    lines = format_metrics(table)
    width = len("producer-topic-metrics:byte-rate:{client-id=p, topic=t}")
    assert lines == ["", "Metric Name".ljust(width) + "   Value",
                     "producer-metrics:record-send-rate:{client-id=p}".ljust(width) +
                     " : 12.500",
                     "producer-topic-metrics:byte-rate:{client-id=p, topic=t} : 1.000"]
    assert format_metrics({}) == []


def test_perf_produce_print_metrics_in_process(cluster: FakeCluster, monkeypatch: Any,
                                               capsys: Any) -> None:
    """The CLI hands --print-metrics to the run and prints the table after the summary."""
    import json

    from millrace.cli.main import main
    from millrace.client import perf

    seen: dict[str, Any] = {}
    real = perf.ProducerPerformance

    def fake(config: Any, topic: str, num: int, size: int, **kw: Any) -> Any:
        seen.update(kw)
        producer, _, clock = setup(cluster)
        run = real(config, topic, num, size, **kw)

        def run_on_fake_cluster() -> Any:
            futures = [producer.send(ProducerRecord(topic, b"x" * size, partition=0))
                       for _ in range(num)]
            run_until(producer, clock, lambda: all(f.done() for f in futures))
            result = perf.ProducerPerfResult.from_histogram(topic, perf.LatencyHistogram(), 0,
                                                            size, 1.0)
            if kw["collect_metrics"]:
                from dataclasses import replace
                result = replace(result,
                                 metrics=perf.by_display_name(producer.metrics(raw=True)))
            producer.close()
            return result

        run.run = run_on_fake_cluster  # type: ignore[method-assign]
        return run

    monkeypatch.setattr(perf, "ProducerPerformance", fake)
    args = ["perf", "produce", "--topic", "t", "--num-records", "5", "--record-size", "10",
            "-b", "fake:9092"]
    assert main([*args, "--print-metrics"]) == 0
    assert seen["collect_metrics"] is True
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("0 records sent") and out[1] == ""
    assert out[2].startswith("Metric Name") and out[2].endswith("   Value")
    assert any(line.startswith("producer-metrics:record-send-total:{client-id=p1} ")
               and line.endswith(" : 5.000") for line in out)
    assert main([*args, "--print-metrics", "--output", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["metrics"]["producer-metrics:record-send-total:{client-id=p1}"] == 5
    assert main(args) == 0  # without the flag: no table, no key
    assert seen["collect_metrics"] is False
    assert "Metric Name" not in capsys.readouterr().out


def test_a_consumer_s_metrics_reach_its_reporters_and_every_rate_has_a_total() -> None:
    from millrace.client.consumer import KafkaConsumer

    consumer: KafkaConsumer[Any, Any] = KafkaConsumer(config={
        "bootstrap.servers": "127.0.0.1:1", "client.id": "c1", "group.id": "g",
        "metric.reporters": [Recording]})
    [reporter] = consumer._metrics._reporters
    assert isinstance(reporter, Recording) and reporter.namespace == "kafka.consumer"
    changed = {name for kind, name in reporter.events if kind == "change"}
    assert {"records-lag-max", "commit-latency-avg", "last-poll-seconds-ago",
            "rebalance-latency-total", "assigned-partitions"} <= changed
    m = consumer.metrics()
    assert set(m) == {"consumer-fetch-manager-metrics", "consumer-coordinator-metrics",
                      "consumer-metrics"}
    for group in m.values():
        for name in group:
            if name.endswith("-rate"):
                assert name[:-5] + "-total" in group, name
            if name.endswith("-rate-per-hour"):
                assert name[:-len("-rate-per-hour")] + "-total" in group, name
    flat = consumer.metrics(flat=True)
    assert flat["assigned-partitions"] == 0 and flat["records-consumed-total"] == 0
    consumer.close()
    assert reporter.events[-1] == ("close", None)
