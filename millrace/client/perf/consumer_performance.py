"""Consumer throughput (the library side of ``millrace perf consume``; Kafka's
``ConsumerPerformance`` tool).

Theory of operation: one ``KafkaConsumer`` on the caller's thread reads ``num_records``
records of ``topic``.  With a ``group`` it subscribes and the coordinator assigns the
partitions; the time from the start to each ``on_partitions_assigned`` (from each
revocation, for later rebalances) adds up to the *rebalance time*.  Without a group it
assigns every partition of the topic itself and seeks to the beginning (or the end,
``from_latest``); the rebalance time is then 0.  It polls until it has counted
``num_records`` (records of the last poll beyond that are not counted) or no record has
come for ``timeout_ms``.

The run's time is from the start (before the consumer connects) to the last record
counted; *fetch time* is that minus the rebalance time.  Bytes are the serialized key
and value sizes.  Sizes in MB are 2^20 bytes, as in Kafka's perf tools.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Collection, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from millrace.client.cluster import TopicPartition
from millrace.client.consumer import FunctionRebalanceListener, KafkaConsumer
from millrace.client.perf.metrics_table import by_display_name
from millrace.common.errors import UnknownTopicOrPartitionError
from millrace.common.time import SYSTEM_TIME, Time

MB = 1024 * 1024

CONSUMER_HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
                   "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
WINDOW_HEADER = ("time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
                 "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")


def format_time(epoch_ms: int) -> str:
    """``2026-11-22 02:12:36:123`` in local time (the tools' ``yyyy-MM-dd HH:mm:ss:SSS``)."""
    t = _dt.datetime.fromtimestamp(epoch_ms / 1000.0)
    return t.strftime("%Y-%m-%d %H:%M:%S:") + f"{epoch_ms % 1000:03d}"


def _per_s(amount: float, ms: float) -> float:
    return amount * 1000.0 / ms if ms > 0 else 0.0


@dataclass(frozen=True)
class ConsumerWindow:
    """One reporting interval (``--show-detailed-stats``): totals so far and the interval's
    rates; the rebalance time is the one accumulated while the interval lasted."""

    time_ms: int  # epoch ms at the end of the interval
    total_bytes: int
    total_records: int
    interval_bytes: int
    interval_records: int
    interval_ms: float
    rebalance_ms: float

    def line(self) -> str:
        fetch_ms = max(self.interval_ms - self.rebalance_ms, 0.0)
        return (f"{format_time(self.time_ms)}, {self.total_bytes / MB:.4f}, "
                f"{_per_s(self.interval_bytes / MB, self.interval_ms):.4f}, "
                f"{self.total_records}, {_per_s(self.interval_records, self.interval_ms):.4f}, "
                f"{self.rebalance_ms:.0f}, {fetch_ms:.0f}, "
                f"{_per_s(self.interval_bytes / MB, fetch_ms):.4f}, "
                f"{_per_s(self.interval_records, fetch_ms):.4f}")


@dataclass(frozen=True)
class ConsumerPerfResult:
    """The outcome of a run; rates are per second of the whole run or of fetch time."""

    topic: str
    group: str | None
    expected_records: int
    records: int
    bytes: int
    start_time_ms: int  # epoch ms
    end_time_ms: int
    elapsed_ms: float
    rebalance_ms: float
    fetch_ms: float
    mb: float
    mb_per_s: float
    records_per_s: float
    fetch_mb_per_s: float
    fetch_records_per_s: float
    timed_out: bool
    # the consumer's metrics at the end (``collect_metrics``): {group:name:{tags}: value}
    metrics: dict[str, float] | None = None

    @classmethod
    def build(cls, topic: str, group: str | None, expected: int, records: int, nbytes: int,
              start_time_ms: int, elapsed_ms: float, rebalance_ms: float,
              timed_out: bool) -> ConsumerPerfResult:
        fetch_ms = max(elapsed_ms - rebalance_ms, 0.0)
        mb = nbytes / MB
        return cls(topic=topic, group=group, expected_records=expected, records=records,
                   bytes=nbytes, start_time_ms=start_time_ms,
                   end_time_ms=start_time_ms + round(elapsed_ms), elapsed_ms=elapsed_ms,
                   rebalance_ms=rebalance_ms, fetch_ms=fetch_ms, mb=mb,
                   mb_per_s=_per_s(mb, elapsed_ms), records_per_s=_per_s(records, elapsed_ms),
                   fetch_mb_per_s=_per_s(mb, fetch_ms),
                   fetch_records_per_s=_per_s(records, fetch_ms), timed_out=timed_out)

    def row(self) -> str:
        """The values under ``CONSUMER_HEADER``."""
        return (f"{format_time(self.start_time_ms)}, {format_time(self.end_time_ms)}, "
                f"{self.mb:.4f}, {self.mb_per_s:.4f}, {self.records}, "
                f"{self.records_per_s:.4f}, {self.rebalance_ms:.0f}, {self.fetch_ms:.0f}, "
                f"{self.fetch_mb_per_s:.4f}, {self.fetch_records_per_s:.4f}")

    def as_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        if doc["metrics"] is None:
            del doc["metrics"]
        return doc


class ConsumerPerformance:
    """Read ``num_records`` records of ``topic`` and measure; see the module docstring.

    ``config`` goes to ``KafkaConsumer``; ``group`` (or a ``group.id`` in ``config``)
    selects subscribe mode.  ``on_window`` gets a ``ConsumerWindow`` every
    ``reporting_interval_ms``, ``on_progress`` the count so far after every poll that
    returned records; both on the caller's thread.
    """

    def __init__(self, config: Mapping[str, Any], topic: str, num_records: int, *,
                 group: str | None = None, from_latest: bool = False,
                 timeout_ms: int = 10_000, poll_timeout_ms: int = 100,
                 reporting_interval_ms: int = 5000,
                 on_window: Callable[[ConsumerWindow], None] | None = None,
                 on_progress: Callable[[int], None] | None = None,
                 time: Time = SYSTEM_TIME, collect_metrics: bool = False) -> None:
        if num_records < 0:
            raise ValueError(f"the number of records cannot be negative: {num_records}")
        self.config = dict(config)
        if group is not None:
            self.config["group.id"] = group
        self.group: str | None = self.config.get("group.id") or None
        if self.group is None:
            self.config.pop("group.id", None)
            self.config["enable.auto.commit"] = False  # no group: nothing to commit to
        self.config.setdefault("auto.offset.reset", "latest" if from_latest else "earliest")
        self.topic = topic
        self.num_records = num_records
        self.from_latest = from_latest
        self.timeout_ms = timeout_ms
        self.poll_timeout_ms = poll_timeout_ms
        self.reporting_interval_ms = reporting_interval_ms
        self.on_window = on_window
        self.on_progress = on_progress
        self._time = time
        self.collect_metrics = collect_metrics
        self._rebalance_ns = 0
        self._join_start_ns: int | None = None

    # rebalance listener callbacks (inside poll, on the caller's thread)
    def _on_revoked(self, partitions: Collection[TopicPartition]) -> None:
        self._join_start_ns = self._time.nanoseconds()

    def _on_assigned(self, partitions: Collection[TopicPartition]) -> None:
        if self._join_start_ns is not None:
            self._rebalance_ns += self._time.nanoseconds() - self._join_start_ns
            self._join_start_ns = None

    def run(self) -> ConsumerPerfResult:
        clock = self._time.nanoseconds
        start_ms = self._time.milliseconds()
        start = clock()
        self._rebalance_ns = 0
        self._join_start_ns = start
        consumer: KafkaConsumer[bytes, bytes] = KafkaConsumer(config=self.config,
                                                               time=self._time)
        try:
            if self.group is not None:
                consumer.subscribe([self.topic], FunctionRebalanceListener(
                    on_assign=self._on_assigned, on_revoke=self._on_revoked,
                    on_lost=self._on_revoked))
            else:
                self._join_start_ns = None
                self._assign_all(consumer)
            records, nbytes, last_ns, timed_out = self._consume(consumer, start, start_ms)
            # before close, as Kafka's tool reads them
            metrics = by_display_name(consumer.metrics(raw=True)) \
                if self.collect_metrics else None
        finally:
            consumer.close()
        result = ConsumerPerfResult.build(
            self.topic, self.group, self.num_records, records, nbytes, start_ms,
            (last_ns - start) / 1e6, self._rebalance_ns / 1e6, timed_out)
        return result if metrics is None else replace(result, metrics=metrics)

    def _assign_all(self, consumer: KafkaConsumer[bytes, bytes]) -> None:
        partitions = [TopicPartition(self.topic, p.partition)
                      for p in consumer.partitions_for(self.topic, self.timeout_ms)]
        if not partitions:
            raise UnknownTopicOrPartitionError(f"topic {self.topic!r} has no partitions")
        consumer.assign(partitions)
        if self.from_latest:
            consumer.seek_to_end(partitions)
        else:
            consumer.seek_to_beginning(partitions)

    def _consume(self, consumer: KafkaConsumer[bytes, bytes], start: int, start_ms: int
                 ) -> tuple[int, int, int, bool]:
        """Poll until done; (records, bytes, time of the last record counted, timed out)."""
        clock = self._time.nanoseconds
        wanted = self.num_records
        timeout_ns = self.timeout_ms * 1_000_000
        interval_ns = self.reporting_interval_ms * 1_000_000
        records = nbytes = 0
        window_start = start
        window_records = window_bytes = 0
        window_rebalance_ns = 0
        last = start  # the last record counted (or the start)
        last_seen = start  # the timeout runs from here
        poll = consumer.poll
        timed_out = False
        while records < wanted:
            batch = poll(self.poll_timeout_ms)
            now = clock()
            if batch:
                for r in batch:
                    if records >= wanted:
                        break
                    records += 1
                    size = r.serialized_value_size
                    if size > 0:
                        nbytes += size
                    size = r.serialized_key_size
                    if size > 0:
                        nbytes += size
                last = last_seen = now
                if self.on_progress is not None:
                    self.on_progress(records)
            elif now - last_seen > timeout_ns:
                timed_out = True
                break
            if self.on_window is not None and now - window_start >= interval_ns:
                self.on_window(ConsumerWindow(
                    time_ms=start_ms + (now - start) // 1_000_000, total_bytes=nbytes,
                    total_records=records, interval_bytes=nbytes - window_bytes,
                    interval_records=records - window_records,
                    interval_ms=(now - window_start) / 1e6,
                    rebalance_ms=(self._rebalance_ns - window_rebalance_ns) / 1e6))
                window_start, window_records, window_bytes = now, records, nbytes
                window_rebalance_ns = self._rebalance_ns
        return records, nbytes, last, timed_out
