"""ControlledShutdown (7), ElectLeaders (43), AlterPartitionReassignments (45) and
ListPartitionReassignments (46): requests only the active controller answers.

Both run as events of the controller (``ControllerService.run_event``), one at a time
with every other controller event.  A broker that is not the active controller answers
NOT_CONTROLLER so the sender looks the controller up again (Kafka's admin client does;
a shutting-down broker asks the controller named by its metadata).

- ControlledShutdown: the controller moves leadership of the broker's partitions to other
  ISR members and takes it out of their ISRs; the answer lists the partitions it still
  leads (those without another replica), and the broker retries until none are left.
- ElectLeaders: preferred (the first assigned replica, if live and in sync) or unclean
  (any live replica when no ISR member is) elections, per partition, with Kafka's errors
  (ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE).
- AlterPartitionReassignments (KIP-455): per partition a target replica list, or null to
  cancel; the answer says per partition whether the reassignment was submitted (it then
  runs in the background until the new replicas are in sync) or why not.  v1 (KIP-1066)
  may forbid a change of replication factor.
- ListPartitionReassignments: the reassignments in progress, with the current replica set
  and the replicas being added and removed.

Authorization comes first (Kafka 3.9's ``KafkaApis``), before the controller is asked:
ControlledShutdown needs ClusterAction on the Cluster, ElectLeaders and
AlterPartitionReassignments Alter on it, ListPartitionReassignments Describe on it.
Refused, each answers CLUSTER_AUTHORIZATION_FAILED in every error slot of its response
(ElectLeaders: on every partition named, and top-level from v1) and asks the controller
nothing.
"""

from __future__ import annotations

from millrace.broker.context import RequestContext
from millrace.broker.controller.controller_result import ElectionType
from millrace.broker.handlers import handles
from millrace.common.errors import Errors
from millrace.common.topic_partition import TopicPartition
from millrace.protocol import ApiKey
from millrace.protocol.types import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from millrace.security.acl import AclOperation

NOT_AUTHORIZED = "Cluster authorization failed."
"""The message of a refused reassignment request (Kafka's names the request in its Java
form, "Request ... is not authorized.")."""


@handles(ApiKey.CONTROLLED_SHUTDOWN)
async def handle_controlled_shutdown(
        ctx: RequestContext, body: ControlledShutdownRequest) -> ControlledShutdownResponse:
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return ControlledShutdownResponse(error_code=Errors.CLUSTER_AUTHORIZATION_FAILED)
    cluster = ctx.services.cluster
    if cluster is None or cluster.controller is None:
        return ControlledShutdownResponse(error_code=Errors.NOT_CONTROLLER)
    result = await cluster.controller.run_event(
        lambda c: c.on_controlled_shutdown(body.broker_id, body.broker_epoch))
    cls = ControlledShutdownResponse
    return cls(error_code=result.error, remaining_partitions=[
        cls.RemainingPartition(topic_name=tp.topic, partition_index=tp.partition)
        for tp in result.remaining_partitions])


@handles(ApiKey.ELECT_LEADERS)
async def handle_elect_leaders(ctx: RequestContext,
                               body: ElectLeadersRequest) -> ElectLeadersResponse:
    cls = ElectLeadersResponse
    cluster = ctx.services.cluster
    wanted = None if body.topic_partitions is None else [
        TopicPartition(t.topic, p) for t in body.topic_partitions for p in t.partitions]
    if not ctx.authorize_cluster(AclOperation.ALTER):
        return _elect_leaders_refused(wanted or [])
    if cluster is None or cluster.controller is None:
        return cls(throttle_time_ms=0, error_code=Errors.NOT_CONTROLLER,
                   replica_election_results=[])
    election = ElectionType(body.election_type if ctx.version >= 1 else 0)
    result = await cluster.controller.run_event(lambda c: c.on_elect_leaders(election, wanted))
    if result.error:
        return cls(throttle_time_ms=0, error_code=result.error, replica_election_results=[])
    by_topic: dict[str, list[ElectLeadersResponse.ReplicaElectionResult.PartitionResult]] = {}
    for tp, outcome in sorted(result.election_results.items()):
        error = outcome if isinstance(outcome, Errors) else Errors.NONE
        by_topic.setdefault(tp.topic, []).append(
            cls.ReplicaElectionResult.PartitionResult(
                partition_id=tp.partition, error_code=error,
                error_message=None if error == Errors.NONE else error.name))
    return cls(throttle_time_ms=0, error_code=Errors.NONE, replica_election_results=[
        cls.ReplicaElectionResult(topic=t, partition_result=ps) for t, ps in by_topic.items()])


def _elect_leaders_refused(wanted: list[TopicPartition]) -> ElectLeadersResponse:
    """Kafka's answer without Alter on the Cluster: 31 top-level and on each distinct
    partition named (none when the request names none, meaning all)."""
    cls = ElectLeadersResponse
    denied = Errors.CLUSTER_AUTHORIZATION_FAILED
    by_topic: dict[str, dict[int, None]] = {}
    for tp in wanted:
        by_topic.setdefault(tp.topic, {})[tp.partition] = None
    return cls(throttle_time_ms=0, error_code=denied, replica_election_results=[
        cls.ReplicaElectionResult(topic=t, partition_result=[
            cls.ReplicaElectionResult.PartitionResult(partition_id=p, error_code=denied,
                                                      error_message=None) for p in ps])
        for t, ps in by_topic.items()])


@handles(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
async def handle_alter_partition_reassignments(
        ctx: RequestContext, body: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    cls = AlterPartitionReassignmentsResponse
    allow = body.allow_replication_factor_change if ctx.version >= 1 else True
    if not ctx.authorize_cluster(AclOperation.ALTER):
        denied = Errors.CLUSTER_AUTHORIZATION_FAILED
        p_cls = cls.ReassignableTopicResponse.ReassignablePartitionResponse
        return cls(throttle_time_ms=0, allow_replication_factor_change=allow,
                   error_code=denied, error_message=NOT_AUTHORIZED, responses=[
                       cls.ReassignableTopicResponse(name=t.name, partitions=[
                           p_cls(partition_index=p.partition_index, error_code=denied,
                                 error_message=NOT_AUTHORIZED) for p in t.partitions])
                       for t in body.topics])
    targets = {TopicPartition(t.name, p.partition_index): p.replicas
               for t in body.topics for p in t.partitions}
    cluster = ctx.services.cluster
    if cluster is None or cluster.controller is None:
        error = Errors.NOT_CONTROLLER
    else:
        result = await cluster.controller.run_event(
            lambda c: c.on_alter_partition_reassignments(
                targets, allow_replication_factor_change=allow))
        error = result.error
    if error:
        return cls(throttle_time_ms=0, allow_replication_factor_change=allow,
                   error_code=error, error_message=None, responses=[])
    p_cls = cls.ReassignableTopicResponse.ReassignablePartitionResponse
    by_topic: dict[str, list[AlterPartitionReassignmentsResponse.ReassignableTopicResponse.
                             ReassignablePartitionResponse]] = {}
    for tp in targets:
        outcome = result.reassignment_results.get(tp, Errors.UNKNOWN_SERVER_ERROR)
        by_topic.setdefault(tp.topic, []).append(p_cls(
            partition_index=tp.partition, error_code=outcome,
            error_message=None if outcome == Errors.NONE else outcome.name))
    return cls(throttle_time_ms=0, allow_replication_factor_change=allow,
               error_code=Errors.NONE, error_message=None, responses=[
                   cls.ReassignableTopicResponse(name=t, partitions=ps)
                   for t, ps in by_topic.items()])


@handles(ApiKey.LIST_PARTITION_REASSIGNMENTS)
async def handle_list_partition_reassignments(
        ctx: RequestContext, body: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    cls = ListPartitionReassignmentsResponse
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return cls(throttle_time_ms=0, error_code=Errors.CLUSTER_AUTHORIZATION_FAILED,
                   error_message=NOT_AUTHORIZED, topics=[
                       cls.OngoingTopicReassignment(name=t.name, partitions=[
                           cls.OngoingTopicReassignment.OngoingPartitionReassignment(
                               partition_index=p, replicas=[], adding_replicas=[],
                               removing_replicas=[]) for p in t.partition_indexes])
                       for t in body.topics or ()])
    wanted = None if body.topics is None else [
        TopicPartition(t.name, p) for t in body.topics for p in t.partition_indexes]
    cluster = ctx.services.cluster
    if cluster is None or cluster.controller is None:
        return cls(throttle_time_ms=0, error_code=Errors.NOT_CONTROLLER, error_message=None,
                   topics=[])
    result = await cluster.controller.run_event(
        lambda c: c.list_partition_reassignments(wanted))
    if result.error:
        return cls(throttle_time_ms=0, error_code=result.error, error_message=None, topics=[])
    p_cls = cls.OngoingTopicReassignment.OngoingPartitionReassignment
    by_topic: dict[str, list[ListPartitionReassignmentsResponse.OngoingTopicReassignment.
                             OngoingPartitionReassignment]] = {}
    for tp, a in sorted(result.ongoing_reassignments.items()):
        by_topic.setdefault(tp.topic, []).append(p_cls(
            partition_index=tp.partition, replicas=list(a.replicas),
            adding_replicas=list(a.adding_replicas),
            removing_replicas=list(a.removing_replicas)))
    return cls(throttle_time_ms=0, error_code=Errors.NONE, error_message=None, topics=[
        cls.OngoingTopicReassignment(name=t, partitions=ps) for t, ps in by_topic.items()])
