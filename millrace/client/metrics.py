"""Windowed client metrics (a small cut of Java's ``Metrics``/``Sensor``/``SampledStat``).

A ``Sensor`` records values; each stat attached to it reads them over a sliding window
of ``samples`` sub-windows of ``window_ms`` (Java's defaults: 2 x 30 s).  ``Avg`` and
``Max`` are NaN-free: an idle window reads 0.  ``Rate`` divides the windowed total by the
elapsed window (at least one full sub-window), as Java's ``Rate`` does.  ``Total``
counts forever.  Thread-safe: sensors are recorded from the sender thread and read from
any thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from millrace.common.time import SYSTEM_TIME, Time


class _Sample:
    __slots__ = ("count", "max", "start_ms", "total")

    def __init__(self, start_ms: int) -> None:
        self.start_ms = start_ms
        self.count = 0
        self.total = 0.0
        self.max = float("-inf")


class Sensor:
    """Records values; reports avg/max/rate/total over the window."""

    __slots__ = (
        "_lock",
        "_n",
        "_samples",
        "_time",
        "_window_ms",
        "lifetime_count",
        "lifetime_total",
    )

    def __init__(self, time: Time, window_ms: int = 30_000, samples: int = 2) -> None:
        self._time = time
        self._window_ms = window_ms
        self._n = samples
        self._samples: list[_Sample] = []
        self._lock = threading.Lock()
        self.lifetime_total = 0.0
        self.lifetime_count = 0

    def record(self, value: float = 1.0, now_ms: int | None = None) -> None:
        now = self._time.milliseconds() if now_ms is None else now_ms
        with self._lock:
            sample = self._current(now)
            sample.count += 1
            sample.total += value
            if value > sample.max:
                sample.max = value
            self.lifetime_total += value
            self.lifetime_count += 1

    def _current(self, now: int) -> _Sample:
        samples = self._samples
        if not samples or now - samples[-1].start_ms >= self._window_ms:
            samples.append(_Sample(now))
            if len(samples) > self._n:
                del samples[0]
        return samples[-1]

    def _live(self, now: int) -> list[_Sample]:
        horizon = now - self._window_ms * self._n
        return [s for s in self._samples if s.start_ms > horizon]

    def avg(self, now_ms: int | None = None) -> float:
        now = self._time.milliseconds() if now_ms is None else now_ms
        with self._lock:
            live = self._live(now)
            count = sum(s.count for s in live)
            return sum(s.total for s in live) / count if count else 0.0

    def max(self, now_ms: int | None = None) -> float:
        now = self._time.milliseconds() if now_ms is None else now_ms
        with self._lock:
            values = [s.max for s in self._live(now) if s.count]
            return max(values) if values else 0.0

    def rate(self, now_ms: int | None = None) -> float:
        """Sum of recorded values per second over the window."""
        now = self._time.milliseconds() if now_ms is None else now_ms
        with self._lock:
            live = self._live(now)
            if not live:
                return 0.0
            elapsed = now - live[0].start_ms
            elapsed = max(elapsed, self._window_ms * (self._n - 1))
            return sum(s.total for s in live) / (max(elapsed, 1) / 1000.0)


class Metrics:
    """Named sensors plus gauges; ``snapshot()`` gives ``{metric name: value}``."""

    def __init__(self, time: Time = SYSTEM_TIME, window_ms: int = 30_000,
                 samples: int = 2) -> None:
        self._time = time
        self._window_ms = window_ms
        self._samples = samples
        self._sensors: dict[str, Sensor] = {}
        self._views: dict[str, Callable[[], float]] = {}

    def sensor(self, name: str) -> Sensor:
        sensor = self._sensors.get(name)
        if sensor is None:
            sensor = self._sensors[name] = Sensor(self._time, self._window_ms, self._samples)
        return sensor

    def add(self, metric: str, view: Callable[[], float]) -> None:
        self._views[metric] = view

    def snapshot(self) -> dict[str, float]:
        return {name: float(view()) for name, view in self._views.items()}
