"""ControlledShutdown (7) and ElectLeaders (43): requests only the active controller answers.

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
"""

from __future__ import annotations

from millrace.broker.context import RequestContext
from millrace.broker.controller.controller_result import ElectionType
from millrace.broker.handlers import handles
from millrace.common.errors import Errors
from millrace.common.topic_partition import TopicPartition
from millrace.protocol import ApiKey
from millrace.protocol.types import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
)


@handles(ApiKey.CONTROLLED_SHUTDOWN)
async def handle_controlled_shutdown(
        ctx: RequestContext, body: ControlledShutdownRequest) -> ControlledShutdownResponse:
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
