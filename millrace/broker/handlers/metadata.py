"""Metadata (key 3) and DescribeCluster (key 60): brokers, topics, partitions, leaders.

Everything comes from the cluster metadata: the registered brokers, the controller, each
topic's replica assignment and each partition's leader, leader epoch and ISR (on one
node, this broker everywhere).  Unknown topics are created on request when
``auto.create.topics.enable`` and the client allows it (``allow_auto_topic_creation``,
v4+; always allowed before v4), as Kafka does.

Authorization (Kafka 3.9's ``handleTopicMetadataRequest``): Describe on each topic, asked
before existence.  A topic named in the request without it answers
TOPIC_AUTHORIZATION_FAILED with no partitions and a zero topic id (asked by id: the id,
which is not secret, and no name); an unknown id is still UNKNOWN_TOPIC_ID.  An
all-topics request (or v0's empty list) leaves out the topics the caller may not
Describe, without logging each refusal.  Auto-creation needs Create on the Cluster or
else on the topic; denied, the topic answers TOPIC_AUTHORIZATION_FAILED and is not
created.  The authorized-operations bitfields are filled in when asked for: per topic
(v8+) for the topics answered without an authorization error, the cluster's (v8-10, and
DescribeCluster) only with Describe on the Cluster, else 0.  DescribeCluster needs no
permission of its own.
"""

from __future__ import annotations

import uuid

from millrace.broker.context import RequestContext
from millrace.broker.handlers import handles
from millrace.broker.metadata import INTERNAL_TOPICS, TopicInfo
from millrace.common.errors import Errors, KafkaError
from millrace.protocol import ApiKey
from millrace.protocol.types import (
    DescribeClusterRequest,
    DescribeClusterResponse,
    MetadataRequest,
    MetadataResponse,
)
from millrace.security.acl import CLUSTER_NAME, AclOperation, ResourceType

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
    topic_cls = cls.MetadataResponseTopic
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
    allow_create = (body.allow_auto_topic_creation if v >= 4 else True) and \
        services.config["auto.create.topics.enable"]
    with_topic_ops = v >= 8 and body.include_topic_authorized_operations

    def topic_ops(name: str) -> int:
        """The topic's bitfield if the request asked for it."""
        if not with_topic_ops:
            return AUTHORIZED_OPERATIONS_OMITTED
        return ctx.authorized_operations(ResourceType.TOPIC, name)

    # (name, the id it was asked by or None); name None: an id nobody knows
    asked: list[tuple[str | None, uuid.UUID | None]] = []
    if all_topics:
        existing = sorted(metadata.topics)
        describable = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                           existing, log_if_denied=False)
        asked = [(n, None) for n in existing if n in describable]
    else:
        for t in requested or ():
            if t.name is None and t.topic_id is not None:
                info = metadata.topic_by_id(t.topic_id)
                asked.append((None if info is None else info.name, t.topic_id))
            else:
                asked.append((t.name, None))
        describable = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                           (n for n, _ in asked if n is not None))
    creatable: set[str] = set()
    missing = [n for n, by_id in asked
               if n in describable and by_id is None and n not in metadata.topics]
    if allow_create and missing:
        creatable = set(missing) if ctx.authorize_cluster(AclOperation.CREATE,
                                                          log_if_denied=False) \
            else ctx.authorized_names(AclOperation.CREATE, ResourceType.TOPIC, missing)
    topics = []
    for name, topic_id in asked:
        if name is None:
            assert topic_id is not None
            topics.append(topic_cls(error_code=Errors.UNKNOWN_TOPIC_ID,
                                    name=None if v >= 12 else "", topic_id=topic_id))
            continue
        if name not in describable:
            # Asked by name: nothing of the topic, not even its id.  Asked by id (not
            # secret): the id again, without the name.
            topics.append(
                topic_cls(error_code=Errors.TOPIC_AUTHORIZATION_FAILED, name=name)
                if topic_id is None else
                topic_cls(error_code=Errors.TOPIC_AUTHORIZATION_FAILED, name=None,
                          topic_id=topic_id))
            continue
        info = metadata.topics.get(name)
        if info is None and allow_create and topic_id is None:
            if name not in creatable:
                topics.append(topic_cls(error_code=Errors.TOPIC_AUTHORIZATION_FAILED,
                                        name=name, is_internal=name in INTERNAL_TOPICS))
                continue
            try:
                info = services.admin_manager.create_topic(
                    name, services.config["num.partitions"], {})
            except KafkaError as e:
                topics.append(topic_cls(error_code=e.code, name=name,
                                        topic_authorized_operations=topic_ops(name)))
                continue
        if info is None:
            # A broker that has not had the controller's first UpdateMetadata yet
            # (just restarted) does not know which topics exist: "no leader yet" is
            # retriable, where "unknown topic" makes librdkafka refuse to produce.
            waiting = services.cluster is not None and \
                services.cluster.metadata_cache.controller_epoch < 0
            topics.append(topic_cls(
                error_code=Errors.LEADER_NOT_AVAILABLE if waiting
                else Errors.UNKNOWN_TOPIC_OR_PARTITION, name=name,
                topic_authorized_operations=topic_ops(name)))
            continue
        topics.append(topic_cls(
            error_code=Errors.NONE, name=info.name, topic_id=info.topic_id,
            is_internal=info.internal, partitions=_partitions(ctx, info, on_listener),
            topic_authorized_operations=topic_ops(name)))
    cluster_ops = AUTHORIZED_OPERATIONS_OMITTED
    if 8 <= v <= 10 and body.include_cluster_authorized_operations:
        cluster_ops = _cluster_authorized_operations(ctx)
    return cls(throttle_time_ms=0, brokers=brokers, cluster_id=metadata.cluster_id,
               controller_id=metadata.controller_id, topics=topics,
               cluster_authorized_operations=cluster_ops, error_code=Errors.NONE)


def _cluster_authorized_operations(ctx: RequestContext) -> int:
    """The cluster's bitfield for a request that asked for it: 0 without Describe on the
    Cluster (Kafka's rule for Metadata v8-10 and DescribeCluster)."""
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return 0
    return ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)


@handles(ApiKey.DESCRIBE_CLUSTER)
async def handle_describe_cluster(ctx: RequestContext, body: DescribeClusterRequest) -> DescribeClusterResponse:
    metadata = ctx.services.metadata
    cls = DescribeClusterResponse
    cluster_ops = AUTHORIZED_OPERATIONS_OMITTED
    if body.include_cluster_authorized_operations:
        cluster_ops = _cluster_authorized_operations(ctx)
    return cls(throttle_time_ms=0, error_code=Errors.NONE, error_message=None, endpoint_type=1,
               cluster_id=metadata.cluster_id, controller_id=metadata.controller_id,
               brokers=[cls.DescribeClusterBroker(broker_id=b.node_id, host=ep[0],
                                                  port=ep[1], rack=b.rack, is_fenced=False)
                        for b in metadata.brokers()
                        if (ep := b.endpoint_for(ctx.listener)) is not None],
               cluster_authorized_operations=cluster_ops)
