"""The perf tools' bookkeeping with an injected clock: latency stats fed like the Sender
thread feeds them, reporting windows, the throttle, and the result lines and JSON."""

from __future__ import annotations

import json
import re

import pytest

from millrace.client.perf import (
    CONSUMER_HEADER,
    ConsumerPerfResult,
    ConsumerWindow,
    LatencyHistogram,
    ProducerPerfResult,
    ProducerStats,
    ProducerWindow,
    ThroughputThrottler,
    format_time,
    random_payload,
)
from millrace.common.errors import NotEnoughReplicasError
from millrace.common.time import MockTime

MS = 1_000_000  # ns


def test_producer_stats_latencies_windows_and_errors() -> None:
    clock = MockTime()
    start = clock.nanoseconds()
    windows: list[ProducerWindow] = []
    progress: list[int] = []
    stats = ProducerStats(100, start, clock, reporting_interval_ms=1000,
                          on_window=windows.append, on_progress=progress.append,
                          progress_interval_ms=100)
    # three records sent at t=0, acknowledged at 2, 4 and 6 ms
    for _ in range(3):
        clock.sleep(2)
        stats.on_completion(start, None, None)
    assert windows == [] and progress == []
    # one failure at t=150 ms: counted, no latency, progress reported (100 ms passed)
    clock.sleep(144)
    error = NotEnoughReplicasError("only 0 of 1")
    stats.on_completion(start, None, error)
    assert (stats.failed, stats.first_error, stats.histogram.count) == (1, error, 3)
    assert progress == [4]
    # a record sent at t=900 ms, acknowledged at t=1000 ms closes the first window
    sent = start + 900 * MS
    clock.sleep(850)
    stats.on_completion(sent, None, None)
    assert windows == [ProducerWindow(records=4, elapsed_s=1.0, record_size=100,
                                      avg_latency_ms=(2 + 4 + 6 + 100) / 4,
                                      max_latency_ms=100.0)]
    assert windows[0].records_per_s == 4.0
    assert windows[0].line() == ("4 records sent, 4.0 records/sec (0.00 MB/sec), "
                                 "28.0 ms avg latency, 100.0 ms max latency.")
    assert stats.completed == 5
    assert stats.histogram.percentile(50) == pytest.approx(4000, rel=1 / 128)  # µs
    assert stats.histogram.max == 100_000


def test_producer_result_from_histogram_and_its_line() -> None:
    h = LatencyHistogram()
    h.record_all([1000] * 98 + [5000, 200_000])  # 98 at 1 ms, one 5 ms, one 200 ms
    result = ProducerPerfResult.from_histogram("t", h, failed=0, record_size=1024,
                                               elapsed_s=0.5)
    assert result.records_sent == 100
    assert result.records_per_s == 200.0
    assert result.mb_per_s == pytest.approx(200 * 1024 / 2**20)
    # within the histogram's bucket precision (1/128)
    assert result.p50_latency_ms == result.p95_latency_ms == pytest.approx(1.0, rel=1 / 128)
    assert result.p99_latency_ms == pytest.approx(5.0, rel=1 / 128)
    assert result.p999_latency_ms == 200.0
    assert result.max_latency_ms == 200.0
    assert result.avg_latency_ms == pytest.approx((98 * 1000 + 5000 + 200_000) / 100 / 1000)
    line = result.summary_line()
    assert line.startswith("100 records sent, 200.0 records/sec (0.20 MB/sec), 3.03 ms avg "
                           "latency, 200.00 ms max latency, 1.00 ms 50th, 1.00 ms 95th, ")
    assert line.endswith(" ms 99th, 200.00 ms 99.9th.")
    doc = json.loads(json.dumps(result.as_dict()))
    assert doc["records_sent"] == 100 and doc["records_failed"] == 0
    assert doc["first_error"] is None and doc["p999_latency_ms"] == 200.0


def test_producer_result_of_nothing() -> None:
    result = ProducerPerfResult.from_histogram("t", LatencyHistogram(), failed=3,
                                               record_size=10, elapsed_s=0.0,
                                               first_error="boom")
    assert (result.records_sent, result.records_failed, result.records_per_s) == (0, 3, 0.0)
    assert result.summary_line().startswith("0 records sent, 0.0 records/sec")


def test_throttler_sleeps_until_records_are_due() -> None:
    clock = MockTime()
    slept: list[float] = []

    def sleep_ms(ms: float) -> None:
        slept.append(ms)
        clock.sleep(ms)

    throttler = ThroughputThrottler(1000, clock.nanoseconds(), clock, sleep_ms)
    # 1000 records/s: record n is due at n ms; sleeps happen only once >= 1 ms ahead
    throttler.throttle(1)
    assert slept == [1.0]
    throttler.throttle(2)
    assert slept == [1.0, 1.0]
    clock.sleep(10)  # behind schedule: no sleep
    throttler.throttle(3)
    assert slept == [1.0, 1.0]
    throttler.throttle(50)  # now t=12 ms, record 50 due at 50 ms
    assert slept[-1] == pytest.approx(38.0)


def test_unlimited_throttler_never_sleeps() -> None:
    clock = MockTime()
    throttler = ThroughputThrottler(-1, clock.nanoseconds(), clock,
                                    lambda ms: pytest.fail("slept"))
    assert throttler.unlimited
    for n in range(1, 1000):
        throttler.throttle(n)
    with pytest.raises(ValueError):
        ThroughputThrottler(0, 0, clock)


def test_random_payload() -> None:
    payload = random_payload(500, seed=1)
    assert len(payload) == 500 and set(payload) <= set(range(65, 91))
    assert payload == random_payload(500, seed=1) and random_payload(0) == b""
    with pytest.raises(ValueError):
        random_payload(-1)


def test_consumer_result_rates() -> None:
    r = ConsumerPerfResult.build("t", "g", expected=1000, records=1000, nbytes=2 * 2**20,
                                 start_time_ms=1_700_000_000_000, elapsed_ms=2000.0,
                                 rebalance_ms=1000.0, timed_out=False)
    assert (r.mb, r.mb_per_s, r.records_per_s) == (2.0, 1.0, 500.0)
    assert (r.fetch_ms, r.fetch_mb_per_s, r.fetch_records_per_s) == (1000.0, 2.0, 1000.0)
    assert r.end_time_ms == 1_700_000_002_000
    values = r.row().split(", ")
    assert len(values) == len(CONSUMER_HEADER.split(", ")) == 10
    assert values[0] == format_time(1_700_000_000_000)
    assert values[1] == format_time(1_700_000_002_000)
    assert values[2:] == ["2.0000", "1.0000", "1000", "500.0000", "1000", "1000", "2.0000",
                          "1000.0000"]
    doc = json.loads(json.dumps(r.as_dict()))
    assert (doc["records"], doc["group"], doc["timed_out"]) == (1000, "g", False)


def test_consumer_result_of_an_instant_run() -> None:
    r = ConsumerPerfResult.build("t", None, 5, 0, 0, 0, elapsed_ms=0.0, rebalance_ms=3.0,
                                 timed_out=True)
    assert (r.records_per_s, r.fetch_ms, r.fetch_records_per_s) == (0.0, 0.0, 0.0)


def test_consumer_window_line() -> None:
    w = ConsumerWindow(time_ms=1_700_000_000_123, total_bytes=3 * 2**20, total_records=30,
                       interval_bytes=2**20, interval_records=10, interval_ms=500.0,
                       rebalance_ms=250.0)
    values = w.line().split(", ")
    assert values[0] == format_time(1_700_000_000_123)
    assert values[1:] == ["3.0000", "2.0000", "30", "20.0000", "250", "250", "4.0000",
                          "40.0000"]


def test_format_time_has_milliseconds() -> None:
    text = format_time(1_700_000_000_007)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:007", text), text
