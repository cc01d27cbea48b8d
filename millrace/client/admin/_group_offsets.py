"""Group offsets seen against the logs: lag, the ``--describe`` view and offset resets.

These compose the plain operations: OffsetFetch at the coordinator, ListOffsets at the
partition leaders, DescribeGroups for who owns what, OffsetCommit to move offsets.
Lag is ``log end offset - committed offset`` (read_uncommitted end offsets, as Kafka's
``kafka-consumer-groups``).  A reset refuses a group that has members -- their next commit
would undo it -- exactly as Kafka's tool does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from millrace.client.admin._admin_network import AdminNetwork
from millrace.client.admin._groups import commit_offsets, describe_groups, fetch_offsets
from millrace.client.admin._topics import describe_topics, list_offsets
from millrace.client.admin.offset_reset import OffsetResetSpec, PartitionOffsets, reset_offset
from millrace.client.admin.results import IllegalArgumentError
from millrace.client.admin.types import (
    ConsumerGroupOffsets,
    ConsumerGroupState,
    GroupOffset,
    MemberDescription,
    OffsetAndMetadata,
    OffsetSpec,
    PartitionAssignmentState,
)
from millrace.client.cluster import TopicPartition
from millrace.common.errors import GroupNotEmptyError

READ_UNCOMMITTED = 0


def _offsets(net: AdminNetwork, partitions: Iterable[TopicPartition], spec: OffsetSpec,
             deadline_ms: int, strict: bool) -> dict[TopicPartition, int]:
    """ListOffsets for ``partitions``; failed partitions raise (strict) or are left out."""
    specs = {tp: spec for tp in partitions}
    if not specs:
        return {}
    result = list_offsets(net, specs, READ_UNCOMMITTED, deadline_ms)
    if strict:
        return {tp: info.offset for tp, info in result.all().items()}
    return {tp: f.result().offset for tp, f in result.items() if f.exception() is None}


def list_group_offsets(net: AdminNetwork, group_id: str,
                       partitions: Iterable[TopicPartition] | None, include_lag: bool,
                       require_stable: bool, deadline_ms: int
                       ) -> dict[TopicPartition, GroupOffset]:
    committed = fetch_offsets(net, group_id, partitions, require_stable, deadline_ms)
    ends = (_offsets(net, committed, OffsetSpec.latest(), deadline_ms, strict=False)
            if include_lag else {})
    return {tp: GroupOffset(om.offset, om.metadata, om.leader_epoch, ends.get(tp))
            for tp, om in sorted(committed.items())}


def describe_group_offsets(net: AdminNetwork, group_id: str, deadline_ms: int
                           ) -> ConsumerGroupOffsets:
    group = describe_groups(net, [group_id], deadline_ms)[group_id].result()
    committed = fetch_offsets(net, group_id, None, False, deadline_ms)
    owners: dict[TopicPartition, MemberDescription] = {}
    for member in group.members:
        for tp in member.assignment.topic_partitions:
            owners[tp] = member
    partitions = sorted(set(committed) | set(owners))
    ends = _offsets(net, partitions, OffsetSpec.latest(), deadline_ms, strict=False)
    rows = []
    for tp in partitions:
        owner = owners.get(tp)
        om = committed.get(tp)
        rows.append(PartitionAssignmentState(
            group_id, tp.topic, tp.partition, None if om is None else om.offset, ends.get(tp),
            owner.member_id if owner else None, owner.host if owner else None,
            owner.client_id if owner else None))
    return ConsumerGroupOffsets(group, rows)


def _partitions_to_reset(net: AdminNetwork, topics: Iterable[str] | None,
                         partitions: Iterable[TopicPartition] | None,
                         committed: Mapping[TopicPartition, OffsetAndMetadata],
                         deadline_ms: int) -> list[TopicPartition]:
    chosen: set[TopicPartition] = set(partitions or ())
    names = list(topics or ())
    if names:
        described = describe_topics(net, names, deadline_ms).all()
        for name, description in described.items():
            chosen.update(TopicPartition(name, p.partition) for p in description.partitions)
    if partitions is None and topics is None:
        chosen = set(committed)  # --all-topics: every partition the group has an offset for
    return sorted(chosen)


def reset_group_offsets(net: AdminNetwork, group_id: str, spec: OffsetResetSpec,
                        topics: Iterable[str] | None, partitions: Iterable[TopicPartition] | None,
                        execute: bool, deadline_ms: int) -> dict[TopicPartition, int]:
    if not group_id:
        raise IllegalArgumentError("a group id is required")
    group = describe_groups(net, [group_id], deadline_ms)[group_id].result()
    if group.state not in (ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD):
        raise GroupNotEmptyError(
            f"Assignments can only be reset if the group '{group_id}' is inactive, but the "
            f"current state is {group.state.value}.")
    committed = fetch_offsets(net, group_id, None, False, deadline_ms)
    targets = _partitions_to_reset(net, topics, partitions, committed, deadline_ms)
    if not targets:
        return {}
    earliest = _offsets(net, targets, OffsetSpec.earliest(), deadline_ms, strict=True)
    latest = _offsets(net, targets, OffsetSpec.latest(), deadline_ms, strict=True)
    by_time = (_offsets(net, targets, OffsetSpec.for_timestamp(spec.value), deadline_ms,
                        strict=True) if spec.needs_timestamp_lookup else {})
    new_offsets = {}
    for tp in targets:
        om = committed.get(tp)
        known = PartitionOffsets(earliest[tp], latest[tp], None if om is None else om.offset,
                                 by_time.get(tp))
        new_offsets[tp] = reset_offset(spec, tp, known)
    if execute:
        commit_offsets(net, group_id, {tp: OffsetAndMetadata(o) for tp, o in new_offsets.items()},
                       deadline_ms).all()
    return new_offsets
