"""The consumer's poll and group metrics, named and grouped as Java's
(``KafkaConsumerMetrics`` -> ``consumer-metrics``; ``AbstractCoordinator``'s and
``ConsumerCoordinator``'s sensors -> ``consumer-coordinator-metrics``).

``consumer-metrics`` (per ``poll``):

* ``time-between-poll-avg``/``-max``: ms from one ``poll`` call's start to the next's (0 for
  the first);
* ``poll-idle-ratio-avg``: time inside ``poll`` / (time inside + time since the previous
  ``poll`` started), per call -- near 1 the application is waiting on the consumer, near 0
  the consumer is waiting on the application;
* ``last-poll-seconds-ago``: whole seconds since the last ``poll`` began, -1 before any --
  a consumer drifting towards ``max.poll.interval.ms`` shows here first.

``consumer-coordinator-metrics`` (per group request):

* heartbeat-rate/-total, heartbeat-response-time-max (each Heartbeat answered),
  last-heartbeat-seconds-ago (since the last Heartbeat was sent; -1 before any);
* join-rate/-total, join-time-avg/-max (each JoinGroup answered without error),
  sync-rate/-total, sync-time-avg/-max (each SyncGroup answered without error);
* rebalance-latency-avg/-max/-total, rebalance-total, rebalance-rate-per-hour: one per
  completed rebalance, from the first JoinGroup of an attempt (failed attempts included)
  to the SyncGroup answer that made the member stable; failed-rebalance-total and
  failed-rebalance-rate-per-hour: each JoinGroup or SyncGroup error answer (but
  MEMBER_ID_REQUIRED, a step of the protocol); last-rebalance-seconds-ago: since the last
  completed rebalance, -1 before any;
* commit-rate/-total, commit-latency-avg/-max: each OffsetCommit answered (errors too);
* assigned-partitions.

The ``*-seconds-ago`` values are truncated to whole seconds, as Java's are.  Poll metrics
are recorded on the application thread; coordinator ones on whichever thread completes the
request (application or heartbeat thread).  Read from any thread.
"""

from __future__ import annotations

from collections.abc import Callable

from millrace.client.metrics import Metrics, Sensor

CONSUMER_GROUP = "consumer-metrics"
COORDINATOR_GROUP = "consumer-coordinator-metrics"
_HOUR_S = 3600.0


def _seconds_ago(metrics: Metrics, at_ms: Callable[[], int]) -> Callable[[], float]:
    def view() -> float:
        at = at_ms()
        return -1.0 if at < 0 else float((metrics.time.milliseconds() - at) // 1000)
    return view


class KafkaConsumerMetrics:
    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self._time_between_poll = metrics.sensor("time-between-poll")
        self._poll_idle_ratio = metrics.sensor("poll-idle-ratio")
        self._last_poll_ms = -1
        self._poll_start_ms = 0
        self._since_last_poll_ms = 0
        m = metrics
        m.add("time-between-poll-avg", CONSUMER_GROUP, self._time_between_poll.avg)
        m.add("time-between-poll-max", CONSUMER_GROUP, self._time_between_poll.max)
        m.add("poll-idle-ratio-avg", CONSUMER_GROUP, self._poll_idle_ratio.avg)
        m.add("last-poll-seconds-ago", CONSUMER_GROUP,
              _seconds_ago(metrics, lambda: self._last_poll_ms))

    def record_poll_start(self, now_ms: int) -> None:
        since = now_ms - self._last_poll_ms if self._last_poll_ms >= 0 else 0
        self._since_last_poll_ms = since
        self._poll_start_ms = now_ms
        self._last_poll_ms = now_ms
        self._time_between_poll.record(since, now_ms)

    def record_poll_end(self, now_ms: int) -> None:
        inside = now_ms - self._poll_start_ms
        if inside + self._since_last_poll_ms > 0:
            self._poll_idle_ratio.record(inside / (inside + self._since_last_poll_ms), now_ms)


class GroupCoordinatorMetrics:
    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        m = metrics
        self.heartbeat = m.sensor("heartbeat-latency")
        self.join = m.sensor("join-latency")
        self.sync = m.sensor("sync-latency")
        self.rebalance = m.sensor("rebalance-latency")
        self.failed_rebalance = m.sensor("failed-rebalance")
        self.commit = m.sensor("commit-latency")
        self._last_heartbeat_send_ms = -1
        self._rebalance_start_ms = -1
        self._last_rebalance_end_ms = -1
        g = COORDINATOR_GROUP
        m.add("heartbeat-response-time-max", g, self.heartbeat.max)
        _count_rate_and_total(m, "heartbeat", self.heartbeat)
        m.add("last-heartbeat-seconds-ago", g,
              _seconds_ago(m, lambda: self._last_heartbeat_send_ms))
        for what, sensor in (("join", self.join), ("sync", self.sync)):
            m.add(f"{what}-time-avg", g, sensor.avg)
            m.add(f"{what}-time-max", g, sensor.max)
            _count_rate_and_total(m, what, sensor)
        m.add("rebalance-latency-avg", g, self.rebalance.avg)
        m.add("rebalance-latency-max", g, self.rebalance.max)
        m.add("rebalance-latency-total", g, lambda: self.rebalance.lifetime_total)
        m.add("rebalance-total", g, lambda: self.rebalance.lifetime_count)
        m.add("rebalance-rate-per-hour", g,
              lambda: self.rebalance.count_rate(unit_seconds=_HOUR_S))
        m.add("failed-rebalance-total", g, lambda: self.failed_rebalance.lifetime_count)
        m.add("failed-rebalance-rate-per-hour", g,
              lambda: self.failed_rebalance.count_rate(unit_seconds=_HOUR_S))
        m.add("last-rebalance-seconds-ago", g,
              _seconds_ago(m, lambda: self._last_rebalance_end_ms))
        m.add("commit-latency-avg", g, self.commit.avg)
        m.add("commit-latency-max", g, self.commit.max)
        _count_rate_and_total(m, "commit", self.commit)

    def add_assigned_partitions(self, view: Callable[[], float]) -> None:
        self.metrics.add("assigned-partitions", COORDINATOR_GROUP, view,
                         description="partitions currently assigned to this consumer")

    def heartbeat_sent(self, now_ms: int) -> None:
        self._last_heartbeat_send_ms = now_ms

    def rebalance_started(self, now_ms: int) -> None:
        """A JoinGroup is sent; a retry after a failed attempt keeps the first start."""
        if self._rebalance_start_ms < 0:
            self._rebalance_start_ms = now_ms

    def rebalance_completed(self, now_ms: int) -> None:
        start = self._rebalance_start_ms if self._rebalance_start_ms >= 0 else now_ms
        self.rebalance.record(now_ms - start, now_ms)
        self._last_rebalance_end_ms = now_ms
        self._rebalance_start_ms = -1

    def rebalance_failed(self, now_ms: int) -> None:
        self.failed_rebalance.record(1, now_ms)


def _count_rate_and_total(metrics: Metrics, prefix: str, sensor: Sensor) -> None:
    metrics.add(f"{prefix}-rate", COORDINATOR_GROUP, sensor.count_rate)
    metrics.add(f"{prefix}-total", COORDINATOR_GROUP, lambda: sensor.lifetime_count)
