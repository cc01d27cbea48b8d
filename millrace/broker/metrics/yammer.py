"""The metric kinds Kafka's broker reports through Yammer: ``Meter``, ``Histogram`` and
``Timer`` (a meter plus a histogram), with the attributes JMX shows for them.

- ``Meter``: ``count`` since start plus exponentially weighted moving averages of the
  rate over one, five and fifteen minutes (``OneMinuteRate`` ... ``FifteenMinuteRate``,
  per second) and ``MeanRate``.  As in Yammer, ``mark(n)`` only adds; the averages move
  on a ``tick()`` every ``TICK_S`` (5 s): the events since the last tick make the
  instant rate and each average moves towards it by ``1 - exp(-5 s / window)``; the
  first tick starts each average at the instant rate.  The broker's metrics registry
  ticks every meter it holds from one loop task, so marking costs two additions.
- ``Histogram``: values (milliseconds or bytes) counted in log-spaced buckets (each
  bound ``BUCKET_FACTOR`` times the one before; a quantile is interpolated inside the
  bucket holding its rank, so it is within one bucket, 25 %, of the true value, and
  much closer for evenly spread values), lifetime ``count`` / ``sum`` / ``min`` / ``max``, and quantiles
  (the 50th ... 99.9th percentiles of JMX) over a recent window: the buckets of the
  current and of the previous ``WINDOW_TICKS`` ticks, like Yammer's exponentially
  decaying reservoir, which favours the last five minutes.  ``update`` is a bisect of
  a tuple and three additions.
- ``Timer``: ``update(ms)`` marks its meter and records the duration
  (Kafka's ``...RateAndTimeMs``).

Thread ownership: updated and read on the broker's event-loop thread.  A metric
updated from another thread (the ZooKeeper client's) is made with ``locked=True`` and
takes a lock around each update and read.
"""

from __future__ import annotations

import math
import threading
import time as _time
from bisect import bisect_left
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

TICK_S = 5.0
WINDOW_TICKS = 12  # quantiles cover the last one to two minutes (12-24 ticks of 5 s)
QUANTILES = (0.5, 0.75, 0.95, 0.98, 0.99, 0.999)
BUCKET_FACTOR = 1.25
_SMALLEST = 0.001
# upper bounds: 0.001 .. ~4e9 (ms: 46 days; bytes: 4 GB), then +Inf
BOUNDS: tuple[float, ...] = tuple(_SMALLEST * BUCKET_FACTOR ** i for i in range(131))


def _alpha(minutes: float) -> float:
    return 1.0 - math.exp(-TICK_S / 60.0 / minutes)


_ALPHAS = (_alpha(1), _alpha(5), _alpha(15))


def _lock(locked: bool) -> AbstractContextManager[object]:
    return threading.Lock() if locked else nullcontext()


class Meter:
    """A count and its moving average rates (module docstring)."""

    __slots__ = ("_clock", "_lock", "_rates", "_start", "_uncounted", "_unlocked", "count")

    def __init__(self, *, locked: bool = False,
                 clock: Callable[[], float] = _time.monotonic) -> None:
        self.count = 0
        self._uncounted = 0
        self._rates: list[float] | None = None  # 1, 5, 15 minute; None until the 1st tick
        self._clock = clock
        self._start = clock()
        self._lock = _lock(locked)
        self._unlocked = not locked

    def mark(self, n: int = 1) -> None:
        if self._unlocked:  # the loop thread's meters: no lock to enter (the hot path)
            self.count += n
            self._uncounted += n
            return
        with self._lock:
            self.count += n
            self._uncounted += n

    def tick(self) -> None:
        with self._lock:
            instant = self._uncounted / TICK_S
            self._uncounted = 0
            rates = self._rates
            if rates is None:
                self._rates = [instant, instant, instant]
            else:
                for i, a in enumerate(_ALPHAS):
                    rates[i] += a * (instant - rates[i])

    def rate(self, minutes: int) -> float:
        """The moving average over 1, 5 or 15 minutes, per second."""
        i = (1, 5, 15).index(minutes)  # ValueError for any other window
        rates = self._rates
        return 0.0 if rates is None else rates[i]

    def mean_rate(self, now: float | None = None) -> float:
        """Events per second since the meter was made (``now`` on its clock)."""
        elapsed = (self._clock() if now is None else now) - self._start
        return self.count / elapsed if elapsed > 0 else 0.0


class Histogram:
    """Values in log-spaced buckets; quantiles over a recent window (module docstring)."""

    __slots__ = ("_current", "_lock", "_previous", "_ticks", "_unlocked", "count", "max",
                 "min", "sum")

    def __init__(self, *, locked: bool = False) -> None:
        self.count = 0
        self.sum = 0.0
        self.min = math.inf
        self.max = -math.inf
        n = len(BOUNDS) + 1
        self._current = [0] * n
        self._previous = [0] * n
        self._ticks = 0
        self._lock = _lock(locked)
        self._unlocked = not locked

    def update(self, value: float) -> None:
        if self._unlocked:  # the loop thread's histograms: no lock to enter (the hot path)
            self._record(value)
            return
        with self._lock:
            self._record(value)

    def _record(self, value: float) -> None:
        self._current[bisect_left(BOUNDS, value)] += 1
        self.count += 1
        self.sum += value
        if value < self.min:
            self.min = value
        if value > self.max:
            self.max = value

    def tick(self) -> None:
        """Every ``TICK_S``: after ``WINDOW_TICKS`` ticks the current buckets become the
        previous ones and a fresh window starts."""
        self._ticks += 1
        if self._ticks >= WINDOW_TICKS:
            with self._lock:
                self._ticks = 0
                self._previous = self._current
                self._current = [0] * len(self._previous)

    @property
    def mean(self) -> float:
        return self.sum / self.count if self.count else 0.0

    def quantiles(self, qs: tuple[float, ...] = QUANTILES) -> list[float]:
        """The ``qs`` quantiles of the values in the window (0 when it holds none):
        the bucket holding each rank, interpolated linearly inside it and clamped to
        the lifetime min and max."""
        with self._lock:
            counts = [a + b for a, b in zip(self._current, self._previous)]
            lo_clamp, hi_clamp = self.min, self.max
        total = sum(counts)
        if total == 0:
            return [0.0] * len(qs)
        out: list[float] = []
        for q in qs:
            rank = q * total
            seen = 0
            for i, c in enumerate(counts):
                if c and seen + c >= rank:
                    lower = BOUNDS[i - 1] if i > 0 else 0.0
                    upper = BOUNDS[i] if i < len(BOUNDS) else hi_clamp
                    value = lower + (upper - lower) * max(0.0, rank - seen) / c
                    out.append(min(max(value, lo_clamp), hi_clamp))
                    break
                seen += c
            else:
                out.append(hi_clamp)
        return out


class Timer:
    """A meter of events plus a histogram of their durations in ms (Yammer's Timer)."""

    __slots__ = ("histogram", "meter")

    def __init__(self, *, locked: bool = False) -> None:
        self.meter = Meter(locked=locked)
        self.histogram = Histogram(locked=locked)

    def update(self, ms: float) -> None:
        self.meter.mark()
        self.histogram.update(ms)

    def tick(self) -> None:
        self.meter.tick()
        self.histogram.tick()

    @property
    def count(self) -> int:
        return self.meter.count
