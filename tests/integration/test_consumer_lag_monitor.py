"""Consumer lag measured by a real ``millrace broker`` process, read three ways: its HTTP
view (``/v1/consumer-groups/<group>``), its ``/metrics`` (parsed with prometheus_client's
own parser) and ``millrace groups describe``.

A group consumes and commits M of N records, stops, and K more are produced: its lag is
N - M + K, and once its silence outlasts the span of its window of commits, Burrow's
status of the partition turns STOP (group ERR).  The negative control is a group that
stopped at the log end of a topic nobody writes to any more: just as silent, no lag, OK.

In a three-broker cluster, exactly one broker (the group's coordinator) reports a group,
and the log ends of the partitions other brokers lead reach it through ListOffsets; the
CLI, bootstrapped anywhere, finds that broker's HTTP listener.

Everything is polled; nothing sleeps a fixed time.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from prometheus_client.parser import text_string_to_metric_families

from millrace.client.consumer import KafkaConsumer, OffsetAndMetadata, TopicPartition
from millrace.launcher.local_cluster import LocalCluster
from millrace.testing.broker_process import BrokerProcess, free_port

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.integration

T = TypeVar("T")
N, M, K = 20, 8, 5


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, str]]:
    data: Path = tmp_path_factory.mktemp("lag-broker")
    url = f"http://127.0.0.1:{free_port()}"
    with BrokerProcess(data, overrides={"http.listeners": url}) as b:
        yield b, url
    assert b.proc is not None and b.proc.returncode == 0, b.logs()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(b: BrokerProcess) -> str:
    name = unique("lag")
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for future in admin.create_topics([NewTopic(name, 1, 1)]).values():
        future.result(15)
    return name


def produce(b: BrokerProcess, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(), partition=0)
    assert p.flush(20) == 0


def consume_and_commit(b: BrokerProcess, topic: str, group: str, upto: int) -> None:
    """Read ``upto`` records as ``group`` and commit after each 2, then stop."""
    tp = TopicPartition(topic, 0)
    c: KafkaConsumer[bytes, bytes]
    with KafkaConsumer(bootstrap_servers=b.bootstrap, group_id=group,
                       auto_offset_reset="earliest", enable_auto_commit=False) as c:
        c.assign([tp])
        read = 0
        record: Any
        deadline = time.monotonic() + 20
        while read < upto and time.monotonic() < deadline:
            for record in c.poll(200):
                if read < upto:
                    read += 1
                    if read % 2 == 0 or read == upto:
                        c.commit_sync({tp: OffsetAndMetadata(record.offset + 1)})
        assert read == upto


def get_json(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def poll(what: Callable[[], T], done: Callable[[T], bool], timeout: float = 30.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


def scrape(url: str) -> dict[str, dict[frozenset[tuple[str, str]], float]]:
    with urllib.request.urlopen(url + "/metrics", timeout=5) as response:
        text = response.read().decode()
    return {f.name: {frozenset(s.labels.items()): s.value for s in f.samples}
            for f in text_string_to_metric_families(text)}


def cli(b: BrokerProcess | str, *args: str) -> subprocess.CompletedProcess[str]:
    bootstrap = b if isinstance(b, str) else b.bootstrap
    return subprocess.run([sys.executable, "-m", "millrace.cli.main", *args,
                           "--bootstrap-server", bootstrap],
                          capture_output=True, text=True, timeout=60)


def test_a_stopped_group_lags_by_what_came_after_and_turns_stop(
        broker: tuple[BrokerProcess, str]) -> None:
    b, url = broker
    topic, idle_topic = create_topic(b), create_topic(b)
    group, idle = unique("stopped"), unique("caught-up")
    produce(b, topic, N)
    produce(b, idle_topic, N)
    consume_and_commit(b, topic, group, M)
    consume_and_commit(b, idle_topic, idle, N)
    produce(b, topic, K)

    def partition(view: Any) -> dict[str, Any]:
        return view["partitions"][0] if view.get("partitions") else {}

    status, view = poll(lambda: get_json(f"{url}/v1/consumer-groups/{group}"),
                        lambda r: r[0] == 200 and partition(r[1]).get("status") == "STOP"
                        and partition(r[1]).get("lag") == N - M + K)
    assert status == 200, view
    p = partition(view)
    assert (p["topic"], p["partition"], p["committed_offset"], p["log_end_offset"],
            p["lag"], p["status"]) == (topic, 0, M, N + K, N - M + K, "STOP"), view
    assert (view["status"], view["status_code"], view["totallag"]) == ("ERR", 3, N - M + K)
    assert [e["offset"] for e in p["window"]][-1] == M

    # the control: as silent, but caught up -- no lag, OK
    status, control = get_json(f"{url}/v1/consumer-groups/{idle}")
    assert status == 200
    assert (partition(control)["lag"], partition(control)["status"], control["status"]) == (
        0, "OK", "OK")
    status, missing = get_json(f"{url}/v1/consumer-groups/{unique('nobody')}")
    assert (status, missing["status"]) == (404, "NOTFOUND")
    status, listing = get_json(f"{url}/v1/consumer-groups")
    assert {group, idle} <= {g["group"] for g in listing["groups"]}

    series = scrape(url)
    labels = frozenset({("consumergroup", group), ("topic", topic), ("partition", "0")})
    assert series["kafka_consumergroup_lag"][labels] == N - M + K
    assert series["kafka_consumergroup_current_offset"][labels] == M
    assert series["kafka_consumergroup_lag"][frozenset(
        {("consumergroup", idle), ("topic", idle_topic), ("partition", "0")})] == 0
    burrow = {k: v for k, v in series["burrow_kafka_consumer_status"].items()
              if ("consumer_group", group) in k or ("consumer_group", idle) in k}
    assert sorted(burrow.values()) == [1.0, 3.0]            # idle OK, stopped ERR
    assert 4.0 in [v for k, v in series["burrow_kafka_topic_partition_status"].items()
                   if ("consumer_group", group) in k]

    # millrace groups describe: the STATUS column and the group's status line
    r = cli(b, "groups", "describe", "--group", group)
    assert r.returncode == 0, r.stderr
    assert "No lag status" not in r.stderr
    assert f"Consumer group '{group}' lag status: ERR (total lag {N - M + K}" in r.stdout
    row = next(line.split() for line in r.stdout.splitlines() if line.startswith(group))
    assert row[3:6] == [str(M), str(N + K), str(N - M + K)] and row[-1] == "STOP"
    r = cli(b, "groups", "describe", "--group", group, "--output", "json")
    (described,) = json.loads(r.stdout)
    assert [(o["lag"], o["status"]) for o in described["offsets"]] == [(N - M + K, "STOP")]
    assert described["lag_status"]["status"] == "ERR"


def test_the_coordinator_reports_partitions_led_by_other_brokers(tmp_path: Path) -> None:
    urls = {i: f"http://127.0.0.1:{free_port()}" for i in (1, 2, 3)}
    cluster = LocalCluster(tmp_path / "cluster", 3, overrides={
        "offsets.topic.replication.factor": "1", "default.replication.factor": "1"},
        broker_overrides={i: {"http.listeners": url} for i, url in urls.items()}).start()
    ok = False
    try:
        topic, group = unique("spread"), unique("g")
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        for future in admin.create_topics([NewTopic(topic, 3, 1)]).values():
            future.result(30)
        p = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 5})
        for i in range(30):
            p.produce(topic, value=b"v", partition=i % 3)
        assert p.flush(30) == 0
        parts = [TopicPartition(topic, i) for i in range(3)]
        c: KafkaConsumer[bytes, bytes]
        with KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id=group) as c:
            c.commit_sync({tp: OffsetAndMetadata(4) for tp in parts})

        def answers() -> dict[int, int]:
            return {i: get_json(f"{url}/v1/consumer-groups/{group}")[0]
                    for i, url in urls.items()}

        statuses = poll(answers, lambda a: sorted(a.values()) == [200, 404, 404])
        assert sorted(statuses.values()) == [200, 404, 404], statuses
        coordinator = next(i for i, code in statuses.items() if code == 200)
        leaders = {p.id: p.leader for p in admin.list_topics(topic, timeout=10)
                   .topics[topic].partitions.values()}
        assert set(leaders.values()) - {coordinator}, leaders    # some are led elsewhere

        def lags() -> list[tuple[int, Any, Any]]:
            view = get_json(f"{urls[coordinator]}/v1/consumer-groups/{group}")[1]
            return [(q["partition"], q["log_end_offset"], q["lag"])
                    for q in view["partitions"]]

        got = poll(lags, lambda rows: rows == [(i, 10, 6) for i in range(3)])
        assert got == [(i, 10, 6) for i in range(3)], (got, leaders, coordinator)

        # the CLI bootstrapped on another broker finds the coordinator's listener
        other = next(i for i in (1, 2, 3) if i != coordinator)
        r = cli(cluster.broker(other).bootstrap, "groups", "describe", "--group", group)
        assert r.returncode == 0 and "No lag status" not in r.stderr, r.stderr
        assert f"Consumer group '{group}' lag status:" in r.stdout
        rows = [line.split() for line in r.stdout.splitlines() if line.startswith(group)]
        assert [row[3:6] for row in rows] == [["4", "10", "6"]] * 3
        assert all(row[-1] != "-" for row in rows)
        ok = True
    finally:
        if ok:
            cluster.stop()
        else:
            cluster.kill_all()
