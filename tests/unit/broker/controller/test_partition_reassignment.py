"""Partition reassignment (KIP-455) stepped with plain values: the phases U, A and B, leader
moves, replication factor changes, cancel, a dead target broker, failover."""

from __future__ import annotations

from dataclasses import replace

from millrace.broker.controller.broker_requests import LeaderAndIsr, StopReplica
from millrace.broker.controller.controller_context import ReplicaAssignment as RA
from millrace.broker.controller.controller_result import ControllerResult
from millrace.broker.controller.kafka_controller import KafkaController
from millrace.broker.controller.zk_writes import UpdatePartitionState, UpdateTopicAssignment
from millrace.common.errors import Errors
from millrace.common.topic_partition import TopicPartition
from tests.unit.broker.controller.ctlgen import Cluster, ZkStore, broker, state, summary, topic

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
TOPIC_ID = topic("t", {}).topic_id


def cluster(assignment: list[int], isr: list[int] | None = None, brokers: int = 4,
            controller_epoch: int = 1) -> Cluster:
    """Brokers 1..n; topic t: partition 0 on ``assignment`` led by its first replica,
    partition 1 on [1] (so the topic znode holds more than the partition moved)."""
    zk = ZkStore({T0: state(assignment[0], isr or assignment, controller_epoch=0),
                  T1: state(1, [1], controller_epoch=0)})
    c = Cluster(KafkaController(1), zk, [broker(b) for b in range(1, brokers + 1)],
                [topic("t", {0: assignment, 1: [1]})])
    c.failover(epoch=controller_epoch)
    return c


def reassign(c: Cluster, targets: dict[TopicPartition, list[int] | None]) -> ControllerResult:
    return c.run(c.controller.on_alter_partition_reassignments(targets))


def isr_change(c: Cluster, tp: TopicPartition, isr: list[int]) -> ControllerResult:
    """The leader wrote a new ISR (znode version + 1, same leader epoch) and notified."""
    cur = c.zk.states[tp]
    c.zk.states[tp] = replace(cur, isr=tuple(isr), zk_version=cur.zk_version + 1)
    return c.run(c.controller.on_isr_change({tp: c.zk.states[tp]}, ["0000000007"]))


def ongoing(c: Cluster) -> dict[TopicPartition, RA]:
    return c.controller.list_partition_reassignments().ongoing_reassignments


def topic_writes(result: ControllerResult) -> list[dict[int, RA]]:
    out = []
    for w in result.zk_writes:
        if isinstance(w, UpdateTopicAssignment):
            assert w.topic == "t" and w.topic_id == TOPIC_ID
            out.append(w.assignment)
    return out


def state_writes(result: ControllerResult) -> list[tuple[int, int, tuple[int, ...]]]:
    """(leader, leader epoch, ISR) of each partition state write."""
    return [(w.new_state.leader, w.new_state.leader_epoch, w.new_state.isr)
            for w in result.zk_writes if isinstance(w, UpdatePartitionState)]


def leader_and_isr(result: ControllerResult) -> dict[int, tuple[tuple[int, ...], tuple[int, ...],
                                                                tuple[int, ...], bool]]:
    """Per destination: (replicas, adding, removing, is_new) of t-0."""
    return {r.broker_id: (s.replicas, s.adding_replicas, s.removing_replicas, s.is_new)
            for r in result.requests if isinstance(r, LeaderAndIsr)
            for s in r.partition_states if (s.topic, s.partition) == ("t", 0)}


def stopped(result: ControllerResult) -> list[tuple[int, str, int, bool]]:
    return [(r.broker_id, s.topic, s.partition, s.delete_partition)
            for r in result.requests if isinstance(r, StopReplica) for s in r.partition_states]


def test_move_one_follower_adds_then_waits_then_removes() -> None:
    c = cluster([1, 2, 3])
    result = reassign(c, {T0: [1, 2, 4]})
    assert result.done and result.reassignment_results == {T0: Errors.NONE}
    full = RA((1, 2, 4, 3), (4,), (3,))
    # U: RS = TRS + ORS with AR/RR (partition 1 rewritten unchanged); A: epoch + 1
    assert topic_writes(result) == [{0: full, 1: RA((1,))}]
    assert state_writes(result) == [(1, 1, (1, 2, 3))]
    assert leader_and_isr(result) == {1: ((1, 2, 4, 3), (4,), (3,), False),
                                      2: ((1, 2, 4, 3), (4,), (3,), False),
                                      3: ((1, 2, 4, 3), (4,), (3,), False),
                                      4: ((1, 2, 4, 3), (4,), (3,), True)}
    assert stopped(result) == []
    assert ongoing(c) == {T0: full}
    assert c.controller.context.replica_assignment(T0) == (1, 2, 4, 3)

    # 4 is not in sync yet: nothing but the metadata moves
    result = isr_change(c, T0, [1, 2])
    assert topic_writes(result) == [] and state_writes(result) == []
    assert ongoing(c) == {T0: full}

    # B: every target replica in the ISR -> RR out of the ISR, RS = TRS, 3 deleted
    result = isr_change(c, T0, [1, 2, 4])
    assert state_writes(result) == [(1, 2, (1, 2, 4))]
    assert topic_writes(result) == [{0: RA((1, 2, 4)), 1: RA((1,))}]
    assert leader_and_isr(result) == {b: ((1, 2, 4), (), (), False) for b in (1, 2, 4)}
    assert stopped(result) == [(3, "t", 0, True)]
    assert ongoing(c) == {}
    assert c.controller.context.replica_assignment(T0) == (1, 2, 4)
    assert c.leadership(T0) == state(1, [1, 2, 4], leader_epoch=2, zk_version=4)
    # the state write precedes the final RS: until then the znode still holds ORS
    assert isinstance(result.zk_writes[1], UpdatePartitionState)
    assert isinstance(result.zk_writes[2], UpdateTopicAssignment)


def test_moving_the_leader_away_elects_the_first_in_sync_target() -> None:
    c = cluster([1, 2, 3])
    reassign(c, {T0: [3, 4, 2]})
    assert ongoing(c) == {T0: RA((3, 4, 2, 1), (4,), (1,))}
    result = isr_change(c, T0, [1, 2, 3, 4])
    assert state_writes(result) == [(3, 2, (2, 3, 4))]
    assert topic_writes(result) == [{0: RA((3, 4, 2)), 1: RA((1,))}]
    assert sorted(leader_and_isr(result)) == [2, 3, 4]
    assert stopped(result) == [(1, "t", 0, True)]
    assert c.leadership(T0).leader == 3


def test_grow_replication_factor_from_one_to_three() -> None:
    c = cluster([1])
    result = reassign(c, {T0: [1, 2, 3]})
    assert topic_writes(result) == [{0: RA((1, 2, 3), (2, 3), ()), 1: RA((1,))}]
    assert leader_and_isr(result) == {1: ((1, 2, 3), (2, 3), (), False),
                                      2: ((1, 2, 3), (2, 3), (), True),
                                      3: ((1, 2, 3), (2, 3), (), True)}
    assert state_writes(isr_change(c, T0, [1, 2])) == []
    result = isr_change(c, T0, [1, 2, 3])
    assert state_writes(result) == [(1, 2, (1, 2, 3))]
    assert topic_writes(result) == [{0: RA((1, 2, 3)), 1: RA((1,))}]
    assert stopped(result) == [] and ongoing(c) == {}


def test_shrink_replication_factor_completes_at_once() -> None:
    c = cluster([1, 2, 3])
    result = reassign(c, {T0: [1, 2]})
    assert result.reassignment_results == {T0: Errors.NONE}
    assert topic_writes(result) == [{0: RA((1, 2, 3), (), (3,)), 1: RA((1,))},
                                    {0: RA((1, 2)), 1: RA((1,))}]
    assert state_writes(result) == [(1, 1, (1, 2))]
    assert leader_and_isr(result) == {1: ((1, 2), (), (), False), 2: ((1, 2), (), (), False)}
    assert stopped(result) == [(3, "t", 0, True)]
    assert ongoing(c) == {}


def test_cancel_restores_the_original_replicas_and_drops_the_new_one() -> None:
    c = cluster([1, 2, 3])
    reassign(c, {T0: [1, 2, 4]})
    isr_change(c, T0, [1, 2, 3])                   # 4 not caught up yet
    result = reassign(c, {T0: None})
    assert result.reassignment_results == {T0: Errors.NONE}
    assert topic_writes(result) == [{0: RA((1, 2, 3)), 1: RA((1,))}]
    assert state_writes(result) == [(1, 2, (1, 2, 3))]
    assert sorted(leader_and_isr(result)) == [1, 2, 3]
    assert stopped(result) == [(4, "t", 0, True)]
    assert ongoing(c) == {}
    again = reassign(c, {T0: None})
    assert again.reassignment_results == {T0: Errors.NO_REASSIGNMENT_IN_PROGRESS}
    assert again.zk_writes == [] and again.requests == []


def test_a_new_reassignment_replaces_the_one_in_progress() -> None:
    c = cluster([1, 2, 3])
    reassign(c, {T0: [1, 2, 4]})
    result = reassign(c, {T0: [1, 3, 2]})
    # 4 is no longer wanted: out of RS and stopped; the order change completes at once
    assert topic_writes(result) == [{0: RA((1, 3, 2)), 1: RA((1,))}]
    assert stopped(result) == [(4, "t", 0, True)]
    assert ongoing(c) == {}


def test_refusals_are_per_partition() -> None:
    c = cluster([1, 2, 3])
    result = reassign(c, {T0: [1, 2, 9], T1: [1, 1], TopicPartition("t", 7): [1],
                          TopicPartition("nope", 0): [1]})
    assert result.reassignment_results == {
        T0: Errors.INVALID_REPLICA_ASSIGNMENT, T1: Errors.INVALID_REPLICA_ASSIGNMENT,
        TopicPartition("t", 7): Errors.UNKNOWN_TOPIC_OR_PARTITION,
        TopicPartition("nope", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION}
    assert result.zk_writes == [] and result.requests == []
    assert reassign(c, {T0: []}).reassignment_results == {T0: Errors.INVALID_REPLICA_ASSIGNMENT}
    assert reassign(c, {T0: [-1, 2]}).reassignment_results == {
        T0: Errors.INVALID_REPLICA_ASSIGNMENT}
    strict = c.run(c.controller.on_alter_partition_reassignments(
        {T0: [1, 2]}, allow_replication_factor_change=False))
    assert strict.reassignment_results == {T0: Errors.INVALID_REPLICATION_FACTOR}
    idle = KafkaController(2)
    refused = idle.on_alter_partition_reassignments({T0: [1]})
    assert refused.error is Errors.NOT_CONTROLLER
    assert refused.reassignment_results == {T0: Errors.NOT_CONTROLLER}
    assert idle.list_partition_reassignments().error is Errors.NOT_CONTROLLER


def test_a_dead_target_broker_keeps_the_reassignment_until_it_returns() -> None:
    c = cluster([1, 2, 3])
    reassign(c, {T0: [1, 2, 4]})
    result = c.change_brokers([broker(1), broker(2), broker(3)])      # 4 dies
    assert state_writes(result) == []                  # it was never in the ISR
    assert state_writes(isr_change(c, T0, [1, 2, 3])) == []
    assert ongoing(c) == {T0: RA((1, 2, 4, 3), (4,), (3,))}

    result = c.change_brokers([broker(1), broker(2), broker(3), broker(4, epoch=500)])
    # phase A again: epoch + 1 and the new replica told it is new
    assert state_writes(result) == [(1, 2, (1, 2, 3))]
    assert leader_and_isr(result)[4] == ((1, 2, 4, 3), (4,), (3,), True)
    result = isr_change(c, T0, [1, 2, 3, 4])
    assert state_writes(result) == [(1, 3, (1, 2, 4))]
    assert topic_writes(result) == [{0: RA((1, 2, 4)), 1: RA((1,))}]
    assert ongoing(c) == {}


def test_a_new_controller_resumes_from_the_topic_znode() -> None:
    zk = ZkStore({T0: state(1, [1, 2, 3], leader_epoch=4, controller_epoch=1, zk_version=6),
                  T1: state(1, [1], controller_epoch=1)})
    c = Cluster(KafkaController(2), zk, [broker(b) for b in (1, 2, 3, 4)],
                [topic("t", {0: [1, 2, 4, 3], 1: [1]})])
    result = c.failover(epoch=2, reassignments={T0: RA((1, 2, 4, 3), (4,), (3,))})
    assert ongoing(c) == {T0: RA((1, 2, 4, 3), (4,), (3,))}
    assert state_writes(result) == [(1, 5, (1, 2, 3))]
    assert leader_and_isr(result)[4] == ((1, 2, 4, 3), (4,), (3,), True)
    result = isr_change(c, T0, [1, 2, 3, 4])
    assert state_writes(result) == [(1, 6, (1, 2, 4))]
    assert topic_writes(result) == [{0: RA((1, 2, 4)), 1: RA((1,))}]
    assert ongoing(c) == {}


def test_failover_finishes_a_reassignment_whose_targets_are_in_sync() -> None:
    zk = ZkStore({T0: state(3, [1, 2, 3, 4], leader_epoch=2, zk_version=3),
                  T1: state(1, [1])})
    c = Cluster(KafkaController(1), zk, [broker(b) for b in (1, 2, 3, 4)],
                [topic("t", {0: [2, 4, 1, 3], 1: [1]})])
    result = c.failover(epoch=3, reassignments={T0: RA((2, 4, 1, 3), (4,), (1, 3))})
    assert state_writes(result) == [(2, 3, (2, 4))]
    assert topic_writes(result) == [{0: RA((2, 4)), 1: RA((1,))}]
    assert stopped(result) == [(1, "t", 0, True), (3, "t", 0, True)]
    assert ongoing(c) == {}


def test_list_names_only_the_partitions_being_reassigned() -> None:
    c = cluster([1, 2, 3])
    reassign(c, {T0: [2, 3, 4]})
    listed = c.controller.list_partition_reassignments([T0, T1])
    assert listed.done and listed.error is Errors.NONE
    assert listed.ongoing_reassignments == {T0: RA((2, 3, 4, 1), (4,), (1,))}
    assert c.controller.list_partition_reassignments([T1]).ongoing_reassignments == {}


def test_requests_follow_kafkas_order() -> None:
    c = cluster([1, 2, 3])
    reassign(c, {T0: [1, 2, 4]})
    result = isr_change(c, T0, [1, 2, 3, 4])
    kinds = [k for k, _, _ in summary(result.requests)]
    last_lai = max(i for i, k in enumerate(kinds) if k == "LeaderAndIsr")
    first_stop = kinds.index("StopReplica")
    assert last_lai < first_stop
