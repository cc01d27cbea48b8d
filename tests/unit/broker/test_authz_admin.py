"""Authorization of the admin and controller APIs (reference security.md 5), through the
handlers of one in-process node with the ACL authorizer on, as Kafka 3.9's ``KafkaApis``,
``ConfigHelper`` and ``AuthHelper`` decide: each API refused without its ACL and served
with it, refused before existence is looked at (an unknown name answers the authorization
error, never UNKNOWN_TOPIC_OR_PARTITION), a super user bypassing, and a refused request
changing nothing.

``alice`` holds only the ACLs a test gives her; ``admin`` is the super user.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from millrace.broker.context import RequestContext
from millrace.broker.handlers import HANDLERS
from millrace.broker.metadata import BrokerRegistration
from millrace.broker.metadata.metadata_cache import MetadataCache
from millrace.broker.services import ClusterServices
from millrace.common.errors import Errors
from millrace.common.topic_partition import TopicPartition
from millrace.protocol import (
    API,
    AlterConfigsRequest,
    AlterPartitionReassignmentsRequest,
    AlterUserScramCredentialsRequest,
    ApiKey,
    ControlledShutdownRequest,
    CreatePartitionsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    DescribeUserScramCredentialsRequest,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    LeaderAndIsrRequest,
    ListPartitionReassignmentsRequest,
    RequestHeader,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from millrace.security.acl import AclOperation, PatternType, ResourceType
from millrace.security.kafka_principal import KafkaPrincipal
from tests.unit.broker.brokergen import (
    AUTHORIZER,
    NODE,
    PRODUCE_V,
    Broker,
    batch,
    create_topics_req,
    produce_req,
)

ALICE = KafkaPrincipal.user("alice")
ADMIN = KafkaPrincipal.user("admin")
TOPIC, CLUSTER = ResourceType.TOPIC, ResourceType.CLUSTER
CLUSTER_NAME = "kafka-cluster"
TOPIC_DENIED = Errors.TOPIC_AUTHORIZATION_FAILED
CLUSTER_DENIED = Errors.CLUSTER_AUTHORIZATION_FAILED
ZERO_ID = uuid.UUID(int=0)


@pytest.fixture
def authz(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(str(tmp_path / "logs"), **AUTHORIZER, **{"super.users": "User:admin"})
    try:
        yield b
    finally:
        b.close()


def call(broker: Broker, key: int, version: int, body: Any,
         principal: KafkaPrincipal = ALICE) -> Any:
    return asyncio.run(broker.call(key, version, body, principal=principal))


def allow_alice(broker: Broker, operation: AclOperation, resource_type: ResourceType,
                name: str, pattern_type: PatternType = PatternType.LITERAL) -> None:
    broker.allow("User:alice", operation, resource_type, name, pattern_type)


# ---------------------------------------------------------------------- CreateTopics
CREATE_TOPICS_V = 7


def created(response: Any) -> list[tuple[str, int, int]]:
    """(name, error_code, topic_config_error_code) per topic."""
    return [(t.name, t.error_code, t.topic_config_error_code) for t in response.topics]


def test_create_topics_needs_create(authz: Broker) -> None:
    authz.create_topic("taken")
    got = call(authz, ApiKey.CREATE_TOPICS, CREATE_TOPICS_V,
               create_topics_req(("new", 1, 1), ("taken", 1, 1)))
    # "taken" exists, and still answers 29: the caller cannot tell
    assert created(got) == [("new", TOPIC_DENIED, TOPIC_DENIED),
                            ("taken", TOPIC_DENIED, TOPIC_DENIED)]
    assert [t.error_message for t in got.topics] == ["Authorization failed."] * 2
    assert "new" not in authz.services.metadata.topics
    assert authz.services.replica_manager.get_partition("new", 0) is None


def test_create_on_a_topic_creates_it_without_showing_its_configs(authz: Broker) -> None:
    allow_alice(authz, AclOperation.CREATE, TOPIC, "new-", PatternType.PREFIXED)
    got = call(authz, ApiKey.CREATE_TOPICS, CREATE_TOPICS_V, create_topics_req(
        ("new-a", 3, 1), ("other", 1, 1), configs={"cleanup.policy": "compact"}))
    assert created(got) == [("new-a", 0, TOPIC_DENIED), ("other", TOPIC_DENIED, TOPIC_DENIED)]
    a = got.topics[0]
    # Without DescribeConfigs Kafka returns neither configs nor the topic's metadata.
    assert (a.topic_id, a.num_partitions, a.replication_factor, a.configs) == (
        ZERO_ID, -1, -1, [])
    assert authz.services.metadata.topics["new-a"].partitions == 3
    assert "other" not in authz.services.metadata.topics


@pytest.mark.parametrize("shown_by", [AclOperation.DESCRIBE_CONFIGS,
                                      AclOperation.ALTER_CONFIGS])  # AlterConfigs implies it
def test_create_topics_shows_configs_with_describe_configs(authz: Broker,
                                                           shown_by: AclOperation) -> None:
    allow_alice(authz, AclOperation.CREATE, TOPIC, "new")
    allow_alice(authz, shown_by, TOPIC, "new")
    got = call(authz, ApiKey.CREATE_TOPICS, CREATE_TOPICS_V,
               create_topics_req(("new", 2, 1), configs={"cleanup.policy": "compact"}))
    assert created(got) == [("new", 0, 0)]
    t = got.topics[0]
    assert (t.topic_id, t.num_partitions, t.replication_factor) == (
        authz.services.metadata.topics["new"].topic_id, 2, 1)
    assert {c.name: c.value for c in t.configs}["cleanup.policy"] == "compact"


def test_create_on_the_cluster_creates_any_topic(authz: Broker) -> None:
    allow_alice(authz, AclOperation.CREATE, CLUSTER, CLUSTER_NAME)
    # Kafka asks the Cluster first; granted there, a Topic DENY is never consulted.
    authz.deny("User:alice", AclOperation.CREATE, TOPIC, "b")
    got = call(authz, ApiKey.CREATE_TOPICS, CREATE_TOPICS_V,
               create_topics_req(("a", 1, 1), ("b", 1, 1)))
    assert [(n, e) for n, e, _ in created(got)] == [("a", 0), ("b", 0)]
    assert {"a", "b"} <= set(authz.services.metadata.topics)


def test_a_failed_create_clears_the_config_error(authz: Broker) -> None:
    authz.create_topic("taken")
    allow_alice(authz, AclOperation.CREATE, TOPIC, "*")
    got = call(authz, ApiKey.CREATE_TOPICS, CREATE_TOPICS_V, create_topics_req(
        ("taken", 1, 1), ("zero", 0, 1), ("dup", 1, 1), ("dup", 1, 1)))
    # Kafka resets topic_config_error_code on a topic whose creation failed, and keeps
    # it on one refused before (the duplicate).
    assert created(got) == [("taken", Errors.TOPIC_ALREADY_EXISTS, 0),
                            ("zero", Errors.INVALID_PARTITIONS, 0),
                            ("dup", 0, TOPIC_DENIED),
                            ("dup", Errors.INVALID_REQUEST, TOPIC_DENIED)]


def test_create_topics_before_v5_has_no_config_error(authz: Broker) -> None:
    got = call(authz, ApiKey.CREATE_TOPICS, 4, create_topics_req(("new", 1, 1)))
    assert created(got) == [("new", TOPIC_DENIED, 0)]   # the field is not on the wire


def test_create_topics_super_user(authz: Broker) -> None:
    got = call(authz, ApiKey.CREATE_TOPICS, CREATE_TOPICS_V,
               create_topics_req(("new", 2, 1)), principal=ADMIN)
    assert created(got) == [("new", 0, 0)]
    assert got.topics[0].num_partitions == 2


# ---------------------------------------------------------------------- DeleteTopics
def delete_by_name(broker: Broker, *names: str, principal: KafkaPrincipal = ALICE) -> Any:
    return call(broker, ApiKey.DELETE_TOPICS, 5,
                DeleteTopicsRequest(topic_names=list(names), timeout_ms=1000), principal)


def delete_by_id(broker: Broker, *ids: uuid.UUID) -> Any:
    return call(broker, ApiKey.DELETE_TOPICS, 6, DeleteTopicsRequest(topics=[
        DeleteTopicsRequest.DeleteTopicState(topic_id=i) for i in ids], timeout_ms=1000))


def test_delete_topics_needs_delete(authz: Broker) -> None:
    authz.create_topic("t")
    got = delete_by_name(authz, "t", "nope")
    assert [(r.name, r.error_code, r.topic_id) for r in got.responses] == [
        ("t", TOPIC_DENIED, ZERO_ID), ("nope", TOPIC_DENIED, ZERO_ID)]
    assert "t" in authz.services.metadata.topics
    allow_alice(authz, AclOperation.DESCRIBE, TOPIC, "t")    # Describe is not Delete
    assert [r.error_code for r in delete_by_name(authz, "t").responses] == [TOPIC_DENIED]
    allow_alice(authz, AclOperation.DELETE, TOPIC, "*")
    got = delete_by_name(authz, "t", "nope")
    assert [(r.name, r.error_code) for r in got.responses] == [
        ("t", 0), ("nope", Errors.UNKNOWN_TOPIC_OR_PARTITION)]
    assert "t" not in authz.services.metadata.topics


def test_delete_topics_by_id_hides_the_name_without_describe(authz: Broker) -> None:
    authz.create_topic("secret")
    topic_id = authz.services.metadata.topics["secret"].topic_id
    unknown = uuid.UUID(int=5)
    got = delete_by_id(authz, topic_id, unknown)
    # the id is not secret (Kafka echoes it), the name is; an unknown id stays
    # UNKNOWN_TOPIC_ID (it names nothing to protect)
    assert [(r.name, r.topic_id, r.error_code) for r in got.responses] == [
        (None, topic_id, TOPIC_DENIED), (None, unknown, Errors.UNKNOWN_TOPIC_ID)]
    allow_alice(authz, AclOperation.READ, TOPIC, "secret")   # implies Describe
    got = delete_by_id(authz, topic_id)
    assert [(r.name, r.error_code) for r in got.responses] == [("secret", TOPIC_DENIED)]
    allow_alice(authz, AclOperation.DELETE, TOPIC, "secret")
    got = delete_by_id(authz, topic_id)
    assert [(r.name, r.topic_id, r.error_code) for r in got.responses] == [
        ("secret", topic_id, 0)]
    assert "secret" not in authz.services.metadata.topics


def test_delete_topics_disabled_comes_first_and_still_hides_names(tmp_path: Path) -> None:
    b = Broker(str(tmp_path / "logs"), **AUTHORIZER, **{"delete.topic.enable": False})
    try:
        b.create_topic("keep")
        topic_id = b.services.metadata.topics["keep"].topic_id
        assert [r.error_code for r in delete_by_name(b, "keep").responses] == [
            Errors.TOPIC_DELETION_DISABLED]
        got = delete_by_id(b, topic_id)
        assert [(r.name, r.error_code) for r in got.responses] == [
            (None, Errors.TOPIC_DELETION_DISABLED)]
        assert "keep" in b.services.metadata.topics
    finally:
        b.close()


def test_delete_topics_super_user(authz: Broker) -> None:
    authz.create_topic("t")
    got = delete_by_name(authz, "t", principal=ADMIN)
    assert [(r.name, r.error_code) for r in got.responses] == [("t", 0)]


# ---------------------------------------------------------------------- CreatePartitions
def grow(broker: Broker, name: str, count: int, principal: KafkaPrincipal = ALICE) -> Any:
    cls = CreatePartitionsRequest
    got = call(broker, ApiKey.CREATE_PARTITIONS, 3, cls(timeout_ms=1000, validate_only=False,
               topics=[cls.CreatePartitionsTopic(name=name, count=count, assignments=None)]),
               principal)
    return [(r.name, r.error_code, r.error_message) for r in got.results]


def test_create_partitions_needs_alter(authz: Broker) -> None:
    authz.create_topic("t")
    denied = "The topic authorization is failed."
    assert grow(authz, "t", 3) == [("t", TOPIC_DENIED, denied)]
    assert grow(authz, "nope", 3) == [("nope", TOPIC_DENIED, denied)]
    allow_alice(authz, AclOperation.CREATE, TOPIC, "t")       # Create is not Alter
    assert grow(authz, "t", 3) == [("t", TOPIC_DENIED, denied)]
    assert authz.services.metadata.topics["t"].partitions == 1
    allow_alice(authz, AclOperation.ALTER, TOPIC, "*")
    assert grow(authz, "t", 3) == [("t", 0, None)]
    assert authz.services.metadata.topics["t"].partitions == 3
    assert grow(authz, "nope", 3)[0][1] == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert authz.services.replica_manager.get_partition("t", 2) is not None


def test_create_partitions_super_user(authz: Broker) -> None:
    authz.create_topic("t")
    assert grow(authz, "t", 2, principal=ADMIN) == [("t", 0, None)]


# ---------------------------------------------------------------------- DescribeConfigs
CFG_TOPIC, CFG_BROKER, CFG_BROKER_LOGGER = 2, 4, 8


def describe_configs(broker: Broker, *resources: tuple[int, str],
                     principal: KafkaPrincipal = ALICE) -> list[tuple[str, int, str | None, int]]:
    """(name, error_code, error_message, number of configs) per resource."""
    cls = DescribeConfigsRequest
    got = call(broker, ApiKey.DESCRIBE_CONFIGS, 4, cls(resources=[
        cls.DescribeConfigsResource(resource_type=t, resource_name=n, configuration_keys=None)
        for t, n in resources], include_synonyms=False), principal)
    return [(r.resource_name, r.error_code, r.error_message, len(r.configs))
            for r in got.results]


def test_describe_configs_of_a_topic_needs_describe_configs(authz: Broker) -> None:
    authz.create_topic("t", configs={"cleanup.policy": "compact"})
    assert describe_configs(authz, (CFG_TOPIC, "t"), (CFG_TOPIC, "nope")) == [
        ("t", TOPIC_DENIED, "Topic authorization failed.", 0),
        ("nope", TOPIC_DENIED, "Topic authorization failed.", 0)]    # no probing
    allow_alice(authz, AclOperation.DESCRIBE, TOPIC, "t")             # not enough
    assert describe_configs(authz, (CFG_TOPIC, "t"))[0][1] == TOPIC_DENIED
    allow_alice(authz, AclOperation.DESCRIBE_CONFIGS, TOPIC, "*")
    (name, error, _, n), (_, unknown, _, _) = describe_configs(
        authz, (CFG_TOPIC, "t"), (CFG_TOPIC, "nope"))
    assert (name, error) == ("t", 0) and n > 0
    assert unknown == Errors.UNKNOWN_TOPIC_OR_PARTITION


def test_alter_configs_implies_describe_configs(authz: Broker) -> None:
    authz.create_topic("t")
    allow_alice(authz, AclOperation.ALTER_CONFIGS, TOPIC, "t")
    (_, error, _, n), = describe_configs(authz, (CFG_TOPIC, "t"))
    assert error == 0 and n > 0


def test_describe_configs_of_the_broker_needs_the_cluster(authz: Broker) -> None:
    authz.create_topic("t")
    allow_alice(authz, AclOperation.DESCRIBE_CONFIGS, TOPIC, "t")
    denied = "Cluster authorization failed."
    assert describe_configs(authz, (CFG_BROKER, "1"), (CFG_BROKER_LOGGER, "1"),
                            (CFG_TOPIC, "t"))[:2] == [
        ("1", CLUSTER_DENIED, denied, 0), ("1", CLUSTER_DENIED, denied, 0)]
    # a type Kafka has no rule for is refused as a bad request, not as unauthorized
    assert describe_configs(authz, (3, "g"))[0][1] == Errors.INVALID_REQUEST
    allow_alice(authz, AclOperation.DESCRIBE_CONFIGS, CLUSTER, CLUSTER_NAME)
    broker_result, logger_result = describe_configs(authz, (CFG_BROKER, "1"),
                                                    (CFG_BROKER_LOGGER, "1"))
    assert broker_result[1] == 0 and broker_result[3] > 0
    assert logger_result[1] == Errors.INVALID_REQUEST       # authorized, not supported here


def test_describe_configs_super_user(authz: Broker) -> None:
    authz.create_topic("t")
    assert [e for _, e, _, _ in describe_configs(authz, (CFG_TOPIC, "t"), (CFG_BROKER, "1"),
                                                 principal=ADMIN)] == [0, 0]


# ---------------------------------------------------------------------- AlterConfigs
def alter_configs(broker: Broker, resource_type: int, name: str, key: str, value: str,
                  principal: KafkaPrincipal = ALICE) -> tuple[int, str | None]:
    """AlterConfigs of one resource to {key: value}: its (error_code, error_message)."""
    cls = AlterConfigsRequest.AlterConfigsResource
    got = call(broker, ApiKey.ALTER_CONFIGS, 2, AlterConfigsRequest(validate_only=False,
               resources=[cls(resource_type=resource_type, resource_name=name, configs=[
                   cls.AlterableConfig(name=key, value=value)])]), principal)
    (r,) = got.responses
    return r.error_code, r.error_message


def incremental_alter(broker: Broker, resource_type: int, name: str, key: str, value: str,
                      principal: KafkaPrincipal = ALICE) -> tuple[int, str | None]:
    cls = IncrementalAlterConfigsRequest.AlterConfigsResource
    got = call(broker, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, IncrementalAlterConfigsRequest(
        validate_only=False, resources=[cls(resource_type=resource_type, resource_name=name,
                                            configs=[cls.AlterableConfig(
                                                name=key, config_operation=0, value=value)])]),
        principal)
    (r,) = got.responses
    return r.error_code, r.error_message


def topic_overrides(broker: Broker, name: str) -> dict[str, str]:
    return dict(broker.services.metadata.topics[name].configs)


@pytest.mark.parametrize("alter", [alter_configs, incremental_alter])
def test_altering_topic_configs_needs_alter_configs(authz: Broker, alter: Any) -> None:
    authz.create_topic("t")
    assert alter(authz, CFG_TOPIC, "t", "retention.ms", "1000") == (TOPIC_DENIED, None)
    assert alter(authz, CFG_TOPIC, "nope", "retention.ms", "1000") == (TOPIC_DENIED, None)
    allow_alice(authz, AclOperation.DESCRIBE_CONFIGS, TOPIC, "t")   # implies nothing upward
    assert alter(authz, CFG_TOPIC, "t", "retention.ms", "1000") == (TOPIC_DENIED, None)
    assert topic_overrides(authz, "t") == {}
    allow_alice(authz, AclOperation.ALTER_CONFIGS, TOPIC, "*")
    assert alter(authz, CFG_TOPIC, "t", "retention.ms", "1000") == (0, None)
    assert topic_overrides(authz, "t") == {"retention.ms": "1000"}
    assert alter(authz, CFG_TOPIC, "nope", "retention.ms", "1000")[0] == \
        Errors.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize("alter", [alter_configs, incremental_alter])
def test_altering_broker_configs_needs_the_cluster(authz: Broker, alter: Any) -> None:
    assert alter(authz, CFG_BROKER, "1", "log.retention.ms", "1")[0] == CLUSTER_DENIED
    allow_alice(authz, AclOperation.ALTER_CONFIGS, TOPIC, "*")      # a topic ACL is no help
    assert alter(authz, CFG_BROKER, "1", "log.retention.ms", "1")[0] == CLUSTER_DENIED
    allow_alice(authz, AclOperation.ALTER_CONFIGS, CLUSTER, CLUSTER_NAME)
    # authorized; dynamic broker configs are not supported by this broker
    assert alter(authz, CFG_BROKER, "1", "log.retention.ms", "1")[0] == Errors.INVALID_REQUEST


def test_broker_logger_configs(authz: Broker) -> None:
    # IncrementalAlterConfigs authorizes a broker logger on the Cluster; the legacy
    # AlterConfigs refuses the type without asking (Kafka throws INVALID_REQUEST).
    assert incremental_alter(authz, CFG_BROKER_LOGGER, "1", "kafka", "DEBUG")[0] == \
        CLUSTER_DENIED
    assert alter_configs(authz, CFG_BROKER_LOGGER, "1", "kafka", "DEBUG")[0] == \
        Errors.INVALID_REQUEST


def test_alter_configs_super_user(authz: Broker) -> None:
    authz.create_topic("t")
    assert alter_configs(authz, CFG_TOPIC, "t", "retention.ms", "5", ADMIN) == (0, None)
    assert incremental_alter(authz, CFG_TOPIC, "t", "segment.ms", "600000", ADMIN) == (0, None)
    assert topic_overrides(authz, "t") == {"retention.ms": "5", "segment.ms": "600000"}


# ---------------------------------------------------------------------- DeleteRecords
def produce_as_admin(broker: Broker, topic: str, partition: int, n: int) -> None:
    got = asyncio.run(broker.call(ApiKey.PRODUCE, PRODUCE_V, produce_req(
        {(topic, partition): batch(*[b"v%d" % i for i in range(n)])}), principal=ADMIN))
    assert [p.error_code for t in got.responses for p in t.partition_responses] == [0]


def delete_records(broker: Broker, *parts: tuple[str, int, int],
                   principal: KafkaPrincipal = ALICE) -> list[tuple[str, int, int, int]]:
    """(topic, partition, error_code, low_watermark) for each (topic, partition, offset)."""
    cls = DeleteRecordsRequest.DeleteRecordsTopic
    topics: dict[str, list[Any]] = {}
    for topic, index, offset in parts:
        topics.setdefault(topic, []).append(
            cls.DeleteRecordsPartition(partition_index=index, offset=offset))
    got = call(broker, ApiKey.DELETE_RECORDS, 2, DeleteRecordsRequest(timeout_ms=1000, topics=[
        cls(name=t, partitions=ps) for t, ps in topics.items()]), principal)
    return [(t.name, p.partition_index, p.error_code, p.low_watermark)
            for t in got.topics for p in t.partitions]


def test_delete_records_needs_delete(authz: Broker) -> None:
    authz.create_topic("t", 2)
    for p in (0, 1):
        produce_as_admin(authz, "t", p, 3)
    assert delete_records(authz, ("t", 0, 2), ("t", 1, 2), ("nope", 0, 1)) == [
        ("t", 0, TOPIC_DENIED, -1), ("t", 1, TOPIC_DENIED, -1),
        ("nope", 0, TOPIC_DENIED, -1)]
    assert authz.partition("t", 0).log.log_start_offset == 0
    allow_alice(authz, AclOperation.ALTER, TOPIC, "t")          # Alter is not Delete
    assert delete_records(authz, ("t", 0, 2))[0][2] == TOPIC_DENIED
    allow_alice(authz, AclOperation.DELETE, TOPIC, "*")
    assert delete_records(authz, ("t", 0, 2), ("nope", 0, 1)) == [
        ("t", 0, 0, 2), ("nope", 0, Errors.UNKNOWN_TOPIC_OR_PARTITION, -1)]
    assert authz.partition("t", 0).log.log_start_offset == 2


def test_delete_records_asks_once_per_topic(authz: Broker,
                                            caplog: pytest.LogCaptureFixture) -> None:
    authz.create_topic("t", 3)
    with caplog.at_level(logging.INFO, logger="millrace.authorizer"):
        delete_records(authz, ("t", 0, 0), ("t", 1, 0), ("t", 2, 0))
    denials = [r.getMessage() for r in caplog.records if r.name == "millrace.authorizer"]
    assert len(denials) == 1 and "Denied Operation = Delete" in denials[0], denials


def test_delete_records_super_user(authz: Broker) -> None:
    authz.create_topic("t")
    produce_as_admin(authz, "t", 0, 2)
    assert delete_records(authz, ("t", 0, -1), principal=ADMIN) == [("t", 0, 0, 2)]


# ---------------------------------------------------------------------- cluster mode
BROKER_PRINCIPAL = KafkaPrincipal.user("broker")   # given ClusterAction where a test says


class FakeController:
    """The active controller as the handlers see it: it runs each event at once and
    records which ran (a refused request must run none)."""

    is_active = True

    def __init__(self) -> None:
        self.events: list[str] = []

    async def run_event(self, event: Any) -> Any:
        return event(self)

    def on_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> Any:
        self.events.append(f"controlled_shutdown {broker_id}")
        return SimpleNamespace(error=Errors.NONE, remaining_partitions=[])

    def on_elect_leaders(self, election: Any, wanted: list[TopicPartition] | None) -> Any:
        self.events.append("elect_leaders")
        return SimpleNamespace(error=Errors.NONE,
                               election_results={tp: Errors.NONE for tp in wanted or ()})

    def on_alter_partition_reassignments(self, targets: dict[TopicPartition, Any], *,
                                         allow_replication_factor_change: bool) -> Any:
        self.events.append("alter_partition_reassignments")
        return SimpleNamespace(error=Errors.NONE,
                               reassignment_results={tp: Errors.NONE for tp in targets})

    def list_partition_reassignments(self, wanted: list[TopicPartition] | None) -> Any:
        self.events.append("list_partition_reassignments")
        return SimpleNamespace(error=Errors.NONE, ongoing_reassignments={})


def cluster_services(broker: Broker, broker_epoch: int = 10,
                     controller: FakeController | None = None) -> ClusterServices:
    """What a broker of a ZooKeeper cluster has besides the node's services (no
    ZooKeeper or fetchers: a refused request must not reach them, and the allowed
    requests here do not need them)."""
    cache = MetadataCache(NODE)
    cache.update_metadata(0, 1, [BrokerRegistration(NODE, "localhost", 9092)], [])
    return ClusterServices(broker_epoch=broker_epoch, metadata_cache=cache,
                           fetcher_manager=cast(Any, None), zk=cast(Any, None),
                           controller=cast(Any, controller))


def cluster_call(broker: Broker, cluster: ClusterServices, key: int, version: int,
                 body: Any, principal: KafkaPrincipal = ALICE) -> Any:
    """``Broker.call`` on a broker that is in a cluster."""
    async def run() -> Any:
        api = API[key]
        request = api.request.decode(api.request.encode(body, version), version)
        services = dataclasses.replace(broker.services, cluster=cluster)
        ctx = RequestContext(RequestHeader(key, version, 7, "test"), api, "127.0.0.1", 5555,
                             services, principal=principal)
        response = await HANDLERS[key](ctx, request)
        return api.response.decode(api.response.encode(response, version), version)
    return asyncio.run(run())


def grant_cluster(broker: Broker, principal: KafkaPrincipal, operation: AclOperation) -> None:
    broker.allow(str(principal), operation, CLUSTER, CLUSTER_NAME)


# ---------------------------------------------------------------------- ControlledShutdown
def test_controlled_shutdown_needs_cluster_action(authz: Broker) -> None:
    controller = FakeController()
    cluster = cluster_services(authz, controller=controller)
    request = ControlledShutdownRequest(broker_id=2, broker_epoch=5)
    got = cluster_call(authz, cluster, ApiKey.CONTROLLED_SHUTDOWN, 3, request)
    assert (got.error_code, got.remaining_partitions) == (CLUSTER_DENIED, [])
    grant_cluster(authz, ALICE, AclOperation.ALTER)           # Alter is not ClusterAction
    got = cluster_call(authz, cluster, ApiKey.CONTROLLED_SHUTDOWN, 3, request)
    assert got.error_code == CLUSTER_DENIED
    assert controller.events == []
    grant_cluster(authz, BROKER_PRINCIPAL, AclOperation.CLUSTER_ACTION)
    got = cluster_call(authz, cluster, ApiKey.CONTROLLED_SHUTDOWN, 3, request,
                       BROKER_PRINCIPAL)
    assert got.error_code == 0 and controller.events == ["controlled_shutdown 2"]
    # before "not the controller": a single node answers the caller 31, the broker 41
    assert call(authz, ApiKey.CONTROLLED_SHUTDOWN, 3, request).error_code == CLUSTER_DENIED
    assert call(authz, ApiKey.CONTROLLED_SHUTDOWN, 3, request, BROKER_PRINCIPAL
                ).error_code == Errors.NOT_CONTROLLER


# ---------------------------------------------------------------------- ElectLeaders
def elect_req(*parts: tuple[str, int], all_partitions: bool = False) -> Any:
    cls = ElectLeadersRequest
    topics: dict[str, list[int]] = {}
    for topic, index in parts:
        topics.setdefault(topic, []).append(index)
    return cls(election_type=0, timeout_ms=1000, topic_partitions=None if all_partitions else [
        cls.TopicPartitions(topic=t, partitions=ps) for t, ps in topics.items()])


def elected(response: Any) -> list[tuple[str, int, int]]:
    return [(r.topic, p.partition_id, p.error_code)
            for r in response.replica_election_results for p in r.partition_result]


def test_elect_leaders_needs_alter_on_the_cluster(authz: Broker) -> None:
    controller = FakeController()
    cluster = cluster_services(authz, controller=controller)
    request = elect_req(("t", 0), ("t", 1), ("nope", 0))
    got = cluster_call(authz, cluster, ApiKey.ELECT_LEADERS, 2, request)
    assert got.error_code == CLUSTER_DENIED
    assert elected(got) == [("t", 0, CLUSTER_DENIED), ("t", 1, CLUSTER_DENIED),
                            ("nope", 0, CLUSTER_DENIED)]
    assert {p.error_message for r in got.replica_election_results
            for p in r.partition_result} == {None}
    # v0 has no top-level error: the partitions carry it
    got = cluster_call(authz, cluster, ApiKey.ELECT_LEADERS, 0, request)
    assert (got.error_code, elected(got)[0]) == (0, ("t", 0, CLUSTER_DENIED))
    # every partition (null): nothing named, nothing to answer but the top level
    got = cluster_call(authz, cluster, ApiKey.ELECT_LEADERS, 2, elect_req(all_partitions=True))
    assert (got.error_code, elected(got)) == (CLUSTER_DENIED, [])
    grant_cluster(authz, ALICE, AclOperation.CLUSTER_ACTION)  # Kafka's code wants Alter
    assert cluster_call(authz, cluster, ApiKey.ELECT_LEADERS, 2, request).error_code == \
        CLUSTER_DENIED
    assert controller.events == []
    grant_cluster(authz, ALICE, AclOperation.ALTER)
    got = cluster_call(authz, cluster, ApiKey.ELECT_LEADERS, 2, request)
    assert got.error_code == 0 and controller.events == ["elect_leaders"]
    assert [e for _, _, e in elected(got)] == [0, 0, 0]


# ---------------------------------------------------------------------- reassignments
def test_alter_partition_reassignments_needs_alter_on_the_cluster(authz: Broker) -> None:
    controller = FakeController()
    cluster = cluster_services(authz, controller=controller)
    cls = AlterPartitionReassignmentsRequest.ReassignableTopic
    request = AlterPartitionReassignmentsRequest(timeout_ms=1000, topics=[
        cls(name="t", partitions=[cls.ReassignablePartition(partition_index=0, replicas=[1]),
                                  cls.ReassignablePartition(partition_index=1)])])
    got = cluster_call(authz, cluster, ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, request)
    assert got.error_code == CLUSTER_DENIED and got.error_message
    assert [(t.name, p.partition_index, p.error_code) for t in got.responses
            for p in t.partitions] == [("t", 0, CLUSTER_DENIED), ("t", 1, CLUSTER_DENIED)]
    grant_cluster(authz, ALICE, AclOperation.DESCRIBE)
    assert cluster_call(authz, cluster, ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0,
                        request).error_code == CLUSTER_DENIED
    assert controller.events == []
    grant_cluster(authz, ALICE, AclOperation.ALTER)
    got = cluster_call(authz, cluster, ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, request)
    assert got.error_code == 0 and controller.events == ["alter_partition_reassignments"]


def test_list_partition_reassignments_needs_describe_on_the_cluster(authz: Broker) -> None:
    controller = FakeController()
    cluster = cluster_services(authz, controller=controller)
    cls = ListPartitionReassignmentsRequest
    request = cls(timeout_ms=1000, topics=[
        cls.ListPartitionReassignmentsTopics(name="t", partition_indexes=[0, 2])])
    got = cluster_call(authz, cluster, ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, request)
    assert got.error_code == CLUSTER_DENIED and got.error_message
    # Kafka's error response echoes the partitions asked about, with nothing in them
    assert [(t.name, p.partition_index, p.replicas) for t in got.topics
            for p in t.partitions] == [("t", 0, []), ("t", 2, [])]
    got = cluster_call(authz, cluster, ApiKey.LIST_PARTITION_REASSIGNMENTS, 0,
                       cls(timeout_ms=1000, topics=None))
    assert (got.error_code, got.topics) == (CLUSTER_DENIED, [])
    assert controller.events == []
    grant_cluster(authz, ALICE, AclOperation.ALTER)           # implies Describe
    got = cluster_call(authz, cluster, ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, request)
    assert (got.error_code, got.topics) == (0, [])
    assert controller.events == ["list_partition_reassignments"]


def test_controller_apis_super_user(authz: Broker) -> None:
    controller = FakeController()
    cluster = cluster_services(authz, controller=controller)
    assert cluster_call(authz, cluster, ApiKey.ELECT_LEADERS, 2, elect_req(("t", 0)),
                        ADMIN).error_code == 0
    assert cluster_call(authz, cluster, ApiKey.CONTROLLED_SHUTDOWN, 3,
                        ControlledShutdownRequest(broker_id=2, broker_epoch=5),
                        ADMIN).error_code == 0
    assert controller.events == ["elect_leaders", "controlled_shutdown 2"]


# ---------------------------------------------------------------------- LeaderAndIsr
def leader_and_isr_req(topic: str, topic_id: uuid.UUID, leader: int, leader_epoch: int,
                       isr: list[int], broker_epoch: int = -1) -> Any:
    cls = LeaderAndIsrRequest
    state = cls.LeaderAndIsrPartitionState(
        partition_index=0, controller_epoch=7, leader=leader, leader_epoch=leader_epoch,
        isr=isr, partition_epoch=leader_epoch, replicas=sorted({NODE, *isr}),
        adding_replicas=[], removing_replicas=[])
    return cls(controller_id=2, controller_epoch=7, broker_epoch=broker_epoch, type=0,
               topic_states=[cls.LeaderAndIsrTopicState(topic_name=topic, topic_id=topic_id,
                                                        partition_states=[state])],
               live_leaders=[cls.LeaderAndIsrLiveLeader(broker_id=2, host_name="h", port=1)])


def leadership(broker: Broker, topic: str) -> tuple[int, int, tuple[int, ...]]:
    p = broker.partition(topic)
    return p.leader_id, p.leader_epoch, tuple(p.isr)


def test_a_forged_leader_and_isr_changes_nothing(authz: Broker) -> None:
    authz.create_topic("t")
    topic_id = authz.services.metadata.topics["t"].topic_id
    cluster = cluster_services(authz)
    before = leadership(authz, "t")
    assert before == (NODE, 0, (NODE,))
    grant_cluster(authz, ALICE, AclOperation.ALTER)           # anything but ClusterAction
    forged = leader_and_isr_req("t", topic_id, leader=2, leader_epoch=5, isr=[2])
    got = cluster_call(authz, cluster, ApiKey.LEADER_AND_ISR, 4, forged)
    assert got.error_code == CLUSTER_DENIED
    assert [(e.topic_name, e.partition_index, e.error_code) for e in got.partition_errors] == [
        ("t", 0, CLUSTER_DENIED)]
    got = cluster_call(authz, cluster, ApiKey.LEADER_AND_ISR, 5, forged)
    assert got.error_code == CLUSTER_DENIED
    assert [(t.topic_id, [(e.partition_index, e.error_code) for e in t.partition_errors])
            for t in got.topics] == [(topic_id, [(0, CLUSTER_DENIED)])]
    assert leadership(authz, "t") == before
    assert authz.services.replica_manager.controller_epoch == 0
    # the negative control: the same kind of request from a principal with ClusterAction
    grant_cluster(authz, BROKER_PRINCIPAL, AclOperation.CLUSTER_ACTION)
    got = cluster_call(authz, cluster, ApiKey.LEADER_AND_ISR, 5,
                       leader_and_isr_req("t", topic_id, leader=NODE, leader_epoch=5,
                                          isr=[NODE]), BROKER_PRINCIPAL)
    assert got.error_code == 0
    assert leadership(authz, "t") == (NODE, 5, (NODE,))


def test_cluster_action_is_asked_before_the_epochs(authz: Broker) -> None:
    authz.create_topic("t")
    topic_id = authz.services.metadata.topics["t"].topic_id
    cluster = cluster_services(authz, broker_epoch=100)
    stale = leader_and_isr_req("t", topic_id, leader=NODE, leader_epoch=5, isr=[NODE],
                               broker_epoch=5)
    assert cluster_call(authz, cluster, ApiKey.LEADER_AND_ISR, 5, stale).error_code == \
        CLUSTER_DENIED
    assert cluster_call(authz, cluster, ApiKey.LEADER_AND_ISR, 5, stale,
                        ADMIN).error_code == Errors.STALE_BROKER_EPOCH
    # the single node accepts none of them, but says so only to a broker
    assert call(authz, ApiKey.LEADER_AND_ISR, 5, stale).error_code == CLUSTER_DENIED
    assert call(authz, ApiKey.LEADER_AND_ISR, 5, stale, ADMIN).error_code == \
        Errors.STALE_CONTROLLER_EPOCH
    assert leadership(authz, "t") == (NODE, 0, (NODE,))


# ---------------------------------------------------------------------- UpdateMetadata
def update_metadata_req(controller_id: int, leader: int) -> Any:
    cls = UpdateMetadataRequest
    broker_cls = cls.UpdateMetadataBroker
    return cls(controller_id=controller_id, controller_epoch=9, broker_epoch=-1,
               topic_states=[cls.UpdateMetadataTopicState(
                   topic_name="t", topic_id=uuid.UUID(int=3), partition_states=[
                       cls.UpdateMetadataPartitionState(
                           partition_index=0, controller_epoch=9, leader=leader,
                           leader_epoch=3, isr=[leader], zk_version=3, replicas=[leader],
                           offline_replicas=[])])],
               live_brokers=[broker_cls(id=b, rack=None, endpoints=[
                   broker_cls.UpdateMetadataEndpoint(port=9000 + b, host="evil",
                                                     listener="PLAINTEXT",
                                                     security_protocol=0)])
                   for b in (controller_id, leader)])


def cache_view(cluster: ClusterServices) -> Any:
    cache = cluster.metadata_cache
    return (cache.controller_id, cache.controller_epoch, sorted(cache.alive_brokers),
            cache.topic_names())


def test_a_forged_update_metadata_changes_nothing(authz: Broker) -> None:
    cluster = cluster_services(authz)
    before = cache_view(cluster)
    assert before == (0, 1, [NODE], [])
    got = cluster_call(authz, cluster, ApiKey.UPDATE_METADATA, 7,
                       update_metadata_req(controller_id=66, leader=66))
    assert got.error_code == CLUSTER_DENIED
    assert cache_view(cluster) == before
    assert authz.services.replica_manager.controller_epoch == 0
    got = cluster_call(authz, cluster, ApiKey.UPDATE_METADATA, 7,
                       update_metadata_req(controller_id=66, leader=66), ADMIN)
    assert got.error_code == 0
    assert cache_view(cluster) == (66, 9, [66], ["t"])


# ---------------------------------------------------------------------- StopReplica
def stop_replica_req(*parts: tuple[str, int]) -> Any:
    cls = StopReplicaRequest
    topics: dict[str, list[int]] = {}
    for topic, index in parts:
        topics.setdefault(topic, []).append(index)
    return cls(controller_id=2, controller_epoch=7, broker_epoch=-1, topic_states=[
        cls.StopReplicaTopicState(topic_name=t, partition_states=[
            cls.StopReplicaTopicState.StopReplicaPartitionState(
                partition_index=i, leader_epoch=-1, delete_partition=True) for i in ps])
        for t, ps in topics.items()])


def test_a_forged_stop_replica_deletes_nothing(authz: Broker) -> None:
    authz.create_topic("t", 2)
    produce_as_admin(authz, "t", 0, 2)
    cluster = cluster_services(authz)
    log_dir = Path(authz.partition("t", 0).log.dir)
    got = cluster_call(authz, cluster, ApiKey.STOP_REPLICA, 3,
                       stop_replica_req(("t", 0), ("t", 1)))
    # Kafka's error response names every partition of the request
    assert got.error_code == CLUSTER_DENIED
    assert [(e.topic_name, e.partition_index, e.error_code) for e in got.partition_errors] == [
        ("t", 0, CLUSTER_DENIED), ("t", 1, CLUSTER_DENIED)]
    assert authz.partition("t", 0).log.log_end_offset == 2 and log_dir.is_dir()
    assert authz.services.replica_manager.get_partition("t", 1) is not None
    grant_cluster(authz, BROKER_PRINCIPAL, AclOperation.CLUSTER_ACTION)
    got = cluster_call(authz, cluster, ApiKey.STOP_REPLICA, 3, stop_replica_req(("t", 0)),
                       BROKER_PRINCIPAL)
    assert (got.error_code, [e.error_code for e in got.partition_errors]) == (0, [0])
    assert authz.services.replica_manager.get_partition("t", 0) is None


# ---------------------------------------------------------------------- SCRAM credentials
def scram_upsert(user: str) -> Any:
    return AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
        name=user, mechanism=1, iterations=4096, salt=b"salt",
        salted_password=b"\x01" * 32)


def alter_scram(broker: Broker, *users: str, principal: KafkaPrincipal = ALICE,
                cluster: ClusterServices | None = None) -> list[tuple[str, int]]:
    request = AlterUserScramCredentialsRequest(deletions=[], upsertions=[
        scram_upsert(u) for u in users])
    key = ApiKey.ALTER_USER_SCRAM_CREDENTIALS
    got = (call(broker, key, 0, request, principal) if cluster is None
           else cluster_call(broker, cluster, key, 0, request, principal))
    return [(r.user, r.error_code) for r in got.results]


def describe_scram(broker: Broker, *users: str, principal: KafkaPrincipal = ALICE) -> Any:
    cls = DescribeUserScramCredentialsRequest
    return call(broker, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0,
                cls(users=[cls.UserName(name=u) for u in users] if users else None), principal)


def test_describe_user_scram_credentials_needs_describe_on_the_cluster(authz: Broker) -> None:
    assert alter_scram(authz, "bob", principal=ADMIN) == [("bob", 0)]
    got = describe_scram(authz, "bob", "nobody")
    assert (got.error_code, got.error_message) == (CLUSTER_DENIED, None)
    assert [(r.user, r.error_code, r.credential_infos) for r in got.results] == [
        ("bob", CLUSTER_DENIED, []), ("nobody", CLUSTER_DENIED, [])]
    got = describe_scram(authz)                                 # every user
    assert (got.error_code, got.results) == (CLUSTER_DENIED, [])
    grant_cluster(authz, ALICE, AclOperation.ALTER)             # implies Describe
    got = describe_scram(authz, "bob")
    assert got.error_code == 0
    assert [(r.user, r.error_code, [(c.mechanism, c.iterations) for c in r.credential_infos])
            for r in got.results] == [("bob", 0, [(1, 4096)])]


def test_alter_user_scram_credentials_needs_alter_on_the_cluster(authz: Broker) -> None:
    store = authz.services.credentials.store
    assert alter_scram(authz, "bob", "carol") == [("bob", CLUSTER_DENIED),
                                                  ("carol", CLUSTER_DENIED)]
    grant_cluster(authz, ALICE, AclOperation.DESCRIBE)          # Describe is not Alter
    assert alter_scram(authz, "bob") == [("bob", CLUSTER_DENIED)]
    assert store.users_with_configs() == []
    grant_cluster(authz, ALICE, AclOperation.ALTER)
    assert alter_scram(authz, "bob") == [("bob", 0)]
    assert store.users_with_configs() == ["bob"]


def test_alter_user_scram_credentials_asks_the_controller_first(authz: Broker) -> None:
    # Kafka's order: a broker that is not the controller says so to anyone
    inactive = FakeController()
    inactive.is_active = False
    assert alter_scram(authz, "bob", cluster=cluster_services(authz, controller=inactive)) == [
        ("bob", Errors.NOT_CONTROLLER)]
    active = cluster_services(authz, controller=FakeController())
    assert alter_scram(authz, "bob", cluster=active) == [("bob", CLUSTER_DENIED)]
    assert alter_scram(authz, "bob", cluster=active, principal=ADMIN) == [("bob", 0)]
