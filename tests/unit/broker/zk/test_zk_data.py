"""Kafka's znode JSON, byte for byte (``kafka.zk.ZkData`` and ``KafkaZkClientTest``), and
decoding of what Kafka itself writes (its maps come out in hash order)."""

from __future__ import annotations

import uuid

import pytest

from millrace.broker.zk import zk_data as zd
from millrace.broker.zk.kafka_zk_client import should_recreate_ephemeral
from millrace.broker.zk.zk_data import (
    BrokerInfo,
    EndPoint,
    LeaderIsrAndControllerEpoch,
    ProducerIdsBlock,
    ReplicaAssignment,
    SupportedVersionRange,
)
from millrace.broker.zk.zookeeper_client import split_connect_string
from millrace.common.topic_partition import TopicPartition

TOPIC_ID = uuid.UUID("517c94f6-2e40-467e-96d3-438ddad69e58")


def test_uuid_base64_is_kafkas_uuid_to_string() -> None:
    assert zd.uuid_to_base64(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
    # Uuid.fromString("UXyU9i5ARn6W00ON2taeWA") from Kafka's UuidTest
    assert zd.uuid_from_base64("UXyU9i5ARn6W00ON2taeWA") == TOPIC_ID
    assert zd.uuid_to_base64(TOPIC_ID) == "UXyU9i5ARn6W00ON2taeWA"
    with pytest.raises(ValueError, match="32 bytes"):
        zd.uuid_from_base64("A" * 43)
    with pytest.raises(ValueError, match="4 bytes"):
        zd.uuid_from_base64("AAAAAA")


def test_paths() -> None:
    tp = TopicPartition("orders", 3)
    assert zd.broker_id_path(7) == "/brokers/ids/7"
    assert zd.topic_path("orders") == "/brokers/topics/orders"
    assert zd.topic_partition_state_path(tp) == "/brokers/topics/orders/partitions/3/state"
    assert zd.config_entity_path("topics", "orders") == "/config/topics/orders"
    assert zd.delete_topic_path("orders") == "/admin/delete_topics/orders"
    assert zd.isr_change_notification_path("0000000012") == \
        "/isr_change_notification/isr_change_0000000012"
    assert zd.sequence_number_of("isr_change_0000000012", "isr_change_") == "0000000012"
    with pytest.raises(ValueError):
        zd.sequence_number_of("config_change_1", "isr_change_")
    assert zd.PERSISTENT_ZK_PATHS == (
        "/consumers", "/brokers/ids", "/brokers/topics", "/config/changes",
        "/admin/delete_topics", "/brokers/seqid", "/isr_change_notification",
        "/latest_producer_id_block", "/log_dir_event_notification", "/config/topics",
        "/config/clients", "/config/users", "/config/brokers", "/config/ips")


def test_controller_and_epoch() -> None:
    assert zd.encode_controller(2, 1700000000123) == \
        b'{"version":2,"brokerid":2,"timestamp":"1700000000123","kraftControllerEpoch":-1}'
    assert zd.decode_controller(b'{"version":1,"brokerid":5,"timestamp":"1"}') == 5
    assert zd.encode_controller_epoch(12) == b"12"
    assert zd.decode_controller_epoch(b"12") == 12
    with pytest.raises(ValueError):
        zd.decode_controller(b'{"version":2}')


def test_broker_registration_v5_exact_json() -> None:
    info = BrokerInfo(1, (EndPoint("127.0.0.1", 9092), EndPoint("::1", 9093, "INTERNAL", "SSL")),
                      rack="r1", features={"metadata.version": SupportedVersionRange(1, 20)})
    assert zd.encode_broker_info(info, 1700000000000) == (
        b'{"version":5,"host":"127.0.0.1","port":9092,"jmx_port":-1,'
        b'"timestamp":"1700000000000",'
        b'"endpoints":["PLAINTEXT://127.0.0.1:9092","INTERNAL://[::1]:9093"],"rack":"r1",'
        b'"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","INTERNAL":"SSL"},'
        b'"features":{"metadata.version":{"min_version":1,"max_version":20}}}')
    assert zd.decode_broker_info(1, zd.encode_broker_info(info, 1)) == info


def test_broker_registration_without_plaintext_or_rack() -> None:
    info = BrokerInfo(3, (EndPoint("h", 9094, "SSL", "SSL"),))
    assert zd.encode_broker_info(info, 5) == (
        b'{"version":5,"host":null,"port":-1,"jmx_port":-1,"timestamp":"5",'
        b'"endpoints":["SSL://h:9094"],"listener_security_protocol_map":{"SSL":"SSL"},'
        b'"features":{}}')


def test_decode_broker_as_kafka_writes_it() -> None:
    # a Kafka 3.8 broker's znode: Jackson writes the Scala map in hash order
    kafka = (b'{"features":{},"listener_security_protocol_map":{"CLIENT":"PLAINTEXT",'
             b'"REPLICATION":"SASL_SSL"},"endpoints":["CLIENT://host1:9092",'
             b'"REPLICATION://host1:9093"],"jmx_port":9999,"port":9092,"host":"host1",'
             b'"version":5,"timestamp":"2233345666","rack":"dc1"}')
    info = zd.decode_broker_info(4, kafka)
    assert info == BrokerInfo(
        4, (EndPoint("host1", 9092, "CLIENT", "PLAINTEXT"),
            EndPoint("host1", 9093, "REPLICATION", "SASL_SSL")), "dc1", {}, 9999, 5)
    assert info.endpoint("REPLICATION") == EndPoint("host1", 9093, "REPLICATION", "SASL_SSL")
    v1 = zd.decode_broker_info(2, b'{"version":1,"host":"h","port":9092,"jmx_port":-1}')
    assert v1.endpoints == (EndPoint("h", 9092),)
    v2 = zd.decode_broker_info(2, b'{"version":2,"host":"h","port":1,"jmx_port":-1,'
                                  b'"endpoints":["SSL://h:9093"]}')
    assert v2.endpoints == (EndPoint("h", 9093, "SSL", "SSL"),)
    with pytest.raises(ValueError, match="No security protocol defined for listener X"):
        zd.decode_broker_info(2, b'{"version":4,"jmx_port":-1,"endpoints":["X://h:1"],'
                                 b'"listener_security_protocol_map":{}}')


def test_topic_assignment_v3() -> None:
    encoded = zd.encode_topic_assignment(TOPIC_ID, {
        1: ReplicaAssignment((2, 3, 1)),
        0: ReplicaAssignment((1, 2, 3), adding_replicas=(3,), removing_replicas=(4,)),
    })
    assert encoded == (
        b'{"version":3,"partitions":{"0":[1,2,3],"1":[2,3,1]},"adding_replicas":{"0":[3]},'
        b'"removing_replicas":{"0":[4]},"topic_id":"UXyU9i5ARn6W00ON2taeWA"}')
    decoded = zd.decode_topic_assignment("t", encoded)
    assert decoded.topic_id == TOPIC_ID
    assert decoded.assignment[0] == ReplicaAssignment((1, 2, 3), (3,), (4,))
    assert decoded.replicas() == {0: [1, 2, 3], 1: [2, 3, 1]}
    assert zd.encode_topic_assignment(None, {0: ReplicaAssignment((1,))}) == \
        b'{"version":3,"partitions":{"0":[1]},"adding_replicas":{},"removing_replicas":{}}'


def test_topic_assignment_old_versions_and_empty() -> None:
    v1 = zd.decode_topic_assignment("t", b'{"version":1,"partitions":{"1":[2],"0":[1,2]}}')
    assert v1.topic_id is None
    assert v1.replicas() == {0: [1, 2], 1: [2]}
    assert v1.assignment[0].adding_replicas == ()
    empty = zd.decode_topic_assignment("t", b"")
    assert (empty.topic_id, dict(empty.assignment)) == (None, {})


def test_partition_state() -> None:
    state = LeaderIsrAndControllerEpoch(1, 0, (1, 2, 3), 7)
    assert zd.encode_partition_state(state) == \
        b'{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":7,"isr":[1,2,3]}'
    assert zd.decode_partition_state(zd.encode_partition_state(state), 4) == \
        LeaderIsrAndControllerEpoch(1, 0, (1, 2, 3), 7, 0, 4)
    recovering = LeaderIsrAndControllerEpoch(2, 5, (2,), 8, zd.LEADER_RECOVERING)
    assert zd.encode_partition_state(recovering) == (
        b'{"version":1,"leader":2,"leader_epoch":5,"controller_epoch":8,"isr":[2],'
        b'"leader_recovery_state":1}')
    as_state = zd.decode_partition_state(
        b'{"controller_epoch":3,"leader":-1,"version":1,"leader_epoch":9,"isr":[2]}', 11)
    assert as_state is not None
    ps = as_state.as_partition_state()
    assert (ps.leader, ps.leader_epoch, ps.isr, ps.controller_epoch, ps.partition_epoch) == \
        (-1, 9, (2,), 3, 11)
    assert zd.decode_partition_state(b"", 0) is None


def test_notifications_as_kafkas_tests_expect() -> None:
    parts = [TopicPartition("topic-b", 0), TopicPartition("topic-a", 0)]
    # KafkaZkClientTest.testPropagateIsrChanges
    assert zd.encode_isr_change_notification(parts) == (
        b'{"version":1,"partitions":[{"topic":"topic-a","partition":0},'
        b'{"topic":"topic-b","partition":0}]}')
    assert zd.decode_isr_change_notification(zd.encode_isr_change_notification(parts)) == \
        sorted(parts)
    assert zd.encode_preferred_replica_election([TopicPartition("t", 1)]) == \
        b'{"version":1,"partitions":[{"topic":"t","partition":1}]}'
    assert zd.decode_preferred_replica_election(
        b'{"partitions":[{"partition":1,"topic":"t"}],"version":1}') == {TopicPartition("t", 1)}


def test_configs_cluster_id_and_producer_ids() -> None:
    assert zd.encode_entity_config({"retention.ms": "1000", "cleanup.policy": "compact"}) == \
        b'{"version":1,"config":{"retention.ms":"1000","cleanup.policy":"compact"}}'
    assert zd.decode_entity_config(b'{"version":1,"config":{"a":"b"}}') == {"a": "b"}
    assert zd.decode_entity_config(b"") == {}
    assert zd.encode_config_change_notification("topics/orders") == \
        b'{"version":2,"entity_path":"topics/orders"}'
    assert zd.decode_config_change_notification(b'{"version":2,"entity_path":"topics/x"}') \
        == "topics/x"
    assert zd.encode_cluster_id("abc") == b'{"version":"1","id":"abc"}'
    assert zd.decode_cluster_id(b'{"id":"xyz","version":"1"}') == "xyz"
    assert len(zd.generate_cluster_id()) == 22
    block = ProducerIdsBlock(2, 1000, 1000)
    assert block.last_producer_id == 1999
    assert block.next_block_first_id() == 2000
    assert zd.encode_producer_id_block(block) == \
        b'{"version":1,"broker":2,"block_start":"1000","block_end":"1999"}'
    assert zd.decode_producer_id_block(zd.encode_producer_id_block(block)) == block
    assert zd.decode_producer_id_block(b"") is None


def test_json_is_utf8_and_slash_unescaped() -> None:
    assert zd.encode_entity_config({"k": "é/ü"}) == \
        '{"version":1,"config":{"k":"é/ü"}}'.encode()


def test_connect_string_and_chroot() -> None:
    assert split_connect_string("h1:2181,h2:2181/kafka/a") == ("h1:2181,h2:2181", "/kafka/a")
    assert split_connect_string("h:2181") == ("h:2181", None)
    assert split_connect_string("h:2181/") == ("h:2181", None)
    with pytest.raises(ValueError):
        split_connect_string("/chroot")


def test_ephemeral_leftover_is_ours_only_from_our_old_session() -> None:
    # node owned by the session we registered with, and we are on a new session: recreate
    assert should_recreate_ephemeral(owner_session=10, registered_session=10,
                                     current_session=11)
    # our current session owns it: nothing to do
    assert not should_recreate_ephemeral(10, 10, 10)
    # another broker's session owns it
    assert not should_recreate_ephemeral(12, 10, 11)
    # never registered: never ours
    assert not should_recreate_ephemeral(10, None, 11)
