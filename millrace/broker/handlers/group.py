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
"""

from __future__ import annotations

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

GROUP_KEY, TRANSACTION_KEY = 0, 1
OFFSETS_TOPIC = "__consumer_offsets"


# ---------------------------------------------------------------------- FindCoordinator
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
            err, msg, node, host, port = _find(ctx, key, key_type)
            coordinators.append(cls.Coordinator(key=key, node_id=node, host=host, port=port,
                                                error_code=err, error_message=msg))
        return cls(throttle_time_ms=0, coordinators=coordinators)
    err, msg, node, host, port = _find(ctx, body.key, key_type)
    return cls(throttle_time_ms=0, error_code=err, error_message=msg, node_id=node, host=host,
               port=port)


# ---------------------------------------------------------------------- membership
@handles(ApiKey.JOIN_GROUP)
async def handle_join_group(ctx: RequestContext, body: JoinGroupRequest) -> JoinGroupResponse:
    # Kafka reports client hosts as Java's InetAddress.toString(): "/127.0.0.1".
    return await ctx.services.group_coordinator.join_group(
        body, ctx.version, ctx.client_id, f"/{ctx.client_host}")


@handles(ApiKey.SYNC_GROUP)
async def handle_sync_group(ctx: RequestContext, body: SyncGroupRequest) -> SyncGroupResponse:
    return await ctx.services.group_coordinator.sync_group(body, ctx.version)


@handles(ApiKey.HEARTBEAT)
async def handle_heartbeat(ctx: RequestContext, body: HeartbeatRequest) -> HeartbeatResponse:
    return await ctx.services.group_coordinator.heartbeat(body, ctx.version)


@handles(ApiKey.LEAVE_GROUP)
async def handle_leave_group(ctx: RequestContext, body: LeaveGroupRequest) -> LeaveGroupResponse:
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
    return await ctx.services.group_coordinator.commit_offsets(
        body, ctx.version, unknown_partitions(ctx, body))


@handles(ApiKey.OFFSET_FETCH)
async def handle_offset_fetch(ctx: RequestContext, body: OffsetFetchRequest) -> OffsetFetchResponse:
    return await ctx.services.group_coordinator.fetch_offsets(body, ctx.version)


# ---------------------------------------------------------------------- administration
@handles(ApiKey.DESCRIBE_GROUPS)
async def handle_describe_groups(ctx: RequestContext, body: DescribeGroupsRequest) -> DescribeGroupsResponse:
    return await ctx.services.group_coordinator.describe_groups(body, ctx.version)


@handles(ApiKey.LIST_GROUPS)
async def handle_list_groups(ctx: RequestContext, body: ListGroupsRequest) -> ListGroupsResponse:
    return await ctx.services.group_coordinator.list_groups(body, ctx.version)


@handles(ApiKey.DELETE_GROUPS)
async def handle_delete_groups(ctx: RequestContext, body: DeleteGroupsRequest) -> DeleteGroupsResponse:
    return await ctx.services.group_coordinator.delete_groups(body, ctx.version)
