"""Metrics with Kafka's names on a real three-broker cluster, scraped over HTTP and
parsed with ``prometheus_client``'s own text parser (issue 24's "how it is shown").

* After N acknowledged records the brokers' ``messagesin`` counters for the topic sum
  to N (only a leader counts an append; followers count replication bytes), and with
  ``acks=all`` the produce time waiting for the followers shows up in RemoteTimeMs.
* A consumer group that stops: the lag its coordinator reports equals what was produced
  after it stopped, and Burrow's rule turns the partitions' status to STOP.
* A follower frozen with SIGSTOP: its leader's UnderReplicatedPartitions and IsrShrinks
  rise; after SIGCONT URP is back to 0 and IsrExpands rose.  Then the controller is
  killed: ActiveControllerCount sums to exactly 1 over the live brokers again.
* Every series the Grafana dashboard (``docs/grafana/millrace.json``) and the alert
  rules of ``docs/operations.md`` name exists on the live cluster, with the labels they
  select on; the check is shown to catch a misspelt name and label (negative controls).
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Iterable
from pathlib import Path

import pytest
from cluster_support import (
    FAST,
    ClusterFactory,
    ContinuousProducer,
    admin,
    controller_id,
    create_topic,
    log_tails,
    partitions,
    wait_until,
)
from confluent_kafka import Consumer, Producer
from prometheus_client.parser import text_string_to_metric_families

from millrace.launcher.local_cluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
DASHBOARD = ROOT / "docs" / "grafana" / "millrace.json"
OPERATIONS = ROOT / "docs" / "operations.md"

Samples = dict[str, list[tuple[dict[str, str], float]]]  # sample name -> (labels, value)


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        text = response.read().decode()
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return out


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels`` (a label given as
    "" must be absent, as in PromQL)."""
    return sum(value for got, value in samples.get(name, ())
               if all(got.get(k, "") == v for k, v in labels.items()))


def cluster_total(cluster: LocalCluster, name: str, brokers: Iterable[int] | None = None,
                  **labels: str) -> float:
    urls = cluster.http_urls()
    return sum(total(scrape(urls[b]), name, **labels)
               for b in (brokers if brokers is not None else urls))


def produce(bootstrap: str, topic: str, count: int, partitions: int = 1,
            acks: str = "all") -> None:
    """``count`` records, round-robin over ``partitions`` partitions (explicitly: without
    a key librdkafka's sticky partitioner may put them all in one)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5})
    failed: list[object] = []
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i, partition=i % partitions,
                         on_delivery=lambda err, _m: failed.append(err) if err else None)
        producer.poll(0)
    assert producer.flush(60) == 0 and failed == []


@pytest.fixture(scope="module")
def metered(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
            ) -> Iterable[LocalCluster]:
    """The module's cluster, with a fast lag refresh and Burrow window."""
    failed = request.session.testsfailed
    c = LocalCluster(tmp_path_factory.mktemp("metered"), 3, overrides={
        **FAST, "consumer.lag.offset.refresh.ms": "500", "consumer.lag.min.distance.ms": "0",
        "consumer.lag.intervals": "5"}).start()
    yield c
    if request.session.testsfailed > failed:
        c.kill_all()
    else:
        c.stop()


def test_messages_in_sum_to_what_was_produced_and_acks_all_waits_remotely(
        metered: LocalCluster) -> None:
    client = admin(metered.bootstrap)
    view = create_topic(client, "metered", 3, 3)
    produce(metered.bootstrap, "metered", 3000, partitions=3)
    assert cluster_total(metered, "kafka_server_brokertopicmetrics_messagesin_total",
                         topic="metered") == 3000
    urls = metered.http_urls()
    # each leader counted the appends of the partitions it leads, the followers none
    led = {b: sum(1 for p in view.values() if p.leader == b) for b in urls}
    per_broker = {b: total(scrape(urls[b]), "kafka_server_brokertopicmetrics_messagesin_total",
                           topic="metered") for b in urls}
    assert per_broker == {b: 1000.0 * n for b, n in led.items()}, (per_broker, led)
    assert cluster_total(metered, "kafka_server_brokertopicmetrics_replicationbytesin_total",
                         topic="") > 0
    # acks=all: the leader parks each produce until the followers have fetched it
    assert cluster_total(metered, "kafka_network_requestmetrics_remotetimems_sum",
                         request="Produce") > 0
    assert cluster_total(metered, "kafka_network_requestmetrics_totaltimems_count",
                         request="FetchFollower") > 0
    assert cluster_total(metered, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert cluster_total(metered, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert cluster_total(metered, "kafka_server_replicamanager_leadercount") >= 3


def test_a_stopped_group_lags_by_what_came_after_and_its_status_turns_stop(
        metered: LocalCluster) -> None:
    client = admin(metered.bootstrap)
    create_topic(client, "lagging", 1, 3)
    produce(metered.bootstrap, "lagging", 200)  # one partition
    consumer = Consumer({"bootstrap.servers": metered.bootstrap, "group.id": "stopper",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["lagging"])
    seen = 0
    try:
        while seen < 200:  # commit as it goes: the coordinator sees a window of commits
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            seen += 1
            if seen % 20 == 0:
                consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    produce(metered.bootstrap, "lagging", 75)

    def group_lag() -> float | None:
        lag = cluster_total(metered, "kafka_consumergroup_lag", consumergroup="stopper",
                            topic="lagging")
        return lag if lag == 75 else None

    wait_until("the coordinator to report a lag of 75", group_lag,
               diagnostics=lambda: log_tails(metered))

    def stopped() -> bool:
        urls = metered.http_urls()
        return any(value == 4  # Burrow's STOP
                   for b in urls for labels, value in scrape(urls[b]).get(
                       "burrow_kafka_topic_partition_status", ())
                   if labels.get("consumer_group") == "stopper")

    wait_until("Burrow's status of the stopped group's partition to turn STOP", stopped)


def test_urp_isr_shrinks_and_the_controller_count_follow_faults(
        fresh_cluster: ClusterFactory) -> None:
    cluster = fresh_cluster(overrides={"replica.lag.time.max.ms": "2000",
                                       "zookeeper.session.timeout.ms": "15000"})
    client = admin(cluster.bootstrap)
    view = create_topic(client, "watched", 1, 3)
    leader = view[0].leader
    ctrl = controller_id(client)
    follower = next(r for r in view[0].replicas if r not in (leader, ctrl))
    leader_url = cluster.http_urls()[leader]
    shrinks_before = total(scrape(leader_url), "kafka_server_replicamanager_isrshrinks_total")
    producer = ContinuousProducer(cluster.bootstrap, "watched").start()
    try:
        wait_until("100 acknowledged records", lambda: producer.acked_count >= 100)
        cluster.pause_broker(follower)
        try:
            wait_until("the leader's UnderReplicatedPartitions to rise", lambda: total(
                scrape(leader_url), "kafka_server_replicamanager_underreplicatedpartitions")
                >= 1, diagnostics=lambda: log_tails(cluster))
            samples = scrape(leader_url)
            assert total(samples, "kafka_server_replicamanager_isrshrinks_total") > \
                shrinks_before
            assert total(samples, "kafka_cluster_partition_underreplicated",
                         topic="watched", partition="0") == 1
        finally:
            cluster.resume_broker(follower)
        wait_until("UnderReplicatedPartitions back to 0", lambda: total(
            scrape(leader_url), "kafka_server_replicamanager_underreplicatedpartitions") == 0
            and partitions(client, "watched"), diagnostics=lambda: log_tails(cluster))
        assert total(scrape(leader_url), "kafka_server_replicamanager_isrexpands_total") >= 1
    finally:
        producer.stop()
    # kill -9 the controller: the survivors elect one, and only one says so
    ctrl = controller_id(client)
    cluster.kill_broker(ctrl)
    live = [b for b in cluster.http_urls() if b != ctrl]

    def one_controller() -> bool:
        try:
            return cluster_total(cluster, "kafka_controller_kafkacontroller_activecontrollercount",
                                 brokers=live) == 1 and controller_id(admin(
                                     cluster.broker(live[0]).bootstrap)) in live
        except OSError:
            return False

    wait_until("ActiveControllerCount to sum to 1 over the live brokers", one_controller,
               diagnostics=lambda: log_tails(cluster))


# --- the dashboard and the alert rules name series that exist -----------------------------

_SELECTOR = re.compile(r"\b((?:kafka|burrow)_[A-Za-z0-9_]+)\s*(\{[^}]*\})?")
_BY = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)\s*\(?\s*(?:[a-z_]+\()*\s*"
                 r"((?:kafka|burrow)_[A-Za-z0-9_]+)")
_LABEL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")
ADDED_BY_PROMETHEUS = {"job", "instance"}


def expressions() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    rules = re.findall(r"^\s*expr:\s*(.+)$", OPERATIONS.read_text(), re.MULTILINE)
    assert exprs and rules
    return exprs + rules


def missing(exprs: Iterable[str], samples: Samples) -> list[str]:
    """What the expressions name that the scraped samples do not have: a series, or a
    label the expression selects or aggregates on."""
    labels_of: dict[str, set[str]] = {}
    for name, rows in samples.items():
        for labels, _ in rows:
            labels_of.setdefault(name, set()).update(labels)
    problems = []
    for expr in exprs:
        for name, selector in _SELECTOR.findall(expr):
            if name not in labels_of:
                problems.append(f"{name} (in {expr})")
                continue
            for label in _LABEL.findall(selector or ""):
                if label not in labels_of[name] | ADDED_BY_PROMETHEUS:
                    problems.append(f"{name}{{{label}}} (in {expr})")
        for labels, name in _BY.findall(expr):
            for label in (x.strip() for x in labels.split(",") if x.strip()):
                if name in labels_of and label not in labels_of[name] | ADDED_BY_PROMETHEUS:
                    problems.append(f"by ({label}) of {name} (in {expr})")
    return problems


def committed_group(cluster: LocalCluster, topic: str, group: str) -> None:
    """A topic with records and a group that committed some of them: what the lag
    series need to exist (the panels over them are checked too)."""
    create_topic(admin(cluster.bootstrap), topic, 1, 3)
    produce(cluster.bootstrap, topic, 20)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    try:
        msg = None
        deadline = time.monotonic() + 60
        while (msg is None or msg.error()) and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
        assert msg is not None and not msg.error()
        consumer.commit(message=msg, asynchronous=False)
    finally:
        consumer.close()


def cluster_samples(cluster: LocalCluster) -> Samples:
    samples: Samples = {}
    for url in cluster.http_urls().values():
        for name, rows in scrape(url).items():
            samples.setdefault(name, []).extend(rows)
    return samples


def test_dashboard_and_alert_rules_name_series_the_cluster_exposes(
        metered: LocalCluster) -> None:
    committed_group(metered, "dashboard", "dashboard-readers")
    samples = wait_until("the group's lag and Burrow series on its coordinator", lambda: (
        s := cluster_samples(metered)) and "burrow_kafka_consumer_status" in s
        and "kafka_consumergroup_lag" in s and s)
    exprs = expressions()
    assert missing(exprs, samples) == []
    # negative controls: a misspelt series and a label nobody has are caught
    assert missing(['sum(kafka_server_replicamanager_underreplicatedpartition)'], samples)
    assert missing(['kafka_server_brokertopicmetrics_messagesin_total{topik="x"}'], samples)
    assert missing(['sum by (group) (kafka_consumergroup_lag)'], samples)


def test_the_idle_share_is_a_ratio(metered: LocalCluster) -> None:
    for url in metered.http_urls().values():
        rows = scrape(url)["kafka_network_socketserver_networkprocessoravgidlepercent"]
        assert len(rows) == 1 and 0.0 <= rows[0][1] <= 1.0

