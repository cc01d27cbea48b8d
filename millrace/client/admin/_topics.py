"""Topic and partition operations: CreateTopics, DeleteTopics, Metadata, CreatePartitions,
ListOffsets, DeleteRecords and DescribeCluster (the bodies of ``KafkaAdminClient``'s
methods of the same names).

Topic changes go to the controller; ListOffsets and DeleteRecords go to each partition's
leader, found with a MetadataRequest for just those topics.  A partition answered with a
retriable error (leader moved, leader not available) is tried again, with fresh leaders,
until the operation's deadline.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from millrace.client.admin._admin_network import AdminNetwork
from millrace.client.admin.results import AdminResult, IllegalArgumentError, kafka_error
from millrace.client.admin.types import (
    ClusterDescription,
    ListOffsetsResultInfo,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    TopicDescription,
    TopicListing,
    TopicPartitionInfo,
)
from millrace.client.cluster import Node, TopicPartition
from millrace.common.errors import Errors, KafkaError, UnsupportedVersionError, for_code
from millrace.protocol import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    ListOffsetsRequest,
    MetadataRequest,
)

ZERO_UUID = uuid.UUID(int=0)
BROKER_ENDPOINT = 1


def _remaining(net: AdminNetwork, deadline_ms: int) -> int:
    return max(min(net.request_timeout_ms, deadline_ms - net.now()), 0)


# ---------------------------------------------------------------------- metadata
def fetch_metadata(net: AdminNetwork, topics: list[str] | None, deadline_ms: int) -> Any:
    """A MetadataResponse for ``topics`` (None: every topic); never creates topics."""
    body = MetadataRequest(
        topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t)
                                            for t in topics],
        allow_auto_topic_creation=False)
    response, _ = net.send(body, deadline_ms)
    return response


def _node(nodes: Mapping[int, Node], node_id: int) -> Node:
    return nodes.get(node_id) or Node(node_id, "", -1)


def list_topics(net: AdminNetwork, list_internal: bool, deadline_ms: int
                ) -> list[TopicListing]:
    response = fetch_metadata(net, None, deadline_ms)
    out = [TopicListing(t.name, None if t.topic_id == ZERO_UUID else t.topic_id,
                        t.is_internal)
           for t in response.topics
           if t.name is not None and not t.error_code and (list_internal or not t.is_internal)]
    return sorted(out, key=lambda t: t.name)


def describe_topics(net: AdminNetwork, names: Iterable[str], deadline_ms: int
                    ) -> AdminResult[str, TopicDescription]:
    wanted = list(dict.fromkeys(names))
    result: AdminResult[str, TopicDescription] = AdminResult()
    if not wanted:
        return result
    response = fetch_metadata(net, wanted, deadline_ms)
    nodes = {b.node_id: Node(b.node_id, b.host, b.port, b.rack) for b in response.brokers}
    answered = {t.name: t for t in response.topics}
    for name in wanted:
        t = answered.get(name)
        if t is None:
            result.set_error(name, kafka_error(Errors.UNKNOWN_TOPIC_OR_PARTITION, None, "topic",
                                               name))
            continue
        if t.error_code:
            message = ("Topic does not exist" if t.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
                       else None)
            result.set_error(name, kafka_error(t.error_code, message, "topic", name))
            continue
        partitions = [
            TopicPartitionInfo(p.partition_index,
                               _node(nodes, p.leader_id) if p.leader_id >= 0 else None,
                               [_node(nodes, r) for r in p.replica_nodes],
                               [_node(nodes, r) for r in p.isr_nodes], p.leader_epoch)
            for p in sorted(t.partitions, key=lambda p: p.partition_index)]
        result.set_value(name, TopicDescription(
            name, None if t.topic_id == ZERO_UUID else t.topic_id, t.is_internal, partitions))
    return result


def describe_cluster(net: AdminNetwork, deadline_ms: int) -> ClusterDescription:
    try:
        response, _ = net.send(DescribeClusterRequest(endpoint_type=BROKER_ENDPOINT),
                               deadline_ms)
    except UnsupportedVersionError:
        meta = fetch_metadata(net, [], deadline_ms)  # Kafka < 2.8: Metadata says as much
        nodes = [Node(b.node_id, b.host, b.port, b.rack) for b in meta.brokers]
        by_id = {n.id: n for n in nodes}
        return ClusterDescription(meta.cluster_id, by_id.get(meta.controller_id), nodes)
    if response.error_code:
        raise for_code(response.error_code)(response.error_message or "describing the cluster")
    nodes = [Node(b.broker_id, b.host, b.port, b.rack) for b in response.brokers]
    by_id = {n.id: n for n in nodes}
    return ClusterDescription(response.cluster_id, by_id.get(response.controller_id), nodes)


# ---------------------------------------------------------------------- topic changes
def create_topics(net: AdminNetwork, new_topics: Iterable[NewTopic], validate_only: bool,
                  deadline_ms: int) -> AdminResult[str, None]:
    topics = list(new_topics)
    result: AdminResult[str, None] = AdminResult()
    if not topics:
        return result
    cls = CreateTopicsRequest.CreatableTopic
    creatable = []
    for t in topics:
        assignments = []
        if t.replica_assignment is not None:
            if t.num_partitions != -1 or t.replication_factor != -1:
                raise IllegalArgumentError(
                    f"topic '{t.name}': give either a replica assignment or partitions and "
                    "a replication factor, not both")
            assignments = [cls.CreatableReplicaAssignment(partition_index=p, broker_ids=b)
                           for p, b in sorted(t.replica_assignment.items())]
        creatable.append(cls(
            name=t.name, num_partitions=t.num_partitions,
            replication_factor=t.replication_factor, assignments=assignments,
            configs=[cls.CreatableTopicConfig(name=k, value=v) for k, v in t.configs.items()]))
    body = CreateTopicsRequest(topics=creatable, timeout_ms=_remaining(net, deadline_ms),
                               validate_only=validate_only)
    response, _ = net.send(body, deadline_ms, net.controller_or_any(deadline_ms))
    answered = {r.name: r for r in response.topics}
    for t in topics:
        r = answered.get(t.name)
        if r is None:
            result.set_error(t.name, KafkaError(f"topic '{t.name}': no answer from the broker"))
        elif r.error_code:
            result.set_error(t.name, kafka_error(r.error_code, r.error_message, "topic",
                                                 t.name))
        else:
            result.set_value(t.name, None)
    return result


def delete_topics(net: AdminNetwork, names: Iterable[str], deadline_ms: int
                  ) -> AdminResult[str, None]:
    wanted = list(dict.fromkeys(names))
    result: AdminResult[str, None] = AdminResult()
    if not wanted:
        return result
    body = DeleteTopicsRequest(
        topics=[DeleteTopicsRequest.DeleteTopicState(name=n) for n in wanted],
        topic_names=wanted, timeout_ms=_remaining(net, deadline_ms))
    response, _ = net.send(body, deadline_ms, net.controller_or_any(deadline_ms))
    answered = {r.name: r for r in response.responses}
    for name in wanted:
        r = answered.get(name)
        if r is None:
            result.set_error(name, KafkaError(f"topic '{name}': no answer from the broker"))
        elif r.error_code:
            message = r.error_message
            if r.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION:
                message = "Topic does not exist"
            result.set_error(name, kafka_error(r.error_code, message, "topic", name))
        else:
            result.set_value(name, None)
    return result


def create_partitions(net: AdminNetwork, new_partitions: Mapping[str, NewPartitions],
                      validate_only: bool, deadline_ms: int) -> AdminResult[str, None]:
    result: AdminResult[str, None] = AdminResult()
    if not new_partitions:
        return result
    cls = CreatePartitionsRequest.CreatePartitionsTopic
    body = CreatePartitionsRequest(
        topics=[cls(name=name, count=p.total_count,
                    assignments=None if p.new_assignments is None else [
                        cls.CreatePartitionsAssignment(broker_ids=b) for b in p.new_assignments])
                for name, p in new_partitions.items()],
        timeout_ms=_remaining(net, deadline_ms), validate_only=validate_only)
    response, _ = net.send(body, deadline_ms, net.controller_or_any(deadline_ms))
    answered = {r.name: r for r in response.results}
    for name in new_partitions:
        r = answered.get(name)
        if r is None:
            result.set_error(name, KafkaError(f"topic '{name}': no answer from the broker"))
        elif r.error_code:
            result.set_error(name, kafka_error(r.error_code, r.error_message, "topic", name))
        else:
            result.set_value(name, None)
    return result


# ---------------------------------------------------------------------- by partition leader
PartitionCall = Callable[[Node, dict[TopicPartition, Any]], dict[TopicPartition, Any]]


def _leaders(net: AdminNetwork, partitions: Iterable[TopicPartition], deadline_ms: int
             ) -> tuple[dict[TopicPartition, Node], dict[TopicPartition, KafkaError]]:
    wanted = list(partitions)
    response = fetch_metadata(net, sorted({tp.topic for tp in wanted}), deadline_ms)
    nodes = {b.node_id: Node(b.node_id, b.host, b.port, b.rack) for b in response.brokers}
    topics = {t.name: t for t in response.topics}
    leaders: dict[TopicPartition, Node] = {}
    errors: dict[TopicPartition, KafkaError] = {}
    for tp in wanted:
        t = topics.get(tp.topic)
        code = Errors.UNKNOWN_TOPIC_OR_PARTITION if t is None else t.error_code
        if not code:
            assert t is not None
            p = next((p for p in t.partitions if p.partition_index == tp.partition), None)
            if p is None:
                code = Errors.UNKNOWN_TOPIC_OR_PARTITION
            elif p.leader_id < 0 or p.leader_id not in nodes:
                code = Errors.LEADER_NOT_AVAILABLE
            else:
                leaders[tp] = nodes[p.leader_id]
        if code:
            errors[tp] = kafka_error(code, None, "partition", tp)
    return leaders, errors


def by_leader(net: AdminNetwork, requests: Mapping[TopicPartition, Any], deadline_ms: int,
              call: PartitionCall, what: str) -> AdminResult[TopicPartition, Any]:
    """Send each partition's request to its leader (``call(node, {tp: arg})`` answers
    ``{tp: value or KafkaError}``); retriable errors are retried until the deadline."""
    def attempt(pending: list[TopicPartition]
                ) -> tuple[dict[TopicPartition, Any], list[TopicPartition]]:
        leaders, errors = _leaders(net, pending, deadline_ms)
        groups: dict[Node, dict[TopicPartition, Any]] = {}
        for tp, node in leaders.items():
            groups.setdefault(node, {})[tp] = requests[tp]
        # A topic or partition the metadata does not know is final; a missing leader is not.
        retry = [tp for tp, e in errors.items() if e.code == Errors.LEADER_NOT_AVAILABLE]
        answers: dict[TopicPartition, Any] = dict(errors)
        for node, args in groups.items():
            for tp, value in call(node, args).items():
                if tp not in args:
                    continue
                if isinstance(value, KafkaError) and value.retriable:
                    retry.append(tp)
                answers[tp] = value
        return answers, retry

    return net.call_keys(requests, deadline_ms, attempt, lambda tp: f"{what} for {tp}")


def _by_topic(partitions: Mapping[TopicPartition, Any]) -> dict[str, dict[int, Any]]:
    out: dict[str, dict[int, Any]] = {}
    for tp, value in partitions.items():
        out.setdefault(tp.topic, {})[tp.partition] = value
    return out


def list_offsets(net: AdminNetwork, specs: Mapping[TopicPartition, OffsetSpec],
                 isolation_level: int, deadline_ms: int
                 ) -> AdminResult[TopicPartition, ListOffsetsResultInfo]:
    t_cls = ListOffsetsRequest.ListOffsetsTopic

    def call(node: Node, args: dict[TopicPartition, Any]) -> dict[TopicPartition, Any]:
        body = ListOffsetsRequest(
            replica_id=-1, isolation_level=isolation_level,
            topics=[t_cls(name=topic, partitions=[
                t_cls.ListOffsetsPartition(partition_index=p, timestamp=spec.timestamp)
                for p, spec in parts.items()]) for topic, parts in _by_topic(args).items()],
            timeout_ms=_remaining(net, deadline_ms))
        response, _ = net.send(body, deadline_ms, node)
        out: dict[TopicPartition, Any] = {}
        for t in response.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if p.error_code:
                    out[tp] = kafka_error(p.error_code, None, "partition", tp)
                else:
                    out[tp] = ListOffsetsResultInfo(
                        p.offset, p.timestamp, p.leader_epoch if p.leader_epoch >= 0 else None)
        for tp in args:
            out.setdefault(tp, KafkaError(f"partition '{tp}': no answer from the broker"))
        return out

    return by_leader(net, specs, deadline_ms, call, "listing offsets")


def delete_records(net: AdminNetwork, before: Mapping[TopicPartition, int], deadline_ms: int
                   ) -> AdminResult[TopicPartition, int]:
    t_cls = DeleteRecordsRequest.DeleteRecordsTopic

    def call(node: Node, args: dict[TopicPartition, Any]) -> dict[TopicPartition, Any]:
        body = DeleteRecordsRequest(
            topics=[t_cls(name=topic, partitions=[
                t_cls.DeleteRecordsPartition(partition_index=p, offset=offset)
                for p, offset in parts.items()]) for topic, parts in _by_topic(args).items()],
            timeout_ms=_remaining(net, deadline_ms))
        response, _ = net.send(body, deadline_ms, node)
        out: dict[TopicPartition, Any] = {}
        for t in response.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                out[tp] = (kafka_error(p.error_code, None, "partition", tp) if p.error_code
                           else p.low_watermark)
        for tp in args:
            out.setdefault(tp, KafkaError(f"partition '{tp}': no answer from the broker"))
        return out

    return by_leader(net, before, deadline_ms, call, "deleting records")
