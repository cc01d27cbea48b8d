"""Admin operations against scripted brokers (no sockets): requests as each version lays
them out, answers parsed per version, per-item errors, coordinator and leader retries."""

from __future__ import annotations

from typing import Any

import pytest

from millrace.client.admin import (
    AlterConfigOp,
    AlterConfigOpType,
    ConfigResource,
    ConfigResourceType,
    ConsumerGroupState,
    NewTopic,
    OffsetResetSpec,
    OffsetSpec,
    TopicPartition,
    _configs,
    _group_offsets,
    _groups,
    _topics,
)
from millrace.client.cluster import Node
from millrace.client.errors import KafkaTimeoutError
from millrace.common.errors import (
    BrokerNotAvailableError,
    GroupNotEmptyError,
    InvalidConfigurationError,
    NotLeaderOrFollowerError,
    TopicExistsError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)
from millrace.protocol import (
    CreateTopicsResponse,
    DeleteTopicsResponse,
    DescribeConfigsResponse,
    DescribeGroupsResponse,
    FindCoordinatorResponse,
    IncrementalAlterConfigsResponse,
    ListOffsetsResponse,
    MetadataResponse,
    OffsetCommitResponse,
    OffsetFetchResponse,
)
from millrace.protocol.consumer_protocol import Assignment, encode_assignment
from tests.unit.client.admin.scripted_network import NODE, ScriptedNetwork

DEADLINE = 2_000_000_000_000
TP = TopicPartition


# ---------------------------------------------------------------------- scripted answers
def find_coordinator(request: Any, version: int, node: Node | None) -> Any:
    if version >= 4:
        return FindCoordinatorResponse(coordinators=[FindCoordinatorResponse.Coordinator(
            key=k, node_id=0, host="broker0", port=9092) for k in request.coordinator_keys])
    assert request.key
    return FindCoordinatorResponse(node_id=0, host="broker0", port=9092)


def metadata(topics: dict[str, int]) -> Any:
    t_cls = MetadataResponse.MetadataResponseTopic

    def answer(request: Any, version: int, node: Node | None) -> Any:
        names = [t.name for t in request.topics] if request.topics is not None else list(topics)
        assert request.allow_auto_topic_creation is False or version < 4
        out = []
        for name in names:
            if name not in topics:
                out.append(t_cls(name=name, error_code=3))
                continue
            out.append(t_cls(name=name, partitions=[t_cls.MetadataResponsePartition(
                partition_index=i, leader_id=0, replica_nodes=[0], isr_nodes=[0])
                for i in range(topics[name])]))
        return MetadataResponse(brokers=[MetadataResponse.MetadataResponseBroker(
            node_id=0, host="broker0", port=9092)], controller_id=0, topics=out)
    return answer


def list_offsets(ends: dict[TopicPartition, int], starts: dict[TopicPartition, int] | None = None,
                 fail_first: int = 0) -> Any:
    calls = {"n": 0}
    t_cls = ListOffsetsResponse.ListOffsetsTopicResponse

    def answer(request: Any, version: int, node: Node | None) -> Any:
        calls["n"] += 1
        topics = []
        for t in request.topics:
            parts = []
            for p in t.partitions:
                tp = TP(t.name, p.partition_index)
                if calls["n"] <= fail_first:
                    parts.append(t_cls.ListOffsetsPartitionResponse(
                        partition_index=p.partition_index, error_code=6))
                    continue
                offset = (starts or {}).get(tp, 0) if p.timestamp == -2 else ends[tp]
                parts.append(t_cls.ListOffsetsPartitionResponse(
                    partition_index=p.partition_index, offset=offset, timestamp=-1))
            topics.append(t_cls(name=t.name, partitions=parts))
        return ListOffsetsResponse(topics=topics)
    return answer


def offset_fetch(committed: dict[TopicPartition, int]) -> Any:
    def answer(request: Any, version: int, node: Node | None) -> Any:
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for tp, offset in committed.items():
            by_topic.setdefault(tp.topic, []).append((tp.partition, offset))
        if version >= 8:
            (group,) = request.groups
            assert group.topics is None
            g_cls = OffsetFetchResponse.OffsetFetchResponseGroup
            t_cls = g_cls.OffsetFetchResponseTopics
            return OffsetFetchResponse(groups=[g_cls(group_id=group.group_id, topics=[
                t_cls(name=t, partitions=[t_cls.OffsetFetchResponsePartitions(
                    partition_index=p, committed_offset=o, metadata="") for p, o in ps])
                for t, ps in by_topic.items()])])
        assert request.group_id and request.topics is None
        t_cls = OffsetFetchResponse.OffsetFetchResponseTopic
        return OffsetFetchResponse(topics=[
            t_cls(name=t, partitions=[t_cls.OffsetFetchResponsePartition(
                partition_index=p, committed_offset=o, metadata="") for p, o in ps])
            for t, ps in by_topic.items()])
    return answer


def describe_groups(state: str, members: list[tuple[str, list[TopicPartition]]],
                    errors: list[int] | None = None) -> Any:
    pending = list(errors or [])
    g_cls = DescribeGroupsResponse.DescribedGroup

    def answer(request: Any, version: int, node: Node | None) -> Any:
        (group_id,) = request.groups
        if pending:
            return DescribeGroupsResponse(groups=[g_cls(group_id=group_id,
                                                        error_code=pending.pop(0))])
        return DescribeGroupsResponse(groups=[g_cls(
            group_id=group_id, group_state=state, protocol_type="consumer",
            protocol_data="range", members=[g_cls.DescribedGroupMember(
                member_id=m, client_id="cli", client_host="/10.0.0.1",
                member_assignment=encode_assignment(Assignment(tps, None, 0)))
                for m, tps in members])])
    return answer


def commits(log: list[dict[TopicPartition, int]], error: int = 0) -> Any:
    def answer(request: Any, version: int, node: Node | None) -> Any:
        assert request.generation_id_or_member_epoch == -1 and request.member_id == ""
        t_cls = OffsetCommitResponse.OffsetCommitResponseTopic
        log.append({TP(t.name, p.partition_index): p.committed_offset
                    for t in request.topics for p in t.partitions})
        return OffsetCommitResponse(topics=[t_cls(name=t.name, partitions=[
            t_cls.OffsetCommitResponsePartition(partition_index=p.partition_index,
                                                error_code=error)
            for p in t.partitions]) for t in request.topics])
    return answer


# ---------------------------------------------------------------------- topics
def test_create_topics_maps_errors_per_topic() -> None:
    def answer(request: Any, version: int, node: Node | None) -> Any:
        assert node == NODE  # the controller
        (first, second) = request.topics
        assert (first.num_partitions, first.replication_factor) == (3, -1)
        assert [(c.name, c.value) for c in first.configs] == [("retention.ms", "1000")]
        r_cls = CreateTopicsResponse.CreatableTopicResult
        return CreateTopicsResponse(topics=[
            r_cls(name=first.name),
            r_cls(name=second.name, error_code=36, error_message="Topic 'b' already exists.")])
    net = ScriptedNetwork({"CreateTopics": answer})
    result = _topics.create_topics(net, [NewTopic("a", 3, configs={"retention.ms": "1000"}),
                                         NewTopic("b")], False, DEADLINE)
    assert result["a"].result() is None
    with pytest.raises(TopicExistsError, match="Topic 'b' already exists"):
        result["b"].result()


@pytest.mark.parametrize("version", [5, 6])
def test_delete_topics_at_each_layout(version: int) -> None:
    def answer(request: Any, v: int, node: Node | None) -> Any:
        names = [t.name for t in request.topics] if v >= 6 else list(request.topic_names)
        assert names == ["a", "gone"]
        r_cls = DeleteTopicsResponse.DeletableTopicResult
        return DeleteTopicsResponse(responses=[r_cls(name="a"), r_cls(name="gone", error_code=3)])
    net = ScriptedNetwork({"DeleteTopics": answer}, {"DeleteTopics": version})
    result = _topics.delete_topics(net, ["a", "gone"], DEADLINE)
    assert result["a"].result() is None
    with pytest.raises(UnknownTopicOrPartitionError, match="topic 'gone': Topic does not exist"):
        result["gone"].result()


def test_list_offsets_retries_a_moved_leader_and_fails_unknown_topics_at_once() -> None:
    net = ScriptedNetwork({"Metadata": metadata({"t": 2}),
                           "ListOffsets": list_offsets({TP("t", 0): 7, TP("t", 1): 9},
                                                       fail_first=1)})
    result = _topics.list_offsets(net, {TP("t", 0): OffsetSpec.latest(),
                                        TP("t", 1): OffsetSpec.latest(),
                                        TP("u", 0): OffsetSpec.latest()}, 0, DEADLINE)
    assert result[TP("t", 0)].result().offset == 7
    assert result[TP("t", 1)].result().offset == 9
    with pytest.raises(UnknownTopicOrPartitionError):
        result[TP("u", 0)].result()
    assert net.names_sent() == ["Metadata", "ListOffsets", "Metadata", "ListOffsets"]


def test_list_offsets_gives_up_at_the_deadline() -> None:
    net = ScriptedNetwork({"Metadata": metadata({"t": 1}),
                           "ListOffsets": list_offsets({}, fail_first=1000)})
    deadline = net.now() + 1000
    result = _topics.list_offsets(net, {TP("t", 0): OffsetSpec.latest()}, 0, deadline)
    with pytest.raises(KafkaTimeoutError, match="NOT_LEADER_OR_FOLLOWER"):
        result[TP("t", 0)].result()
    assert not isinstance(result[TP("t", 0)].exception(), NotLeaderOrFollowerError)


# ---------------------------------------------------------------------- configs
def test_configs_go_to_the_named_broker_and_unknown_brokers_fail_fast() -> None:
    seen: list[tuple[int, Node | None]] = []

    def describe(request: Any, version: int, node: Node | None) -> Any:
        r_cls = DescribeConfigsResponse.DescribeConfigsResult
        out = []
        for r in request.resources:
            seen.append((r.resource_type, node))
            out.append(r_cls(resource_type=r.resource_type, resource_name=r.resource_name,
                             configs=[r_cls.DescribeConfigsResourceResult(
                                 name="retention.ms", value="5", config_source=1)]))
        return DescribeConfigsResponse(results=out)
    nodes = [NODE, Node(1, "broker1", 9093)]
    net = ScriptedNetwork({"DescribeConfigs": describe}, nodes=nodes)
    topic = ConfigResource(ConfigResourceType.TOPIC, "t")
    broker = ConfigResource(ConfigResourceType.BROKER, "1")
    missing = ConfigResource(ConfigResourceType.BROKER, "7")
    result = _configs.describe_configs(net, [topic, broker, missing], False, False, DEADLINE)
    assert list(result) == [topic, broker, missing]
    entry = result[topic].result()["retention.ms"]
    assert entry.value == "5" and entry.source.is_dynamic and not entry.is_default
    assert sorted(seen, key=lambda s: s[0]) == [(2, None), (4, nodes[1])]
    with pytest.raises(BrokerNotAvailableError, match="broker '7' is not in the cluster"):
        result[missing].result()


def test_incremental_alter_configs_sends_ops_and_maps_errors() -> None:
    def alter(request: Any, version: int, node: Node | None) -> Any:
        (r,) = request.resources
        assert [(c.name, c.config_operation, c.value) for c in r.configs] == [
            ("a", 0, "1"), ("b", 1, None)]
        return IncrementalAlterConfigsResponse(responses=[
            IncrementalAlterConfigsResponse.AlterConfigsResourceResponse(
                resource_type=2, resource_name="t", error_code=40,
                error_message="Invalid value x for configuration a")])
    net = ScriptedNetwork({"IncrementalAlterConfigs": alter})
    resource = ConfigResource(ConfigResourceType.TOPIC, "t")
    result = _configs.incremental_alter_configs(
        net, {resource: [AlterConfigOp("a", "1"), AlterConfigOp("b", None, AlterConfigOpType.DELETE)]}, False,
        DEADLINE)
    with pytest.raises(InvalidConfigurationError, match="topic 't': Invalid value"):
        result[resource].result()


# ---------------------------------------------------------------------- groups
@pytest.mark.parametrize("version", [3, 4])
def test_describe_group_decodes_assignments(version: int) -> None:
    net = ScriptedNetwork({"FindCoordinator": find_coordinator,
                           "DescribeGroups": describe_groups(
                               "Stable", [("m1", [TP("t", 0), TP("t", 1)])])},
                          {"FindCoordinator": version})
    group = _groups.describe_groups(net, ["g"], DEADLINE)["g"].result()
    assert group.state is ConsumerGroupState.STABLE and group.partition_assignor == "range"
    (member,) = group.members
    assert member.host == "/10.0.0.1"
    assert member.assignment.topic_partitions == {TP("t", 0), TP("t", 1)}


def test_a_moved_coordinator_is_found_again() -> None:
    net = ScriptedNetwork({"FindCoordinator": find_coordinator,
                           "DescribeGroups": describe_groups("Empty", [], errors=[16, 14])})
    group = _groups.describe_groups(net, ["g"], DEADLINE)["g"].result()
    assert group.state is ConsumerGroupState.EMPTY
    # NOT_COORDINATOR forgets the coordinator; COORDINATOR_LOAD_IN_PROGRESS does not.
    assert net.names_sent() == ["FindCoordinator", "DescribeGroups", "FindCoordinator",
                                "DescribeGroups", "DescribeGroups"]


def test_an_unknown_group_is_dead() -> None:
    net = ScriptedNetwork({"FindCoordinator": find_coordinator,
                           "DescribeGroups": describe_groups("", [], errors=[69])})
    group = _groups.describe_groups(net, ["nope"], DEADLINE)["nope"].result()
    assert group.state is ConsumerGroupState.DEAD and group.members == []


@pytest.mark.parametrize("version", [7, 9])
def test_group_offsets_with_lag_at_each_layout(version: int) -> None:
    net = ScriptedNetwork({"FindCoordinator": find_coordinator,
                           "OffsetFetch": offset_fetch({TP("t", 0): 4, TP("t", 1): -1}),
                           "Metadata": metadata({"t": 2}),
                           "ListOffsets": list_offsets({TP("t", 0): 10})},
                          {"OffsetFetch": version})
    offsets = _group_offsets.list_group_offsets(net, "g", None, True, False, DEADLINE)
    assert list(offsets) == [TP("t", 0)]  # -1: nothing committed
    assert (offsets[TP("t", 0)].offset, offsets[TP("t", 0)].log_end_offset,
            offsets[TP("t", 0)].lag) == (4, 10, 6)
    assert ("OffsetFetch", version, NODE) in net.sent


def test_describe_group_offsets_joins_owners_and_committed_offsets() -> None:
    net = ScriptedNetwork({"FindCoordinator": find_coordinator,
                           "DescribeGroups": describe_groups("Stable", [("m1", [TP("t", 1)])]),
                           "OffsetFetch": offset_fetch({TP("t", 0): 3}),
                           "Metadata": metadata({"t": 2}),
                           "ListOffsets": list_offsets({TP("t", 0): 5, TP("t", 1): 8})})
    rows = _group_offsets.describe_group_offsets(net, "g", DEADLINE).partitions
    assert [(r.partition, r.offset, r.log_end_offset, r.lag, r.consumer_id) for r in rows] == [
        (0, 3, 5, 2, None), (1, None, 8, None, "m1")]


def test_commits_to_a_group_with_members_say_so() -> None:
    log: list[dict[TopicPartition, int]] = []
    net = ScriptedNetwork({"FindCoordinator": find_coordinator,
                           "OffsetCommit": commits(log, error=25)})
    result = _groups.commit_offsets(net, "g", {TP("t", 0): _offset(1)}, DEADLINE)
    with pytest.raises(UnknownMemberIdError, match="has active members"):
        result.all()


def _offset(n: int) -> Any:
    from millrace.client.admin import OffsetAndMetadata
    return OffsetAndMetadata(n)


def _reset_network(state: str, log: list[dict[TopicPartition, int]]) -> ScriptedNetwork:
    return ScriptedNetwork({
        "FindCoordinator": find_coordinator,
        "DescribeGroups": describe_groups(state, []),
        "OffsetFetch": offset_fetch({TP("t", 0): 4, TP("t", 1): 9}),
        "Metadata": metadata({"t": 3}),
        "ListOffsets": list_offsets({TP("t", 0): 10, TP("t", 1): 10, TP("t", 2): 10},
                                    starts={TP("t", 1): 2}),
        "OffsetCommit": commits(log)})


def test_reset_refuses_an_active_group() -> None:
    log: list[dict[TopicPartition, int]] = []
    net = _reset_network("Stable", log)
    with pytest.raises(GroupNotEmptyError, match="current state is Stable"):
        _group_offsets.reset_group_offsets(net, "g", OffsetResetSpec.to_earliest(), None,
                                           None, True, DEADLINE)
    assert not log


def test_reset_all_topics_to_earliest_executes() -> None:
    log: list[dict[TopicPartition, int]] = []
    net = _reset_network("Empty", log)
    new = _group_offsets.reset_group_offsets(net, "g", OffsetResetSpec.to_earliest(), None,
                                             None, True, DEADLINE)
    assert new == {TP("t", 0): 0, TP("t", 1): 2}
    assert log == [new]


def test_reset_a_topic_by_shift_is_a_dry_run_unless_executed() -> None:
    log: list[dict[TopicPartition, int]] = []
    net = _reset_network("Dead", log)
    new = _group_offsets.reset_group_offsets(net, "g", OffsetResetSpec.shift_by(-3), None,
                                             [TP("t", 0), TP("t", 1)], False, DEADLINE)
    assert new == {TP("t", 0): 1, TP("t", 1): 6}
    assert not log
    new = _group_offsets.reset_group_offsets(net, "g", OffsetResetSpec.to_latest(), ["t"],
                                             None, False, DEADLINE)
    assert new == {TP("t", 0): 10, TP("t", 1): 10, TP("t", 2): 10}
