"""Leader elections on request: ElectLeaders (key 43, KIP-460), the body of
``KafkaAdminClient.elect_leaders`` and of ``millrace leader-election``.

Only the active controller elects, so the request goes to the controller the metadata
names (any broker while none is known).  A broker that is not, or no longer, the
controller answers NOT_CONTROLLER at the top level; the client then fetches the metadata
again and resends to the controller it names now, until the operation's deadline (Java's
``ControllerNodeProvider`` retry).  Another top-level error fails the whole call.

Each partition's outcome comes back on its own: success (the leader is now the one the
election type wants) or Kafka's exception -- ElectionNotNeededError when it already was,
PreferredLeaderNotAvailableError / EligibleLeadersNotAvailableError when no replica
qualifies, UnknownTopicOrPartitionError, InvalidTopicError for a topic being deleted.
An unclean election needs v1 (v0 has no election type and always means preferred), so it
is refused with UnsupportedVersionError by a broker that has only v0.
"""

from __future__ import annotations

from collections.abc import Iterable

from millrace.client.admin._admin_network import AdminNetwork
from millrace.client.admin.results import AdminResult, kafka_error
from millrace.client.admin.types import ElectionType
from millrace.client.cluster import TopicPartition
from millrace.common.errors import KafkaError, error_name
from millrace.protocol import ElectLeadersRequest, ElectLeadersResponse

WHAT = "electing leaders"


def elect_leaders(net: AdminNetwork, election_type: ElectionType,
                  partitions: Iterable[TopicPartition] | None, deadline_ms: int
                  ) -> AdminResult[TopicPartition, None]:
    """Per partition None (elected) or the error; ``partitions=None``: every partition,
    keyed as the controller answered."""
    wanted = None if partitions is None else list(dict.fromkeys(partitions))
    result: AdminResult[TopicPartition, None] = AdminResult()
    if wanted is not None and not wanted:
        return result
    by_topic: dict[str, list[int]] = {}
    for tp in wanted or ():
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    t_cls = ElectLeadersRequest.TopicPartitions
    min_version = 1 if election_type is ElectionType.UNCLEAN else None

    def attempt() -> list[tuple[TopicPartition, KafkaError | None]]:
        body = ElectLeadersRequest(
            election_type=int(election_type),
            topic_partitions=None if wanted is None else [
                t_cls(topic=t, partitions=ps) for t, ps in by_topic.items()],
            timeout_ms=max(min(net.request_timeout_ms, deadline_ms - net.now()), 0))
        response, _version = net.send_to_controller(body, deadline_ms, WHAT,
                                                     min_version=min_version)
        return [(TopicPartition(t.topic, p.partition_id), _error(t.topic, p))
                for t in response.replica_election_results for p in t.partition_result]

    answered = dict(net.call(deadline_ms, attempt, WHAT))
    result.settle(answered if wanted is None else wanted, answered, None,
                  "no answer from the controller")
    return result


def _error(topic: str, p: ElectLeadersResponse.ReplicaElectionResult.PartitionResult
           ) -> KafkaError | None:
    if not p.error_code:
        return None
    # a message that only repeats the error's name says nothing the exception does not
    message = None if p.error_message == error_name(p.error_code) else p.error_message
    return kafka_error(p.error_code, message, "partition", TopicPartition(topic, p.partition_id))
