"""DescribeProducers (key 61, v0; KIP-664): the active producers of partitions this
broker leads, from each partition's producer state -- id, epoch, last sequence, last
timestamp, coordinator epoch and the first offset of its open transaction (-1 if none).
A partition this broker hosts but does not lead is NOT_LEADER_OR_FOLLOWER; one it does
not host, UNKNOWN_TOPIC_OR_PARTITION.  Tools use it to find hanging transactions.

Authorization (Kafka 3.9's ``handleDescribeProducersRequest``): Read on each topic,
asked before existence; a denied topic's partitions answer TOPIC_AUTHORIZATION_FAILED
with Kafka's message.
"""

from __future__ import annotations

from millrace.broker.context import RequestContext
from millrace.broker.handlers import handles
from millrace.common.errors import Errors, KafkaError
from millrace.protocol import ApiKey
from millrace.protocol.types import (
    DescribeProducersRequest,
    DescribeProducersResponse,
)
from millrace.security.acl import AclOperation, ResourceType

# Kafka's Errors.TOPIC_AUTHORIZATION_FAILED message (ApiError of the bare code).
TOPIC_DENIED = "Topic authorization failed."


@handles(ApiKey.DESCRIBE_PRODUCERS)
async def handle_describe_producers(ctx: RequestContext, body: DescribeProducersRequest
                                    ) -> DescribeProducersResponse:
    rm = ctx.services.replica_manager
    cls = DescribeProducersResponse
    topic_cls = cls.TopicResponse
    part_cls = topic_cls.PartitionResponse
    state_cls = part_cls.ProducerState
    readable = ctx.authorized_names(AclOperation.READ, ResourceType.TOPIC,
                                    (t.name for t in body.topics))
    topics = []
    for t in body.topics:
        parts = []
        for index in t.partition_indexes:
            if t.name not in readable:
                parts.append(part_cls(partition_index=index,
                                      error_code=Errors.TOPIC_AUTHORIZATION_FAILED,
                                      error_message=TOPIC_DENIED, active_producers=[]))
                continue
            p = rm.leader_partition_or_error(t.name, index)
            if isinstance(p, Errors):
                parts.append(part_cls(partition_index=index, error_code=p,
                                      error_message=None, active_producers=[]))
                continue
            try:
                producers = p.log.active_producers()
            except KafkaError as e:
                parts.append(part_cls(partition_index=index, error_code=e.code,
                                      error_message=e.message, active_producers=[]))
                continue
            parts.append(part_cls(
                partition_index=index, error_code=Errors.NONE, error_message=None,
                active_producers=[state_cls(
                    producer_id=s.producer_id, producer_epoch=s.producer_epoch,
                    last_sequence=s.last_sequence, last_timestamp=s.last_timestamp,
                    coordinator_epoch=s.coordinator_epoch,
                    current_txn_start_offset=s.current_txn_start_offset)
                    for s in producers]))
        topics.append(topic_cls(name=t.name, partitions=parts))
    return cls(throttle_time_ms=0, topics=topics)
