"""Group APIs: FindCoordinator (10), JoinGroup (11), Heartbeat (12), LeaveGroup (13),
SyncGroup (14), OffsetCommit (8), OffsetFetch (9), DescribeGroups (15), ListGroups (16),
DeleteGroups (42).

Thin adapters: the request body and version go to the broker's
``GroupCoordinatorService`` (``ctx.services.group_coordinator``), which answers in the
request's version.  What only the broker knows is added here: the coordinator's
address (FindCoordinator) and which topics exist (OffsetCommit refuses partitions of
unknown topics with UNKNOWN_TOPIC_OR_PARTITION, as Kafka does).

FindCoordinator: a group's coordinator is the leader of its ``__consumer_offsets``
partition (on one broker, this node, once the partition is loaded); a transactional id's
is the leader of its ``__transaction_state`` partition.

Authorization (Kafka 3.9's ``KafkaApis``), always before the coordinator or the metadata
is asked, so a caller cannot learn whether a group or topic exists: FindCoordinator needs
Describe on the group (30) or transactional id (53), per key; JoinGroup, SyncGroup,
Heartbeat and LeaveGroup need Read on the group (30 in the response's error field);
OffsetCommit Read on the group (30 in every partition) then Read on each topic (29 for
its partitions); OffsetFetch Describe on each group (30) then Describe on each asked
topic (29), while an "all partitions" fetch silently leaves out the topics the caller may
not Describe; DescribeGroups Describe per group (30), and its v3+ authorized-operations
field is what the caller may do; ListGroups lists every group with Describe on the
cluster, else only those the caller may Describe (never an error); DeleteGroups Delete per
group (30).  The coordinator only ever sees what the caller may touch.
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from millrace.broker.context import RequestContext
from millrace.broker.handlers import handles
from millrace.broker.transaction.topic import TRANSACTION_STATE_TOPIC, transaction_topic_configs
from millrace.common.errors import Errors, KafkaError
from millrace.protocol import ApiKey
from millrace.protocol.types import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
    TxnOffsetCommitRequest,
)
from millrace.security.acl import AclOperation, ResourceType

GROUP_KEY, TRANSACTION_KEY, SHARE_KEY = 0, 1, 2
OFFSETS_TOPIC = "__consumer_offsets"
# FindCoordinator v0-3 answers a refusal with the error's text (Kafka's Errors message).
_DENIED_MESSAGES: dict[int, str] = {
    Errors.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
    Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Transactional Id authorization failed.",
    Errors.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
}
# DescribeGroups v3+: authorized_operations of a group the answer carries an error for.
AUTHORIZED_OPERATIONS_OMITTED = -(1 << 31)


def with_fields(body: Any, **fields: Any) -> Any:
    """A shallow copy of a request body with some fields replaced (the authorized part of
    a request, handed on; the request itself is left as it came)."""
    part = copy.copy(body)
    for name, value in fields.items():
        setattr(part, name, value)
    return part


def error_topics(topic_cls: Any, partition_cls: Any, topics: Iterable[Any], error: int
                 ) -> list[Any]:
    """Every partition of the request ``topics`` (``.name``, ``.partitions[].partition_
    index``) answered with ``error``: an offset commit refused whole or per topic."""
    return [topic_cls(name=t.name, partitions=[
        partition_cls(partition_index=p.partition_index, error_code=error)
        for p in t.partitions]) for t in topics]


async def commit_readable_topics(ctx: RequestContext, body: Any, response_cls: Any,
                                 t_cls: Any, p_cls: Any,
                                 commit: Callable[[Any], Awaitable[Any]]) -> Any:
    """An offset commit (OffsetCommit, TxnOffsetCommit) whose group was authorized: the
    topics without Read answer TOPIC_AUTHORIZATION_FAILED, the rest go to ``commit`` (not
    called when none is left); the refused topics come first, as in Kafka's answer."""
    allowed = ctx.authorized_names(AclOperation.READ, ResourceType.TOPIC,
                                   (t.name for t in body.topics))
    refused = [t for t in body.topics if t.name not in allowed]
    if refused:
        body = with_fields(body, topics=[t for t in body.topics if t.name in allowed])
    denied = error_topics(t_cls, p_cls, refused, Errors.TOPIC_AUTHORIZATION_FAILED)
    if refused and not body.topics:
        return response_cls(throttle_time_ms=0, topics=denied)
    response = await commit(body)
    response.topics[:0] = denied
    return response


# ---------------------------------------------------------------------- FindCoordinator
def _denied(ctx: RequestContext, key: str, key_type: int) -> int:
    """Kafka's ``getCoordinator`` checks, made before the key is looked at: Describe on
    the group or transactional id; a share group's coordinator is for brokers only."""
    if key_type == GROUP_KEY and not ctx.authorize(
            AclOperation.DESCRIBE, ResourceType.GROUP, key):
        return Errors.GROUP_AUTHORIZATION_FAILED
    if key_type == TRANSACTION_KEY and not ctx.authorize(
            AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
        return Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if key_type == SHARE_KEY and ctx.version >= 6 and not ctx.authorize_cluster(
            AclOperation.CLUSTER_ACTION):
        return Errors.CLUSTER_AUTHORIZATION_FAILED
    return Errors.NONE


def _coordinator(ctx: RequestContext, key: str, key_type: int
                 ) -> tuple[int, str | None, int, str, int]:
    denied = _denied(ctx, key, key_type)
    if denied:
        return denied, None, -1, "", -1
    return _find(ctx, key, key_type)


def _find(ctx: RequestContext, key: str, key_type: int) -> tuple[int, str | None, int, str, int]:
    """(error, message, node id, host, port) of the coordinator for one key."""
    services = ctx.services
    if key_type == GROUP_KEY:
        service = services.group_coordinator
        partition = service.partition_for(key)
        if services.cluster is not None:
            return _partition_leader(ctx, OFFSETS_TOPIC, partition)
        coord = service.coordinator
        if partition not in coord.hosted and partition not in coord.loading:
            return Errors.COORDINATOR_NOT_AVAILABLE, None, -1, "", -1
    elif key_type == TRANSACTION_KEY:
        if not key:
            return Errors.INVALID_REQUEST, "Transactional id must not be empty", -1, "", -1
        txn = services.transaction_coordinator
        partition = txn.partition_for(key)
        if services.cluster is not None:
            return _partition_leader(ctx, TRANSACTION_STATE_TOPIC, partition)
        txn_coord = txn.coordinator
        if partition not in txn_coord.epochs and partition not in txn_coord.loading:
            return Errors.COORDINATOR_NOT_AVAILABLE, None, -1, "", -1
    else:
        return (Errors.INVALID_REQUEST, f"Unknown coordinator type {key_type}", -1, "", -1)
    node = services.config.node_id
    return _coordinator_endpoint(ctx, node)


def _partition_leader(ctx: RequestContext, topic: str, partition: int
                      ) -> tuple[int, str | None, int, str, int]:
    """In a cluster a group's coordinator is the leader of its ``__consumer_offsets``
    partition, a transactional id's the leader of its ``__transaction_state`` partition.
    The topic is created on first use (``offsets.topic.replication.factor`` /
    ``transaction.state.log.replication.factor`` replicas; COORDINATOR_NOT_AVAILABLE
    until it has a leader, as in Kafka)."""
    services = ctx.services
    metadata = services.metadata
    config = services.config
    if topic not in metadata.topics:
        if topic == TRANSACTION_STATE_TOPIC:
            rf = config["transaction.state.log.replication.factor"]
            partitions = config["transaction.state.log.num.partitions"]
            configs = transaction_topic_configs(config, rf)
        else:
            rf = config["offsets.topic.replication.factor"]
            partitions = config["offsets.topic.num.partitions"]
            configs = {"cleanup.policy": "compact",
                       "segment.bytes": str(config["offsets.topic.segment.bytes"])}
        try:
            services.admin_manager.create_topic(topic, partitions, configs, rf)
        except KafkaError as e:
            if e.code != Errors.TOPIC_ALREADY_EXISTS:
                return Errors.COORDINATOR_NOT_AVAILABLE, e.message, -1, "", -1
        return Errors.COORDINATOR_NOT_AVAILABLE, None, -1, "", -1
    state = metadata.partition_state(topic, partition)
    if state is None or state.leader < 0:
        return Errors.COORDINATOR_NOT_AVAILABLE, None, -1, "", -1
    return _coordinator_endpoint(ctx, state.leader)


def _coordinator_endpoint(ctx: RequestContext, node: int
                          ) -> tuple[int, str | None, int, str, int]:
    """Broker ``node`` as the coordinator, on the listener the request came in on."""
    for broker in ctx.services.metadata.brokers():
        if broker.node_id == node:
            endpoint = broker.endpoint_for(ctx.listener)
            if endpoint is None:
                return Errors.COORDINATOR_NOT_AVAILABLE, None, -1, "", -1
            return Errors.NONE, None, node, endpoint[0], endpoint[1]
    return Errors.COORDINATOR_NOT_AVAILABLE, None, -1, "", -1


@handles(ApiKey.FIND_COORDINATOR)
async def handle_find_coordinator(ctx: RequestContext, body: FindCoordinatorRequest) -> FindCoordinatorResponse:
    cls = FindCoordinatorResponse
    key_type = body.key_type if ctx.version >= 1 else GROUP_KEY
    if ctx.version >= 4:
        coordinators = []
        for key in body.coordinator_keys:
            err, msg, node, host, port = _coordinator(ctx, key, key_type)
            coordinators.append(cls.Coordinator(key=key, node_id=node, host=host, port=port,
                                                error_code=err, error_message=msg))
        return cls(throttle_time_ms=0, coordinators=coordinators)
    err, msg, node, host, port = _coordinator(ctx, body.key, key_type)
    msg = _DENIED_MESSAGES.get(err, msg)
    return cls(throttle_time_ms=0, error_code=err, error_message=msg, node_id=node, host=host,
               port=port)


# ---------------------------------------------------------------------- membership
def _may_read(ctx: RequestContext, group_id: str) -> bool:
    return ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id)


@handles(ApiKey.JOIN_GROUP)
async def handle_join_group(ctx: RequestContext, body: JoinGroupRequest) -> JoinGroupResponse:
    if not _may_read(ctx, body.group_id):
        return JoinGroupResponse(
            throttle_time_ms=0, error_code=Errors.GROUP_AUTHORIZATION_FAILED,
            generation_id=-1, protocol_name=None if ctx.version >= 7 else "", leader="",
            member_id="", members=[])
    # Kafka reports client hosts as Java's InetAddress.toString(): "/127.0.0.1".
    return await ctx.services.group_coordinator.join_group(
        body, ctx.version, ctx.client_id, f"/{ctx.client_host}")


@handles(ApiKey.SYNC_GROUP)
async def handle_sync_group(ctx: RequestContext, body: SyncGroupRequest) -> SyncGroupResponse:
    if not _may_read(ctx, body.group_id):
        return SyncGroupResponse(throttle_time_ms=0,
                                 error_code=Errors.GROUP_AUTHORIZATION_FAILED, assignment=b"")
    return await ctx.services.group_coordinator.sync_group(body, ctx.version)


@handles(ApiKey.HEARTBEAT)
async def handle_heartbeat(ctx: RequestContext, body: HeartbeatRequest) -> HeartbeatResponse:
    if not _may_read(ctx, body.group_id):
        return HeartbeatResponse(throttle_time_ms=0,
                                 error_code=Errors.GROUP_AUTHORIZATION_FAILED)
    return await ctx.services.group_coordinator.heartbeat(body, ctx.version)


@handles(ApiKey.LEAVE_GROUP)
async def handle_leave_group(ctx: RequestContext, body: LeaveGroupRequest) -> LeaveGroupResponse:
    if not _may_read(ctx, body.group_id):
        return LeaveGroupResponse(throttle_time_ms=0,
                                  error_code=Errors.GROUP_AUTHORIZATION_FAILED, members=[])
    return await ctx.services.group_coordinator.leave_group(body, ctx.version)


# ---------------------------------------------------------------------- offsets
def unknown_partitions(ctx: RequestContext,
                       body: OffsetCommitRequest | TxnOffsetCommitRequest
                       ) -> frozenset[tuple[str, int]]:
    """The (topic, partition)s of an offset commit that this cluster does not have."""
    topics = ctx.services.metadata.topics
    unknown = set()
    for t in body.topics:
        info = topics.get(t.name)
        for p in t.partitions:
            if info is None or not 0 <= p.partition_index < info.partitions:
                unknown.add((t.name, p.partition_index))
    return frozenset(unknown)


@handles(ApiKey.OFFSET_COMMIT)
async def handle_offset_commit(ctx: RequestContext, body: OffsetCommitRequest) -> OffsetCommitResponse:
    t_cls = OffsetCommitResponse.OffsetCommitResponseTopic
    p_cls = t_cls.OffsetCommitResponsePartition
    if not _may_read(ctx, body.group_id):
        return OffsetCommitResponse(throttle_time_ms=0, topics=error_topics(
            t_cls, p_cls, body.topics, Errors.GROUP_AUTHORIZATION_FAILED))
    return await commit_readable_topics(
        ctx, body, OffsetCommitResponse, t_cls, p_cls,
        lambda part: ctx.services.group_coordinator.commit_offsets(
            part, ctx.version, unknown_partitions(ctx, part)))


@handles(ApiKey.OFFSET_FETCH)
async def handle_offset_fetch(ctx: RequestContext, body: OffsetFetchRequest) -> OffsetFetchResponse:
    if ctx.version >= 8:
        return await _offset_fetch_groups(ctx, body)
    service = ctx.services.group_coordinator
    t_cls = OffsetFetchResponse.OffsetFetchResponseTopic
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, body.group_id):
        if ctx.version >= 2:
            return OffsetFetchResponse(throttle_time_ms=0,
                                       error_code=Errors.GROUP_AUTHORIZATION_FAILED, topics=[])
        # v1 has no top-level error: every asked partition carries it
        return OffsetFetchResponse(topics=_fetch_errors(
            t_cls, body.topics or [], Errors.GROUP_AUTHORIZATION_FAILED))
    if body.topics is None:     # all partitions: what the caller may not see is left out
        response: OffsetFetchResponse = await service.fetch_offsets(body, ctx.version)
        response.topics = _visible(ctx, response.topics)
        return response
    allowed = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                   (t.name for t in body.topics))
    refused = [t for t in body.topics if t.name not in allowed]
    if not refused:
        return await service.fetch_offsets(body, ctx.version)
    response = await service.fetch_offsets(
        with_fields(body, topics=[t for t in body.topics if t.name in allowed]), ctx.version)
    if ctx.version < 2 or response.error_code == Errors.NONE:
        response.topics += _fetch_errors(t_cls, refused, Errors.TOPIC_AUTHORIZATION_FAILED)
    return response


async def _offset_fetch_groups(ctx: RequestContext, body: OffsetFetchRequest
                               ) -> OffsetFetchResponse:
    """v8+: several groups, each authorized on its own (Describe: 30 for that group),
    then its topics as in v1-7.  The coordinator gets only the authorized groups, each
    with only its authorized topics."""
    g_cls = OffsetFetchResponse.OffsetFetchResponseGroup
    t_cls = g_cls.OffsetFetchResponseTopics
    readable = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.GROUP,
                                    (g.group_id for g in body.groups))
    allowed = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, (
        t.name for g in body.groups if g.group_id in readable for t in g.topics or ()))
    kept = [g if g.topics is None or all(t.name in allowed for t in g.topics)
            else with_fields(g, topics=[t for t in g.topics if t.name in allowed])
            for g in body.groups if g.group_id in readable]
    response = OffsetFetchResponse(throttle_time_ms=0, groups=[])
    if kept:
        whole = len(kept) == len(body.groups) and all(map(operator.is_, kept, body.groups))
        response = await ctx.services.group_coordinator.fetch_offsets(
            body if whole else with_fields(body, groups=kept), ctx.version)
    answers = iter(response.groups)
    groups = []
    for g in body.groups:
        if g.group_id not in readable:
            groups.append(g_cls(group_id=g.group_id, topics=[],
                                error_code=Errors.GROUP_AUTHORIZATION_FAILED))
            continue
        answer = next(answers)
        if answer.error_code == Errors.NONE:
            if g.topics is None:
                answer.topics = _visible(ctx, answer.topics)
            else:
                answer.topics += _fetch_errors(
                    t_cls, [t for t in g.topics if t.name not in allowed],
                    Errors.TOPIC_AUTHORIZATION_FAILED)
        groups.append(answer)
    response.groups = groups
    return response


_FETCH_PARTITION = {
    OffsetFetchResponse.OffsetFetchResponseTopic:
        OffsetFetchResponse.OffsetFetchResponseTopic.OffsetFetchResponsePartition,
    OffsetFetchResponse.OffsetFetchResponseGroup.OffsetFetchResponseTopics:
        OffsetFetchResponse.OffsetFetchResponseGroup.OffsetFetchResponseTopics
        .OffsetFetchResponsePartitions,
}


def _visible(ctx: RequestContext, topics: list[Any]) -> list[Any]:
    """The answered topics of an all-partitions OffsetFetch the caller may Describe."""
    allowed = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                   (t.name for t in topics))
    return [t for t in topics if t.name in allowed]


def _fetch_errors(topic_cls: Any, topics: Iterable[Any], error: int) -> list[Any]:
    """OffsetFetch answers for asked ``topics`` (``.name``, ``.partition_indexes``) that
    carry ``error`` and no offset; ``topic_cls`` is the v0-7 or the v8+ topic class."""
    partition_cls = _FETCH_PARTITION[topic_cls]
    return [topic_cls(name=t.name, partitions=[
        partition_cls(partition_index=p, committed_offset=-1, committed_leader_epoch=-1,
                      metadata="", error_code=error)
        for p in t.partition_indexes]) for t in topics]


# ---------------------------------------------------------------------- administration
@handles(ApiKey.DESCRIBE_GROUPS)
async def handle_describe_groups(ctx: RequestContext, body: DescribeGroupsRequest) -> DescribeGroupsResponse:
    allowed = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.GROUP, body.groups)
    refused = [g for g in body.groups if g not in allowed]
    if refused:
        body = with_fields(body, groups=[g for g in body.groups if g in allowed])
    response: DescribeGroupsResponse = await ctx.services.group_coordinator.describe_groups(
        body, ctx.version)
    if ctx.version >= 3 and body.include_authorized_operations:
        for group in response.groups:
            group.authorized_operations = (
                ctx.authorized_operations(ResourceType.GROUP, group.group_id)
                if group.error_code == Errors.NONE else AUTHORIZED_OPERATIONS_OMITTED)
    g_cls = DescribeGroupsResponse.DescribedGroup
    response.groups[:0] = [g_cls(group_id=g, error_code=Errors.GROUP_AUTHORIZATION_FAILED,
                                 group_state="", protocol_type="", protocol_data="",
                                 members=[], authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
                           for g in refused]
    return response


@handles(ApiKey.LIST_GROUPS)
async def handle_list_groups(ctx: RequestContext, body: ListGroupsRequest) -> ListGroupsResponse:
    everything = ctx.authorize_cluster(AclOperation.DESCRIBE, log_if_denied=False)
    response: ListGroupsResponse = await ctx.services.group_coordinator.list_groups(
        body, ctx.version)
    if not everything:
        allowed = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.GROUP,
                                       (g.group_id for g in response.groups),
                                       log_if_denied=False)
        response.groups = [g for g in response.groups if g.group_id in allowed]
    return response


@handles(ApiKey.DELETE_GROUPS)
async def handle_delete_groups(ctx: RequestContext, body: DeleteGroupsRequest) -> DeleteGroupsResponse:
    allowed = ctx.authorized_names(AclOperation.DELETE, ResourceType.GROUP, body.groups_names)
    refused = [g for g in dict.fromkeys(body.groups_names) if g not in allowed]
    if refused:
        body = with_fields(body, groups_names=[g for g in body.groups_names if g in allowed])
    response: DeleteGroupsResponse = await ctx.services.group_coordinator.delete_groups(
        body, ctx.version)
    r_cls = DeleteGroupsResponse.DeletableGroupResult
    response.results += [r_cls(group_id=g, error_code=Errors.GROUP_AUTHORIZATION_FAILED)
                         for g in refused]
    return response
