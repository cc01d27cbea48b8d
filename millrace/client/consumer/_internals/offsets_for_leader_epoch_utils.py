"""The consumer's OffsetsForLeaderEpoch request and the reading of its answer (Java
``OffsetsForLeaderEpochUtils``); no I/O.

KIP-320: to validate a position after a leader change, the consumer asks the new leader
where the epoch of the last record it read ends in the leader's log.  The request
(key 23) is sent as a consumer: version 3 or later, ``replica_id`` -1 (the broker then
answers only as the partition's leader), ``current_leader_epoch`` the epoch the consumer
believes the leader has, so a leader on another epoch answers FENCED_LEADER_EPOCH or
UNKNOWN_LEADER_EPOCH instead of a wrong end offset.  Each partition's answer is the
largest epoch at or below the one asked for and the offset where the next epoch starts
(the log end for the latest epoch), or (-1, -1) when the leader has no such epoch.

Partition errors that mean "ask again once the metadata is fresh" (leadership moved or is
settling) put the partition in ``partitions_to_retry``; TOPIC_AUTHORIZATION_FAILED fails
the whole request.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import NamedTuple

from millrace.client.cluster import TopicPartition
from millrace.client.consumer._internals.subscription_state import FetchPosition
from millrace.client.metadata import LeaderAndEpoch
from millrace.common.errors import Errors, TopicAuthorizationFailedError, for_code
from millrace.protocol.types import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse

log = logging.getLogger(__name__)

CONSUMER_REPLICA_ID = -1
MIN_VERSION = 3  # the first with replica_id: older versions are follower-only
_RETRY = frozenset({
    Errors.NOT_LEADER_OR_FOLLOWER, Errors.REPLICA_NOT_AVAILABLE, Errors.KAFKA_STORAGE_ERROR,
    Errors.OFFSET_NOT_AVAILABLE, Errors.LEADER_NOT_AVAILABLE, Errors.FENCED_LEADER_EPOCH,
    Errors.UNKNOWN_LEADER_EPOCH, Errors.UNKNOWN_TOPIC_OR_PARTITION,
})


class EpochEndOffset(NamedTuple):
    leader_epoch: int
    end_offset: int


class OffsetForEpochResult(NamedTuple):
    end_offsets: dict[TopicPartition, EpochEndOffset]
    partitions_to_retry: set[TopicPartition]


def prepare_request(positions: Mapping[TopicPartition, tuple[FetchPosition, LeaderAndEpoch]]
                    ) -> OffsetForLeaderEpochRequest:
    """One request for the positions (each with the leader it is checked against);
    positions without an epoch have nothing to validate and are left out."""
    topics: dict[str, list[OffsetForLeaderEpochRequest.OffsetForLeaderTopic
                           .OffsetForLeaderPartition]] = {}
    partition_cls = OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition
    for tp, (position, leader) in positions.items():
        if position.offset_epoch is None:
            continue
        topics.setdefault(tp.topic, []).append(partition_cls(
            partition=tp.partition, leader_epoch=position.offset_epoch,
            current_leader_epoch=leader.epoch if leader.epoch is not None else -1))
    return OffsetForLeaderEpochRequest(
        replica_id=CONSUMER_REPLICA_ID,
        topics=[OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=t, partitions=ps)
                for t, ps in topics.items()])


def handle_response(asked: Mapping[TopicPartition, object],
                    response: OffsetForLeaderEpochResponse) -> OffsetForEpochResult:
    """The end offsets found and the partitions to ask again (every partition asked
    for and not answered without error, except unauthorized ones, which raise)."""
    retry = set(asked)
    end_offsets: dict[TopicPartition, EpochEndOffset] = {}
    unauthorized: set[str] = set()
    for topic in response.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.topic, p.partition)
            if tp not in asked:
                log.warning("OffsetsForLeaderEpoch answered %s, which was not asked for", tp)
                continue
            error = p.error_code
            if error == Errors.NONE:
                log.debug("OffsetsForLeaderEpoch for %s: epoch %d ends at %d", tp,
                          p.leader_epoch, p.end_offset)
                end_offsets[tp] = EpochEndOffset(p.leader_epoch, p.end_offset)
                retry.discard(tp)
            elif error == Errors.TOPIC_AUTHORIZATION_FAILED:
                unauthorized.add(tp.topic)
                retry.discard(tp)
            elif error in _RETRY:
                log.debug("OffsetsForLeaderEpoch for %s failed with %s; retrying", tp,
                          for_code(error).name)
            else:
                log.warning("OffsetsForLeaderEpoch for %s failed with %s; retrying", tp,
                            for_code(error).name)
    if unauthorized:
        raise TopicAuthorizationFailedError(
            f"Not authorized to access topics: {sorted(unauthorized)}")
    return OffsetForEpochResult(end_offsets, retry)
