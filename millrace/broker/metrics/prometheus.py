"""The broker's metrics as Prometheus series, named as the JMX exporter's standard Kafka
rules (``kafka-2_0_0.yml`` with lower-case label names, as Strimzi runs it) name them,
so dashboards and alert rules written for Kafka work unchanged (reference
observability.md 3.1):

============================================  =============================================
MBean                                          series
============================================  =============================================
meter ``kafka.D:type=T,name=XPerSec,k=v``      ``kafka_d_t_x_total{k="v"}`` (counter)
meter not ending in ``PerSec``                 ``kafka_d_t_x_count``
gauge ``kafka.D:type=T,name=X,k=v``            ``kafka_d_t_x{k="v"}``
histogram / timer ``...name=X``                ``kafka_d_t_x{quantile="0.50"}`` (``0.NN``
                                               of ``NNthPercentile``: 0.50 ... 0.999),
                                               ``_count`` and ``_sum`` (a summary)
state gauge ``...name=SessionState``           ``kafka_server_sessionexpirelistener_``
                                               ``sessionstate{state="CONNECTED"} 1``
raw gauge family ``name`` (no MBean)           ``name{k="v"}``, name and labels unchanged
============================================  =============================================

Names are lower case (``lowercaseOutputName``), as are label names; ``kafka.D`` is the
domain with its dots made underscores (``kafka.coordinator.group`` →
``kafka_coordinator_group``).  Every meter (and a timer's meter) is also exposed the way
the JMX exporter shows an MBean without rules, ``kafka_d_T_FifteenMinuteRate{name="XPerSec",
k="v"}`` (and One-, Five-minute and Mean rates), which is what kafbat UI reads for bytes
in and out (reference 3.2).

``KafkaCollector`` is a ``prometheus_client`` custom collector: the series are built
from the registry when a scrape asks.  ``exposition(registry, accept)`` answers a scrape
in the format its ``Accept`` header asks for (OpenMetrics or the text format 0.0.4).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from millrace.broker.metrics.registry import KafkaMetricsRegistry, MetricName
from millrace.broker.metrics.yammer import QUANTILES, Histogram, Meter, Timer

_RATES = (("OneMinuteRate", 1), ("FiveMinuteRate", 5), ("FifteenMinuteRate", 15))
# the exporter's rule makes ``NNthPercentile`` into quantile="0.NN": 50th -> "0.50"
_QUANTILE_LABELS = {0.5: "0.50", 0.75: "0.75", 0.95: "0.95", 0.98: "0.98", 0.99: "0.99",
                    0.999: "0.999"}


def series_name(domain: str, type_: str, name: str) -> str:
    """The JMX exporter's name for ``domain:type=type_,name=name`` (a gauge's)."""
    return f"{domain.replace('.', '_')}_{type_}_{name}".lower().replace("-", "_")


def _labels(tags: Mapping[str, object] | tuple[tuple[str, str], ...]) -> dict[str, str]:
    items = tags.items() if isinstance(tags, Mapping) else tags
    return {k.lower().replace("-", "_"): str(v) for k, v in items}


class _Families:
    """The metric families of one scrape, by series name, in first-seen order."""

    def __init__(self) -> None:
        self.by_name: dict[str, Metric] = {}

    def __call__(self, name: str, kind: str, doc: str) -> Metric:
        metric = self.by_name.get(name)
        if metric is None:
            metric = self.by_name[name] = Metric(name, doc, kind)
        return metric


class KafkaCollector(Collector):
    """Builds every series from a ``KafkaMetricsRegistry`` at scrape time."""

    def __init__(self, registry: KafkaMetricsRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        family = _Families()
        raw_rates: defaultdict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
        for key, recorded in self.registry.metrics.items():
            labels = _labels(key.tags)
            meter = recorded.meter if isinstance(recorded, Timer) else recorded
            if isinstance(meter, Meter):
                self._meter(family, key, meter, labels, raw_rates,
                            counted=not isinstance(recorded, Timer))
            histogram = recorded.histogram if isinstance(recorded, Timer) else recorded
            if isinstance(histogram, Histogram):
                self._histogram(family, key, histogram, labels)
        for key, gauge in self.registry.gauges.items():
            series = series_name(key.domain, key.type, key.name)
            family(series, "gauge", _doc(key)).add_sample(series, _labels(key.tags),
                                                          float(gauge.read()))
        for (domain, type_, name), gauges in self.registry.families.items():
            series = series_name(domain, type_, name)
            out = family(series, "gauge", f"{domain}:type={type_},name={name}")
            for tags, value in gauges.read():
                out.add_sample(series, _labels(tags), float(value))
        for key, state in self.registry.state_gauges.items():
            series = series_name(key.domain, key.type, key.name)
            family(series, "gauge", _doc(key) + " (the state is the label)").add_sample(
                series, {**_labels(key.tags), "state": state.read()}, 1.0)
        for raw in self.registry.raw_families.values():
            out = family(raw.name, "gauge", raw.doc)
            for tags, value in raw.read():
                out.add_sample(raw.name, {k: str(v) for k, v in tags.items()}, float(value))
        for raw_name, samples in raw_rates.items():
            out = family(raw_name, "gauge",
                         "Yammer meter rate per second (the JMX exporter's default format)")
            for labels, value in samples:
                out.add_sample(raw_name, labels, value)
        yield from family.by_name.values()

    @staticmethod
    def _meter(family: _Families, key: MetricName, meter: Meter, labels: dict[str, str],
               raw_rates: defaultdict[str, list[tuple[dict[str, str], float]]], *,
               counted: bool) -> None:
        if counted:
            if key.name.endswith("PerSec"):
                base = series_name(key.domain, key.type, key.name[: -len("PerSec")])
                family(base, "counter", _doc(key) + " (Count)").add_sample(
                    base + "_total", labels, float(meter.count))
            else:
                base = series_name(key.domain, key.type, key.name) + "_count"
                family(base, "gauge", _doc(key) + " (Count)").add_sample(
                    base, labels, float(meter.count))
        prefix = f"{key.domain.replace('.', '_')}_{key.type}_"
        named = {"name": key.name, **labels}
        for attribute, minutes in _RATES:
            raw_rates[prefix + attribute].append((named, meter.rate(minutes)))
        raw_rates[prefix + "MeanRate"].append((named, meter.mean_rate()))

    @staticmethod
    def _histogram(family: _Families, key: MetricName, histogram: Histogram,
                   labels: dict[str, str]) -> None:
        series = series_name(key.domain, key.type, key.name)
        out = family(series, "summary", _doc(key))
        for q, value in zip(QUANTILES, histogram.quantiles()):
            out.add_sample(series, {**labels, "quantile": _QUANTILE_LABELS[q]}, value)
        out.add_sample(series + "_count", labels, float(histogram.count))
        out.add_sample(series + "_sum", labels, float(histogram.sum))


def _doc(key: MetricName) -> str:
    """The MBean without its tags: the family's help text."""
    return f"{key.domain}:type={key.type},name={key.name}"


def collector_registry(registry: KafkaMetricsRegistry) -> CollectorRegistry:
    """A prometheus_client registry holding only the broker's collector."""
    out = CollectorRegistry(auto_describe=False)
    out.register(KafkaCollector(registry))
    return out


def exposition(registry: CollectorRegistry, accept: str | None) -> tuple[bytes, str]:
    """The scrape's body and content type: OpenMetrics when ``Accept`` asks for
    ``application/openmetrics-text``, else the Prometheus text format 0.0.4
    (prometheus_client's own negotiation)."""
    encode, content_type = choose_encoder(accept or "")
    return encode(registry), content_type
