"""Performance tools for producers and consumers (Kafka's ``ProducerPerformance`` and
``ConsumerPerformance``): the logic behind ``millrace perf produce`` and ``millrace perf
consume``, usable from Python too::

    from millrace.client.perf import ProducerPerformance

    result = ProducerPerformance({"bootstrap.servers": "127.0.0.1:9092", "acks": "1"},
                                 "bench", num_records=100_000, record_size=100).run()
    print(result.summary_line())
"""

from millrace.client.perf.consumer_performance import (
    CONSUMER_HEADER,
    WINDOW_HEADER,
    ConsumerPerformance,
    ConsumerPerfResult,
    ConsumerWindow,
    format_time,
)
from millrace.client.perf.histogram import LatencyHistogram, bucket_bounds, bucket_index
from millrace.client.perf.metrics_table import by_display_name, display_name, format_metrics
from millrace.client.perf.producer_performance import (
    PERCENTILES,
    ProducerPerformance,
    ProducerPerfResult,
    ProducerStats,
    ProducerWindow,
    ThroughputThrottler,
    random_payload,
)

__all__ = [
    "CONSUMER_HEADER",
    "PERCENTILES",
    "WINDOW_HEADER",
    "ConsumerPerfResult",
    "ConsumerPerformance",
    "ConsumerWindow",
    "LatencyHistogram",
    "ProducerPerfResult",
    "ProducerPerformance",
    "ProducerStats",
    "ProducerWindow",
    "ThroughputThrottler",
    "bucket_bounds",
    "bucket_index",
    "by_display_name",
    "display_name",
    "format_metrics",
    "format_time",
    "random_payload",
]
