"""``elect_leaders`` against scripted brokers (no sockets): the request as each version lays
it out, routing to the controller and the NOT_CONTROLLER retry, per-partition results with
Kafka's exceptions, and the version an unclean election needs."""

from __future__ import annotations

from typing import Any

import pytest

from millrace.client.admin import ElectionType, TopicPartition, _leaders
from millrace.client.cluster import Node
from millrace.client.errors import KafkaTimeoutError
from millrace.common.errors import (
    ClusterAuthorizationFailedError,
    ElectionNotNeededError,
    Errors,
    KafkaError,
    PreferredLeaderNotAvailableError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from millrace.protocol import ElectLeadersResponse
from tests.unit.client.admin.scripted_network import NODE, ScriptedNetwork

DEADLINE = 2_000_000_000_000
TP = TopicPartition
NODE1 = Node(1, "broker1", 9093)
R = ElectLeadersResponse.ReplicaElectionResult


def answer(results: dict[TopicPartition, int], error_code: int = 0,
           messages: dict[TopicPartition, str] | None = None) -> Any:
    by_topic: dict[str, list[Any]] = {}
    for tp, code in results.items():
        by_topic.setdefault(tp.topic, []).append(R.PartitionResult(
            partition_id=tp.partition, error_code=code,
            error_message=(messages or {}).get(tp, Errors(code).name if code else None)))
    return ElectLeadersResponse(error_code=error_code, replica_election_results=[
        R(topic=t, partition_result=ps) for t, ps in by_topic.items()])


def test_preferred_election_per_partition_results() -> None:
    requests: list[tuple[Any, int, Node | None]] = []

    def handle(request: Any, version: int, node: Node | None) -> Any:
        requests.append((request, version, node))
        return answer({TP("orders", 0): 0, TP("orders", 1): Errors.ELECTION_NOT_NEEDED,
                       TP("orders", 2): Errors.PREFERRED_LEADER_NOT_AVAILABLE,
                       TP("gone", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION},
                      messages={TP("orders", 2): "replica 3 is not alive"})

    net = ScriptedNetwork({"ElectLeaders": handle}, nodes=[NODE, NODE1])
    wanted = [TP("orders", 0), TP("orders", 1), TP("orders", 2), TP("gone", 0),
              TP("orders", 0)]
    result = _leaders.elect_leaders(net, ElectionType.PREFERRED, wanted, DEADLINE)

    (request, version, node), = requests
    assert (version, node) == (2, NODE)  # the controller the metadata names
    assert request.election_type == 0 and request.timeout_ms == 30_000
    assert [(t.topic, t.partitions) for t in request.topic_partitions] == [
        ("orders", [0, 1, 2]), ("gone", [0])]
    assert list(result) == [TP("orders", 0), TP("orders", 1), TP("orders", 2), TP("gone", 0)]
    assert result[TP("orders", 0)].result() is None
    errors = result.errors()
    assert isinstance(errors[TP("orders", 1)], ElectionNotNeededError)
    assert str(errors[TP("orders", 1)]) == ("[Error 84] ELECTION_NOT_NEEDED: "
                                            "partition 'orders-1'")
    assert isinstance(errors[TP("orders", 2)], PreferredLeaderNotAvailableError)
    assert str(errors[TP("orders", 2)]) == ("[Error 80] PREFERRED_LEADER_NOT_AVAILABLE: "
                                            "partition 'orders-2': replica 3 is not alive")
    assert isinstance(errors[TP("gone", 0)], UnknownTopicOrPartitionError)


def test_every_partition_is_a_null_list_and_keys_come_from_the_answer() -> None:
    seen: list[Any] = []

    def handle(request: Any, version: int, node: Node | None) -> Any:
        seen.append(request.topic_partitions)
        return answer({TP("a", 0): 0, TP("a", 1): Errors.ELECTION_NOT_NEEDED})

    net = ScriptedNetwork({"ElectLeaders": handle})
    result = _leaders.elect_leaders(net, ElectionType.UNCLEAN, None, DEADLINE)
    assert seen == [None]
    assert list(result) == [TP("a", 0), TP("a", 1)]
    assert result.values_or_none() == {TP("a", 0): None, TP("a", 1): None}
    assert list(result.errors()) == [TP("a", 1)]


def test_no_partitions_sends_nothing() -> None:
    net = ScriptedNetwork({})
    assert _leaders.elect_leaders(net, ElectionType.PREFERRED, [], DEADLINE) == {}
    assert net.sent == []


def test_not_controller_refreshes_metadata_and_goes_to_the_new_controller() -> None:
    def handle(request: Any, version: int, node: Node | None) -> Any:
        if node != NODE1:
            return ElectLeadersResponse(error_code=Errors.NOT_CONTROLLER)
        return answer({TP("t", 0): 0})

    net = ScriptedNetwork({"ElectLeaders": handle}, nodes=[NODE, NODE1])
    net.controller_after_refresh = NODE1
    result = _leaders.elect_leaders(net, ElectionType.PREFERRED, [TP("t", 0)], DEADLINE)
    assert result.all() == {TP("t", 0): None}
    assert [node for _, _, node in net.sent] == [NODE, NODE1]
    assert net.refreshes == 1


def test_not_controller_until_the_deadline_is_a_timeout() -> None:
    net = ScriptedNetwork({"ElectLeaders": lambda r, v, n: ElectLeadersResponse(
        error_code=Errors.NOT_CONTROLLER)})
    with pytest.raises(KafkaTimeoutError, match="electing leaders: timed out; last error: "
                                                r"\[Error 41\] NOT_CONTROLLER"):
        _leaders.elect_leaders(net, ElectionType.PREFERRED, [TP("t", 0)], net.now() + 1_000)
    assert net.refreshes == 10  # one per attempt: at 0, 100, ..., 900 ms


def test_another_top_level_error_fails_the_call() -> None:
    net = ScriptedNetwork({"ElectLeaders": lambda r, v, n: ElectLeadersResponse(
        error_code=Errors.CLUSTER_AUTHORIZATION_FAILED)})
    with pytest.raises(ClusterAuthorizationFailedError):
        _leaders.elect_leaders(net, ElectionType.PREFERRED, None, DEADLINE)
    assert net.names_sent() == ["ElectLeaders"]


def test_version_0_means_preferred_and_has_no_top_level_error() -> None:
    def handle(request: Any, version: int, node: Node | None) -> Any:
        assert version == 0
        return answer({TP("t", 0): 0, TP("t", 1): Errors.ELECTION_NOT_NEEDED})

    net = ScriptedNetwork({"ElectLeaders": handle}, versions={"ElectLeaders": 0})
    result = _leaders.elect_leaders(net, ElectionType.PREFERRED, [TP("t", 0), TP("t", 1),
                                                                  TP("t", 2)], DEADLINE)
    assert result[TP("t", 0)].result() is None
    assert isinstance(result.errors()[TP("t", 1)], ElectionNotNeededError)
    missing = result.errors()[TP("t", 2)]
    assert type(missing) is KafkaError
    assert str(missing) == ("[Error -1] UNKNOWN_SERVER_ERROR: partition 't-2': no answer "
                            "from the controller")
    # an unclean election cannot be said in v0: refused before anything is sent
    with pytest.raises(UnsupportedVersionError):
        _leaders.elect_leaders(net, ElectionType.UNCLEAN, [TP("t", 0)], DEADLINE)
    assert net.names_sent() == ["ElectLeaders"]
