"""Group APIs: FindCoordinator (10), JoinGroup (11), Heartbeat (12), LeaveGroup (13),
SyncGroup (14), OffsetCommit (8), OffsetFetch (9), DescribeGroups (15), ListGroups (16),
DeleteGroups (42).

Thin adapters: the request body and version go to the broker's
``GroupCoordinatorService`` (``ctx.server.group_coordinator``), which answers in the
request's version.  What only the broker knows is added here: the coordinator's
address (FindCoordinator) and which topics exist (OffsetCommit refuses partitions of
unknown topics with UNKNOWN_TOPIC_OR_PARTITION, as Kafka does).  Without a running
coordinator every group API answers COORDINATOR_NOT_AVAILABLE so that clients retry.

FindCoordinator on one broker: every group's ``__consumer_offsets`` partition (and every
transactional id's ``__transaction_state`` partition) is led by this node.  The partition
is still computed -- that is the seam where a cluster looks up the partition's leader.
"""

from __future__ import annotations

from typing import Any

from millrace.broker.context import RequestContext
from millrace.broker.group.errors import Errors
from millrace.broker.group.group_metadata_manager import partition_for
from millrace.broker.group.responses import (
    heartbeat_response,
    join_error,
    leave_response,
    sync_error,
)
from millrace.broker.group.service import GroupCoordinatorService
from millrace.broker.handlers import handles
from millrace.protocol import ApiKey

GROUP_KEY, TRANSACTION_KEY = 0, 1


def _service(ctx: RequestContext) -> GroupCoordinatorService | None:
    service = getattr(ctx.server, "group_coordinator", None)
    return service if isinstance(service, GroupCoordinatorService) else None


# ---------------------------------------------------------------------- FindCoordinator
def _find(ctx: RequestContext, key: str, key_type: int) -> tuple[int, str | None, int, str, int]:
    """(error, message, node id, host, port) of the coordinator for one key."""
    server = ctx.server
    if key_type == GROUP_KEY:
        service = _service(ctx)
        if service is None:
            return Errors.COORDINATOR_NOT_AVAILABLE, None, -1, "", -1
        partition = service.partition_for(key)
        coord = service.coordinator
        if partition not in coord.hosted and partition not in coord.loading:
            return Errors.COORDINATOR_NOT_AVAILABLE, None, -1, "", -1
    elif key_type == TRANSACTION_KEY:
        # The transaction coordinator is a later milestone; its partition would be
        # partition_for(key, transaction.state.log.num.partitions), led by this node.
        partition_for(key, server.config["transaction.state.log.num.partitions"])
    else:
        return (Errors.INVALID_REQUEST, f"Unknown coordinator type {key_type}", -1, "", -1)
    return Errors.NONE, None, server.config.node_id, server.advertised_host, \
        int(server.advertised_port)


@handles(ApiKey.FIND_COORDINATOR)
async def handle_find_coordinator(ctx: RequestContext, body: Any) -> Any:
    cls = ctx.api.response.cls
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
async def handle_join_group(ctx: RequestContext, body: Any) -> Any:
    service = _service(ctx)
    if service is None:
        return join_error(ctx.version, Errors.COORDINATOR_NOT_AVAILABLE, body.member_id)
    # Kafka reports client hosts as Java's InetAddress.toString(): "/127.0.0.1".
    return await service.join_group(body, ctx.version, ctx.client_id, f"/{ctx.client_host}")


@handles(ApiKey.SYNC_GROUP)
async def handle_sync_group(ctx: RequestContext, body: Any) -> Any:
    service = _service(ctx)
    if service is None:
        return sync_error(Errors.COORDINATOR_NOT_AVAILABLE)
    return await service.sync_group(body, ctx.version)


@handles(ApiKey.HEARTBEAT)
async def handle_heartbeat(ctx: RequestContext, body: Any) -> Any:
    service = _service(ctx)
    if service is None:
        return heartbeat_response(Errors.COORDINATOR_NOT_AVAILABLE)
    return await service.heartbeat(body, ctx.version)


@handles(ApiKey.LEAVE_GROUP)
async def handle_leave_group(ctx: RequestContext, body: Any) -> Any:
    service = _service(ctx)
    if service is None:
        return leave_response(ctx.version, Errors.COORDINATOR_NOT_AVAILABLE, [])
    return await service.leave_group(body, ctx.version)


# ---------------------------------------------------------------------- offsets
def _unknown_partitions(ctx: RequestContext, body: Any) -> frozenset[tuple[str, int]]:
    metadata = getattr(ctx.server, "metadata", None)
    topics = getattr(metadata, "topics", None)
    if topics is None:
        return frozenset()
    unknown = set()
    for t in body.topics:
        info = topics.get(t.name)
        for p in t.partitions:
            if info is None or not 0 <= p.partition_index < info.partitions:
                unknown.add((t.name, p.partition_index))
    return frozenset(unknown)


@handles(ApiKey.OFFSET_COMMIT)
async def handle_offset_commit(ctx: RequestContext, body: Any) -> Any:
    service = _service(ctx)
    if service is None:
        cls = ctx.api.response.cls
        t_cls = cls.OffsetCommitResponseTopic
        return cls(topics=[t_cls(name=t.name, topic_id=t.topic_id, partitions=[
            t_cls.OffsetCommitResponsePartition(
                partition_index=p.partition_index, error_code=Errors.COORDINATOR_NOT_AVAILABLE)
            for p in t.partitions]) for t in body.topics])
    return await service.commit_offsets(body, ctx.version, _unknown_partitions(ctx, body))


@handles(ApiKey.OFFSET_FETCH)
async def handle_offset_fetch(ctx: RequestContext, body: Any) -> Any:
    service = _service(ctx)
    if service is None:
        cls = ctx.api.response.cls
        if ctx.version >= 8:
            return cls(groups=[cls.OffsetFetchResponseGroup(
                group_id=g.group_id, error_code=Errors.COORDINATOR_NOT_AVAILABLE)
                for g in body.groups])
        if ctx.version >= 2:
            return cls(error_code=Errors.COORDINATOR_NOT_AVAILABLE)
        t_cls = cls.OffsetFetchResponseTopic
        return cls(topics=[t_cls(name=t.name, partitions=[t_cls.OffsetFetchResponsePartition(
            partition_index=p, committed_offset=-1, metadata="",
            error_code=Errors.COORDINATOR_NOT_AVAILABLE) for p in t.partition_indexes])
            for t in body.topics or []])
    return await service.fetch_offsets(body, ctx.version)


# ---------------------------------------------------------------------- administration
@handles(ApiKey.DESCRIBE_GROUPS)
async def handle_describe_groups(ctx: RequestContext, body: Any) -> Any:
    service = _service(ctx)
    if service is None:
        cls = ctx.api.response.cls
        return cls(groups=[cls.DescribedGroup(group_id=g, error_code=(
            Errors.COORDINATOR_NOT_AVAILABLE)) for g in body.groups])
    return await service.describe_groups(body, ctx.version)


@handles(ApiKey.LIST_GROUPS)
async def handle_list_groups(ctx: RequestContext, body: Any) -> Any:
    service = _service(ctx)
    if service is None:
        return ctx.response(error_code=Errors.COORDINATOR_NOT_AVAILABLE, groups=[])
    return await service.list_groups(body, ctx.version)


@handles(ApiKey.DELETE_GROUPS)
async def handle_delete_groups(ctx: RequestContext, body: Any) -> Any:
    service = _service(ctx)
    if service is None:
        cls = ctx.api.response.cls
        return cls(results=[cls.DeletableGroupResult(
            group_id=g, error_code=Errors.COORDINATOR_NOT_AVAILABLE) for g in body.groups_names])
    return await service.delete_groups(body, ctx.version)
