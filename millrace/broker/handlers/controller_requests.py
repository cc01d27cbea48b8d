"""LeaderAndIsr (4), StopReplica (5), UpdateMetadata (6): what the controller tells a broker.

A broker obeys these only from the current controller and only when they are meant for
this incarnation of itself:

- the sender needs ClusterAction on the Cluster (Kafka 3.9's ``KafkaApis``, asked before
  any epoch): a client forging one gets CLUSTER_AUTHORIZATION_FAILED in every error slot
  of the response and changes nothing;
- a request from an older controller epoch than the last one seen is refused whole with
  STALE_CONTROLLER_EPOCH (KAFKA-6082: a zombie controller cannot undo newer decisions);
- a request carrying an older broker epoch than this broker's registration is refused
  with STALE_BROKER_EPOCH (KIP-380: it was meant for the broker before its restart); a
  newer one is accepted (KAFKA-9839);
- the single-node embedded broker is its own controller and accepts none of them.

LeaderAndIsr applies partition states through ``ReplicaManager.become_leader_or_follower``;
UpdateMetadata replaces the broker's ``MetadataCache``; StopReplica stops (and with
delete removes) replicas.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from millrace.broker.context import RequestContext
from millrace.broker.handlers import handles
from millrace.broker.metadata import (
    SECURITY_PROTOCOL_NAMES,
    BrokerRegistration,
    EndPoint,
    PartitionState,
)
from millrace.broker.metadata.metadata_cache import PartitionMetadata
from millrace.broker.metadata.zk_cluster_metadata import ZkClusterMetadata
from millrace.broker.replica_fetcher import BrokerEndpoint
from millrace.broker.replica_state_changes import LeaderAndIsrPartition
from millrace.broker.services import ClusterServices
from millrace.common.errors import Errors
from millrace.protocol import ApiKey
from millrace.protocol.types import (
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from millrace.security.acl import AclOperation

log = logging.getLogger(__name__)


def _refusal(ctx: RequestContext, controller_epoch: int, broker_epoch: int
             ) -> tuple[int, ClusterServices | None]:
    """(error, cluster services) for a controller request: NONE to go ahead."""
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return Errors.CLUSTER_AUTHORIZATION_FAILED, None
    cluster = ctx.services.cluster
    if cluster is None:
        return Errors.STALE_CONTROLLER_EPOCH, None
    if controller_epoch < ctx.services.replica_manager.controller_epoch:
        return Errors.STALE_CONTROLLER_EPOCH, cluster
    if 0 <= broker_epoch < cluster.broker_epoch:
        return Errors.STALE_BROKER_EPOCH, cluster
    return Errors.NONE, cluster


@handles(ApiKey.LEADER_AND_ISR)
async def handle_leader_and_isr(ctx: RequestContext,
                                body: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
    cls = LeaderAndIsrResponse
    v = ctx.version
    # the partition state types of v0-1 and v2+ carry the same fields (v0-1 adds the name)
    states: list[tuple[str, uuid.UUID, Any]] = []
    if v < 2:  # v0-1: one flat list of partition states, each naming its topic
        states.extend((p.topic_name, uuid.UUID(int=0), p)
                      for p in body.ungrouped_partition_states)
    for t in body.topic_states or ():
        states.extend((t.topic_name, t.topic_id, p) for p in t.partition_states)
    error, cluster = _refusal(ctx, body.controller_epoch, body.broker_epoch)
    if error:
        return _leader_and_isr_response(v, error, [(name, tid, p.partition_index, error)
                                                   for name, tid, p in states])
    assert cluster is not None
    partitions = [LeaderAndIsrPartition(
        name, p.partition_index,
        PartitionState(p.leader, p.leader_epoch, tuple(p.isr), p.controller_epoch,
                       p.partition_epoch),
        tuple(p.replicas), p.is_new) for name, _, p in states]
    live = {b.broker_id: BrokerEndpoint(b.broker_id, b.host_name, b.port)
            for b in body.live_leaders}
    live.update({b.node_id: BrokerEndpoint(b.node_id, b.host, b.port)
                 for b in cluster.metadata_cache.alive_brokers.values()
                 if b.node_id not in live})
    # A partition new here gets its log created with the topic's overrides, read from
    # ZooKeeper: the UpdateMetadata that brings the topic may not have arrived yet.
    rm = ctx.services.replica_manager
    new_topics = sorted({p.topic for p in partitions
                         if (p.topic, p.partition) not in rm.partitions})
    configs = await asyncio.get_running_loop().run_in_executor(
        None, lambda: {t: dict(cluster.zk.get_entity_configs("topics", t))
                       for t in new_topics}) if new_topics else None
    if configs and isinstance(ctx.services.metadata, ZkClusterMetadata):
        ctx.services.metadata.remember_topic_configs(configs)
    errors = rm.become_leader_or_follower(body.controller_epoch, partitions, live, configs)
    del cls
    return _leader_and_isr_response(v, Errors.NONE, [
        (name, tid, p.partition_index, errors.get((name, p.partition_index), Errors.NONE))
        for name, tid, p in states])


def _leader_and_isr_response(version: int, error: int,
                             results: list[tuple[str, uuid.UUID, int, int]]
                             ) -> LeaderAndIsrResponse:
    cls = LeaderAndIsrResponse
    if version < 5:
        return cls(error_code=error, partition_errors=[
            cls.LeaderAndIsrPartitionError(topic_name=name, partition_index=p, error_code=e)
            for name, _, p, e in results])
    by_topic: dict[uuid.UUID, list[LeaderAndIsrResponse.LeaderAndIsrTopicError.
                                   LeaderAndIsrPartitionError]] = {}
    for _, tid, p, e in results:
        by_topic.setdefault(tid, []).append(
            cls.LeaderAndIsrTopicError.LeaderAndIsrPartitionError(partition_index=p,
                                                                  error_code=e))
    return cls(error_code=error, topics=[cls.LeaderAndIsrTopicError(
        topic_id=tid, partition_errors=errs) for tid, errs in by_topic.items()])


@handles(ApiKey.UPDATE_METADATA)
async def handle_update_metadata(ctx: RequestContext,
                                 body: UpdateMetadataRequest) -> UpdateMetadataResponse:
    error, cluster = _refusal(ctx, body.controller_epoch, body.broker_epoch)
    if error:
        return UpdateMetadataResponse(error_code=error)
    assert cluster is not None
    listener = ctx.services.config.inter_broker_listener_name
    brokers = []
    for b in body.live_brokers:
        endpoint = next((e for e in b.endpoints if e.listener == listener),
                        b.endpoints[0] if b.endpoints else None)
        if endpoint is not None:
            brokers.append(BrokerRegistration(
                b.id, endpoint.host, endpoint.port, b.rack,
                endpoints=tuple(EndPoint(e.host, e.port, e.listener,
                                         SECURITY_PROTOCOL_NAMES.get(e.security_protocol,
                                                                     "PLAINTEXT"))
                                for e in b.endpoints)))
    partitions = [PartitionMetadata(
        t.topic_name, p.partition_index,
        PartitionState(p.leader, p.leader_epoch, tuple(p.isr), p.controller_epoch,
                       p.zk_version),
        tuple(p.replicas), tuple(p.offline_replicas))
        for t in body.topic_states for p in t.partition_states]
    await _warm_topic_configs(ctx, {t.topic_name for t in body.topic_states})
    ctx.services.replica_manager.controller_epoch = max(
        ctx.services.replica_manager.controller_epoch, body.controller_epoch)
    cluster.metadata_cache.update_metadata(
        body.controller_id, body.controller_epoch, brokers, partitions,
        {t.topic_name: t.topic_id for t in body.topic_states})
    log.info("UpdateMetadata (controller %d, epoch %d): live brokers %s, %d partition "
             "state(s)", body.controller_id, body.controller_epoch,
             sorted(b.node_id for b in brokers), len(partitions))
    return UpdateMetadataResponse(error_code=Errors.NONE)


async def _warm_topic_configs(ctx: RequestContext, names: set[str]) -> None:
    """Read the overrides of topics new to this broker off the loop, so that Metadata
    answers from memory (see ``ZkClusterMetadata.remember_topic_configs``).  A failed
    read (ZooKeeper unreachable right now) leaves them to be read when first needed."""
    metadata = ctx.services.metadata
    if not isinstance(metadata, ZkClusterMetadata):
        return
    missing = metadata.topics_without_configs(names)
    if not missing:
        return
    try:
        configs = await asyncio.get_running_loop().run_in_executor(
            None, metadata.read_topic_configs, missing)
    except Exception as e:  # kazoo's ConnectionLoss, SessionExpired, timeouts
        log.warning("could not read the configs of topics %s from ZooKeeper: %s",
                    missing, e)
        return
    metadata.remember_topic_configs(configs)


@handles(ApiKey.STOP_REPLICA)
async def handle_stop_replica(ctx: RequestContext,
                              body: StopReplicaRequest) -> StopReplicaResponse:
    cls = StopReplicaResponse
    if ctx.version >= 3:
        wanted = [((t.topic_name, p.partition_index), p.leader_epoch, p.delete_partition)
                  for t in body.topic_states for p in t.partition_states]
    elif ctx.version >= 1:
        wanted = [((t.name, i), -1, body.delete_partitions)
                  for t in body.topics for i in t.partition_indexes]
    else:
        wanted = [((p.topic_name, p.partition_index), -1, body.delete_partitions)
                  for p in body.ungrouped_partitions]
    error, _ = _refusal(ctx, body.controller_epoch, body.broker_epoch)
    if error == Errors.CLUSTER_AUTHORIZATION_FAILED:  # Kafka's error response names them
        return cls(error_code=error, partition_errors=[
            cls.StopReplicaPartitionError(topic_name=tp[0], partition_index=tp[1],
                                          error_code=error) for tp, _, _ in wanted])
    if error:
        return cls(error_code=error, partition_errors=[])
    errors = ctx.services.replica_manager.stop_replicas(body.controller_epoch, wanted)
    return cls(error_code=Errors.NONE, partition_errors=[
        cls.StopReplicaPartitionError(topic_name=tp[0], partition_index=tp[1], error_code=e)
        for tp, e in errors.items()])
