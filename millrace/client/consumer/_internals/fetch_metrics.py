"""The consumer's fetch metrics, named as Java's ``consumer-fetch-manager-metrics`` group
(``FetchMetricsRegistry``), plus the coordinator's commit latency.

Recorded per fetch response and per ``poll`` -- never per record.  ``bytes-consumed`` counts
the record bytes fetched (batch framing included).  ``KafkaConsumer.metrics()`` returns the
snapshot.
"""

from __future__ import annotations

from millrace.client.metrics import Metrics


class FetchMetrics:
    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self.records_consumed = metrics.sensor("records-consumed")
        self.bytes_consumed = metrics.sensor("bytes-consumed")
        self.fetch_latency = metrics.sensor("fetch-latency")
        self.fetch_size = metrics.sensor("fetch-size")
        self.fetches = metrics.sensor("fetch")
        self.records_lag = metrics.sensor("records-lag")
        m = metrics
        m.add("records-consumed-rate", self.records_consumed.rate)
        m.add("records-consumed-total", lambda: self.records_consumed.lifetime_total)
        m.add("bytes-consumed-rate", self.bytes_consumed.rate)
        m.add("bytes-consumed-total", lambda: self.bytes_consumed.lifetime_total)
        m.add("fetch-latency-avg", self.fetch_latency.avg)
        m.add("fetch-latency-max", self.fetch_latency.max)
        m.add("fetch-rate", self.fetches.rate)
        m.add("fetch-total", lambda: self.fetches.lifetime_total)
        m.add("fetch-size-avg", self.fetch_size.avg)
        m.add("fetch-size-max", self.fetch_size.max)
        m.add("records-lag-max", self.records_lag.max)
