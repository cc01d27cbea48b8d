"""OffsetForLeaderEpoch (key 23): where a leader epoch ends in the leader's log.

A follower that starts following a new leader asks where its own latest epoch ends in
the leader's log and truncates its divergent tail to that point (KIP-101, KIP-279);
consumers ask it after a leader change to detect a truncated log (KIP-320).  The
answer is the largest epoch at or below the requested one and the offset where the next
epoch starts (the log end for the latest epoch); an epoch below everything the leader
has answers (-1, -1).  ``current_leader_epoch`` fences a caller with an old view.

Authorization (Kafka 3.9's ``handleOffsetForLeaderEpochRequest``): ClusterAction on the
Cluster (a follower) covers every topic; otherwise (a consumer) Describe on each topic,
asked before existence, and a denied topic's partitions answer
TOPIC_AUTHORIZATION_FAILED.  The cluster question is not logged when denied: consumers
are expected to lack it.
"""

from __future__ import annotations

from millrace.broker.context import RequestContext
from millrace.broker.handlers import handles
from millrace.common.errors import Errors
from millrace.protocol import ApiKey
from millrace.protocol.types import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from millrace.security.acl import AclOperation, ResourceType


@handles(ApiKey.OFFSET_FOR_LEADER_EPOCH)
async def handle_offset_for_leader_epoch(
        ctx: RequestContext, body: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    rm = ctx.services.replica_manager
    cls = OffsetForLeaderEpochResponse
    topic_cls = cls.OffsetForLeaderTopicResult
    names = [t.topic for t in body.topics]
    if ctx.authorize_cluster(AclOperation.CLUSTER_ACTION, log_if_denied=False):
        describable = set(names)
    else:
        describable = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            if t.topic in describable:
                error, epoch, end = rm.last_offset_for_leader_epoch(
                    t.topic, p.partition, p.leader_epoch, p.current_leader_epoch)
            else:
                error, epoch, end = Errors.TOPIC_AUTHORIZATION_FAILED, -1, -1
            parts.append(topic_cls.EpochEndOffset(error_code=error, partition=p.partition,
                                                  leader_epoch=epoch, end_offset=end))
        topics.append(topic_cls(topic=t.topic, partitions=parts))
    return cls(throttle_time_ms=0, topics=topics)
