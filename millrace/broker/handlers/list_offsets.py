"""ListOffsets (key 2): earliest, latest, max-timestamp or by-timestamp offsets.

Authorization (Kafka 3.9's ``handleListOffsetRequest``): Describe on each topic (Read,
Write, Delete or Alter imply it), asked before existence; a denied topic's partitions
answer TOPIC_AUTHORIZATION_FAILED with no timestamp or offset.
"""

from __future__ import annotations

from millrace.broker.context import RequestContext
from millrace.broker.handlers import handles
from millrace.common.errors import Errors
from millrace.protocol import ApiKey
from millrace.protocol.types import (
    ListOffsetsRequest,
    ListOffsetsResponse,
)
from millrace.security.acl import AclOperation, ResourceType


@handles(ApiKey.LIST_OFFSETS)
async def handle_list_offsets(ctx: RequestContext, body: ListOffsetsRequest) -> ListOffsetsResponse:
    rm = ctx.services.replica_manager
    cls = ListOffsetsResponse
    topic_cls = cls.ListOffsetsTopicResponse
    part_cls = topic_cls.ListOffsetsPartitionResponse
    isolation = body.isolation_level if ctx.version >= 2 else 0
    describable = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                       (t.name for t in body.topics))
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            if t.name in describable:
                error, ts, offset, epoch = rm.offset_for_timestamp(
                    t.name, p.partition_index, p.timestamp, isolation,
                    current_leader_epoch=p.current_leader_epoch if ctx.version >= 4 else -1,
                    replica_id=body.replica_id)
            else:
                error, ts, offset, epoch = Errors.TOPIC_AUTHORIZATION_FAILED, -1, -1, -1
            parts.append(part_cls(partition_index=p.partition_index, error_code=error,
                                  old_style_offsets=[offset] if offset >= 0 else [],
                                  timestamp=ts, offset=offset, leader_epoch=epoch))
        topics.append(topic_cls(name=t.name, partitions=parts))
    return cls(throttle_time_ms=0, topics=topics)
