"""The producer's metrics, named as Java's ``producer-metrics`` group (``SenderMetricsRegistry``).

Recorded per batch and per request on the sender thread -- never per record -- so they
cost nothing on ``send``'s path.  ``KafkaProducer.metrics()`` returns the snapshot.
"""

from __future__ import annotations

from millrace.client.metrics import Metrics
from millrace.client.producer._internals.buffer_pool import BufferPool
from millrace.client.producer._internals.producer_batch import ProducerBatch


class SenderMetrics:
    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self.record_send = metrics.sensor("record-send")
        self.record_error = metrics.sensor("record-error")
        self.record_retry = metrics.sensor("record-retry")
        self.batch_size = metrics.sensor("batch-size")
        self.compression_rate = metrics.sensor("compression-rate")
        self.queue_time = metrics.sensor("record-queue-time")
        self.records_per_request = metrics.sensor("records-per-request")
        self.request_latency = metrics.sensor("request-latency")
        self.record_size = metrics.sensor("record-size")
        self.requests = metrics.sensor("request")
        self.batch_split = metrics.sensor("batch-split")
        m = metrics
        m.add("record-send-rate", self.record_send.rate)
        m.add("record-send-total", lambda: self.record_send.lifetime_total)
        m.add("record-error-rate", self.record_error.rate)
        m.add("record-error-total", lambda: self.record_error.lifetime_total)
        m.add("record-retry-rate", self.record_retry.rate)
        m.add("record-retry-total", lambda: self.record_retry.lifetime_total)
        m.add("batch-size-avg", self.batch_size.avg)
        m.add("batch-size-max", self.batch_size.max)
        m.add("compression-rate-avg", self.compression_rate.avg)
        m.add("record-queue-time-avg", self.queue_time.avg)
        m.add("record-queue-time-max", self.queue_time.max)
        m.add("records-per-request-avg", self.records_per_request.avg)
        m.add("request-latency-avg", self.request_latency.avg)
        m.add("request-latency-max", self.request_latency.max)
        m.add("record-size-avg", self.record_size.avg)
        m.add("request-rate", self.requests.rate)
        m.add("request-total", lambda: self.requests.lifetime_total)
        m.add("batch-split-rate", self.batch_split.rate)
        m.add("batch-split-total", lambda: self.batch_split.lifetime_total)

    def add_buffer_pool(self, pool: BufferPool) -> None:
        self.metrics.add("buffer-total-bytes", lambda: pool.total_memory)
        self.metrics.add("buffer-available-bytes", pool.available_memory)
        self.metrics.add("waiting-threads", pool.queued)
        wait = self.metrics.sensor("bufferpool-wait-time")
        self.metrics.add("bufferpool-wait-time-ns-total", lambda: wait.lifetime_total)

    def record_request(self, batches: list[ProducerBatch], now_ms: int) -> None:
        records = 0
        for batch in batches:
            records += batch.record_count
            self.record_send.record(batch.record_count, now_ms)
            self.batch_size.record(batch.estimated_size_in_bytes(), now_ms)
            self.compression_rate.record(batch.compression_ratio, now_ms)
            self.queue_time.record(batch.queue_time_ms(), now_ms)
            if batch.record_count:
                self.record_size.record(batch.appended_size() / batch.record_count, now_ms)
        self.records_per_request.record(records, now_ms)
        self.requests.record(1, now_ms)
