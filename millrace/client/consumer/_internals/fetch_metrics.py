"""The consumer's fetch metrics, named and grouped as Java's ``consumer-fetch-manager-metrics``
(``FetchMetricsRegistry`` / ``FetchMetricsManager``).

Client-wide (group ``consumer-fetch-manager-metrics``): fetch-rate/-total,
fetch-latency-avg/-max, fetch-size-avg/-max, bytes-consumed-rate/-total,
records-consumed-rate/-total, records-per-request-avg, records-lag-max, records-lead-min,
fetch-throttle-time-avg/-max.  Per partition (same group, tags ``topic`` and
``partition``): records-lag, records-lag-avg, records-lag-max, records-lead,
records-lead-avg, records-lead-min.

When each is recorded -- never per record:

* per fetch response: fetch-rate, fetch-latency, fetch-size and bytes-consumed (the record
  bytes of the response, batch framing included), fetch-throttle-time;
* per ``poll`` that returns records: records-consumed (the records handed out);
* per partition each time a fetched partition is handed to ``poll`` (records or none):
  records-lag = high watermark (LSO under read_committed) - position and records-lead =
  position - log start offset, measured after the position advanced.  ``records-lag-max``
  over the client is the largest lag recorded in the window, so it returns to 0 only once
  a window has passed since the last lagging fetch; the per-partition ``records-lag`` is
  the latest value.

``records-per-request-avg`` is the records handed out in the window divided by the fetch
responses in it (Java counts the records parsed per response; millrace parses lazily).
A partition's metrics go away when it leaves the assignment (checked once per ``poll``,
by the assignment's version).

Recorded on the application thread (the fetch response callbacks also run there); read
from any thread.
"""

from __future__ import annotations

from collections.abc import Callable

from millrace.client.cluster import TopicPartition
from millrace.client.metrics import MetricName, Metrics

GROUP = "consumer-fetch-manager-metrics"


class _PartitionSensors:
    __slots__ = ("lag", "lead", "names")

    def __init__(self, metrics: Metrics, tp: TopicPartition) -> None:
        tags = {"topic": tp.topic, "partition": str(tp.partition)}
        self.lag = metrics.new_sensor()
        self.lead = metrics.new_sensor()
        lag, lead = self.lag, self.lead
        self.names: list[MetricName] = [
            metrics.add("records-lag", GROUP, lambda: lag.last_value, tags,
                        "the latest lag of the partition"),
            metrics.add("records-lag-avg", GROUP, lag.avg, tags),
            metrics.add("records-lag-max", GROUP, lag.max, tags),
            metrics.add("records-lead", GROUP, lambda: lead.last_value, tags,
                        "the latest lead of the partition"),
            metrics.add("records-lead-avg", GROUP, lead.avg, tags),
            metrics.add("records-lead-min", GROUP, lead.min, tags),
        ]


class FetchMetrics:
    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        m = metrics
        self.records_consumed = m.sensor("records-consumed")
        self.bytes_consumed = m.sensor("bytes-consumed")
        self.fetch_latency = m.sensor("fetch-latency")
        self.fetch_size = m.sensor("fetch-size")
        self.fetches = m.sensor("fetch")
        self.fetch_throttle_time = m.sensor("fetch-throttle-time")
        self.records_lag = m.sensor("records-lag")
        self.records_lead = m.sensor("records-lead")
        self._partitions: dict[TopicPartition, _PartitionSensors] = {}
        self._assignment_version = -1
        m.add("records-consumed-rate", GROUP, self.records_consumed.rate,
              description="records handed to the application per second")
        m.add("records-consumed-total", GROUP, lambda: self.records_consumed.lifetime_total)
        m.add("bytes-consumed-rate", GROUP, self.bytes_consumed.rate)
        m.add("bytes-consumed-total", GROUP, lambda: self.bytes_consumed.lifetime_total)
        m.add("fetch-latency-avg", GROUP, self.fetch_latency.avg,
              description="ms from writing a FetchRequest to its response")
        m.add("fetch-latency-max", GROUP, self.fetch_latency.max)
        m.add("fetch-rate", GROUP, self.fetches.count_rate)
        m.add("fetch-total", GROUP, lambda: self.fetches.lifetime_count)
        m.add("fetch-size-avg", GROUP, self.fetch_size.avg)
        m.add("fetch-size-max", GROUP, self.fetch_size.max)
        m.add("records-per-request-avg", GROUP, self._records_per_request)
        m.add("fetch-throttle-time-avg", GROUP, self.fetch_throttle_time.avg)
        m.add("fetch-throttle-time-max", GROUP, self.fetch_throttle_time.max)
        m.add("records-lag-max", GROUP, self.records_lag.max,
              description="the largest partition lag (high watermark - position) in the window")
        m.add("records-lead-min", GROUP, self.records_lead.min,
              description="the smallest partition lead (position - log start) in the window")

    def _records_per_request(self) -> float:
        fetches = self.fetches.count()
        return self.records_consumed.total() / fetches if fetches else 0.0

    def record_fetch(self, latency_ms: int, size: int, throttle_ms: int, now_ms: int) -> None:
        """A fetch response arrived with ``size`` record bytes."""
        self.fetches.record(1, now_ms)
        self.fetch_latency.record(latency_ms, now_ms)
        self.fetch_size.record(size, now_ms)
        self.bytes_consumed.record(size, now_ms)
        self.fetch_throttle_time.record(throttle_ms, now_ms)

    def record_partition(self, tp: TopicPartition, lag: int | None, lead: int | None) -> None:
        sensors = self._partitions.get(tp)
        if sensors is None:
            sensors = self._partitions[tp] = _PartitionSensors(self.metrics, tp)
        now = self.metrics.time.milliseconds()
        if lag is not None:
            self.records_lag.record(lag, now)
            sensors.lag.record(lag, now)
        if lead is not None:
            self.records_lead.record(lead, now)
            sensors.lead.record(lead, now)

    def maybe_update_assignment(self, version: int,
                                assigned_partitions: Callable[[], list[TopicPartition]]) -> None:
        """Drop the metrics of partitions no longer assigned (when the version moved)."""
        if version == self._assignment_version:
            return
        self._assignment_version = version
        assigned = set(assigned_partitions())
        for tp in [tp for tp in self._partitions if tp not in assigned]:
            for name in self._partitions.pop(tp).names:
                self.metrics.remove(name)
