"""``KafkaMetricsRegistry``: every broker metric under its Kafka MBean name (Kafka's
``KafkaYammerMetrics`` registry and ``KafkaMetricsGroup``).

A metric is named as JMX shows it, ``domain:type=T,name=N[,tag=v...]`` (``MetricName``),
for example ``kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=orders``;
the Prometheus module turns these names into the series the JMX exporter's standard Kafka
rules produce.  Kinds:

- meters, histograms and timers (``yammer``): recorded by the component that owns them
  (the replica manager owns its ISR-shrink meter), registered here once at start-up;
- gauges: a function read at scrape time (``gauge``), a function yielding one value per
  tag set (``gauge_family``: per-partition log sizes, lag per group partition), or a
  state (``state_gauge``: ZooKeeper's session state, exposed as ``state="CONNECTED"`` 1);
- raw gauge families (``raw_gauge_family``): series that are no MBean's, named as
  Prometheus shows them (the exporters' consumer-lag series, ``kafka_consumergroup_lag``),
  exposed unchanged.

Nothing is computed until a scrape asks, so a gauge over every partition costs nothing
between scrapes.  ``tick()`` (every ``yammer.TICK_S`` from the broker's metrics task)
moves every meter's rates and every histogram's window.

Thread ownership: the broker's event-loop thread (register, tick, collect).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from millrace.broker.metrics.yammer import Histogram, Meter, Timer

Tags = tuple[tuple[str, str], ...]
YammerMetric = Meter | Histogram | Timer
M = TypeVar("M", Meter, Histogram, Timer)


@dataclass(frozen=True, slots=True)
class MetricName:
    domain: str  # kafka.server
    type: str  # BrokerTopicMetrics
    name: str  # MessagesInPerSec
    tags: Tags = ()

    @property
    def mbean(self) -> str:
        tags = "".join(f",{k}={v}" for k, v in self.tags)
        return f"{self.domain}:type={self.type},name={self.name}{tags}"


def metric_name(domain: str, type_: str, name: str,
                tags: Mapping[str, object] | None = None) -> MetricName:
    return MetricName(domain, type_, name,
                      tuple((k, str(v)) for k, v in tags.items()) if tags else ())


@dataclass(frozen=True, slots=True)
class Gauge:
    name: MetricName
    read: Callable[[], float]


@dataclass(frozen=True, slots=True)
class GaugeFamily:
    """One gauge name, one value per tag set, all computed at scrape time."""

    domain: str
    type: str
    name: str
    read: Callable[[], Iterable[tuple[Mapping[str, object], float]]]


@dataclass(frozen=True, slots=True)
class RawGaugeFamily:
    """A gauge family under its Prometheus name and label names, exposed as is."""

    name: str
    doc: str
    read: Callable[[], Iterable[tuple[Mapping[str, object], float]]]


@dataclass(frozen=True, slots=True)
class StateGauge:
    """A gauge whose value is a state name (Kafka's string gauges)."""

    name: MetricName
    read: Callable[[], str]


class KafkaMetricsRegistry:
    """The broker's metrics by MBean name (module docstring)."""

    def __init__(self) -> None:
        self.metrics: dict[MetricName, YammerMetric] = {}
        self.gauges: dict[MetricName, Gauge] = {}
        self.families: dict[tuple[str, str, str], GaugeFamily] = {}
        self.state_gauges: dict[MetricName, StateGauge] = {}
        self.raw_families: dict[str, RawGaugeFamily] = {}

    # ------------------------------------------------------------------ registering
    def add(self, name: MetricName, metric: M) -> M:
        """Register a metric its owner made; the one already there if the name is taken."""
        existing = self.metrics.get(name)
        if existing is not None:
            assert type(existing) is type(metric), f"{name.mbean} is a {type(existing)}"
            return existing
        self.metrics[name] = metric
        return metric

    def meter(self, domain: str, type_: str, name: str,
              tags: Mapping[str, object] | None = None, *, locked: bool = False) -> Meter:
        key = metric_name(domain, type_, name, tags)
        found = self.metrics.get(key)
        return found if isinstance(found, Meter) else self.add(key, Meter(locked=locked))

    def histogram(self, domain: str, type_: str, name: str,
                  tags: Mapping[str, object] | None = None, *,
                  locked: bool = False) -> Histogram:
        key = metric_name(domain, type_, name, tags)
        found = self.metrics.get(key)
        return (found if isinstance(found, Histogram)
                else self.add(key, Histogram(locked=locked)))

    def timer(self, domain: str, type_: str, name: str,
              tags: Mapping[str, object] | None = None, *, locked: bool = False) -> Timer:
        key = metric_name(domain, type_, name, tags)
        found = self.metrics.get(key)
        return found if isinstance(found, Timer) else self.add(key, Timer(locked=locked))

    def gauge(self, domain: str, type_: str, name: str, read: Callable[[], float],
              tags: Mapping[str, object] | None = None) -> None:
        key = metric_name(domain, type_, name, tags)
        self.gauges[key] = Gauge(key, read)

    def gauge_family(self, domain: str, type_: str, name: str,
                     read: Callable[[], Iterable[tuple[Mapping[str, object], float]]]
                     ) -> None:
        self.families[(domain, type_, name)] = GaugeFamily(domain, type_, name, read)

    def raw_gauge_family(self, name: str, doc: str,
                         read: Callable[[], Iterable[tuple[Mapping[str, object], float]]]
                         ) -> None:
        self.raw_families[name] = RawGaugeFamily(name, doc, read)

    def state_gauge(self, domain: str, type_: str, name: str, read: Callable[[], str],
                    tags: Mapping[str, object] | None = None) -> None:
        key = metric_name(domain, type_, name, tags)
        self.state_gauges[key] = StateGauge(key, read)

    def remove_tagged(self, tag: str, value: str) -> int:
        """Forget every meter/histogram/gauge tagged ``tag=value`` (a deleted topic's
        BrokerTopicMetrics, as Kafka's ``removeMetrics``); the number removed."""
        removed = 0
        for table in (self.metrics, self.gauges, self.state_gauges):
            for key in [k for k in table if (tag, value) in k.tags]:
                del table[key]
                removed += 1
        return removed

    # ------------------------------------------------------------------ reading
    def tick(self) -> None:
        for metric in self.metrics.values():
            metric.tick()

    def find(self, domain: str, type_: str, name: str,
             tags: Mapping[str, object] | None = None) -> YammerMetric | None:
        return self.metrics.get(metric_name(domain, type_, name, tags))
