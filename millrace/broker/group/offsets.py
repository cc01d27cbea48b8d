"""OffsetCommit, OffsetFetch and offset expiration over a coordinator's groups.

Java counterpart: the offset half of Kafka's classic ``GroupCoordinator`` /
``GroupMetadataManager`` (``OffsetMetadataManager`` in the rewritten coordinator).

Who may commit:

* a member of the current generation of a Stable or PreparingRebalance group (its commit
  also counts as a sign of life);
* anyone with generation -1, no member id and no instance id while the group is Empty --
  "simple" consumers that assign partitions themselves and use Kafka only to store
  offsets; such a commit to a group that does not exist creates it (when its first
  offset record is replayed).

Otherwise: FENCED_INSTANCE_ID / UNKNOWN_MEMBER_ID (not a current member),
ILLEGAL_GENERATION (stale generation, or any generation for an unknown group),
REBALANCE_IN_PROGRESS (CompletingRebalance: the member must finish the rebalance first).

TxnOffsetCommit (KIP-98; KIP-447 from v3): a transactional producer commits a group's
offsets inside its transaction.  Generation -1 passes (pre-KIP-447 producers, and groups
that do not exist yet, which are created Empty as for simple consumers); otherwise the
member id / instance id / generation must match the group's current ones, else
UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID / ILLEGAL_GENERATION -- a zombie that lost its
partitions in a rebalance cannot commit for them.  The offsets are written as one
transactional batch of the producer and stay pending until its marker (see
``group_metadata_manager``).  OffsetFetch with ``require_stable`` (v7+) answers
UNSTABLE_OFFSET_COMMIT for a partition with a pending transactional offset; without it,
the last committed offset.

Expiration (``offsets.retention.minutes``): an offset committed with an explicit retention
(OffsetCommit v2-4) expires at its own expire timestamp; otherwise offsets of an Empty
group expire once the group has been Empty (consumer groups) or the offset has been
unchanged (simple groups) for the retention time.  An offset with a pending
transactional commit does not expire, and a group with open transactions is not
deleted; an Empty group left without offsets is deleted (group tombstone).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from millrace.broker.group.group_metadata import GroupMetadata, GroupState
from millrace.broker.group.group_metadata_manager import CoordinatorResult, OffsetsRecord
from millrace.broker.group.records import OffsetAndMetadata
from millrace.common.errors import Errors
from millrace.protocol import OffsetCommitResponse, OffsetFetchResponse, TxnOffsetCommitResponse

if TYPE_CHECKING:
    from millrace.broker.group.coordinator import GroupCoordinator


def _commit_error(coord: GroupCoordinator, group: GroupMetadata | None, generation: int,
                  member_id: str, instance_id: str | None) -> int:
    if group is None:
        return Errors.NONE if generation < 0 else Errors.ILLEGAL_GENERATION
    if group.is_(GroupState.DEAD):
        return Errors.COORDINATOR_NOT_AVAILABLE
    if generation >= 0 or member_id or instance_id is not None:
        err = coord.validate_member(group, member_id, instance_id)
        if err:
            return err
        if generation != group.generation_id:
            return Errors.ILLEGAL_GENERATION
    elif not group.is_(GroupState.EMPTY):
        return Errors.UNKNOWN_MEMBER_ID    # only members commit to a group with members
    if group.is_(GroupState.COMPLETING_REBALANCE):
        return Errors.REBALANCE_IN_PROGRESS
    return Errors.NONE


def commit_offsets(coord: GroupCoordinator, body: Any, version: int, now_ms: int,
                   unknown: frozenset[tuple[str, int]]) -> CoordinatorResult:
    group_id: str = body.group_id
    generation: int = body.generation_id_or_member_epoch
    member_id: str = body.member_id or ""
    instance_id = body.group_instance_id if version >= 7 else None
    group = coord.groups.get(group_id)
    err = coord.coordinator_error(group_id) if group_id is not None else Errors.INVALID_GROUP_ID
    err = err or _commit_error(coord, group, generation, member_id, instance_id)
    if not err and group is not None and member_id in group.members:
        coord.touch(group.members[member_id], now_ms)
    retention = body.retention_time_ms if 2 <= version <= 4 else -1
    expire = now_ms + retention if retention >= 0 else None
    t_cls = OffsetCommitResponse.OffsetCommitResponseTopic
    records, topics = _commit_topics(
        coord, group_id, body.topics,
        err or (Errors.UNKNOWN_TOPIC_ID if version >= 10 else Errors.NONE),  # ids unresolved
        unknown,
        lambda p: OffsetAndMetadata(p.committed_offset, p.committed_leader_epoch,
                                    p.committed_metadata or "", now_ms, expire),
        t_cls.OffsetCommitResponsePartition,
        lambda t, parts: t_cls(name=t.name, topic_id=t.topic_id, partitions=parts))
    response = OffsetCommitResponse(topics=topics)
    return CoordinatorResult(records, response, on_failure=_fail_accepted(response))


def _txn_commit_error(coord: GroupCoordinator, group: GroupMetadata | None, generation: int,
                      member_id: str, instance_id: str | None) -> int:
    """Kafka's ``validateOffsetCommit`` for a transactional commit (KIP-447)."""
    if group is not None and group.is_(GroupState.DEAD):
        return Errors.COORDINATOR_NOT_AVAILABLE
    if generation < 0 and (group is None or group.is_(GroupState.EMPTY)):
        return Errors.NONE
    if generation >= 0 or member_id or instance_id is not None:
        if group is None:     # created Empty: nobody is a member of it
            return Errors.UNKNOWN_MEMBER_ID
        err = coord.validate_member(group, member_id, instance_id)
        if err:
            return err
        if generation != group.generation_id:
            return Errors.ILLEGAL_GENERATION
    return Errors.NONE


def txn_commit_offsets(coord: GroupCoordinator, body: Any, version: int, now_ms: int,
                       unknown: frozenset[tuple[str, int]]) -> CoordinatorResult:
    """TxnOffsetCommit: validate, and the offset records as one transactional batch of
    the producer (``CoordinatorResult.producer``); partitions in ``unknown`` are
    refused with UNKNOWN_TOPIC_OR_PARTITION."""
    group_id: str = body.group_id
    if version >= 3:
        generation: int = body.generation_id
        member_id: str = body.member_id or ""
        instance_id: str | None = body.group_instance_id
    else:
        generation, member_id, instance_id = -1, "", None
    err = coord.coordinator_error(group_id) if group_id else Errors.INVALID_GROUP_ID
    if not err and body.producer_id < 0:
        err = Errors.INVALID_PRODUCER_ID_MAPPING
    if not err and body.producer_epoch < 0:
        err = Errors.INVALID_PRODUCER_EPOCH
    err = err or _txn_commit_error(coord, coord.groups.get(group_id), generation, member_id,
                                   instance_id)
    t_cls = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
    records, topics = _commit_topics(
        coord, group_id, body.topics, err, unknown,
        lambda p: OffsetAndMetadata(p.committed_offset,
                                    p.committed_leader_epoch if version >= 2 else -1,
                                    p.committed_metadata or "", now_ms),
        t_cls.TxnOffsetCommitResponsePartition,
        lambda t, parts: t_cls(name=t.name, partitions=parts))
    response = TxnOffsetCommitResponse(throttle_time_ms=0, topics=topics)
    return CoordinatorResult(records, response, on_failure=_fail_accepted(response),
                             producer=(body.producer_id, body.producer_epoch) if records
                             else None)


def _commit_topics(coord: GroupCoordinator, group_id: str, topics: list[Any], error: int,
                   unknown: frozenset[tuple[str, int]],
                   offset_of: Callable[[Any], OffsetAndMetadata],
                   response_partition: Callable[..., Any],
                   response_topic: Callable[[Any, list[Any]], Any]
                   ) -> tuple[list[OffsetsRecord], list[Any]]:
    """The per-partition half that OffsetCommit and TxnOffsetCommit share: each asked
    partition's error -- ``error`` for all when set, else UNKNOWN_TOPIC_OR_PARTITION for
    ``unknown``, OFFSET_METADATA_TOO_LARGE past ``offset.metadata.max.bytes`` -- and the
    offset record (``offset_of`` the request partition) of each accepted one.  Returns
    the records and the response topics, shaped by ``response_partition(partition_index,
    error_code)`` and ``response_topic(request topic, partitions)``."""
    records: list[OffsetsRecord] = []
    response_topics = []
    for t in topics:
        parts = []
        for p in t.partitions:
            if error:
                e = error
            elif (t.name, p.partition_index) in unknown:
                e = Errors.UNKNOWN_TOPIC_OR_PARTITION
            elif len((p.committed_metadata or "").encode()) > coord.config.offset_metadata_max_bytes:
                e = Errors.OFFSET_METADATA_TOO_LARGE
            else:
                e = Errors.NONE
                records.append(coord.offset_record(group_id, t.name, p.partition_index,
                                                   offset_of(p)))
            parts.append(response_partition(partition_index=p.partition_index, error_code=e))
        response_topics.append(response_topic(t, parts))
    return records, response_topics


def _fail_accepted(response: Any) -> Callable[[int], Any]:
    """A commit's ``on_failure``: when its write fails, every partition it accepted
    answers the write's error; the partitions it refused keep their own."""
    def failed(error: int) -> Any:
        for topic in response.topics:
            for part in topic.partitions:
                if part.error_code == Errors.NONE:
                    part.error_code = error
        return response
    return failed


_Row = tuple[int, int, int, str, int]   # partition, offset, leader epoch, metadata, error


def _committed(group: GroupMetadata | None, topic: str, partition: int,
               require_stable: bool) -> tuple[int, int, str, int]:
    if require_stable and group is not None and group.pending_txn_offsets and (
            group.has_pending_txn_offset((topic, partition))):
        return -1, -1, "", Errors.UNSTABLE_OFFSET_COMMIT
    off = group.offsets.get((topic, partition)) if group is not None else None
    if off is None:
        return -1, -1, "", Errors.NONE
    return off.offset, off.leader_epoch, off.metadata, Errors.NONE


def _group_offsets(group: GroupMetadata | None, topics: list[Any] | None,
                   require_stable: bool = False) -> list[tuple[str, list[_Row]]]:
    """[(topic, [(partition, offset, leader epoch, metadata, error)])]; topics None = all
    committed ones.  ``require_stable``: UNSTABLE_OFFSET_COMMIT where a transaction
    holds a pending offset."""
    if topics is None:
        by_topic: dict[str, list[_Row]] = defaultdict(list)
        for topic, partition in sorted(group.offsets if group else {}):
            by_topic[topic].append((partition, *_committed(group, topic, partition,
                                                           require_stable)))
        return list(by_topic.items())
    return [(t.name, [(p, *_committed(group, t.name, p, require_stable))
                      for p in t.partition_indexes])
            for t in topics]


def fetch_offsets(coord: GroupCoordinator, body: Any, version: int) -> Any:
    if version >= 8:
        groups = []
        g_cls = OffsetFetchResponse.OffsetFetchResponseGroup
        t_cls = g_cls.OffsetFetchResponseTopics
        p_cls = t_cls.OffsetFetchResponsePartitions
        for req in body.groups:
            err = coord.coordinator_error(req.group_id)
            rows = [] if err else _group_offsets(coord.groups.get(req.group_id), req.topics,
                                                 body.require_stable)
            groups.append(g_cls(group_id=req.group_id, error_code=err, topics=[
                t_cls(name=name, partitions=[p_cls(
                    partition_index=p, committed_offset=o, committed_leader_epoch=ep,
                    metadata=md, error_code=e) for p, o, ep, md, e in parts])
                for name, parts in rows]))
        return OffsetFetchResponse(groups=groups)
    t_cls = OffsetFetchResponse.OffsetFetchResponseTopic
    p_cls = t_cls.OffsetFetchResponsePartition
    err = coord.coordinator_error(body.group_id)
    topics = body.topics if version >= 2 else (body.topics or [])
    if err and version >= 2:
        return OffsetFetchResponse(error_code=err, topics=[])
    if err:  # v0-1 have no top-level error: every asked partition carries it
        return OffsetFetchResponse(topics=[t_cls(name=t.name, partitions=[p_cls(
            partition_index=p, committed_offset=-1, metadata="", error_code=err)
            for p in t.partition_indexes]) for t in topics])
    rows = _group_offsets(coord.groups.get(body.group_id), topics,
                          version >= 7 and body.require_stable)
    return OffsetFetchResponse(error_code=Errors.NONE, topics=[
        t_cls(name=name, partitions=[p_cls(
            partition_index=p, committed_offset=o, committed_leader_epoch=ep, metadata=md,
            error_code=e) for p, o, ep, md, e in parts])
        for name, parts in rows])


def expire_offsets(coord: GroupCoordinator, now_ms: int) -> list[OffsetsRecord]:
    retention = coord.config.offsets_retention_ms
    records: list[OffsetsRecord] = []
    for group in list(coord.groups.values()):
        if group.partition not in coord.hosted or group.is_(GroupState.DEAD):
            continue
        empty = group.is_(GroupState.EMPTY)
        expired = []
        for (topic, partition), off in group.offsets.items():
            if group.pending_txn_offsets and group.has_pending_txn_offset((topic, partition)):
                gone = False        # a transaction is committing it: not yet
            elif off.expire_timestamp is not None:
                gone = now_ms >= off.expire_timestamp
            elif empty:
                base = off.commit_timestamp
                if group.protocol_type and group.state_timestamp_ms is not None:
                    base = group.state_timestamp_ms
                gone = now_ms - base >= retention
            else:
                gone = False
            if gone:
                expired.append(coord.offset_record(group.group_id, topic, partition, None))
        records += expired
        if (empty and len(expired) == len(group.offsets) and not group.members
                and not group.pending_members and not group.pending_txn_offsets):
            records += coord.group_tombstones(group)[-1:]
    return records
