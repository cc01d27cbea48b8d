"""Windowed client metrics (a small cut of Java's ``Metrics``/``Sensor``/``SampledStat``/
``MetricsReporter``).

A ``Sensor`` records values; each stat read from it spans a sliding window of ``samples``
sub-windows of ``window_ms`` (Java's defaults: 2 x 30 s, ``metrics.num.samples`` and
``metrics.sample.window.ms``).  ``avg``/``max``/``min`` read 0 over an idle window (Java
reads NaN; 0 keeps dashboards and JSON free of NaN).  ``rate`` divides the windowed sum of
the recorded values by the elapsed window (at least all sub-windows but the newest), as
Java's ``Rate`` does; ``count_rate`` does the same with the number of recordings
(``Rate(WindowedCount)``).  ``lifetime_total``/``lifetime_count`` never reset: they are the
``-total`` twin of every rate (``CumulativeSum`` / ``CumulativeCount``).

A metric is a ``MetricName`` -- Java's (name, group, tags) -- plus a function read when the
metric is read, so nothing is computed between reads.  The producer's metrics are in
groups ``producer-metrics``, ``producer-topic-metrics`` (tag ``topic``) and
``producer-node-metrics`` (tag ``node-id``); the consumer's in ``consumer-metrics``,
``consumer-fetch-manager-metrics`` (per partition with tags ``topic``, ``partition``) and
``consumer-coordinator-metrics``.  Every metric carries the ``client-id`` tag.

``Metrics.snapshot()`` gives kafka-python's view, ``{group: {name: value}}``: the tags
other than ``client-id`` are folded into the group name with ``.`` and ``-`` --
``producer-topic-metrics.<topic>``, ``producer-node-metrics.node-<id>``,
``consumer-fetch-manager-metrics.<topic>-<partition>``.  ``raw=True`` gives
``{MetricName: value}`` with the tags; ``flat=True`` the untagged metrics as
``{name: value}`` (the view millrace's clients returned before they had groups).

Reporters (``metric.reporters``): each is told the namespace (``kafka.producer`` /
``kafka.consumer``, the JMX domain) with ``context_change``, then given every metric with
``init`` and each later one with ``metric_change`` / ``metric_removal``; ``close`` at the
end.  ``millrace.client.prometheus.PrometheusReporter`` is one.

Thread-safety: sensors are recorded from the client's threads (the producer's sender, the
consumer's application and heartbeat threads) and read from any thread; each sensor has its
own lock.  Registration takes ``Metrics._lock``; reporters are called outside it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from millrace.common.errors import ConfigError
from millrace.common.time import SYSTEM_TIME, Time

log = logging.getLogger(__name__)


class _Sample:
    __slots__ = ("count", "max", "min", "start_ms", "total")

    def __init__(self, start_ms: int) -> None:
        self.start_ms = start_ms
        self.count = 0
        self.total = 0.0
        self.max = float("-inf")
        self.min = float("inf")


class Sensor:
    """Records values; reports avg/max/min/rate/count-rate over the window and lifetime
    totals."""

    __slots__ = (
        "_lock",
        "_n",
        "_samples",
        "_time",
        "_window_ms",
        "last_value",
        "lifetime_count",
        "lifetime_total",
    )

    def __init__(self, time: Time, window_ms: int = 30_000, samples: int = 2) -> None:
        self._time = time
        self._window_ms = max(window_ms, 1)
        self._n = samples
        self._samples: list[_Sample] = []  # guarded by _lock
        self._lock = threading.Lock()
        self.lifetime_total = 0.0
        self.lifetime_count = 0
        self.last_value = 0.0  # Java's ``Value`` stat: the latest recording

    def record(self, value: float = 1.0, now_ms: int | None = None) -> None:
        now = self._time.milliseconds() if now_ms is None else now_ms
        with self._lock:
            sample = self._current(now)
            sample.count += 1
            sample.total += value
            if value > sample.max:
                sample.max = value
            if value < sample.min:
                sample.min = value
            self.lifetime_total += value
            self.lifetime_count += 1
            self.last_value = value

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

    def _now(self, now_ms: int | None) -> int:
        return self._time.milliseconds() if now_ms is None else now_ms

    def avg(self, now_ms: int | None = None) -> float:
        now = self._now(now_ms)
        with self._lock:
            live = self._live(now)
            count = sum(s.count for s in live)
            return sum(s.total for s in live) / count if count else 0.0

    def max(self, now_ms: int | None = None) -> float:
        now = self._now(now_ms)
        with self._lock:
            values = [s.max for s in self._live(now) if s.count]
            return max(values) if values else 0.0

    def min(self, now_ms: int | None = None) -> float:
        now = self._now(now_ms)
        with self._lock:
            values = [s.min for s in self._live(now) if s.count]
            return min(values) if values else 0.0

    def total(self, now_ms: int | None = None) -> float:
        """The sum of the values recorded in the window."""
        now = self._now(now_ms)
        with self._lock:
            return sum(s.total for s in self._live(now))

    def count(self, now_ms: int | None = None) -> int:
        """How many values were recorded in the window."""
        now = self._now(now_ms)
        with self._lock:
            return sum(s.count for s in self._live(now))

    def _per_window(self, now: int, amount: Callable[[_Sample], float],
                    unit_seconds: float) -> float:
        with self._lock:
            live = self._live(now)
            if not live:
                return 0.0
            elapsed = max(now - live[0].start_ms, self._window_ms * (self._n - 1), 1)
            return sum(amount(s) for s in live) / (elapsed / 1000.0 / unit_seconds)

    def rate(self, now_ms: int | None = None, unit_seconds: float = 1.0) -> float:
        """Sum of the recorded values per ``unit_seconds`` over the window."""
        return self._per_window(self._now(now_ms), lambda s: s.total, unit_seconds)

    def count_rate(self, now_ms: int | None = None, unit_seconds: float = 1.0) -> float:
        """Recordings per ``unit_seconds`` over the window."""
        return self._per_window(self._now(now_ms), lambda s: s.count, unit_seconds)


class MetricName:
    """Java's ``MetricName``: a name, a group and tags (``client-id`` first)."""

    __slots__ = ("description", "group", "name", "tags")

    def __init__(self, name: str, group: str, tags: Mapping[str, str] | None = None,
                 description: str = "") -> None:
        self.name = name
        self.group = group
        self.tags: tuple[tuple[str, str], ...] = tuple((tags or {}).items())
        self.description = description

    def _key(self) -> tuple[str, str, frozenset[tuple[str, str]]]:
        return self.name, self.group, frozenset(self.tags)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MetricName) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        tags = ",".join(f"{k}={v}" for k, v in self.tags)
        return f"MetricName({self.group}:{self.name}:{{{tags}}})"

    @property
    def tag_dict(self) -> dict[str, str]:
        return dict(self.tags)

    @property
    def group_key(self) -> str:
        """kafka-python's group: the group, then ``.`` and the tag values other than
        ``client-id`` joined with ``-`` (``consumer-fetch-manager-metrics.t-0``)."""
        extra = [v for k, v in self.tags if k != "client-id"]
        return f"{self.group}.{'-'.join(extra)}" if extra else self.group


class KafkaMetric:
    """One registered metric: its name and the function that reads its value."""

    __slots__ = ("_view", "metric_name")

    def __init__(self, metric_name: MetricName, view: Callable[[], float]) -> None:
        self.metric_name = metric_name
        self._view = view

    def metric_value(self) -> float:
        return float(self._view())


class MetricsReporter:
    """Java's ``MetricsReporter`` (``metric.reporters``): subclass and override what you
    need.  Called on the thread that registers the metric; keep each call quick."""

    namespace = ""

    def configure(self, configs: Mapping[str, Any]) -> None:
        pass

    def context_change(self, context: Mapping[str, str]) -> None:
        """``{"_namespace": "kafka.producer"}`` (or ``kafka.consumer``), before ``init``."""
        self.namespace = context.get("_namespace", "")

    def init(self, metrics: list[KafkaMetric]) -> None:
        pass

    def metric_change(self, metric: KafkaMetric) -> None:
        pass

    def metric_removal(self, metric: KafkaMetric) -> None:
        pass

    def close(self) -> None:
        pass


def load_reporters(value: Any, configs: Mapping[str, Any]) -> list[MetricsReporter]:
    """``metric.reporters``: class names (a list or a comma-separated string), classes or
    instances; each class is instantiated with no arguments, then ``configure``-d."""
    from millrace.client.serialization import load_class

    if value is None:
        return []
    items = [v.strip() for v in value.split(",") if v.strip()] if isinstance(value, str) \
        else list(value) if isinstance(value, list | tuple) else [value]
    out: list[MetricsReporter] = []
    for item in items:
        if isinstance(item, str):
            item = load_class(item, "metric.reporters")
        if isinstance(item, type):
            item = item()
        if not all(callable(getattr(item, m, None))
                   for m in ("init", "metric_change", "metric_removal", "close")):
            raise ConfigError(f"Invalid value {item!r} for configuration metric.reporters: "
                              "not a MetricsReporter (init, metric_change, metric_removal, "
                              "close)")
        configure = getattr(item, "configure", None)
        if callable(configure):
            configure(configs)
        out.append(item)
    return out


class Metrics:
    """The registry of one client: sensors by name plus ``MetricName`` -> metric."""

    def __init__(self, time: Time = SYSTEM_TIME, window_ms: int = 30_000,
                 samples: int = 2, *, namespace: str = "", tags: Mapping[str, str] | None = None,
                 reporters: Iterable[MetricsReporter] = ()) -> None:
        self.time = time
        self.namespace = namespace
        self.tags = dict(tags or {})
        self._window_ms = window_ms
        self._samples = samples
        self._lock = threading.Lock()
        self._sensors: dict[str, Sensor] = {}  # guarded by _lock
        self._metrics: dict[MetricName, KafkaMetric] = {}  # guarded by _lock
        self._reporters = list(reporters)
        for reporter in self._reporters:
            self._tell(reporter.context_change, {"_namespace": namespace})
            self._tell(reporter.init, [])

    @staticmethod
    def _tell(method: Callable[[Any], None], arg: Any) -> None:
        try:
            method(arg)
        except Exception:
            log.warning("metrics reporter %r failed", method, exc_info=True)

    def sensor(self, name: str) -> Sensor:
        with self._lock:
            sensor = self._sensors.get(name)
            if sensor is None:
                sensor = self._sensors[name] = Sensor(self.time, self._window_ms,
                                                      self._samples)
            return sensor

    def new_sensor(self) -> Sensor:
        """A sensor with this registry's window that is not kept by name (its owner drops
        it, e.g. a partition's when the partition is unassigned)."""
        return Sensor(self.time, self._window_ms, self._samples)

    def metric_name(self, name: str, group: str, tags: Mapping[str, str] | None = None,
                    description: str = "") -> MetricName:
        merged = dict(self.tags)
        merged.update(tags or {})
        return MetricName(name, group, merged, description)

    def add(self, name: str, group: str, view: Callable[[], float],
            tags: Mapping[str, str] | None = None, description: str = "") -> MetricName:
        """Register (or replace) the metric ``group:name:{client-id, **tags}``."""
        metric = KafkaMetric(self.metric_name(name, group, tags, description), view)
        with self._lock:
            self._metrics[metric.metric_name] = metric
        for reporter in self._reporters:
            self._tell(reporter.metric_change, metric)
        return metric.metric_name

    def remove(self, metric_name: MetricName) -> None:
        with self._lock:
            metric = self._metrics.pop(metric_name, None)
        if metric is not None:
            for reporter in self._reporters:
                self._tell(reporter.metric_removal, metric)

    def add_reporter(self, reporter: MetricsReporter) -> None:
        self._tell(reporter.context_change, {"_namespace": self.namespace})
        self._tell(reporter.init, self.metrics())
        self._reporters.append(reporter)

    def metrics(self) -> list[KafkaMetric]:
        with self._lock:
            return list(self._metrics.values())

    def snapshot(self, raw: bool = False, flat: bool = False) -> dict[Any, Any]:
        """``{group: {name: value}}``; ``raw``: ``{MetricName: value}``; ``flat``: the
        untagged metrics (``client-id`` aside) as ``{name: value}``."""
        values = [(m.metric_name, m.metric_value()) for m in self.metrics()]
        if raw:
            return dict(values)
        if flat:
            return {mn.name: v for mn, v in values if mn.group_key == mn.group}
        out: dict[str, dict[str, float]] = {}
        for mn, v in values:
            out.setdefault(mn.group_key, {})[mn.name] = v
        return out

    def close(self) -> None:
        for reporter in self._reporters:
            try:
                reporter.close()
            except Exception:
                log.warning("failed to close metrics reporter %r", reporter, exc_info=True)
        self._reporters.clear()
