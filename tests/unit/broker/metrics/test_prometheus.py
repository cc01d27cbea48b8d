"""The broker's metrics as Prometheus series (``millrace.broker.metrics.prometheus``).

Every name is checked two ways: against literal series from the reference (observability
md 3.1, 3.2) and against the JMX exporter's standard Kafka rules (``kafka-2_0_0.yml``)
restated below as regular expressions, applied to each MBean and attribute the way the
exporter applies them (first matching rule wins, ``lowercaseOutputName``; label names in
lower case, as Strimzi runs it).  The exposition is parsed back with prometheus_client's
own parsers, the text format 0.0.4 and OpenMetrics."""

from __future__ import annotations

import re
from collections.abc import Iterable

import pytest
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

from millrace.broker.metrics.prometheus import collector_registry, exposition
from millrace.broker.metrics.registry import KafkaMetricsRegistry, MetricName
from millrace.broker.metrics.yammer import Histogram, Meter, Timer

OPENMETRICS = "application/openmetrics-text; version=1.0.0"
Series = dict[tuple[str, frozenset[tuple[str, str]]], float]

# ---------------------------------------------------------------- the exporter's rules
# (pattern, name template, label templates); $n are the pattern's groups.  The 0-2
# key/value variants of each generic rule, in the order kafka-2_0_0.yml lists them.
PAIRS2 = r"(.+)=(.+), (.+)=(.+)"
RULES: list[tuple[str, str, dict[str, str]]] = [
    (r"kafka\.server<type=(.+), name=(.+), clientId=(.+), topic=(.+), partition=(.*)><>Value",
     "kafka_server_$1_$2", {"clientId": "$3", "topic": "$4", "partition": "$5"}),
    (r"kafka\.coordinator\.(\w+)<type=(.+), name=(.+)><>Value",
     "kafka_coordinator_$1_$2_$3", {}),
    (r"kafka\.(\w+)<type=(.+), name=(.+)PerSec\w*, (.+)=(.+), (.+)=(.+)><>Count",
     "kafka_$1_$2_$3_total", {"$4": "$5", "$6": "$7"}),
    (r"kafka\.(\w+)<type=(.+), name=(.+)PerSec\w*, (.+)=(.+)><>Count",
     "kafka_$1_$2_$3_total", {"$4": "$5"}),
    (r"kafka\.(\w+)<type=(.+), name=(.+)PerSec\w*><>Count", "kafka_$1_$2_$3_total", {}),
    (r"kafka\.(\w+)<type=(.+), name=(.+), (.+)=(.+), (.+)=(.+)><>Value",
     "kafka_$1_$2_$3", {"$4": "$5", "$6": "$7"}),
    (r"kafka\.(\w+)<type=(.+), name=(.+), (.+)=(.+)><>Value", "kafka_$1_$2_$3", {"$4": "$5"}),
    (r"kafka\.(\w+)<type=(.+), name=(.+)><>Value", "kafka_$1_$2_$3", {}),
    (r"kafka\.(\w+)<type=(.+), name=(.+), (.+)=(.*), (.+)=(.+)><>Count",
     "kafka_$1_$2_$3_count", {"$4": "$5", "$6": "$7"}),
    (r"kafka\.(\w+)<type=(.+), name=(.+), (.+)=(.*), (.+)=(.+)><>(\d+)thPercentile",
     "kafka_$1_$2_$3", {"$4": "$5", "$6": "$7", "quantile": "0.$8"}),
    (r"kafka\.(\w+)<type=(.+), name=(.+), (.+)=(.*)><>Count",
     "kafka_$1_$2_$3_count", {"$4": "$5"}),
    (r"kafka\.(\w+)<type=(.+), name=(.+), (.+)=(.*)><>(\d+)thPercentile",
     "kafka_$1_$2_$3", {"$4": "$5", "quantile": "0.$6"}),
    (r"kafka\.(\w+)<type=(.+), name=(.+)><>Count", "kafka_$1_$2_$3_count", {}),
    (r"kafka\.(\w+)<type=(.+), name=(.+)><>(\d+)thPercentile",
     "kafka_$1_$2_$3", {"quantile": "0.$4"}),
]
PERCENTILES = ("50th", "75th", "95th", "98th", "99th", "999th")


def _fill(template: str, m: re.Match[str]) -> str:
    return re.sub(r"\$(\d+)", lambda g: m.group(int(g.group(1))), template)


def jmx_exporter(name: MetricName, attribute: str) -> tuple[str, dict[str, str]] | None:
    """The series the exporter's rules make of one MBean attribute (None: no rule)."""
    props = ", ".join([f"type={name.type}", f"name={name.name}",
                       *(f"{k}={v}" for k, v in name.tags)])
    line = f"{name.domain}<{props}><>{attribute}"
    for pattern, template, labels in RULES:
        m = re.fullmatch(pattern, line)
        if m:
            return (_fill(template, m).lower(),
                    {_fill(k, m).lower(): _fill(v, m) for k, v in labels.items()})
    return None


def expected_series(registry: KafkaMetricsRegistry) -> set[tuple[str, frozenset[tuple[str, str]]]]:
    """What the JMX exporter would expose for every metric in the registry."""
    out = set()
    for key, metric in registry.metrics.items():
        attributes = ["Count"]
        if isinstance(metric, Histogram | Timer):
            attributes += [f"{p}Percentile" for p in PERCENTILES]
        for attribute in attributes:
            series = jmx_exporter(key, attribute)
            if series is not None:
                out.add((series[0], frozenset(series[1].items())))
    for key in registry.gauges:
        series = jmx_exporter(key, "Value")
        assert series is not None, key.mbean
        out.add((series[0], frozenset(series[1].items())))
    return out


# ---------------------------------------------------------------- helpers
def scrape(registry: KafkaMetricsRegistry, accept: str | None = None) -> tuple[str, str]:
    body, content_type = exposition(collector_registry(registry), accept)
    return body.decode(), content_type


def parse(text: str, parser: object = text_string_to_metric_families) -> Series:
    out: Series = {}
    for family in parser(text):  # type: ignore[operator]
        for s in family.samples:
            key = (s.name, frozenset(s.labels.items()))
            assert key not in out, f"duplicate series {key}"
            out[key] = s.value
    return out


def value(series: Series, metric: str, /, **labels: str) -> float:
    return series[(metric, frozenset(labels.items()))]


def kinds(text: str) -> dict[str, str]:
    return {f.name: f.type for f in text_string_to_metric_families(text)}


@pytest.fixture
def registry() -> KafkaMetricsRegistry:
    r = KafkaMetricsRegistry()
    r.meter("kafka.server", "BrokerTopicMetrics", "MessagesInPerSec").mark(7)
    r.meter("kafka.server", "BrokerTopicMetrics", "MessagesInPerSec",
            {"topic": "orders"}).mark(5)
    r.meter("kafka.server", "BrokerTopicMetrics", "BytesInPerSec").mark(1000)
    r.meter("kafka.server", "BrokerTopicMetrics", "BytesInPerSec", {"topic": "orders"}).mark(600)
    r.meter("kafka.network", "RequestMetrics", "RequestsPerSec",
            {"request": "Produce", "version": 9}).mark(3)
    r.meter("kafka.network", "RequestMetrics", "ErrorsPerSec",
            {"request": "Produce", "error": "NONE"}).mark(3)
    r.meter("kafka.server", "KafkaRequestHandlerPool", "RequestHandlerAvgIdlePercent").mark(2)
    r.meter("kafka.controller", "ControllerStats", "UncleanLeaderElectionsPerSec")
    total = r.histogram("kafka.network", "RequestMetrics", "TotalTimeMs", {"request": "Produce"})
    for ms in range(1, 101):
        total.update(float(ms))
    r.histogram("kafka.server", "ZooKeeperClientMetrics", "ZooKeeperRequestLatencyMs").update(4.0)
    elections = r.timer("kafka.controller", "ControllerStats", "LeaderElectionRateAndTimeMs")
    elections.update(12.0)
    elections.update(30.0)
    r.gauge("kafka.server", "ReplicaManager", "UnderReplicatedPartitions", lambda: 2)
    r.gauge("kafka.controller", "KafkaController", "ActiveControllerCount", lambda: 1)
    r.gauge("kafka.server", "ReplicaFetcherManager", "MaxLag", lambda: 17.0,
            {"clientId": "Replica"})
    r.gauge("kafka.server", "DelayedOperationPurgatory", "PurgatorySize", lambda: 4,
            {"delayedOperation": "Produce"})
    r.gauge("kafka.coordinator.group", "GroupMetadataManager", "NumGroups", lambda: 3)
    r.gauge("kafka.network", "SocketServer", "NetworkProcessorAvgIdlePercent", lambda: 0.75)
    r.gauge_family("kafka.log", "Log", "Size", lambda: [
        ({"topic": "orders", "partition": 0}, 100), ({"topic": "orders", "partition": 1}, 50)])
    r.state_gauge("kafka.server", "SessionExpireListener", "SessionState", lambda: "CONNECTED")
    r.raw_gauge_family("kafka_consumergroup_lag", "lag per partition", lambda: [
        ({"consumergroup": "g", "topic": "orders", "partition": "0"}, 9)])
    r.tick()
    return r


# ---------------------------------------------------------------- names
def test_series_named_as_the_reference_lists_them(registry: KafkaMetricsRegistry) -> None:
    series = parse(scrape(registry)[0])
    assert value(series, "kafka_server_brokertopicmetrics_messagesin_total") == 7
    assert value(series, "kafka_server_brokertopicmetrics_messagesin_total",
                 topic="orders") == 5
    assert value(series, "kafka_server_brokertopicmetrics_bytesin_total", topic="orders") == 600
    assert value(series, "kafka_network_requestmetrics_requests_total",
                 request="Produce", version="9") == 3
    assert value(series, "kafka_network_requestmetrics_errors_total",
                 request="Produce", error="NONE") == 3
    assert value(series, "kafka_controller_controllerstats_uncleanleaderelections_total") == 0
    assert value(series, "kafka_server_replicamanager_underreplicatedpartitions") == 2
    assert value(series, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(series, "kafka_server_replicafetchermanager_maxlag", clientid="Replica") == 17
    assert value(series, "kafka_server_delayedoperationpurgatory_purgatorysize",
                 delayedoperation="Produce") == 4
    assert value(series, "kafka_coordinator_group_groupmetadatamanager_numgroups") == 3
    assert value(series, "kafka_network_socketserver_networkprocessoravgidlepercent") == 0.75
    assert value(series, "kafka_network_requestmetrics_totaltimems",
                 request="Produce", quantile="0.99") == pytest.approx(99, rel=0.05)
    assert value(series, "kafka_log_log_size", topic="orders", partition="1") == 50
    assert value(series, "kafka_server_sessionexpirelistener_sessionstate",
                 state="CONNECTED") == 1
    assert value(series, "kafka_consumergroup_lag", consumergroup="g", topic="orders",
                 partition="0") == 9


def test_every_mbean_is_exposed_as_the_jmx_exporters_kafka_rules_name_it(
        registry: KafkaMetricsRegistry) -> None:
    ours = set(parse(scrape(registry)[0]))
    wanted = expected_series(registry)
    assert len(wanted) > 30
    assert wanted <= ours, sorted(wanted - ours)
    # negative control: the rules are not a restatement of our output -- a different
    # quantile spelling or a dropped PerSec would be told apart
    assert jmx_exporter(MetricName("kafka.network", "RequestMetrics", "TotalTimeMs",
                                   (("request", "Produce"),)), "50thPercentile") == \
        ("kafka_network_requestmetrics_totaltimems", {"request": "Produce", "quantile": "0.50"})
    assert jmx_exporter(MetricName("kafka.server", "BrokerTopicMetrics", "BytesOutPerSec"),
                        "Count") == ("kafka_server_brokertopicmetrics_bytesout_total", {})


def test_a_meter_not_ending_in_per_sec_is_a_count(registry: KafkaMetricsRegistry) -> None:
    text = scrape(registry)[0]
    series = parse(text)
    assert value(series,
                 "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent_count") == 2
    assert not any(name.startswith("kafka_server_kafkarequesthandlerpool_"
                                   "requesthandleravgidlepercent_total") for name, _ in series)
    assert kinds(text)["kafka_server_brokertopicmetrics_messagesin"] == "counter"


def test_histograms_and_timers_are_summaries_with_quantiles_count_and_sum(
        registry: KafkaMetricsRegistry) -> None:
    text = scrape(registry)[0]
    series = parse(text)
    name = "kafka_network_requestmetrics_totaltimems"
    assert kinds(text)[name] == "summary"
    quantiles = {dict(labels)["quantile"]: v for (n, labels), v in series.items()
                 if n == name and dict(labels).get("request") == "Produce"}
    assert sorted(quantiles) == ["0.50", "0.75", "0.95", "0.98", "0.99", "0.999"]
    for q, got in quantiles.items():
        assert got == pytest.approx(float(q) * 100, rel=0.1), q  # 1..100 ms, evenly
    assert value(series, name + "_count", request="Produce") == 100
    assert value(series, name + "_sum", request="Produce") == 5050
    # a timer: its count is the histogram's, not a meter's _total
    timer = "kafka_controller_controllerstats_leaderelectionrateandtimems"
    assert value(series, timer + "_count") == 2
    assert value(series, timer + "_sum") == 42
    assert value(series, timer, quantile="0.999") == 30
    assert not any(n.startswith(timer + "_total") for n, _ in series)


def test_meter_rates_as_the_exporter_shows_an_mbean_without_rules(
        registry: KafkaMetricsRegistry) -> None:
    """kafbat UI reads bytes in/out from ``…BrokerTopicMetrics…FifteenMinuteRate`` with
    exactly ``name`` for the broker and ``name`` + ``topic`` per topic (reference 3.2)."""
    series = parse(scrape(registry)[0])
    rate = "kafka_server_BrokerTopicMetrics_FifteenMinuteRate"
    assert value(series, rate, name="BytesInPerSec") == 1000 / 5  # one tick of 5 s
    assert value(series, rate, name="BytesInPerSec", topic="orders") == 600 / 5
    assert value(series, "kafka_server_BrokerTopicMetrics_OneMinuteRate",
                 name="MessagesInPerSec", topic="orders") == 1.0
    assert (("kafka_server_BrokerTopicMetrics_MeanRate",
             frozenset({("name", "BytesInPerSec")})) in series)
    # a timer's meter too; a histogram has no rate
    assert value(series, "kafka_controller_ControllerStats_FifteenMinuteRate",
                 name="LeaderElectionRateAndTimeMs") == 2 / 5
    assert not any(dict(labels).get("name") == "ZooKeeperRequestLatencyMs"
                   for _, labels in series)


def test_rates_move_with_ticks(registry: KafkaMetricsRegistry) -> None:
    meter = registry.find("kafka.server", "BrokerTopicMetrics", "BytesInPerSec")
    assert isinstance(meter, Meter)
    for _ in range(12):
        registry.tick()
    series = parse(scrape(registry)[0])
    got = value(series, "kafka_server_BrokerTopicMetrics_OneMinuteRate", name="BytesInPerSec")
    assert got == pytest.approx(200 / 2.718281828459045)  # e^-1 after an idle minute
    assert got == meter.rate(1)


def test_gauges_are_read_at_scrape_time() -> None:
    r = KafkaMetricsRegistry()
    urp, session = [0], ["CONNECTING"]
    r.gauge("kafka.server", "ReplicaManager", "UnderReplicatedPartitions", lambda: urp[0])
    r.state_gauge("kafka.server", "SessionExpireListener", "SessionState", lambda: session[0])
    before = parse(scrape(r)[0])
    urp[0], session[0] = 3, "CONNECTED"
    after = parse(scrape(r)[0])
    assert value(before, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(after, "kafka_server_replicamanager_underreplicatedpartitions") == 3
    assert value(before, "kafka_server_sessionexpirelistener_sessionstate",
                 state="CONNECTING") == 1
    assert value(after, "kafka_server_sessionexpirelistener_sessionstate",
                 state="CONNECTED") == 1
    assert len([n for n, _ in after if n.endswith("sessionstate")]) == 1


def test_an_empty_registry_is_a_valid_empty_scrape() -> None:
    text, content_type = scrape(KafkaMetricsRegistry())
    assert parse(text) == {}
    assert content_type.startswith("text/plain; version=0.0.4")
    text, content_type = scrape(KafkaMetricsRegistry(), OPENMETRICS)
    assert text == "# EOF\n"


# ---------------------------------------------------------------- formats
@pytest.mark.parametrize("accept", [None, "", "*/*", "text/plain",
                                    "text/plain;version=0.0.4;q=0.9,*/*;q=0.1"])
def test_the_text_format_unless_openmetrics_is_asked_for(registry: KafkaMetricsRegistry,
                                                         accept: str | None) -> None:
    text, content_type = scrape(registry, accept)
    assert content_type == "text/plain; version=0.0.4; charset=utf-8"
    assert "# EOF" not in text
    assert parse(text)


@pytest.mark.parametrize("accept", [
    OPENMETRICS,
    "application/openmetrics-text; version=1.0.0; charset=utf-8",
    # what Prometheus sends
    "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.1",
])
def test_openmetrics_when_asked_parses_with_the_openmetrics_parser(
        registry: KafkaMetricsRegistry, accept: str) -> None:
    text, content_type = scrape(registry, accept)
    assert content_type.startswith("application/openmetrics-text; version=1.0.0")
    assert text.endswith("# EOF\n")
    series = parse(text, openmetrics_families)
    assert value(series, "kafka_server_brokertopicmetrics_messagesin_total", topic="orders") == 5
    assert value(series, "kafka_network_requestmetrics_totaltimems", request="Produce",
                 quantile="0.50") == pytest.approx(50, rel=0.1)
    assert value(series, "kafka_server_BrokerTopicMetrics_FifteenMinuteRate",
                 name="BytesInPerSec") == 200
    # the same series as the text format, sample for sample
    assert set(series) == set(parse(scrape(registry)[0]))
    # negative control: the OpenMetrics parser refuses the text format (no # EOF)
    with pytest.raises(ValueError):
        parse(scrape(registry)[0], openmetrics_families)


def test_label_values_are_escaped(registry: KafkaMetricsRegistry) -> None:
    registry.raw_gauge_family("kafka_consumergroup_lag_sum", "sum", lambda: [
        ({"consumergroup": 'we"ird\\group\nname'}, 1)])
    for accept, parser in ((None, text_string_to_metric_families),
                           (OPENMETRICS, openmetrics_families)):
        series = parse(scrape(registry, accept)[0], parser)
        assert value(series, "kafka_consumergroup_lag_sum",
                     consumergroup='we"ird\\group\nname') == 1


def test_labels_of_tags_are_lower_case_with_underscores() -> None:
    r = KafkaMetricsRegistry()
    r.gauge("kafka.server", "FetcherLagMetrics", "ConsumerLag", lambda: 5,
            {"clientId": "ReplicaFetcherThread-0-1", "topic": "t", "partition": 0})
    r.gauge("kafka.server", "app-info", "start-time-ms", lambda: 1, {"client-id": "x"})
    series = parse(scrape(r)[0])
    assert value(series, "kafka_server_fetcherlagmetrics_consumerlag",
                 clientid="ReplicaFetcherThread-0-1", topic="t", partition="0") == 5
    assert value(series, "kafka_server_app_info_start_time_ms", client_id="x") == 1


def _names(series: Iterable[tuple[str, frozenset[tuple[str, str]]]]) -> set[str]:
    return {n for n, _ in series}


def test_a_removed_topic_leaves_the_scrape(registry: KafkaMetricsRegistry) -> None:
    assert registry.remove_tagged("topic", "orders") == 2
    series = parse(scrape(registry)[0])
    assert not any(dict(labels).get("topic") == "orders" for name, labels in series
                   if "brokertopicmetrics" in name.lower())
    assert value(series, "kafka_server_brokertopicmetrics_messagesin_total") == 7
    assert "kafka_log_log_size" in _names(series)  # a family is computed, not removed
