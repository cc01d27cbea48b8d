"""Metadata (key 3) and DescribeCluster (key 60): brokers, topics, partitions, leaders.

On one node every partition's leader, replica set and ISR is this broker.  Unknown topics
are created on request when ``auto.create.topics.enable`` and the client allows it
(``allow_auto_topic_creation``, v4+; always allowed before v4), as Kafka does.
"""

from __future__ import annotations

from typing import Any

from millrace.broker.context import RequestContext
from millrace.broker.handlers import handles
from millrace.common.errors import KafkaError
from millrace.protocol import ApiKey

UNKNOWN_TOPIC_OR_PARTITION = 3
UNKNOWN_TOPIC_ID = 100
AUTHORIZED_OPERATIONS_OMITTED = -2147483648


@handles(ApiKey.METADATA)
async def handle_metadata(ctx: RequestContext, body: Any) -> Any:
    server = ctx.server
    cls = ctx.api.response.cls
    v = ctx.version
    node = server.config.node_id
    brokers = [cls.MetadataResponseBroker(node_id=node, host=server.advertised_host,
                                          port=server.advertised_port, rack=None)]
    requested = body.topics
    all_topics = requested is None or (v == 0 and not requested)
    allow_create = body.allow_auto_topic_creation if v >= 4 else True
    topics = []
    if all_topics:
        names: list[tuple[str | None, Any]] = [(n, None) for n in sorted(server.metadata.topics)]
    else:
        names = [(t.name, t.topic_id) for t in requested]
    for name, topic_id in names:
        info = None
        if name is None and topic_id is not None:
            info = server.metadata.topic_by_id(topic_id)
            if info is None:
                topics.append(cls.MetadataResponseTopic(error_code=UNKNOWN_TOPIC_ID,
                                                        name=None if v >= 12 else "",
                                                        topic_id=topic_id))
                continue
        else:
            assert name is not None
            info = server.metadata.topics.get(name)
            if info is None and allow_create and server.config["auto.create.topics.enable"]:
                try:
                    info = server.create_topic(name, server.config["num.partitions"], {})
                except KafkaError as e:
                    topics.append(cls.MetadataResponseTopic(error_code=e.code, name=name))
                    continue
            if info is None:
                topics.append(cls.MetadataResponseTopic(error_code=UNKNOWN_TOPIC_OR_PARTITION,
                                                        name=name))
                continue
        partitions = [
            cls.MetadataResponseTopic.MetadataResponsePartition(
                error_code=0, partition_index=i, leader_id=node,
                leader_epoch=server.replica_manager.leader_epoch(info.name, i),
                replica_nodes=[node], isr_nodes=[node], offline_replicas=[])
            for i in range(info.partitions)]
        topics.append(cls.MetadataResponseTopic(
            error_code=0, name=info.name, topic_id=info.topic_id, is_internal=info.internal,
            partitions=partitions, topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
    return cls(throttle_time_ms=0, brokers=brokers, cluster_id=server.metadata.cluster_id,
               controller_id=node, topics=topics,
               cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED, error_code=0)


@handles(ApiKey.DESCRIBE_CLUSTER)
async def handle_describe_cluster(ctx: RequestContext, body: Any) -> Any:
    server = ctx.server
    cls = ctx.api.response.cls
    node = server.config.node_id
    return cls(throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=1,
               cluster_id=server.metadata.cluster_id, controller_id=node,
               brokers=[cls.DescribeClusterBroker(broker_id=node, host=server.advertised_host,
                                                  port=server.advertised_port, rack=None,
                                                  is_fenced=False)],
               cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
