"""Consumer group operations: ListGroups, DescribeGroups, DeleteGroups, OffsetFetch and
OffsetCommit (the bodies of ``KafkaAdminClient``'s group methods).

ListGroups goes to every broker (each knows the groups it coordinates); the others go to
the group's coordinator, found with FindCoordinator and found again when it moved.
Member assignments of "consumer" groups are decoded from the ConsumerProtocol bytes.

OffsetFetch and OffsetCommit are capped at v9: v10 names topics by id only.  Both are
sent with the fields of every version filled in (group_id/topics for v1-7, groups for
v8+); the codec writes only those the negotiated version has.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from millrace.client.admin._admin_network import (
    AdminNetwork,
    RetriableCallError,
    check_coordinator_error,
)
from millrace.client.admin.results import AdminResult, kafka_error
from millrace.client.admin.types import (
    ConsumerGroupDescription,
    ConsumerGroupListing,
    ConsumerGroupState,
    MemberAssignment,
    MemberDescription,
    OffsetAndMetadata,
)
from millrace.client.cluster import Node, TopicPartition
from millrace.common.errors import Errors, KafkaError, ProtocolDecodeError, for_code
from millrace.protocol import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)
from millrace.protocol.consumer_protocol import PROTOCOL_TYPE, decode_assignment

log = logging.getLogger(__name__)

OFFSET_API_MAX_VERSION = 9


# ---------------------------------------------------------------------- list
def list_groups(net: AdminNetwork, states: Iterable[str] | None, deadline_ms: int
                ) -> list[ConsumerGroupListing]:
    wanted = {s.lower() for s in states} if states else set()
    listings: dict[str, ConsumerGroupListing] = {}
    for node in net.cluster(deadline_ms).nodes:
        def attempt(node: Node = node) -> Any:
            body = ListGroupsRequest(states_filter=sorted(wanted))
            response, _ = net.send(body, deadline_ms, node)
            if response.error_code:
                error = for_code(response.error_code)(f"listing the groups of node {node.id}")
                if error.retriable:
                    raise RetriableCallError(error)
                raise error
            return response
        response = net.call(deadline_ms, attempt, f"listing the groups of node {node.id}")
        for g in response.groups:
            state = ConsumerGroupState.parse(g.group_state) if g.group_state else \
                ConsumerGroupState.UNKNOWN
            if wanted and state.value.lower() not in wanted:
                continue  # a broker before ListGroups v4 cannot filter
            listings[g.group_id] = ConsumerGroupListing(
                g.group_id, g.protocol_type == "", state, g.protocol_type,
                g.group_type or "classic")
    return sorted(listings.values(), key=lambda g: g.group_id)


# ---------------------------------------------------------------------- describe
def _assignment(group_id: str, member_id: str, protocol_type: str, data: bytes
                ) -> MemberAssignment:
    if protocol_type != PROTOCOL_TYPE or not data:
        return MemberAssignment()
    try:
        decoded = decode_assignment(data)
    except ProtocolDecodeError as e:
        log.warning("group %s member %s: undecodable assignment: %s", group_id, member_id, e)
        return MemberAssignment()
    return MemberAssignment(frozenset(decoded.partitions), decoded.user_data)


def _describe_one(net: AdminNetwork, group_id: str, deadline_ms: int
                  ) -> ConsumerGroupDescription:
    def attempt(node: Node) -> ConsumerGroupDescription:
        body = DescribeGroupsRequest(groups=[group_id], include_authorized_operations=False)
        response, _ = net.send(body, deadline_ms, node)
        g = next((g for g in response.groups if g.group_id == group_id), None)
        if g is None:
            raise KafkaError(f"group '{group_id}': no answer from the coordinator")
        check_coordinator_error(g.error_code, group_id)
        if g.error_code == Errors.GROUP_ID_NOT_FOUND:
            # As Kafka's admin client: an unknown group is described as Dead (v6+ says
            # GROUP_ID_NOT_FOUND, older versions answer state "Dead").
            return ConsumerGroupDescription(group_id, True, [], "", ConsumerGroupState.DEAD,
                                            node)
        if g.error_code:
            raise kafka_error(g.error_code, g.error_message, "group", group_id)
        members = [
            MemberDescription(m.member_id, m.group_instance_id, m.client_id,
                              m.client_host,
                              _assignment(group_id, m.member_id, g.protocol_type,
                                          m.member_assignment))
            for m in g.members]
        return ConsumerGroupDescription(
            group_id, g.protocol_type == "", members, g.protocol_data,
            ConsumerGroupState.parse(g.group_state), node, g.protocol_type)

    return net.group_call(group_id, deadline_ms, attempt, f"describing group '{group_id}'")


def describe_groups(net: AdminNetwork, group_ids: Iterable[str], deadline_ms: int
                    ) -> AdminResult[str, ConsumerGroupDescription]:
    result: AdminResult[str, ConsumerGroupDescription] = AdminResult()
    for group_id in dict.fromkeys(group_ids):
        try:
            result.set_value(group_id, _describe_one(net, group_id, deadline_ms))
        except KafkaError as e:
            result.set_error(group_id, e)
    return result


# ---------------------------------------------------------------------- delete
def delete_groups(net: AdminNetwork, group_ids: Iterable[str], deadline_ms: int
                  ) -> AdminResult[str, None]:
    result: AdminResult[str, None] = AdminResult()
    for group_id in dict.fromkeys(group_ids):
        def attempt(node: Node, group_id: str = group_id) -> None:
            response, _ = net.send(DeleteGroupsRequest(groups_names=[group_id]), deadline_ms,
                                   node)
            r = next((r for r in response.results if r.group_id == group_id), None)
            if r is None:
                raise KafkaError(f"group '{group_id}': no answer from the coordinator")
            check_coordinator_error(r.error_code, group_id)
            if r.error_code:
                message = {Errors.GROUP_ID_NOT_FOUND: "The group does not exist",
                           Errors.NON_EMPTY_GROUP: "The group is not empty"}.get(r.error_code)
                raise kafka_error(r.error_code, message, "group", group_id)
        try:
            net.group_call(group_id, deadline_ms, attempt, f"deleting group '{group_id}'")
            result.set_value(group_id, None)
        except KafkaError as e:
            result.set_error(group_id, e)
    return result


# ---------------------------------------------------------------------- offsets
def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in partitions:
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


def fetch_offsets(net: AdminNetwork, group_id: str,
                  partitions: Iterable[TopicPartition] | None, require_stable: bool,
                  deadline_ms: int) -> dict[TopicPartition, OffsetAndMetadata]:
    """Committed offsets (partitions without one are left out)."""
    wanted = None if partitions is None else _by_topic(partitions)

    def attempt(node: Node) -> dict[TopicPartition, OffsetAndMetadata]:
        old_cls = OffsetFetchRequest.OffsetFetchRequestTopic
        new_cls = OffsetFetchRequest.OffsetFetchRequestGroup
        body = OffsetFetchRequest(
            group_id=group_id,
            topics=None if wanted is None else [
                old_cls(name=t, partition_indexes=ps) for t, ps in wanted.items()],
            groups=[new_cls(group_id=group_id, topics=None if wanted is None else [
                new_cls.OffsetFetchRequestTopics(name=t, partition_indexes=ps)
                for t, ps in wanted.items()])],
            require_stable=require_stable)
        response, version = net.send(body, deadline_ms, node,
                                     max_version=OFFSET_API_MAX_VERSION)
        if version >= 8:
            g = next((g for g in response.groups if g.group_id == group_id), None)
            if g is None:
                raise KafkaError(f"group '{group_id}': no answer from the coordinator")
            code, topics = g.error_code, g.topics
        else:
            code, topics = response.error_code, response.topics
        check_coordinator_error(code, group_id)
        if code:
            raise kafka_error(code, None, "group", group_id)
        out: dict[TopicPartition, OffsetAndMetadata] = {}
        for t in topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if p.error_code:
                    error = kafka_error(p.error_code, None, "partition", tp)
                    if error.retriable:
                        raise RetriableCallError(error)
                    raise error
                if p.committed_offset >= 0:
                    out[tp] = OffsetAndMetadata(
                        p.committed_offset, p.metadata or "",
                        p.committed_leader_epoch if p.committed_leader_epoch >= 0 else None)
        return out

    return net.group_call(group_id, deadline_ms, attempt,
                          f"fetching the offsets of group '{group_id}'")


def commit_offsets(net: AdminNetwork, group_id: str,
                   offsets: Mapping[TopicPartition, OffsetAndMetadata], deadline_ms: int
                   ) -> AdminResult[TopicPartition, None]:
    """Commit as an outsider (generation -1, no member id): the group must be empty."""
    by_topic: dict[str, dict[int, OffsetAndMetadata]] = {}
    for tp, om in offsets.items():
        by_topic.setdefault(tp.topic, {})[tp.partition] = om

    def attempt(node: Node) -> dict[TopicPartition, int]:
        t_cls = OffsetCommitRequest.OffsetCommitRequestTopic
        body = OffsetCommitRequest(
            group_id=group_id, generation_id_or_member_epoch=-1, member_id="",
            topics=[t_cls(name=topic, partitions=[
                t_cls.OffsetCommitRequestPartition(
                    partition_index=p, committed_offset=om.offset,
                    committed_leader_epoch=-1 if om.leader_epoch is None else om.leader_epoch,
                    committed_metadata=om.metadata)
                for p, om in parts.items()]) for topic, parts in by_topic.items()])
        response, _ = net.send(body, deadline_ms, node, max_version=OFFSET_API_MAX_VERSION)
        codes = {TopicPartition(t.name, p.partition_index): p.error_code
                 for t in response.topics for p in t.partitions}
        for code in codes.values():
            check_coordinator_error(code, group_id)
        return codes

    codes = net.group_call(group_id, deadline_ms, attempt,
                           f"committing offsets for group '{group_id}'")
    result: AdminResult[TopicPartition, None] = AdminResult()
    for tp in offsets:
        code = codes.get(tp)
        if code is None:
            result.set_error(tp, KafkaError(f"partition '{tp}': no answer from the coordinator"))
        elif code in (Errors.UNKNOWN_MEMBER_ID, Errors.ILLEGAL_GENERATION):
            result.set_error(tp, for_code(code)(
                f"group '{group_id}' has active members: its offsets can only be changed "
                "while it is empty (stop its consumers first)"))
        elif code:
            result.set_error(tp, kafka_error(code, None, "partition", tp))
        else:
            result.set_value(tp, None)
    return result
