"""Partition reassignment (KIP-455): AlterPartitionReassignments (key 45) and
ListPartitionReassignments (key 46), the bodies of
``KafkaAdminClient.alter_partition_reassignments`` / ``list_partition_reassignments`` and
of ``millrace reassign-partitions``.

Only the active controller reassigns, so both go to the controller the metadata names
and are resent after NOT_CONTROLLER (see ``_leaders``).  An accepted reassignment is only
*submitted*: the controller adds the new replicas, waits until they are in the ISR, then
moves leadership if needed and removes the old replicas; listing shows it until then.

Per partition the alter call yields None (submitted) or Kafka's exception:
UnknownTopicOrPartitionError, InvalidReplicaAssignmentError (empty or duplicate replicas,
a broker that is not alive), NoReassignmentInProgressError (a cancel of nothing) and,
when ``allow_replication_factor_change`` is false (v1, KIP-1066),
InvalidReplicationFactorError.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from millrace.client.admin._admin_network import AdminNetwork
from millrace.client.admin.results import AdminResult, kafka_error
from millrace.client.admin.types import PartitionReassignment
from millrace.client.cluster import TopicPartition
from millrace.common.errors import KafkaError, error_name
from millrace.protocol import (
    AlterPartitionReassignmentsRequest,
    ListPartitionReassignmentsRequest,
)

ALTER = "altering partition reassignments"
LIST = "listing partition reassignments"


def alter_partition_reassignments(
        net: AdminNetwork, reassignments: Mapping[TopicPartition, Sequence[int] | None],
        allow_replication_factor_change: bool, deadline_ms: int
) -> AdminResult[TopicPartition, None]:
    """Per partition None (submitted) or the error; a None target cancels."""
    result: AdminResult[TopicPartition, None] = AdminResult()
    wanted = dict(reassignments)
    if not wanted:
        return result
    by_topic: dict[str, list[AlterPartitionReassignmentsRequest.ReassignableTopic.
                             ReassignablePartition]] = {}
    t_cls = AlterPartitionReassignmentsRequest.ReassignableTopic
    for tp, target in wanted.items():
        by_topic.setdefault(tp.topic, []).append(t_cls.ReassignablePartition(
            partition_index=tp.partition, replicas=None if target is None else list(target)))

    def attempt() -> list[tuple[TopicPartition, KafkaError | None]]:
        body = AlterPartitionReassignmentsRequest(
            timeout_ms=max(min(net.request_timeout_ms, deadline_ms - net.now()), 0),
            allow_replication_factor_change=allow_replication_factor_change,
            topics=[t_cls(name=t, partitions=ps) for t, ps in by_topic.items()])
        response, _version = net.send_to_controller(
            body, deadline_ms, ALTER, min_version=None if allow_replication_factor_change else 1)
        return [(TopicPartition(t.name, p.partition_index),
                 _error(TopicPartition(t.name, p.partition_index), p.error_code,
                        p.error_message))
                for t in response.responses for p in t.partitions]

    answered = dict(net.call(deadline_ms, attempt, ALTER))
    result.settle(wanted, answered, None, "no answer from the controller")
    return result


def list_partition_reassignments(net: AdminNetwork,
                                 partitions: Iterable[TopicPartition] | None,
                                 deadline_ms: int) -> dict[TopicPartition, PartitionReassignment]:
    """The ongoing reassignments among ``partitions`` (None: all of them)."""
    wanted = None if partitions is None else list(dict.fromkeys(partitions))
    if wanted is not None and not wanted:
        return {}
    by_topic: dict[str, list[int]] = {}
    for tp in wanted or ():
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    t_cls = ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics

    def attempt() -> dict[TopicPartition, PartitionReassignment]:
        body = ListPartitionReassignmentsRequest(
            timeout_ms=max(min(net.request_timeout_ms, deadline_ms - net.now()), 0),
            topics=None if wanted is None else [
                t_cls(name=t, partition_indexes=ps) for t, ps in by_topic.items()])
        response, _version = net.send_to_controller(body, deadline_ms, LIST)
        return {TopicPartition(t.name, p.partition_index): PartitionReassignment(
                    tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas))
                for t in response.topics for p in t.partitions}

    return net.call(deadline_ms, attempt, LIST)


def _error(tp: TopicPartition, code: int, message: str | None) -> KafkaError | None:
    if not code:
        return None
    # a message that only repeats the error's name says nothing the exception does not
    return kafka_error(code, None if message == error_name(code) else message, "partition", tp)
