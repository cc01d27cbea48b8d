"""Minimal valid requests for every API the broker serves, and the error slots of their
responses, for the authorization walk (``test_authz_every_api.py``).

Each builder takes the resource ``Names`` a run uses (the topic, group and transactional
id; the walk passes names that do not exist for the refused run, so a handler that looks
at existence first answers "unknown" instead of the authorization code) and the request
version, and returns a body that is legal at that version: fields a version does not
have are simply not encoded.  Each request names one resource of each kind it carries
(one topic with partition 0, one group, one transactional id), so every error slot of
the answer is about a resource the run did or did not grant.

Readers turn a response into the values of its error slots: ``at("topics.partitions.
error_code")`` walks lists on the way (a field this version does not carry reads as no
slot), ``every_slot`` is every ``*error_code`` field anywhere in the answer -- what an
API that "throws" fills (Kafka's ``getErrorResponse``: the code in every slot).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from millrace.protocol import CLASSES
from millrace.protocol.api import RESPONSE_CLASS_TO_API
from millrace.protocol.schema import Field
from millrace.protocol.types import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    AlterConfigsRequest,
    AlterPartitionReassignmentsRequest,
    AlterUserScramCredentialsRequest,
    ApiVersionsRequest,
    ControlledShutdownRequest,
    CreateAclsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DeleteGroupsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeAclsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    DescribeLogDirsRequest,
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    DescribeUserScramCredentialsRequest,
    ElectLeadersRequest,
    EndTxnRequest,
    FetchRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    IncrementalAlterConfigsRequest,
    InitProducerIdRequest,
    JoinGroupRequest,
    LeaderAndIsrRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    ListOffsetsRequest,
    ListPartitionReassignmentsRequest,
    ListTransactionsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    OffsetForLeaderEpochRequest,
    ProduceRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
    StopReplicaRequest,
    SyncGroupRequest,
    TxnOffsetCommitRequest,
    UpdateMetadataRequest,
    WriteTxnMarkersRequest,
)
from millrace.record import RecordBatchBuilder

NODE = 1            # the broker under test (brokergen.NODE)
OTHER_BROKER = 2    # a follower / the sender of inter-broker requests
PRODUCER_ID, PRODUCER_EPOCH = 4000, 0
UNKNOWN_TOPIC_ID = uuid.UUID(int=0x1234)
TOPIC_CONFIG, BROKER_CONFIG = 2, 4          # DescribeConfigs / AlterConfigs resource types
# ACL wire codes (security.md 4): a resource type, pattern, operation and permission
ACL_TOPIC, ACL_LITERAL, ACL_READ, ACL_ALLOW, ACL_ANY = 2, 3, 3, 3, 1


@dataclass(frozen=True)
class Names:
    """The resources one run names: a topic (partition 0), a group, a transactional id."""

    topic: str
    group: str
    txn: str
    topic_id: uuid.UUID = UNKNOWN_TOPIC_ID
    """The topic's id (v13+ Fetch names topics by id): the real one once it exists."""


Builder = Callable[[Names, int], Any]
Reader = Callable[[Any, int], list[int | None]]
"""A response's error slots at a version; None stands for a slot the answer lacks."""


# ---------------------------------------------------------------------- readers
def _schema(response: Any) -> tuple[Field, ...]:
    return RESPONSE_CLASS_TO_API[type(response)].response.message.fields


def _walk(value: Any, fields: tuple[Field, ...], path: list[str],
          version: int) -> Iterator[Any]:
    if isinstance(value, list):
        for item in value:
            yield from _walk(item, fields, path, version)
        return
    if not path:
        yield value
        return
    if value is None:
        return
    name, rest = path[0], path[1:]
    f = next((f for f in fields if f.name == name), None)
    if f is None:
        raise AttributeError(f"{type(value).__name__} has no field {name!r}")
    if f.present_in(version):
        yield from _walk(getattr(value, name), f.fields, rest, version)


def at(path: str) -> Reader:
    """The values at a dotted path of the response (lists on the way are walked; a null
    list, or a field the version does not carry, is no slot)."""
    parts = path.split(".")

    def read(response: Any, version: int) -> list[int | None]:
        return [int(v) for v in _walk(response, _schema(response), parts, version)]
    return read


def by_version(*ranges: tuple[int, Reader]) -> Reader:
    """The reader of the highest ``(from_version, reader)`` at or below the version."""
    def read(response: Any, version: int) -> list[int | None]:
        return [r for lo, r in ranges if lo <= version][-1](response, version)
    return read


def _slots(value: Any, fields: tuple[Field, ...], version: int, where: str
           ) -> Iterator[tuple[str, int]]:
    if isinstance(value, list):
        for item in value:
            yield from _slots(item, fields, version, where)
        return
    if value is None:
        return
    for f in fields:
        if not f.present_in(version):
            continue
        if f.name.endswith("error_code") and not f.is_struct:
            yield f"{where}.{f.name}", getattr(value, f.name)
        elif f.is_struct:
            yield from _slots(getattr(value, f.name), f.fields, version, f"{where}.{f.name}")


def error_slots(response: Any, version: int) -> list[tuple[str, int]]:
    """(path, code) of every ``*error_code`` field the response carries at ``version``."""
    return list(_slots(response, _schema(response), version, type(response).__name__))


def every_slot(response: Any, version: int) -> list[int | None]:
    return [code for _, code in error_slots(response, version)]


def listing(*required: Reader) -> Reader:
    """Every slot of the answer, which must include some at each ``required`` place (a
    None for each that has none): Kafka's error response of an API that "throws" names
    each resource of the request with the code (``getErrorResponse``)."""
    def read(response: Any, version: int) -> list[int | None]:
        missing: list[int | None] = [None for r in required if not r(response, version)]
        return every_slot(response, version) + missing
    return read


# ---------------------------------------------------------------------- records
def batch(*, transactional: bool = False) -> bytes:
    builder = RecordBatchBuilder(
        producer_id=PRODUCER_ID if transactional else -1,
        producer_epoch=PRODUCER_EPOCH if transactional else -1,
        base_sequence=0 if transactional else -1, is_transactional=transactional)
    builder.append(1_700_000_000_000, b"k", b"v")
    return builder.build()


# ---------------------------------------------------------------------- data plane
def produce(n: Names, v: int, *, transactional: bool = False) -> Any:
    part = ProduceRequest.TopicProduceData.PartitionProduceData(
        index=0, records=batch(transactional=transactional))
    return ProduceRequest(
        transactional_id=n.txn if transactional else None, acks=1, timeout_ms=1000,
        topic_data=[ProduceRequest.TopicProduceData(name=n.topic, topic_id=n.topic_id,
                                                    partition_data=[part])])


def produce_transactional(n: Names, v: int) -> Any:
    return produce(n, v, transactional=True)


def produce_transactional_batch_without_id(n: Names, v: int) -> Any:
    """A transactional batch in a request that names no transactional id
    (CVE-2018-17196)."""
    body = produce(n, v, transactional=True)
    body.transactional_id = None
    return body


def fetch(n: Names, v: int, *, replica_id: int = -1) -> Any:
    part = FetchRequest.FetchTopic.FetchPartition(partition=0, fetch_offset=0,
                                                  partition_max_bytes=1 << 16)
    return FetchRequest(
        replica_id=replica_id,
        replica_state=FetchRequest.ReplicaState(replica_id=replica_id, replica_epoch=-1),
        max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
        topics=[FetchRequest.FetchTopic(topic=n.topic, topic_id=n.topic_id, partitions=[part])])


def follower_fetch(n: Names, v: int) -> Any:
    return fetch(n, v, replica_id=OTHER_BROKER)


def list_offsets(n: Names, v: int) -> Any:
    part = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(partition_index=0,
                                                                     timestamp=-1)
    return ListOffsetsRequest(replica_id=-1, isolation_level=0, timeout_ms=1000, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=n.topic, partitions=[part])])


def metadata(n: Names, v: int, *, auto_create: bool = False) -> Any:
    return MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=n.topic)],
                           allow_auto_topic_creation=auto_create)


def metadata_auto_create(n: Names, v: int) -> Any:
    return metadata(n, v, auto_create=True)


def metadata_all_topics(n: Names, v: int) -> Any:
    """Every topic: null (v1+) or, in v0, the empty list."""
    return MetadataRequest(topics=[] if v == 0 else None, allow_auto_topic_creation=False)


def metadata_cluster_operations(n: Names, v: int) -> Any:
    return MetadataRequest(topics=[], allow_auto_topic_creation=False,
                           include_cluster_authorized_operations=True)


def offset_for_leader_epoch(n: Names, v: int) -> Any:
    part = OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition(
        partition=0, current_leader_epoch=-1, leader_epoch=0)
    return OffsetForLeaderEpochRequest(replica_id=-1, topics=[
        OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=n.topic, partitions=[part])])


def describe_producers(n: Names, v: int) -> Any:
    return DescribeProducersRequest(topics=[DescribeProducersRequest.TopicRequest(
        name=n.topic, partition_indexes=[0])])


def init_producer_id_transactional(n: Names, v: int) -> Any:
    return InitProducerIdRequest(transactional_id=n.txn, transaction_timeout_ms=60_000)


def init_producer_id_idempotent(n: Names, v: int) -> Any:
    return InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000)


# ---------------------------------------------------------------------- inter-broker
def leader_and_isr(n: Names, v: int) -> Any:
    fields: dict[str, Any] = dict(
        partition_index=0, controller_epoch=1, leader=NODE, leader_epoch=1, isr=[NODE],
        partition_epoch=1, replicas=[NODE], topic_name=n.topic)
    return LeaderAndIsrRequest(
        controller_id=OTHER_BROKER, controller_epoch=1, broker_epoch=-1, type=0,
        ungrouped_partition_states=[LeaderAndIsrRequest.LeaderAndIsrPartitionState(**fields)],
        topic_states=[LeaderAndIsrRequest.LeaderAndIsrTopicState(
            topic_name=n.topic, topic_id=n.topic_id, partition_states=[
                LeaderAndIsrRequest.LeaderAndIsrTopicState.LeaderAndIsrPartitionState(
                    **fields)])],
        live_leaders=[LeaderAndIsrRequest.LeaderAndIsrLiveLeader(
            broker_id=NODE, host_name="localhost", port=9092)])


def stop_replica(n: Names, v: int) -> Any:
    return StopReplicaRequest(
        controller_id=OTHER_BROKER, controller_epoch=1, broker_epoch=-1,
        delete_partitions=False,
        ungrouped_partitions=[StopReplicaRequest.StopReplicaPartitionV0(
            topic_name=n.topic, partition_index=0)],
        topics=[StopReplicaRequest.StopReplicaTopicV1(name=n.topic, partition_indexes=[0])],
        topic_states=[StopReplicaRequest.StopReplicaTopicState(
            topic_name=n.topic, partition_states=[
                StopReplicaRequest.StopReplicaTopicState.StopReplicaPartitionState(
                    partition_index=0, leader_epoch=1, delete_partition=False)])])


def update_metadata(n: Names, v: int) -> Any:
    fields: dict[str, Any] = dict(
        partition_index=0, controller_epoch=1, leader=NODE, leader_epoch=1, isr=[NODE],
        zk_version=1, replicas=[NODE], topic_name=n.topic)
    cls = UpdateMetadataRequest
    return cls(
        controller_id=OTHER_BROKER, controller_epoch=1, broker_epoch=-1,
        ungrouped_partition_states=[cls.UpdateMetadataPartitionState(**fields)],
        topic_states=[cls.UpdateMetadataTopicState(
            topic_name=n.topic, topic_id=n.topic_id, partition_states=[
                cls.UpdateMetadataTopicState.UpdateMetadataPartitionState(**fields)])],
        live_brokers=[cls.UpdateMetadataBroker(
            id=NODE, v0_host="localhost", v0_port=9092, rack=None,
            endpoints=[cls.UpdateMetadataBroker.UpdateMetadataEndpoint(
                port=9092, host="localhost", listener="PLAINTEXT", security_protocol=0)])])


def controlled_shutdown(n: Names, v: int) -> Any:
    return ControlledShutdownRequest(broker_id=OTHER_BROKER, broker_epoch=-1)


def write_txn_markers(n: Names, v: int) -> Any:
    cls = WriteTxnMarkersRequest.WritableTxnMarker
    return WriteTxnMarkersRequest(markers=[cls(
        producer_id=PRODUCER_ID, producer_epoch=PRODUCER_EPOCH, transaction_result=False,
        coordinator_epoch=0,
        topics=[cls.WritableTxnMarkerTopic(name=n.topic, partition_indexes=[0])])])


def add_partitions_to_txn(n: Names, v: int) -> Any:
    """v0-3: one producer's transaction; v4+: the broker-to-broker batch (verify only)."""
    cls = AddPartitionsToTxnRequest
    topic = cls.AddPartitionsToTxnTopic(name=n.topic, partitions=[0])
    return cls(
        v3_and_below_transactional_id=n.txn, v3_and_below_producer_id=PRODUCER_ID,
        v3_and_below_producer_epoch=PRODUCER_EPOCH, v3_and_below_topics=[topic],
        transactions=[cls.AddPartitionsToTxnTransaction(
            transactional_id=n.txn, producer_id=PRODUCER_ID, producer_epoch=PRODUCER_EPOCH,
            verify_only=True, topics=[
                cls.AddPartitionsToTxnTransaction.AddPartitionsToTxnTopic(
                    name=n.topic, partitions=[0])])])


# ---------------------------------------------------------------------- groups
def offset_commit(n: Names, v: int) -> Any:
    cls = OffsetCommitRequest.OffsetCommitRequestTopic
    return OffsetCommitRequest(
        group_id=n.group, generation_id_or_member_epoch=-1, member_id="",
        topics=[cls(name=n.topic, topic_id=n.topic_id, partitions=[
            cls.OffsetCommitRequestPartition(partition_index=0, committed_offset=0,
                                             committed_metadata="")])])


def offset_fetch(n: Names, v: int, *, all_topics: bool = False) -> Any:
    cls = OffsetFetchRequest
    group = cls.OffsetFetchRequestGroup(
        group_id=n.group, topics=None if all_topics else [
            cls.OffsetFetchRequestGroup.OffsetFetchRequestTopics(
                name=n.topic, topic_id=n.topic_id, partition_indexes=[0])])
    return cls(group_id=n.group, groups=[group], topics=None if all_topics else [
        cls.OffsetFetchRequestTopic(name=n.topic, partition_indexes=[0])])


def offset_fetch_all(n: Names, v: int) -> Any:
    return offset_fetch(n, v, all_topics=True)


def find_coordinator(n: Names, v: int, *, key_type: int = 0) -> Any:
    key = n.group if key_type == 0 else n.txn
    return FindCoordinatorRequest(key=key, key_type=key_type, coordinator_keys=[key])


def find_txn_coordinator(n: Names, v: int) -> Any:
    return find_coordinator(n, v, key_type=1)


def join_group(n: Names, v: int) -> Any:
    return JoinGroupRequest(
        group_id=n.group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
        member_id="", protocol_type="consumer", protocols=[
            JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")])


def heartbeat(n: Names, v: int) -> Any:
    return HeartbeatRequest(group_id=n.group, generation_id=1, member_id="m")


def leave_group(n: Names, v: int) -> Any:
    return LeaveGroupRequest(group_id=n.group, member_id="m", members=[
        LeaveGroupRequest.MemberIdentity(member_id="m")])


def sync_group(n: Names, v: int) -> Any:
    return SyncGroupRequest(group_id=n.group, generation_id=1, member_id="m",
                            protocol_type="consumer", protocol_name="range", assignments=[])


def describe_groups(n: Names, v: int) -> Any:
    return DescribeGroupsRequest(groups=[n.group], include_authorized_operations=True)


def list_groups(n: Names, v: int) -> Any:
    return ListGroupsRequest()


def delete_groups(n: Names, v: int) -> Any:
    return DeleteGroupsRequest(groups_names=[n.group])


# ---------------------------------------------------------------------- transactions
def add_offsets_to_txn(n: Names, v: int) -> Any:
    return AddOffsetsToTxnRequest(transactional_id=n.txn, producer_id=PRODUCER_ID,
                                  producer_epoch=PRODUCER_EPOCH, group_id=n.group)


def end_txn(n: Names, v: int) -> Any:
    return EndTxnRequest(transactional_id=n.txn, producer_id=PRODUCER_ID,
                         producer_epoch=PRODUCER_EPOCH, committed=False)


def txn_offset_commit(n: Names, v: int) -> Any:
    cls = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    return TxnOffsetCommitRequest(
        transactional_id=n.txn, group_id=n.group, producer_id=PRODUCER_ID,
        producer_epoch=PRODUCER_EPOCH, topics=[cls(name=n.topic, partitions=[
            cls.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=0,
                                                committed_metadata="")])])


def describe_transactions(n: Names, v: int) -> Any:
    return DescribeTransactionsRequest(transactional_ids=[n.txn])


def list_transactions(n: Names, v: int) -> Any:
    return ListTransactionsRequest(state_filters=[], producer_id_filters=[])


# ---------------------------------------------------------------------- admin
def create_topics(n: Names, v: int) -> Any:
    return CreateTopicsRequest(timeout_ms=1000, topics=[CreateTopicsRequest.CreatableTopic(
        name=n.topic, num_partitions=1, replication_factor=1, assignments=[], configs=[])])


def delete_topics(n: Names, v: int) -> Any:
    return DeleteTopicsRequest(timeout_ms=1000, topic_names=[n.topic], topics=[
        DeleteTopicsRequest.DeleteTopicState(name=n.topic)])


def delete_topics_by_id(n: Names, v: int) -> Any:
    return DeleteTopicsRequest(timeout_ms=1000, topics=[
        DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=n.topic_id)])


def delete_records(n: Names, v: int) -> Any:
    cls = DeleteRecordsRequest.DeleteRecordsTopic
    return DeleteRecordsRequest(timeout_ms=1000, topics=[cls(name=n.topic, partitions=[
        cls.DeleteRecordsPartition(partition_index=0, offset=0)])])


def create_partitions(n: Names, v: int) -> Any:
    return CreatePartitionsRequest(timeout_ms=1000, validate_only=False, topics=[
        CreatePartitionsRequest.CreatePartitionsTopic(name=n.topic, count=2,
                                                      assignments=None)])


def describe_configs(n: Names, v: int, *, broker: bool = False) -> Any:
    return DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=BROKER_CONFIG if broker else TOPIC_CONFIG,
        resource_name=str(NODE) if broker else n.topic, configuration_keys=None)])


def describe_broker_configs(n: Names, v: int) -> Any:
    return describe_configs(n, v, broker=True)


def alter_configs(n: Names, v: int, *, broker: bool = False) -> Any:
    cls = AlterConfigsRequest.AlterConfigsResource
    return AlterConfigsRequest(validate_only=False, resources=[cls(
        resource_type=BROKER_CONFIG if broker else TOPIC_CONFIG,
        resource_name=str(NODE) if broker else n.topic,
        configs=[cls.AlterableConfig(name="retention.ms", value="100000")])])


def alter_broker_configs(n: Names, v: int) -> Any:
    return alter_configs(n, v, broker=True)


def incremental_alter_configs(n: Names, v: int, *, broker: bool = False) -> Any:
    cls = IncrementalAlterConfigsRequest.AlterConfigsResource
    return IncrementalAlterConfigsRequest(validate_only=False, resources=[cls(
        resource_type=BROKER_CONFIG if broker else TOPIC_CONFIG,
        resource_name=str(NODE) if broker else n.topic,
        configs=[cls.AlterableConfig(name="retention.ms", config_operation=0,
                                     value="100000")])])


def incremental_alter_broker_configs(n: Names, v: int) -> Any:
    return incremental_alter_configs(n, v, broker=True)


def describe_acls(n: Names, v: int) -> Any:
    return DescribeAclsRequest(resource_type_filter=ACL_TOPIC, resource_name_filter=n.topic,
                               pattern_type_filter=ACL_LITERAL, principal_filter=None,
                               host_filter=None, operation=ACL_ANY, permission_type=ACL_ANY)


def create_acls(n: Names, v: int) -> Any:
    return CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
        resource_type=ACL_TOPIC, resource_name=n.topic, resource_pattern_type=ACL_LITERAL,
        principal="User:carol", host="*", operation=ACL_READ, permission_type=ACL_ALLOW)])


def delete_acls(n: Names, v: int) -> Any:
    return DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(
        resource_type_filter=ACL_TOPIC, resource_name_filter=n.topic,
        pattern_type_filter=ACL_LITERAL, principal_filter="User:carol", host_filter=None,
        operation=ACL_ANY, permission_type=ACL_ANY)])


def elect_leaders(n: Names, v: int) -> Any:
    return ElectLeadersRequest(election_type=0, timeout_ms=1000, topic_partitions=[
        ElectLeadersRequest.TopicPartitions(topic=n.topic, partitions=[0])])


def alter_partition_reassignments(n: Names, v: int) -> Any:
    cls = AlterPartitionReassignmentsRequest.ReassignableTopic
    return AlterPartitionReassignmentsRequest(timeout_ms=1000, topics=[cls(
        name=n.topic, partitions=[cls.ReassignablePartition(partition_index=0,
                                                             replicas=[NODE])])])


def list_partition_reassignments(n: Names, v: int) -> Any:
    return ListPartitionReassignmentsRequest(timeout_ms=1000, topics=[
        ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics(
            name=n.topic, partition_indexes=[0])])


def describe_log_dirs(n: Names, v: int) -> Any:
    return DescribeLogDirsRequest(topics=[DescribeLogDirsRequest.DescribableLogDirTopic(
        topic=n.topic, partitions=[0])])


def describe_user_scram_credentials(n: Names, v: int) -> Any:
    return DescribeUserScramCredentialsRequest(users=[
        DescribeUserScramCredentialsRequest.UserName(name="carol")])


def alter_user_scram_credentials(n: Names, v: int) -> Any:
    """Give carol a SCRAM-SHA-256 credential."""
    return AlterUserScramCredentialsRequest(deletions=[], upsertions=[
        AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
            name="carol", mechanism=1, iterations=4096, salt=b"salt" * 4,
            salted_password=bytes(range(32)))])


def describe_cluster(n: Names, v: int) -> Any:
    return DescribeClusterRequest(include_cluster_authorized_operations=True)


def describe_client_quotas(n: Names, v: int) -> Any:
    cls = CLASSES["DescribeClientQuotasRequest"]
    return cls(strict=False, components=[cls.ComponentData(entity_type="user", match_type=2,
                                                            match=None)])


def alter_client_quotas(n: Names, v: int) -> Any:
    cls = CLASSES["AlterClientQuotasRequest"]
    entry = cls.EntryData
    return cls(validate_only=False, entries=[entry(
        entity=[entry.EntityData(entity_type="user", entity_name="carol")],
        ops=[entry.OpData(key="producer_byte_rate", value=1024.0, remove=False)])])


# ---------------------------------------------------------------------- no authorization
def api_versions(n: Names, v: int) -> Any:
    return ApiVersionsRequest(client_software_name="authz-walk",
                              client_software_version="1.0")


def sasl_handshake(n: Names, v: int) -> Any:
    return SaslHandshakeRequest(mechanism="PLAIN")


def sasl_authenticate(n: Names, v: int) -> Any:
    return SaslAuthenticateRequest(auth_bytes=b"\0bob\0secret")

