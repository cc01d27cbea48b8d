"""The producer's metrics, named and grouped as Java's (``SenderMetricsRegistry``, the buffer
pool's and the per-node ones).

Groups:

* ``producer-metrics``: record-send-rate/-total, record-error-rate/-total,
  record-retry-rate/-total, batch-size-avg/-max, compression-rate-avg,
  record-queue-time-avg/-max, records-per-request-avg, request-latency-avg/-max,
  request-rate/-total, produce-throttle-time-avg/-max, record-size-avg/-max,
  batch-split-rate/-total, requests-in-flight, metadata-age, buffer-total-bytes,
  buffer-available-bytes, bufferpool-wait-ratio, bufferpool-wait-time-ns-total,
  buffer-exhausted-rate/-total, waiting-threads;
* ``producer-topic-metrics`` (tag ``topic``): record-send-rate/-total, byte-rate/-total,
  compression-rate, record-retry-rate/-total, record-error-rate/-total;
* ``producer-node-metrics`` (tag ``node-id`` = ``node-<id>``): request-latency-avg/-max,
  request-rate/-total, response-rate/-total -- of ProduceRequests only (Java's come from
  the selector and count every request to the node).

Recorded per batch and per request on the sender thread -- never per record -- so they
cost nothing on ``send``'s path.  record-send counts a batch's records when its request is
written (as Java does, so a retried batch counts again).  ``record-size-avg``/``-max`` use
a batch's mean record size (Java records the batch's largest record, which would cost a
comparison per ``send``).  Topic and node metrics appear with the first batch or request
for them.

Owned by the sender thread (recording); read from any thread.
"""

from __future__ import annotations

from typing import Any

from millrace.client.metrics import Metrics, Sensor
from millrace.client.producer._internals.buffer_pool import BufferPool
from millrace.client.producer._internals.producer_batch import ProducerBatch

GROUP = "producer-metrics"
TOPIC_GROUP = "producer-topic-metrics"
NODE_GROUP = "producer-node-metrics"


class _TopicSensors:
    __slots__ = ("bytes", "compression", "errors", "records", "retries")

    def __init__(self, metrics: Metrics, topic: str) -> None:
        tags = {"topic": topic}
        self.records = metrics.sensor(f"topic.{topic}.records-per-batch")
        self.bytes = metrics.sensor(f"topic.{topic}.bytes")
        self.compression = metrics.sensor(f"topic.{topic}.compression-rate")
        self.retries = metrics.sensor(f"topic.{topic}.record-retries")
        self.errors = metrics.sensor(f"topic.{topic}.record-errors")
        _rate_and_total(metrics, "record-send", TOPIC_GROUP, self.records, tags)
        _rate_and_total(metrics, "byte", TOPIC_GROUP, self.bytes, tags)
        metrics.add("compression-rate", TOPIC_GROUP, self.compression.avg, tags,
                    "the average compression rate of the topic's batches")
        _rate_and_total(metrics, "record-retry", TOPIC_GROUP, self.retries, tags)
        _rate_and_total(metrics, "record-error", TOPIC_GROUP, self.errors, tags)


class _NodeSensors:
    __slots__ = ("latency", "requests", "responses")

    def __init__(self, metrics: Metrics, node_id: int) -> None:
        tags = {"node-id": f"node-{node_id}"}
        self.latency = metrics.sensor(f"node-{node_id}.latency")
        self.requests = metrics.sensor(f"node-{node_id}.requests")
        self.responses = metrics.sensor(f"node-{node_id}.responses")
        metrics.add("request-latency-avg", NODE_GROUP, self.latency.avg, tags)
        metrics.add("request-latency-max", NODE_GROUP, self.latency.max, tags)
        _rate_and_total(metrics, "request", NODE_GROUP, self.requests, tags, count=True)
        _rate_and_total(metrics, "response", NODE_GROUP, self.responses, tags, count=True)


def _rate_and_total(metrics: Metrics, prefix: str, group: str, sensor: Sensor,
                    tags: dict[str, str] | None = None, count: bool = False) -> None:
    """``<prefix>-rate`` and its ``<prefix>-total`` twin: of the recorded values, or of
    the recordings (``count``)."""
    if count:
        metrics.add(f"{prefix}-rate", group, sensor.count_rate, tags)
        metrics.add(f"{prefix}-total", group, lambda: sensor.lifetime_count, tags)
    else:
        metrics.add(f"{prefix}-rate", group, sensor.rate, tags)
        metrics.add(f"{prefix}-total", group, lambda: sensor.lifetime_total, tags)


class SenderMetrics:
    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        m = metrics
        self.record_send = m.sensor("record-send")
        self.record_error = m.sensor("record-error")
        self.record_retry = m.sensor("record-retry")
        self.batch_size = m.sensor("batch-size")
        self.compression_rate = m.sensor("compression-rate")
        self.queue_time = m.sensor("record-queue-time")
        self.records_per_request = m.sensor("records-per-request")
        self.request_latency = m.sensor("request-latency")
        self.produce_throttle_time = m.sensor("produce-throttle-time")
        self.record_size = m.sensor("record-size")
        self.requests = m.sensor("request")
        self.batch_split = m.sensor("batch-split")
        self.buffer_exhausted = m.sensor("buffer-exhausted-records")
        self.bufferpool_wait_time = m.sensor("bufferpool-wait-time")
        self._topics: dict[str, _TopicSensors] = {}
        self._nodes: dict[int, _NodeSensors] = {}
        _rate_and_total(m, "record-send", GROUP, self.record_send)
        _rate_and_total(m, "record-error", GROUP, self.record_error)
        _rate_and_total(m, "record-retry", GROUP, self.record_retry)
        m.add("batch-size-avg", GROUP, self.batch_size.avg,
              description="the average number of bytes sent per partition per request")
        m.add("batch-size-max", GROUP, self.batch_size.max)
        m.add("compression-rate-avg", GROUP, self.compression_rate.avg,
              description="compressed / uncompressed batch size (lower is better)")
        m.add("record-queue-time-avg", GROUP, self.queue_time.avg,
              description="ms a batch waited in the accumulator")
        m.add("record-queue-time-max", GROUP, self.queue_time.max)
        m.add("records-per-request-avg", GROUP, self.records_per_request.avg)
        m.add("request-latency-avg", GROUP, self.request_latency.avg,
              description="ms from writing a ProduceRequest to its response")
        m.add("request-latency-max", GROUP, self.request_latency.max)
        m.add("produce-throttle-time-avg", GROUP, self.produce_throttle_time.avg,
              description="ms the brokers throttled this producer (quotas)")
        m.add("produce-throttle-time-max", GROUP, self.produce_throttle_time.max)
        m.add("record-size-avg", GROUP, self.record_size.avg)
        m.add("record-size-max", GROUP, self.record_size.max)
        _rate_and_total(m, "request", GROUP, self.requests, count=True)
        _rate_and_total(m, "batch-split", GROUP, self.batch_split, count=True)
        _rate_and_total(m, "buffer-exhausted", GROUP, self.buffer_exhausted, count=True)

    def add_buffer_pool(self, pool: BufferPool) -> None:
        m, wait = self.metrics, self.bufferpool_wait_time
        m.add("buffer-total-bytes", GROUP, lambda: pool.total_memory)
        m.add("buffer-available-bytes", GROUP, pool.available_memory)
        m.add("waiting-threads", GROUP, pool.queued)
        # the share of wall time spent blocked on buffer.memory: ns waited per ns
        m.add("bufferpool-wait-ratio", GROUP, lambda: wait.rate() / 1e9)
        m.add("bufferpool-wait-time-ns-total", GROUP, lambda: wait.lifetime_total)

    def _topic(self, topic: str) -> _TopicSensors:
        sensors = self._topics.get(topic)
        if sensors is None:
            sensors = self._topics[topic] = _TopicSensors(self.metrics, topic)
        return sensors

    def _node(self, node_id: int) -> _NodeSensors:
        sensors = self._nodes.get(node_id)
        if sensors is None:
            sensors = self._nodes[node_id] = _NodeSensors(self.metrics, node_id)
        return sensors

    def record_request(self, node_id: int, batches: list[ProducerBatch], now_ms: int) -> None:
        """A ProduceRequest carrying ``batches`` is about to be written."""
        records = 0
        for batch in batches:
            count = batch.record_count
            records += count
            size = batch.estimated_size_in_bytes()
            ratio = batch.compression_ratio
            topic = self._topic(batch.topic_partition.topic)
            topic.records.record(count, now_ms)
            topic.bytes.record(size, now_ms)
            topic.compression.record(ratio, now_ms)
            self.record_send.record(count, now_ms)
            self.batch_size.record(size, now_ms)
            self.compression_rate.record(ratio, now_ms)
            self.queue_time.record(batch.queue_time_ms(), now_ms)
            if count:
                self.record_size.record(batch.appended_size() / count, now_ms)
        self.records_per_request.record(records, now_ms)
        self.requests.record(1, now_ms)
        self._node(node_id).requests.record(1, now_ms)

    def record_response(self, node_id: int, latency_ms: int, body: Any, now_ms: int) -> None:
        """A ProduceRequest was answered (``body`` None for acks=0)."""
        self.request_latency.record(latency_ms, now_ms)
        node = self._node(node_id)
        node.latency.record(latency_ms, now_ms)
        node.responses.record(1, now_ms)
        if body is not None:
            self.produce_throttle_time.record(getattr(body, "throttle_time_ms", 0) or 0, now_ms)

    def record_retries(self, batch: ProducerBatch, now_ms: int) -> None:
        self.record_retry.record(batch.record_count, now_ms)
        self._topic(batch.topic_partition.topic).retries.record(batch.record_count, now_ms)

    def record_errors(self, batch: ProducerBatch, now_ms: int | None = None) -> None:
        self.record_error.record(batch.record_count, now_ms)
        self._topic(batch.topic_partition.topic).errors.record(batch.record_count, now_ms)
