"""A Prometheus exposition of the clients' metrics, named as the JMX exporter names Java's.

The mapping.  Java registers each client metric as the MBean
``<namespace>:type=<group>,client-id=<C>[,<tag>=<v>...]`` with attribute ``<name>``
(namespace ``kafka.producer`` or ``kafka.consumer``); the JMX exporter's usual client rules
turn that into the series ``<namespace>_<group>_<name>`` -- lower case, every character
other than a letter, digit or ``_`` replaced by ``_`` -- with the tags as labels, ``-`` in
a tag name turned into ``_``.  So::

    kafka.producer:type=producer-metrics,client-id=C  record-send-rate
      -> kafka_producer_producer_metrics_record_send_rate{client_id="C"}
    kafka.producer:type=producer-topic-metrics,client-id=C,topic=T  byte-rate
      -> kafka_producer_producer_topic_metrics_byte_rate{client_id="C",topic="T"}
    kafka.producer:type=producer-node-metrics,client-id=C,node-id=node-1  request-latency-avg
      -> kafka_producer_producer_node_metrics_request_latency_avg{client_id="C",node_id="node-1"}
    kafka.consumer:type=consumer-fetch-manager-metrics,client-id=C,topic=T,partition=0
      records-lag -> kafka_consumer_consumer_fetch_manager_metrics_records_lag{client_id="C",
      topic="T",partition="0"}

A client-wide metric and its per-partition namesake (``records-lag-max``) share a series
name and differ by their labels, as they do behind the JMX exporter.  Every series is a
gauge, as the exporter exposes JMX attributes: a ``-total`` is monotonic, so ``rate()``
applies to it; ``-rate`` and ``-avg`` are Kafka's own windowed values.

Three ways in:

* ``ClientMetricsCollector(client)`` -- a ``prometheus_client`` custom collector reading
  one or more producers/consumers at scrape time; register it in any ``CollectorRegistry``;
* ``serve_client_metrics(client, host, port)`` -- that collector in a private registry
  served over HTTP (``/metrics``, by ``prometheus_client.start_http_server``); returns
  ``(server, port)``, stop it with ``server.shutdown(); server.server_close()``;
* ``metric.reporters=millrace.client.prometheus.PrometheusReporter`` -- every client so
  configured appears in ``prometheus_client``'s default ``REGISTRY`` (what
  ``start_http_server(port)`` and ``generate_latest()`` serve) until it is closed.

Collection runs on the scraping thread: it reads the sensors, each under its own lock,
and never blocks the client's threads for longer than one read.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import REGISTRY, GaugeMetricFamily, Metric
from prometheus_client.samples import Sample

from millrace.client.metrics import KafkaMetric, Metrics, MetricsReporter

_INVALID = re.compile(r"[^a-zA-Z0-9_]")


def series_name(namespace: str, group: str, name: str) -> str:
    """``kafka.producer``, ``producer-metrics``, ``record-send-rate`` ->
    ``kafka_producer_producer_metrics_record_send_rate``."""
    return _INVALID.sub("_", f"{namespace}_{group}_{name}".lower())


def label_name(tag: str) -> str:
    """``client-id`` -> ``client_id``."""
    return _INVALID.sub("_", tag)


def _families(sources: Iterable[tuple[str, Iterable[KafkaMetric]]]) -> Iterator[Metric]:
    families: dict[str, Metric] = {}
    for namespace, metrics in sources:
        for metric in metrics:
            mn = metric.metric_name
            name = series_name(namespace, mn.group, mn.name)
            family = families.get(name)
            if family is None:
                doc = mn.description or f"{namespace}:type={mn.group} {mn.name}"
                family = families[name] = GaugeMetricFamily(name, doc)
            labels = {label_name(k): v for k, v in mn.tags}
            family.samples.append(Sample(name, labels, metric.metric_value()))
    yield from families.values()


def _registry_of(client: Any) -> Metrics:
    if isinstance(client, Metrics):
        return client
    metrics = getattr(client, "_metrics", None)  # KafkaProducer / KafkaConsumer
    if not isinstance(metrics, Metrics):
        raise TypeError(f"{type(client).__name__} keeps no client metrics")
    return metrics


class ClientMetricsCollector:
    """Exposes the metrics of ``clients`` (producers, consumers, or their ``Metrics``)."""

    def __init__(self, *clients: Any) -> None:
        if not clients:
            raise ValueError("ClientMetricsCollector needs at least one client")
        self._registries = [_registry_of(c) for c in clients]

    def collect(self) -> Iterator[Metric]:
        return _families((r.namespace, r.metrics()) for r in self._registries)

    def describe(self) -> list[Metric]:
        return []  # names depend on the topics and partitions seen: nothing to pre-check


def serve_client_metrics(client: Any, host: str = "127.0.0.1", port: int = 0
                         ) -> tuple[Any, int]:
    """Serve the metrics of ``client`` (or of a list of clients) at
    ``http://host:port/metrics`` from a daemon thread; ``port=0`` picks a free port.
    Returns ``(server, port)``."""
    clients = list(client) if isinstance(client, list | tuple) else [client]
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClientMetricsCollector(*clients))
    server, _thread = start_http_server(port, addr=host, registry=registry)
    return server, server.server_port


class _ReportedClients:
    """The default registry's one collector for every ``PrometheusReporter``: a series name
    must appear once per exposition, whichever client it comes from."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reporters: list[PrometheusReporter] = []  # guarded by _lock
        self._registered = False  # guarded by _lock

    def add(self, reporter: PrometheusReporter) -> None:
        with self._lock:
            self._reporters.append(reporter)
            if not self._registered:
                REGISTRY.register(self)
                self._registered = True

    def discard(self, reporter: PrometheusReporter) -> None:
        with self._lock:
            if reporter in self._reporters:
                self._reporters.remove(reporter)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            reporters = list(self._reporters)
        return _families((r.namespace, r.snapshot()) for r in reporters)

    def describe(self) -> list[Metric]:
        return []


_REPORTED = _ReportedClients()


class PrometheusReporter(MetricsReporter):
    """``metric.reporters``: the client's metrics in ``prometheus_client.REGISTRY``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._metrics: dict[Any, KafkaMetric] = {}  # guarded by _lock

    def init(self, metrics: list[KafkaMetric]) -> None:
        with self._lock:
            for metric in metrics:
                self._metrics[metric.metric_name] = metric
        _REPORTED.add(self)

    def metric_change(self, metric: KafkaMetric) -> None:
        with self._lock:
            self._metrics[metric.metric_name] = metric

    def metric_removal(self, metric: KafkaMetric) -> None:
        with self._lock:
            self._metrics.pop(metric.metric_name, None)

    def snapshot(self) -> list[KafkaMetric]:
        with self._lock:
            return list(self._metrics.values())

    def close(self) -> None:
        _REPORTED.discard(self)
        with self._lock:
            self._metrics.clear()
