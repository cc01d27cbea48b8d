"""``KafkaMetricsRegistry``: get-or-create by MBean name, gauges read at scrape time
(single, families, states), removal of a deleted topic's metrics, ticking."""

from __future__ import annotations

import pytest

from millrace.broker.metrics.registry import KafkaMetricsRegistry, MetricName, metric_name
from millrace.broker.metrics.yammer import TICK_S, WINDOW_TICKS, Histogram, Meter, Timer


def test_the_mbean_name_is_as_jmx_shows_it() -> None:
    name = metric_name("kafka.server", "BrokerTopicMetrics", "MessagesInPerSec",
                       {"topic": "orders"})
    assert name.mbean == "kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=orders"
    assert metric_name("kafka.network", "RequestMetrics", "RequestsPerSec",
                       {"request": "Fetch", "version": 12}).tags == (
        ("request", "Fetch"), ("version", "12"))
    assert metric_name("kafka.log", "LogManager", "OfflineLogDirectoryCount").mbean == \
        "kafka.log:type=LogManager,name=OfflineLogDirectoryCount"


def test_meters_histograms_and_timers_are_got_or_created() -> None:
    r = KafkaMetricsRegistry()
    m = r.meter("kafka.server", "BrokerTopicMetrics", "BytesInPerSec", {"topic": "a"})
    assert r.meter("kafka.server", "BrokerTopicMetrics", "BytesInPerSec", {"topic": "a"}) is m
    assert r.meter("kafka.server", "BrokerTopicMetrics", "BytesInPerSec", {"topic": "b"}) is not m
    assert r.meter("kafka.server", "BrokerTopicMetrics", "BytesInPerSec") is not m
    h = r.histogram("kafka.network", "RequestMetrics", "TotalTimeMs", {"request": "Produce"})
    assert r.histogram("kafka.network", "RequestMetrics", "TotalTimeMs",
                       {"request": "Produce"}) is h
    t = r.timer("kafka.controller", "ControllerStats", "LeaderElectionRateAndTimeMs")
    assert r.timer("kafka.controller", "ControllerStats", "LeaderElectionRateAndTimeMs") is t
    assert (type(m), type(h), type(t)) == (Meter, Histogram, Timer)
    assert len(r.metrics) == 5
    assert r.find("kafka.server", "BrokerTopicMetrics", "BytesInPerSec", {"topic": "a"}) is m
    assert r.find("kafka.server", "BrokerTopicMetrics", "BytesOutPerSec") is None


def test_a_locked_metric_is_made_locked() -> None:
    r = KafkaMetricsRegistry()
    locked = r.meter("kafka.server", "SessionExpireListener", "ZooKeeperExpiresPerSec",
                     locked=True)
    plain = r.meter("kafka.server", "ReplicaManager", "IsrShrinksPerSec")
    assert hasattr(locked._lock, "acquire")
    assert not hasattr(plain._lock, "acquire")


def test_add_keeps_the_metric_already_registered() -> None:
    r = KafkaMetricsRegistry()
    name = metric_name("kafka.server", "ReplicaManager", "IsrShrinksPerSec")
    first = r.add(name, Meter())
    assert r.add(name, Meter()) is first
    assert r.meter("kafka.server", "ReplicaManager", "IsrShrinksPerSec") is first


def test_one_name_cannot_hold_two_kinds() -> None:
    r = KafkaMetricsRegistry()
    r.meter("kafka.server", "X", "Y")
    with pytest.raises(AssertionError, match=r"kafka\.server:type=X,name=Y"):
        r.histogram("kafka.server", "X", "Y")
    with pytest.raises(AssertionError):
        r.timer("kafka.server", "X", "Y")


def test_gauges_families_and_states_are_functions_read_when_asked() -> None:
    r = KafkaMetricsRegistry()
    leaders = [3]
    r.gauge("kafka.server", "ReplicaManager", "LeaderCount", lambda: leaders[0])
    r.gauge_family("kafka.log", "Log", "Size",
                   lambda: [({"topic": "t", "partition": p}, 10 * p) for p in range(leaders[0])])
    r.state_gauge("kafka.server", "SessionExpireListener", "SessionState", lambda: "CONNECTED")
    r.raw_gauge_family("kafka_consumergroup_lag", "lag", lambda: [({"consumergroup": "g"}, 1)])
    gauge = r.gauges[metric_name("kafka.server", "ReplicaManager", "LeaderCount")]
    family = r.families[("kafka.log", "Log", "Size")]
    assert gauge.read() == 3 and len(list(family.read())) == 3
    leaders[0] = 5
    assert gauge.read() == 5 and len(list(family.read())) == 5
    state = r.state_gauges[metric_name("kafka.server", "SessionExpireListener", "SessionState")]
    assert state.read() == "CONNECTED"
    assert list(r.raw_families["kafka_consumergroup_lag"].read()) == [({"consumergroup": "g"}, 1)]
    # registering again replaces the function (a service rebuilt on restart)
    r.gauge("kafka.server", "ReplicaManager", "LeaderCount", lambda: 0)
    assert len(r.gauges) == 1
    assert r.gauges[metric_name("kafka.server", "ReplicaManager", "LeaderCount")].read() == 0


def test_remove_tagged_forgets_one_topics_metrics_only() -> None:
    r = KafkaMetricsRegistry()
    for topic in ("gone", "kept"):
        r.meter("kafka.server", "BrokerTopicMetrics", "MessagesInPerSec", {"topic": topic})
        r.meter("kafka.server", "BrokerTopicMetrics", "BytesInPerSec", {"topic": topic})
        r.gauge("kafka.log", "Log", "Size", lambda: 1, {"topic": topic, "partition": 0})
        r.state_gauge("kafka.x", "T", "S", lambda: "ON", {"topic": topic})
    all_topics = r.meter("kafka.server", "BrokerTopicMetrics", "MessagesInPerSec")
    r.gauge_family("kafka.log", "Log", "NumLogSegments", lambda: [({"topic": "gone"}, 1)])
    # a tag of another name with the same value is not the topic
    r.meter("kafka.server", "DelayedFetchMetrics", "ExpiresPerSec", {"fetcherType": "gone"})

    assert r.remove_tagged("topic", "gone") == 4
    remaining = [n.mbean for n in (*r.metrics, *r.gauges, *r.state_gauges)]
    assert not any("topic=gone" in n for n in remaining)
    assert sum("topic=kept" in n for n in remaining) == 4
    assert r.find("kafka.server", "BrokerTopicMetrics", "MessagesInPerSec") is all_topics
    assert r.find("kafka.server", "DelayedFetchMetrics", "ExpiresPerSec",
                  {"fetcherType": "gone"}) is not None
    assert ("kafka.log", "Log", "NumLogSegments") in r.families
    assert r.remove_tagged("topic", "gone") == 0
    # made again after removal: a fresh meter from zero (a topic re-created)
    again = r.meter("kafka.server", "BrokerTopicMetrics", "MessagesInPerSec", {"topic": "gone"})
    assert again.count == 0


def test_tick_moves_every_meter_and_histogram_window() -> None:
    r = KafkaMetricsRegistry()
    m = r.meter("kafka.server", "BrokerTopicMetrics", "MessagesInPerSec")
    h = r.histogram("kafka.network", "RequestMetrics", "TotalTimeMs", {"request": "Fetch"})
    t = r.timer("kafka.log", "LogFlushStats", "LogFlushRateAndTimeMs")
    m.mark(10)
    t.update(3.0)
    h.update(7.0)
    r.tick()
    assert m.rate(1) == 10 / TICK_S
    assert t.meter.rate(1) == 1 / TICK_S
    for _ in range(2 * WINDOW_TICKS - 1):
        r.tick()
    assert h.quantiles()[0] == 0.0 and t.histogram.quantiles()[0] == 0.0
    assert h.count == 1 and t.count == 1


def test_metric_names_are_values() -> None:
    a = MetricName("kafka.server", "T", "N", (("topic", "x"),))
    assert a == metric_name("kafka.server", "T", "N", {"topic": "x"})
    assert hash(a) == hash(metric_name("kafka.server", "T", "N", {"topic": "x"}))
    assert a != metric_name("kafka.server", "T", "N", {"topic": "y"})
