"""Producer throughput and latency (the library side of ``millrace perf produce``; Kafka's
``ProducerPerformance`` tool).

Theory of operation: the caller's thread sends ``num_records`` records of one fixed
random payload as fast as the producer takes them, or at ``throughput`` records/s
(``ThroughputThrottler``).  Every record carries a callback made with the monotonic
time just before its ``send``; the Sender thread runs it when the outcome is known,
so a record's latency is *send() to acknowledgement*, including any time ``send``
blocked on buffer memory.  ``ProducerStats`` -- owned by the Sender thread while the run
lasts -- adds each latency to a ``LatencyHistogram`` and to the current reporting window;
when a window is ``reporting_interval_ms`` old it is handed to ``on_window`` (on the
Sender thread, so listeners must be quick).  After ``flush`` the caller's thread reads
the totals: the run's time is from the first ``send`` to the end of ``flush``.

Sizes in MB are 2^20 bytes of record values, as in Kafka's perf tools.
"""

from __future__ import annotations

import functools
import random
import time as _time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any, cast

from millrace.client.perf.histogram import LatencyHistogram
from millrace.client.perf.metrics_table import by_display_name
from millrace.client.producer import KafkaProducer, ProducerRecord, RecordMetadata
from millrace.common.time import SYSTEM_TIME, Time

MB = 1024 * 1024
PERCENTILES = (50.0, 95.0, 99.0, 99.9)


def random_payload(size: int, seed: int | None = None) -> bytes:
    """``size`` random uppercase letters (the kind of payload Kafka's tool sends)."""
    if size < 0:
        raise ValueError(f"a record size cannot be negative: {size}")
    rng = random.Random(seed)
    return bytes(rng.randrange(65, 91) for _ in range(size))


@dataclass(frozen=True)
class ProducerWindow:
    """One reporting interval: records acknowledged in it and their latencies."""

    records: int
    elapsed_s: float
    record_size: int
    avg_latency_ms: float
    max_latency_ms: float

    @property
    def records_per_s(self) -> float:
        return self.records / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.records_per_s * self.record_size / MB

    def line(self) -> str:
        return (f"{self.records} records sent, {self.records_per_s:.1f} records/sec "
                f"({self.mb_per_s:.2f} MB/sec), {self.avg_latency_ms:.1f} ms avg latency, "
                f"{self.max_latency_ms:.1f} ms max latency.")


@dataclass(frozen=True)
class ProducerPerfResult:
    """The outcome of a run.  Latencies (ms) cover the acknowledged records only."""

    topic: str
    records_sent: int  # acknowledged without error
    records_failed: int
    record_size: int
    elapsed_s: float
    records_per_s: float
    mb_per_s: float
    avg_latency_ms: float
    max_latency_ms: float
    p50_latency_ms: float
    p95_latency_ms: float
    p99_latency_ms: float
    p999_latency_ms: float
    first_error: str | None = None
    # the producer's metrics at the end (``collect_metrics``): {group:name:{tags}: value}
    metrics: dict[str, float] | None = None

    @classmethod
    def from_histogram(cls, topic: str, histogram: LatencyHistogram, failed: int,
                       record_size: int, elapsed_s: float,
                       first_error: str | None = None) -> ProducerPerfResult:
        """Totals from a histogram of latencies in microseconds."""
        sent = histogram.count
        rate = sent / elapsed_s if elapsed_s > 0 else 0.0
        p50, p95, p99, p999 = (histogram.percentile(p) / 1000.0 for p in PERCENTILES)
        return cls(topic=topic, records_sent=sent, records_failed=failed,
                   record_size=record_size, elapsed_s=elapsed_s, records_per_s=rate,
                   mb_per_s=rate * record_size / MB, avg_latency_ms=histogram.mean / 1000.0,
                   max_latency_ms=histogram.max / 1000.0, p50_latency_ms=p50,
                   p95_latency_ms=p95, p99_latency_ms=p99, p999_latency_ms=p999,
                   first_error=first_error)

    def summary_line(self) -> str:
        return (f"{self.records_sent} records sent, {self.records_per_s:.1f} records/sec "
                f"({self.mb_per_s:.2f} MB/sec), {self.avg_latency_ms:.2f} ms avg latency, "
                f"{self.max_latency_ms:.2f} ms max latency, {self.p50_latency_ms:.2f} ms 50th, "
                f"{self.p95_latency_ms:.2f} ms 95th, {self.p99_latency_ms:.2f} ms 99th, "
                f"{self.p999_latency_ms:.2f} ms 99.9th.")

    def as_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        if doc["metrics"] is None:
            del doc["metrics"]
        return doc


class ThroughputThrottler:
    """Holds a sender to ``target_per_s`` on average (a negative target: no limit).

    ``throttle(sent)`` after each send sleeps until ``sent`` records are due at the target
    rate, but only once it is at least ``min_sleep_ms`` ahead, so fast rates sleep in
    coarse steps instead of once per record.
    """

    def __init__(self, target_per_s: float, start_ns: int, time: Time = SYSTEM_TIME,
                 sleep_ms: Callable[[float], None] | None = None,
                 min_sleep_ms: float = 1.0) -> None:
        if target_per_s == 0:
            raise ValueError("a throughput of 0 records/s would never finish; "
                             "use a negative value for no limit")
        self.target_per_s = target_per_s
        self._start_ns = start_ns
        self._time = time
        self._sleep_ms = sleep_ms or (lambda ms: _time.sleep(ms / 1000.0))
        self._ns_per_record = 1e9 / target_per_s if target_per_s > 0 else 0.0
        self._min_sleep_ns = min_sleep_ms * 1e6

    @property
    def unlimited(self) -> bool:
        return self.target_per_s < 0

    def throttle(self, sent: int) -> None:
        if self.target_per_s < 0:
            return
        ahead_ns = sent * self._ns_per_record - (self._time.nanoseconds() - self._start_ns)
        if ahead_ns >= self._min_sleep_ns:
            self._sleep_ms(ahead_ns / 1e6)


class ProducerStats:
    """Per-record outcomes -> a latency histogram, an error count, reporting windows.

    ``on_completion`` is the producer callback (bound to a record's send time with
    ``functools.partial``); it runs on the Sender thread, which owns every field here
    until the run is flushed.
    """

    def __init__(self, record_size: int, start_ns: int, time: Time = SYSTEM_TIME,
                 reporting_interval_ms: int = 5000,
                 on_window: Callable[[ProducerWindow], None] | None = None,
                 on_progress: Callable[[int], None] | None = None,
                 progress_interval_ms: int = 100) -> None:
        self.record_size = record_size
        self.histogram = LatencyHistogram()
        self.failed = 0
        self.first_error: BaseException | None = None
        self._time = time
        self._interval_ns = reporting_interval_ms * 1_000_000
        self._progress_interval_ns = progress_interval_ms * 1_000_000
        self._on_window = on_window
        self._on_progress = on_progress
        self._window_start_ns = start_ns
        self._next_window_ns = start_ns + self._interval_ns
        self._next_progress_ns = start_ns + self._progress_interval_ns
        self._window_count = 0
        self._window_total_us = 0
        self._window_max_us = 0

    @property
    def completed(self) -> int:
        """Records with an outcome so far (acknowledged or failed)."""
        return self.histogram.count + self.failed

    def on_completion(self, send_ns: int, _metadata: RecordMetadata | None,
                      error: BaseException | None) -> None:
        now = self._time.nanoseconds()
        if error is not None:
            self.failed += 1
            if self.first_error is None:
                self.first_error = error
        else:
            latency_us = (now - send_ns) // 1000
            self.histogram.record(latency_us)
            self._window_count += 1
            self._window_total_us += latency_us
            if latency_us > self._window_max_us:
                self._window_max_us = latency_us
        if now >= self._next_progress_ns:
            self._next_progress_ns = now + self._progress_interval_ns
            if self._on_progress is not None:
                self._on_progress(self.completed)
        if now >= self._next_window_ns:
            self._close_window(now)

    def _close_window(self, now: int) -> None:
        count = self._window_count
        window = ProducerWindow(
            records=count, elapsed_s=(now - self._window_start_ns) / 1e9,
            record_size=self.record_size,
            avg_latency_ms=self._window_total_us / count / 1000.0 if count else 0.0,
            max_latency_ms=self._window_max_us / 1000.0)
        self._window_start_ns = now
        self._next_window_ns = now + self._interval_ns
        self._window_count = self._window_total_us = self._window_max_us = 0
        if self._on_window is not None:
            self._on_window(window)


class ProducerPerformance:
    """Send ``num_records`` records of ``record_size`` bytes to ``topic`` and measure.

    ``config`` is handed to ``KafkaProducer`` as is (the producer's defaults apply:
    acks=all, idempotence on).  ``throughput`` limits records/s (negative: no limit).
    ``run`` raises what ``send`` raises (no metadata within ``max.block.ms``, a bad
    config); records that fail later are counted in the result.
    """

    def __init__(self, config: Mapping[str, Any], topic: str, num_records: int,
                 record_size: int, *, throughput: float = -1, payload: bytes | None = None,
                 reporting_interval_ms: int = 5000,
                 on_window: Callable[[ProducerWindow], None] | None = None,
                 on_progress: Callable[[int], None] | None = None,
                 time: Time = SYSTEM_TIME,
                 sleep_ms: Callable[[float], None] | None = None,
                 collect_metrics: bool = False) -> None:
        if num_records < 0:
            raise ValueError(f"the number of records cannot be negative: {num_records}")
        if throughput == 0:
            raise ValueError("a throughput of 0 records/s would never finish; "
                             "use -1 for no limit")
        self.config = dict(config)
        self.topic = topic
        self.num_records = num_records
        self.payload = payload if payload is not None else random_payload(record_size)
        self.record_size = len(self.payload)
        self.throughput = throughput
        self.reporting_interval_ms = reporting_interval_ms
        self.on_window = on_window
        self.on_progress = on_progress
        self._time = time
        self._sleep_ms = sleep_ms
        self.collect_metrics = collect_metrics
        self.stats: ProducerStats | None = None

    def run(self) -> ProducerPerfResult:
        # bytes in, bytes out: no serializers
        producer = cast(KafkaProducer[bytes, bytes], KafkaProducer(self.config, time=self._time))
        ok = False
        try:
            result = self._run(producer)
            ok = True
            return result
        finally:
            producer.close(None if ok else 0)

    def _run(self, producer: KafkaProducer[bytes, bytes]) -> ProducerPerfResult:
        clock = self._time.nanoseconds
        start = clock()
        stats = self.stats = ProducerStats(
            self.record_size, start, self._time, self.reporting_interval_ms, self.on_window,
            self.on_progress)
        throttler = ThroughputThrottler(self.throughput, start, self._time, self._sleep_ms)
        topic, payload = self.topic, self.payload
        send, completion = producer.send, stats.on_completion
        partial = functools.partial
        if throttler.unlimited:
            for _ in range(self.num_records):
                send(ProducerRecord(topic, payload), partial(completion, clock()))
        else:
            throttle = throttler.throttle
            for i in range(1, self.num_records + 1):
                send(ProducerRecord(topic, payload), partial(completion, clock()))
                throttle(i)
        producer.flush()
        elapsed_s = (clock() - start) / 1e9
        error = stats.first_error
        result = ProducerPerfResult.from_histogram(
            topic, stats.histogram, stats.failed, self.record_size, elapsed_s,
            None if error is None else f"{type(error).__name__}: {error}")
        if self.collect_metrics:  # after flush, before close, as Kafka's tool reads them
            result = replace(result, metrics=by_display_name(producer.metrics(raw=True)))
        return result
