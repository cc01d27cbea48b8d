"""DescribeLogDirs against a real broker process with the ACL authorizer (SASL PLAIN:
``admin`` the super user, ``alice`` without ACLs until the last test): partition sizes
grow as records are produced, a topic that does not exist is absent, the volume's bytes
are there (v4), ``millrace log-dirs --describe`` prints them in kafka-log-dirs.sh's shape,
and a user without Describe on the Cluster gets CLUSTER_AUTHORIZATION_FAILED."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from millrace.cli.main import main
from millrace.client.admin import KafkaAdminClient, NewTopic, TopicPartition
from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.common.errors import ClusterAuthorizationFailedError
from millrace.protocol import DescribeLogDirsRequest
from millrace.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from millrace.testing.broker_process import BrokerProcess
from tests.integration.broker_http_support import admin_config, secured_broker

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with secured_broker(tmp_path_factory.mktemp("log-dirs")) as b:
        yield b


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    with KafkaAdminClient(admin_config(broker)) as a:
        yield a


@pytest.fixture(scope="module")
def node_id(admin: KafkaAdminClient) -> int:
    (node,) = admin.describe_cluster().nodes
    return node.id


def produce(broker: BrokerProcess, topic: str, n: int) -> None:
    config = {k: v for k, v in admin_config(broker).items() if k != "default.api.timeout.ms"}
    producer: KafkaProducer[bytes, bytes] = KafkaProducer({**config, "acks": "1"})
    with producer:
        for _ in range(n):
            producer.send(ProducerRecord(topic, b"x" * 200, partition=1))
        producer.flush(30)


def sizes(admin: KafkaAdminClient, node_id: int) -> dict[TopicPartition, int]:
    (described,) = admin.describe_log_dirs([node_id]).values()
    return {tp: info.size for d in described.values() for tp, info in d.replica_infos.items()}


def test_sizes_grow_as_records_are_produced(broker: BrokerProcess, admin: KafkaAdminClient,
                                            node_id: int) -> None:
    topic = f"ld-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(20)
    before = sizes(admin, node_id)
    assert before[TopicPartition(topic, 1)] == 0
    produce(broker, topic, 100)
    middle = sizes(admin, node_id)
    produce(broker, topic, 100)
    after = sizes(admin, node_id)
    assert 100 * 200 < middle[TopicPartition(topic, 1)] < after[TopicPartition(topic, 1)]
    assert after[TopicPartition(topic, 0)] == 0
    assert not any(tp.topic == "no-such-topic" for tp in after)

    (described,) = admin.describe_log_dirs([node_id]).values()
    (path, d) = next(iter(described.items()))
    assert path == str(broker.data_dir / "logs") and d.error is None
    st = os.statvfs(path)
    assert d.total_bytes == st.f_blocks * st.f_frsize
    assert d.usable_bytes is not None and 0 < d.usable_bytes <= d.total_bytes
    info = d.replica_infos[TopicPartition(topic, 1)]
    assert (info.offset_lag, info.is_future) == (0, False)


def test_cli_prints_kafka_log_dirs_shape(broker: BrokerProcess, admin: KafkaAdminClient,
                                        node_id: int, capsys: pytest.CaptureFixture[str]
                                        ) -> None:
    topic = f"ld-cli-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(20)
    produce(broker, topic, 10)
    config = admin_config(broker)
    argv = ["log-dirs", "--describe", "--bootstrap-server", broker.bootstrap,
            "--broker-list", str(node_id), "--topic-list", topic,
            *[x for k in ("security.protocol", "sasl.mechanism", "sasl.username",
                          "sasl.password") for x in ("-X", f"{k}={config[k]}")]]
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == f"Received log directory information from brokers {node_id}"
    doc = json.loads(out[2])
    (entry,) = doc["brokers"]
    (log_dir,) = entry["logDirs"]
    assert (doc["version"], entry["broker"], log_dir["error"]) == (1, node_id, None)
    parts = {p["partition"]: p for p in log_dir["partitions"]}
    assert sorted(parts) == [f"{topic}-0", f"{topic}-1"]
    assert parts[f"{topic}-1"]["size"] > 10 * 200 and parts[f"{topic}-0"]["size"] == 0
    assert parts[f"{topic}-1"]["offsetLag"] == 0 and parts[f"{topic}-1"]["isFuture"] is False


def _raw(broker: BrokerProcess, user: str, version: int) -> Any:
    """One DescribeLogDirs at ``version``, as ``user``, over the admin client's network."""
    with KafkaAdminClient(admin_config(broker, user)) as a:
        net: Any = a._net
        response, got = net.send(DescribeLogDirsRequest(topics=None),
                                 net.now() + 20_000, None, min_version=version,
                                 max_version=version)
    assert got == version
    return response


def test_without_describe_on_the_cluster_it_is_refused(broker: BrokerProcess,
                                                      admin: KafkaAdminClient,
                                                      node_id: int) -> None:
    with KafkaAdminClient(admin_config(broker, "alice")) as alice, \
            pytest.raises(ClusterAuthorizationFailedError):
        alice.describe_log_dirs([node_id])
    v4 = _raw(broker, "alice", 4)
    assert (v4.error_code, v4.results) == (31, [])
    v2 = _raw(broker, "alice", 2)       # no error field before v3: an empty answer
    assert v2.results == []
    binding = AclBinding(ResourcePattern(ResourceType.CLUSTER, "kafka-cluster",
                                         PatternType.LITERAL),
                         AccessControlEntry("User:alice", "*", AclOperation.DESCRIBE,
                                            AclPermissionType.ALLOW))
    admin.create_acls([binding]).all()
    try:
        with KafkaAdminClient(admin_config(broker, "alice")) as alice:
            got = alice.describe_log_dirs([node_id])
        assert list(got) == [node_id] and all(d.error is None for d in got[node_id].values())
    finally:
        admin.delete_acls([binding.to_filter()]).all()


@pytest.mark.parametrize("version", range(5))
def test_every_version_is_served(broker: BrokerProcess, version: int) -> None:
    response = _raw(broker, "admin", version)
    (result,) = response.results
    assert result.error_code == 0 and result.log_dir == str(broker.data_dir / "logs")
    assert (result.total_bytes > 0) == (version >= 4)
