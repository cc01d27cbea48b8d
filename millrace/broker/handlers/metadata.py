"""Metadata (key 3) and DescribeCluster (key 60): brokers, topics, partitions, leaders.

Everything comes from the cluster metadata: the registered brokers, the controller, each
topic's replica assignment and each partition's leader, leader epoch and ISR (on one
node, this broker everywhere).  Unknown topics are created on request when
``auto.create.topics.enable`` and the client allows it (``allow_auto_topic_creation``,
v4+; always allowed before v4), as Kafka does.
"""

from __future__ import annotations

import uuid

from millrace.broker.context import RequestContext
from millrace.broker.handlers import handles
from millrace.broker.metadata import TopicInfo
from millrace.common.errors import Errors, KafkaError
from millrace.protocol import ApiKey
from millrace.protocol.types import (
    DescribeClusterRequest,
    DescribeClusterResponse,
    MetadataRequest,
    MetadataResponse,
)

AUTHORIZED_OPERATIONS_OMITTED = -2147483648


_Partition = MetadataResponse.MetadataResponseTopic.MetadataResponsePartition


def _partitions(ctx: RequestContext, info: TopicInfo, on_listener: set[int]
                ) -> list[_Partition]:
    """``on_listener``: the live brokers that have the request's listener.  A leader
    without it is LISTENER_NOT_FOUND (v6+; LEADER_NOT_AVAILABLE before), as in Kafka."""
    metadata = ctx.services.metadata
    live = {b.node_id for b in metadata.brokers()}
    missing = Errors.LISTENER_NOT_FOUND if ctx.version >= 6 else Errors.LEADER_NOT_AVAILABLE
    out = []
    for i in range(info.partitions):
        replicas = info.replicas(i)
        state = metadata.partition_state(info.name, i)
        leader = state.leader if state is not None else -1
        error = (Errors.LEADER_NOT_AVAILABLE if leader < 0 else
                 missing if leader in live and leader not in on_listener else Errors.NONE)
        out.append(_Partition(
            error_code=error,
            partition_index=i, leader_id=leader,
            leader_epoch=state.leader_epoch if state is not None else -1,
            replica_nodes=list(replicas), isr_nodes=list(state.isr) if state else [],
            offline_replicas=[r for r in replicas if r not in live]))
    return out


@handles(ApiKey.METADATA)
async def handle_metadata(ctx: RequestContext, body: MetadataRequest) -> MetadataResponse:
    services = ctx.services
    metadata = services.metadata
    cls = MetadataResponse
    v = ctx.version
    brokers = []
    for b in metadata.brokers():
        endpoint = b.endpoint_for(ctx.listener)
        if endpoint is not None:
            brokers.append(cls.MetadataResponseBroker(node_id=b.node_id, host=endpoint[0],
                                                      port=endpoint[1], rack=b.rack))
    on_listener = {b.node_id for b in brokers}
    requested = body.topics
    all_topics = requested is None or (v == 0 and not requested)
    allow_create = body.allow_auto_topic_creation if v >= 4 else True
    topics = []
    if all_topics:
        names: list[tuple[str | None, uuid.UUID | None]] = [
            (n, None) for n in sorted(metadata.topics)]
    else:
        names = [(t.name, t.topic_id) for t in requested or ()]
    for name, topic_id in names:
        info = None
        if name is None and topic_id is not None:
            info = metadata.topic_by_id(topic_id)
            if info is None:
                topics.append(cls.MetadataResponseTopic(error_code=Errors.UNKNOWN_TOPIC_ID,
                                                        name=None if v >= 12 else "",
                                                        topic_id=topic_id))
                continue
        else:
            assert name is not None
            info = metadata.topics.get(name)
            if info is None and allow_create and services.config["auto.create.topics.enable"]:
                try:
                    info = services.admin_manager.create_topic(
                        name, services.config["num.partitions"], {})
                except KafkaError as e:
                    topics.append(cls.MetadataResponseTopic(error_code=e.code, name=name))
                    continue
            if info is None:
                # A broker that has not had the controller's first UpdateMetadata yet
                # (just restarted) does not know which topics exist: "no leader yet" is
                # retriable, where "unknown topic" makes librdkafka refuse to produce.
                waiting = services.cluster is not None and \
                    services.cluster.metadata_cache.controller_epoch < 0
                topics.append(cls.MetadataResponseTopic(
                    error_code=Errors.LEADER_NOT_AVAILABLE if waiting
                    else Errors.UNKNOWN_TOPIC_OR_PARTITION, name=name))
                continue
        topics.append(cls.MetadataResponseTopic(
            error_code=Errors.NONE, name=info.name, topic_id=info.topic_id,
            is_internal=info.internal, partitions=_partitions(ctx, info, on_listener),
            topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
    return cls(throttle_time_ms=0, brokers=brokers, cluster_id=metadata.cluster_id,
               controller_id=metadata.controller_id, topics=topics,
               cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
               error_code=Errors.NONE)


@handles(ApiKey.DESCRIBE_CLUSTER)
async def handle_describe_cluster(ctx: RequestContext, body: DescribeClusterRequest) -> DescribeClusterResponse:
    metadata = ctx.services.metadata
    cls = DescribeClusterResponse
    return cls(throttle_time_ms=0, error_code=Errors.NONE, error_message=None, endpoint_type=1,
               cluster_id=metadata.cluster_id, controller_id=metadata.controller_id,
               brokers=[cls.DescribeClusterBroker(broker_id=b.node_id, host=ep[0],
                                                  port=ep[1], rack=b.rack, is_fenced=False)
                        for b in metadata.brokers()
                        if (ep := b.endpoint_for(ctx.listener)) is not None],
               cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
