"""Yammer's metric kinds (``millrace.broker.metrics.yammer``): the meter's moving averages
checked against Yammer's EWMA formula (and the values Yammer's own EWMA tests publish),
histogram quantiles against the exact quantiles of known data, the quantile window's
rotation, and the locked variants from several threads."""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Callable

import pytest

from millrace.broker.metrics.yammer import (
    BOUNDS,
    BUCKET_FACTOR,
    QUANTILES,
    TICK_S,
    WINDOW_TICKS,
    Histogram,
    Meter,
    Timer,
)

MINUTE_TICKS = int(60 / TICK_S)  # 12 ticks of 5 s


def yammer_ewma(per_tick: list[int], minutes: int) -> float:
    """Yammer's ``EWMA`` written out from its definition: alpha = 1 - e^(-5 s / 60 s / m);
    each tick the events since the last one make the instant rate (per second), the
    first tick sets the average to it, later ones move it by alpha towards it."""
    alpha = 1 - math.exp(-5.0 / 60.0 / minutes)
    rate: float | None = None
    for n in per_tick:
        instant = n / 5.0
        rate = instant if rate is None else rate + alpha * (instant - rate)
    return 0.0 if rate is None else rate


def run_meter(per_tick: list[int]) -> Meter:
    meter = Meter()
    for n in per_tick:
        if n:
            meter.mark(n)
        meter.tick()
    return meter


# --------------------------------------------------------------------------- Meter
def test_a_meter_counts_marks_and_rates_stay_zero_until_the_first_tick() -> None:
    meter = Meter()
    meter.mark()
    meter.mark(4)
    assert meter.count == 5
    assert [meter.rate(m) for m in (1, 5, 15)] == [0.0, 0.0, 0.0]
    meter.tick()
    # the first tick starts every average at the instant rate: 5 events / 5 s
    assert [meter.rate(m) for m in (1, 5, 15)] == [1.0, 1.0, 1.0]
    assert meter.count == 5  # ticking never changes the count


def test_the_rates_after_one_idle_minute_are_the_values_yammers_ewma_tests_publish() -> None:
    """Yammer/Dropwizard ``EWMATest``: update(3), tick → 0.6/s; after one minute of
    ticks without events the 1-minute rate is 0.22072766, the 5-minute 0.49123845, the
    15-minute 0.56130419 (0.6 · e^(-1/m))."""
    meter = run_meter([3] + [0] * MINUTE_TICKS)
    assert meter.rate(1) == pytest.approx(0.22072766, abs=1e-8)
    assert meter.rate(5) == pytest.approx(0.49123845, abs=1e-8)
    assert meter.rate(15) == pytest.approx(0.56130419, abs=1e-8)


def test_the_m_minute_rate_falls_to_1_over_e_after_m_idle_minutes() -> None:
    for minutes in (1, 5, 15):
        meter = run_meter([100] + [0] * (minutes * MINUTE_TICKS))
        assert meter.rate(minutes) == pytest.approx(20.0 / math.e, rel=1e-9)


def test_rates_follow_the_formula_over_an_irregular_load() -> None:
    rng = random.Random(24)
    per_tick = [rng.choice([0, 0, 1, 7, 50, 1000]) for _ in range(200)]
    meter = run_meter(per_tick)
    assert meter.count == sum(per_tick)
    for minutes in (1, 5, 15):
        assert meter.rate(minutes) == pytest.approx(yammer_ewma(per_tick, minutes),
                                                    rel=1e-12)
    # negative control: the checker tells the averages apart (they differ on this load)
    assert yammer_ewma(per_tick, 1) != pytest.approx(yammer_ewma(per_tick, 15), rel=1e-3)


def test_a_steady_load_keeps_every_rate_at_the_load() -> None:
    meter = run_meter([30] * 100)  # 30 events per 5 s tick
    assert [meter.rate(m) for m in (1, 5, 15)] == pytest.approx([6.0, 6.0, 6.0])


def test_only_one_five_and_fifteen_minute_rates_exist() -> None:
    with pytest.raises(ValueError):
        Meter().rate(10)


def test_the_mean_rate_is_the_count_over_the_time_since_creation() -> None:
    now = [100.0]
    meter = Meter(clock=lambda: now[0])
    meter.mark(50)
    now[0] = 110.0
    assert meter.mean_rate(now=110.0) == 5.0
    assert meter.mean_rate() == 5.0  # the meter's own clock, not another one
    assert Meter(clock=lambda: 7.0).mean_rate(now=7.0) == 0.0  # no time has passed


# --------------------------------------------------------------------------- Histogram
def yammer_quantile(values: list[float], q: float) -> float:
    """The exact quantile as Yammer's ``Snapshot.getValue`` takes it from sorted
    values: position q·(n+1), linear between the neighbours, clamped to the ends."""
    s = sorted(values)
    pos = q * (len(s) + 1)
    if pos < 1:
        return s[0]
    if pos >= len(s):
        return s[-1]
    lower, upper = s[int(pos) - 1], s[int(pos)]
    return lower + (pos - math.floor(pos)) * (upper - lower)


def filled(values: list[float]) -> Histogram:
    h = Histogram()
    for v in values:
        h.update(v)
    return h


@pytest.mark.parametrize("values", [
    [float(v) for v in range(1, 1001)],  # uniform 1..1000
    [float(v) for v in random.Random(7).sample(range(1, 1001), 1000)],  # same, shuffled
    [random.Random(8).lognormvariate(1.0, 2.0) for _ in range(5000)],  # latencies, skewed
    [0.25 * v for v in range(1, 4001)],  # sub-millisecond to 1 s
])
def test_quantiles_are_within_one_bucket_of_the_exact_ones(values: list[float]) -> None:
    h = filled(values)
    for q, got in zip(QUANTILES, h.quantiles()):
        exact = yammer_quantile(values, q)
        assert exact / BUCKET_FACTOR <= got <= exact * BUCKET_FACTOR, (q, got, exact)


def test_uniform_quantiles_interpolate_close_to_the_exact_ones() -> None:
    values = [float(v) for v in range(1, 1001)]
    got = dict(zip(QUANTILES, filled(values).quantiles()))
    for q in QUANTILES:
        assert got[q] == pytest.approx(yammer_quantile(values, q), rel=0.02), q
    # negative control: a quantile off by one bucket fails that check
    assert got[0.5] * BUCKET_FACTOR != pytest.approx(yammer_quantile(values, 0.5), rel=0.02)


def test_a_single_value_is_every_quantile_min_max_and_mean() -> None:
    h = filled([42.0])
    assert h.quantiles() == [42.0] * len(QUANTILES)
    assert (h.count, h.sum, h.min, h.max, h.mean) == (1, 42.0, 42.0, 42.0, 42.0)
    many = filled([3.7] * 500)
    assert many.quantiles() == [3.7] * len(QUANTILES)


def test_zero_and_values_past_the_last_bound_land_in_the_end_buckets() -> None:
    h = filled([0.0, 0.0, 0.0, 1e12])
    p50, *_, p999 = h.quantiles()
    assert 0.0 <= p50 <= BOUNDS[0]
    assert BOUNDS[-1] < p999 <= 1e12
    assert filled([1e12]).quantiles() == [1e12] * len(QUANTILES)


def test_an_empty_histogram_reports_zeros() -> None:
    h = Histogram()
    assert h.quantiles() == [0.0] * len(QUANTILES)
    assert (h.count, h.sum, h.mean) == (0, 0.0, 0.0)


def test_the_window_keeps_values_for_one_to_two_windows_then_forgets_them() -> None:
    h = filled([1000.0] * 10)
    for _ in range(WINDOW_TICKS - 1):
        h.tick()
    assert h.quantiles()[0] == 1000.0
    h.tick()  # WINDOW_TICKS: the values move to the previous window, still counted
    assert h.quantiles()[0] == 1000.0
    h.update(1.0)  # the new window's value shares the quantiles with the old ones
    assert h.quantiles()[0] > 1000.0 / BUCKET_FACTOR
    for _ in range(WINDOW_TICKS):
        h.tick()  # the old window is dropped; 1.0 is now the previous window
    assert all(1.0 <= q <= BUCKET_FACTOR for q in h.quantiles())
    for _ in range(WINDOW_TICKS):
        h.tick()
    assert h.quantiles() == [0.0] * len(QUANTILES)  # nothing recent
    # the lifetime figures never rotate
    assert (h.count, h.sum, h.min, h.max) == (11, 10001.0, 1.0, 1000.0)


def test_a_timer_marks_its_meter_and_records_the_duration() -> None:
    t = Timer()
    for ms in (10.0, 20.0, 30.0):
        t.update(ms)
    assert t.count == 3 == t.meter.count == t.histogram.count
    assert t.histogram.sum == 60.0
    t.tick()
    assert t.meter.rate(1) == pytest.approx(3 / TICK_S)


# --------------------------------------------------------------------------- locking
THREADS = 8
PER_THREAD = 5000


def hammer(work: Callable[[], None]) -> None:
    start = threading.Barrier(THREADS)

    def run() -> None:
        start.wait()
        for _ in range(PER_THREAD):
            work()

    threads = [threading.Thread(target=run) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_locked_meter_histogram_and_timer_lose_nothing_across_threads() -> None:
    meter, histogram, timer = Meter(locked=True), Histogram(locked=True), Timer(locked=True)

    def work() -> None:
        meter.mark(2)
        histogram.update(3.0)
        timer.update(1.0)

    hammer(work)
    total = THREADS * PER_THREAD
    assert meter.count == 2 * total
    assert (histogram.count, histogram.sum) == (total, 3.0 * total)
    assert timer.count == timer.histogram.count == total
    meter.tick()
    assert meter.rate(1) == 2 * total / TICK_S
    assert histogram.quantiles() == [3.0] * len(QUANTILES)


def test_a_locked_metric_really_waits_for_its_lock() -> None:
    """The lock is taken by the update: while the test holds it, another thread's
    ``mark`` cannot finish (negative control: an unlocked meter's does at once)."""
    for locked in (True, False):
        meter = Meter(locked=locked)
        lock = meter._lock
        with lock:
            t = threading.Thread(target=meter.mark)
            t.start()
            t.join(0.2)
            assert t.is_alive() is locked
        t.join()
        assert meter.count == 1


def test_a_locked_histogram_rotates_and_reads_while_another_thread_updates() -> None:
    h = Histogram(locked=True)
    stop = threading.Event()

    def update() -> None:
        while not stop.is_set():
            h.update(5.0)

    t = threading.Thread(target=update)
    t.start()
    try:
        for _ in range(5 * WINDOW_TICKS):
            h.tick()
            assert all(q in (0.0, 5.0) for q in h.quantiles())
    finally:
        stop.set()
        t.join()
    assert h.sum == 5.0 * h.count
