"""The admin client and the ``millrace`` admin commands against a real broker process.

Topics are created, listed, described, altered and deleted through the CLI (run as a
user would: ``python -m millrace.cli.main ...`` subprocesses) and checked with the admin
client; configs are described and altered; a librdkafka consumer group with committed
offsets is listed, described (lag), refused a reset while it is active, reset to the
earliest offsets once it closed, and deleted; records are deleted; the cluster described.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from millrace.client.admin import (
    ConfigResource,
    ConfigResourceType,
    ConsumerGroupState,
    KafkaAdminClient,
    OffsetSpec,
    TopicPartition,
)
from millrace.client.errors import IllegalStateError, KafkaTimeoutError
from millrace.testing.broker_process import BrokerProcess, free_port

pytestmark = pytest.mark.integration

TP = TopicPartition


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data: Path = tmp_path_factory.mktemp("admin-broker")
    with BrokerProcess(data) as b:
        yield b


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap,
                          default_api_timeout_ms=15_000) as client:
        yield client


def cli(broker: BrokerProcess | None, *args: str, rc: int = 0,
        bootstrap: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "MILLRACE_BOOTSTRAP"}
    env["MILLRACE_BOOTSTRAP"] = bootstrap or (broker.bootstrap if broker else "")
    done = subprocess.run([sys.executable, "-m", "millrace.cli.main", *args],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == rc, (args, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    if rc:
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), done.stderr
    return done


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


# ---------------------------------------------------------------------- topics
def test_topic_lifecycle(broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    topic = unique("orders")
    out = cli(broker, "topics", "create", "--topic", topic, "--partitions", "3",
              "--replication-factor", "1", "--config", "retention.ms=60000").stdout
    assert out == f"Created topic {topic}.\n"
    err = cli(broker, "topics", "create", "--topic", topic, rc=1).stderr
    assert "TOPIC_ALREADY_EXISTS" in err and topic in err
    cli(broker, "topics", "create", "--topic", topic, "--if-not-exists")

    assert topic in cli(broker, "topics", "list").stdout.split()
    assert "__consumer_offsets" in cli(broker, "topics", "list").stdout.split()
    assert "__consumer_offsets" not in cli(broker, "topics", "list",
                                           "--exclude-internal").stdout.split()

    lines = cli(broker, "topics", "describe", "--topic", topic).stdout.splitlines()
    assert lines[0].startswith(f"Topic: {topic}\tTopicId: ")
    assert "\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=60000" in lines[0]
    assert lines[1:] == [f"\tTopic: {topic}\tPartition: {i}\tLeader: 0\tReplicas: 0\tIsr: 0"
                         for i in range(3)]

    out = cli(broker, "topics", "alter", "--topic", topic, "--partitions", "5",
              "--config", "cleanup.policy=compact", "--delete-config", "retention.ms").stdout
    assert out.splitlines() == [f"Increased the partition count of topic {topic} to 5.",
                                f"Updated the configs of topic {topic}."]
    described = admin.describe_topics([topic]).all()[topic]
    assert [p.partition for p in described.partitions] == [0, 1, 2, 3, 4]
    assert all(p.leader is not None and [r.id for r in p.isr] == [p.leader.id]
               for p in described.partitions)
    config = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)]).all()
    entries = next(iter(config.values()))
    assert entries["cleanup.policy"].value == "compact"
    assert entries["retention.ms"].is_default
    err = cli(broker, "topics", "alter", "--topic", topic, "--partitions", "2", rc=1).stderr
    assert "INVALID_PARTITIONS" in err

    assert cli(broker, "topics", "delete", "--topic", topic).stdout == \
        f"Deleted topic {topic}.\n"
    assert topic not in {t.name for t in admin.list_topics()}
    assert "does not exist" in cli(broker, "topics", "describe", "--topic", topic, rc=1).stderr
    cli(broker, "topics", "delete", "--topic", topic, "--if-exists")


def test_configs(broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    topic = unique("configured")
    cli(broker, "topics", "create", "--topic", topic)
    out = cli(broker, "configs", "alter", "--entity-type", "topics", "--entity-name", topic,
              "--add-config", "retention.ms=1000,cleanup.policy=[compact,delete]").stdout
    assert out == f"Completed updating config for topic {topic}.\n"
    lines = cli(broker, "configs", "describe", "--entity-type", "topics", "--entity-name",
                topic).stdout.splitlines()
    assert lines[0] == f"Dynamic configs for topic {topic} are:"
    assert sorted(line.split(" ")[2] for line in lines[1:]) == [
        "cleanup.policy=compact,delete", "retention.ms=1000"]
    cli(broker, "configs", "alter", "--entity-type", "topics", "--entity-name", topic,
        "--delete-config", "retention.ms")
    resource = ConfigResource(ConfigResourceType.TOPIC, topic)
    entries = admin.describe_configs([resource]).all()[resource]
    assert entries["retention.ms"].is_default
    err = cli(broker, "configs", "alter", "--entity-type", "topics", "--entity-name", topic,
              "--add-config", "retention.ms=soon", rc=1).stderr
    assert "INVALID_CONFIG" in err

    out = cli(broker, "configs", "describe", "--entity-type", "brokers", "--entity-name", "0",
              "--all").stdout
    assert out.startswith("All configs for broker 0 are:\n")
    assert "  num.partitions=" in out
    err = cli(broker, "configs", "alter", "--entity-type", "brokers", "--entity-name", "0",
              "--add-config", "num.partitions=3", rc=1).stderr
    assert "INVALID_REQUEST" in err


# ---------------------------------------------------------------------- groups
def _produce(broker: BrokerProcess, topic: str, per_partition: int, partitions: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1})
    for partition in range(partitions):
        for i in range(per_partition):
            p.produce(topic, value=f"v{i}".encode(), partition=partition)
    assert p.flush(30) == 0


def _describe_rows(broker: BrokerProcess, group: str) -> dict[int, list[str]]:
    out = cli(broker, "groups", "describe", "--group", group).stdout
    lines = [line for line in out.splitlines() if line.strip()]
    header = lines.index(next(line for line in lines if line.startswith("GROUP ")))
    assert lines[header].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET",
                                     "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                                     "CLIENT-ID", "STATUS"]
    return {int(row.split()[2]): row.split() for row in lines[header + 1:]}


def test_consumer_group_lag_reset_and_delete(broker: BrokerProcess,
                                             admin: KafkaAdminClient) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CkTopicPartition

    topic, group = unique("lagged"), unique("grp")
    cli(broker, "topics", "create", "--topic", topic, "--partitions", "2")
    _produce(broker, topic, 5, 2)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "client.id": "lag-test", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 6000})
    try:
        consumer.subscribe([topic])
        seen = 0
        deadline = time.monotonic() + 30
        while seen < 10 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                seen += 1
        assert seen == 10
        consumer.commit(offsets=[CkTopicPartition(topic, 0, 3), CkTopicPartition(topic, 1, 5)],
                        asynchronous=False)

        assert group in cli(broker, "groups", "list").stdout.split()
        rows = _describe_rows(broker, group)
        assert [rows[0][3:6], rows[1][3:6]] == [["3", "5", "2"], ["5", "5", "0"]]
        member_id = rows[0][6]
        assert member_id.startswith("lag-test") and rows[0][7] == "/127.0.0.1"
        assert rows[0][8] == "lag-test"

        description = admin.describe_groups([group]).all()[group]
        assert description.state is ConsumerGroupState.STABLE
        (member,) = description.members
        assert member.assignment.topic_partitions == {TP(topic, 0), TP(topic, 1)}
        offsets = admin.list_group_offsets(group)
        assert {tp: (o.offset, o.lag) for tp, o in offsets.items()} == {
            TP(topic, 0): (3, 2), TP(topic, 1): (5, 0)}

        err = cli(broker, "groups", "reset-offsets", "--group", group, "--all-topics",
                  "--to-earliest", "--execute", rc=1).stderr
        assert "inactive" in err and "Stable" in err
        err = cli(broker, "groups", "delete", "--group", group, rc=1).stderr
        assert "NON_EMPTY_GROUP" in err
    finally:
        consumer.close()

    out = cli(broker, "groups", "describe", "--group", group).stdout
    assert f"Consumer group '{group}' has no active members." in out
    rows = _describe_rows(broker, group)
    assert rows[0][6:] == ["-", "-", "-", "-"]   # no member; STATUS: no HTTP listener

    dry = cli(broker, "groups", "reset-offsets", "--group", group, "--topic", topic,
              "--to-earliest")
    assert "Dry run" in dry.stderr
    assert [line.split() for line in dry.stdout.split("\n") if line.strip()][1:] == [
        [group, topic, "0", "0"], [group, topic, "1", "0"]]
    assert admin.list_group_offsets(group)[TP(topic, 0)].offset == 3  # unchanged

    cli(broker, "groups", "reset-offsets", "--group", group, "--all-topics", "--to-earliest",
        "--execute")
    offsets = admin.list_group_offsets(group)
    assert {tp: (o.offset, o.log_end_offset, o.lag) for tp, o in offsets.items()} == {
        TP(topic, 0): (0, 5, 5), TP(topic, 1): (0, 5, 5)}
    rows = _describe_rows(broker, group)
    assert [rows[0][3:6], rows[1][3:6]] == [["0", "5", "5"], ["0", "5", "5"]]

    cli(broker, "groups", "reset-offsets", "--group", group, "--topic", f"{topic}:1",
        "--shift-by", "2", "--execute")
    assert admin.list_group_offsets(group)[TP(topic, 1)].offset == 2

    out = cli(broker, "groups", "delete", "--group", group).stdout
    assert out == f"Deletion of requested consumer groups ('{group}') was successful.\n"
    assert group not in cli(broker, "groups", "list").stdout.split()
    err = cli(broker, "groups", "describe", "--group", group, rc=1).stderr
    assert err.strip() == f"Error: Consumer group '{group}' does not exist."


# ---------------------------------------------------------------------- records, cluster
def test_delete_records(broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    topic = unique("trimmed")
    cli(broker, "topics", "create", "--topic", topic, "--partitions", "1")
    _produce(broker, topic, 10, 1)
    tp = TP(topic, 0)
    assert admin.delete_records({tp: 4}).all() == {tp: 4}
    earliest = admin.list_offsets({tp: OffsetSpec.earliest()}).all()[tp]
    latest = admin.list_offsets({tp: OffsetSpec.latest()}).all()[tp]
    assert (earliest.offset, latest.offset) == (4, 10)
    assert admin.delete_records({tp: -1}).all() == {tp: 10}
    missing = admin.delete_records({TP(topic, 7): 1})[TP(topic, 7)]
    assert "UNKNOWN_TOPIC_OR_PARTITION" in str(missing.exception())


def test_describe_cluster(broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    cluster = admin.describe_cluster()
    assert cluster.cluster_id
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(0, "127.0.0.1", broker.port)]
    assert cluster.controller is not None and cluster.controller.id == 0
    out = cli(broker, "cluster", "describe").stdout.splitlines()
    assert out[0] == f"Cluster ID: {cluster.cluster_id}"
    assert out[1] == f"Controller: 0 (127.0.0.1:{broker.port})"
    assert out[3].split() == ["ID", "HOST", "PORT", "RACK"]
    assert out[4].split() == ["0", "127.0.0.1", str(broker.port), "-"]


def test_no_broker_is_one_clear_line() -> None:
    address = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    err = cli(None, "topics", "list", "--timeout", "1500", rc=1, bootstrap=address).stderr
    assert time.monotonic() - started < 20
    assert err == f"Error: no broker reachable at {address} (connection refused)\n"
    with KafkaAdminClient(bootstrap_servers=address, default_api_timeout_ms=500) as client, \
            pytest.raises(KafkaTimeoutError, match=f"no broker reachable at {address} "):
        client.list_topics()
    with pytest.raises(IllegalStateError, match="closed"):
        client.list_topics()


def test_against_librdkafkas_mock_cluster() -> None:
    from confluent_kafka import Producer

    mock = Producer({"test.mock.num.brokers": 1, "bootstrap.servers": "unused:1",
                     "log_level": 0})
    (node,) = mock.list_topics(timeout=10).brokers.values()
    with KafkaAdminClient(bootstrap_servers=f"{node.host}:{node.port}",
                          default_api_timeout_ms=2000) as client:
        assert [n.id for n in client.describe_cluster().nodes] == [node.id]
        assert client.list_topics() == []
