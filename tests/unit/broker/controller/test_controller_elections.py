"""Controlled shutdown, preferred election, ElectLeaders, auto rebalance and AlterPartition."""

from __future__ import annotations

from millrace.broker.controller.controller_result import AlterPartitionItem, ElectionType
from millrace.broker.controller.kafka_controller import KafkaController
from millrace.broker.controller.zk_writes import (
    DeletePreferredReplicaElection,
    UpdatePartitionState,
)
from millrace.common.errors import Errors
from millrace.common.topic_partition import TopicPartition
from tests.unit.broker.controller.ctlgen import (
    T0,
    Cluster,
    ZkStore,
    broker,
    state,
    summary,
    topic,
)

T = [TopicPartition("t", p) for p in range(3)]
SINGLE = TopicPartition("single", 0)


def cluster() -> Cluster:
    zk = ZkStore({T[0]: state(1, [1, 2, 3], controller_epoch=0),
                  T[1]: state(2, [2, 3, 1], controller_epoch=0),
                  T[2]: state(3, [3, 1, 2], controller_epoch=0),
                  SINGLE: state(1, [1], controller_epoch=0)})
    c = Cluster(KafkaController(2), zk, [broker(1), broker(2), broker(3)],
                [topic("t", {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}),
                 topic("single", {0: [1]})])
    c.failover()
    return c


def test_controlled_shutdown_moves_leadership_first_and_leaves_rf1_partitions() -> None:
    c = cluster()
    result = c.run(c.controller.on_controlled_shutdown(1, 101))
    assert result.error is Errors.NONE
    assert result.remaining_partitions == [SINGLE]
    assert c.leadership(T[0]) == state(2, [2, 3], leader_epoch=1, zk_version=1)
    assert c.leadership(T[1]) == state(2, [2, 3], leader_epoch=1, zk_version=1)
    assert c.leadership(T[2]) == state(3, [3, 2], leader_epoch=1, zk_version=1)
    assert c.leadership(SINGLE) == state(1, [1], controller_epoch=0)
    assert summary(result.requests) == [
        ("StopReplica", 1, ("t-1:stop", "t-2:stop")),
        ("LeaderAndIsr", 1, ("t-0:2/1",)),          # the shutting-down leader hears it
        ("LeaderAndIsr", 2, ("t-0:2/1", "t-1:2/1", "t-2:3/1")),
        ("LeaderAndIsr", 3, ("t-0:2/1", "t-1:2/1", "t-2:3/1")),
        ("UpdateMetadata", 1, ("t-0:2/1", "t-1:2/1", "t-2:3/1")),
        ("UpdateMetadata", 2, ("t-0:2/1", "t-1:2/1", "t-2:3/1")),
        ("UpdateMetadata", 3, ("t-0:2/1", "t-1:2/1", "t-2:3/1")),
    ]
    # A shutting-down broker is never elected: 2 dies, t-1 goes to 3 although 1 is live.
    c.change_brokers([broker(1), broker(3)])
    assert c.leadership(T[1]).leader == 3
    assert 1 not in c.leadership(T[1]).isr


def test_controlled_shutdown_refusals() -> None:
    c = cluster()
    assert c.controller.on_controlled_shutdown(1, 100).error is Errors.STALE_BROKER_EPOCH
    assert c.controller.on_controlled_shutdown(9, 1).error is Errors.BROKER_NOT_AVAILABLE
    assert not c.controller.context.shutting_down_broker_ids


def rejoin(c: Cluster, tp: TopicPartition, isr: tuple[int, ...]) -> None:
    s = c.leadership(tp)
    leader_epoch = c.controller.context.broker_epoch(s.leader)
    assert leader_epoch is not None
    result = c.run(c.controller.on_alter_partition(
        s.leader, leader_epoch, [AlterPartitionItem(tp, s.leader_epoch, isr, s.zk_version)]))
    assert result.alter_partition_results == {tp: c.leadership(tp)}


def test_elect_leaders_preferred_with_per_partition_errors() -> None:
    c = cluster()
    c.change_brokers([broker(1, epoch=300), broker(2), broker(3)])  # 1 bounces
    assert c.leadership(T[0]).leader == 2
    unknown = TopicPartition("nope", 0)
    result = c.run(c.controller.on_elect_leaders(ElectionType.PREFERRED, [T[0], T[1], unknown]))
    assert result.election_results == {T[0]: Errors.PREFERRED_LEADER_NOT_AVAILABLE,
                                       T[1]: Errors.ELECTION_NOT_NEEDED,
                                       unknown: Errors.UNKNOWN_TOPIC_OR_PARTITION}
    assert result.zk_writes == []
    rejoin(c, T[0], (2, 3, 1))
    result = c.run(c.controller.on_elect_leaders(ElectionType.PREFERRED, [T[0]]))
    assert result.election_results == {T[0]: 1}
    assert c.leadership(T[0]) == state(1, [2, 3, 1], leader_epoch=2, zk_version=3)


def test_elect_leaders_unclean() -> None:
    c = cluster()
    c.change_brokers([broker(2), broker(3)])
    assert c.leadership(SINGLE) == state(-1, [1], leader_epoch=1, controller_epoch=1,
                                         zk_version=1)
    result = c.run(c.controller.on_elect_leaders(ElectionType.UNCLEAN, [SINGLE, T[1]]))
    assert result.election_results == {SINGLE: Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                                       T[1]: Errors.ELECTION_NOT_NEEDED}


def test_preferred_election_znode_is_deleted_after_electing() -> None:
    c = cluster()
    c.change_brokers([broker(1, epoch=300), broker(2), broker(3)])
    rejoin(c, T[0], (2, 3, 1))
    result = c.run(c.controller.on_preferred_election([T[0], T[1]]))
    assert c.leadership(T[0]).leader == 1
    assert [type(w) for w in result.zk_writes] == [UpdatePartitionState,
                                                    DeletePreferredReplicaElection]


def test_auto_rebalance_waits_for_its_interval_then_restores_preferred_leaders() -> None:
    c = cluster()
    c.change_brokers([broker(1, epoch=300), broker(2), broker(3)])
    rejoin(c, T[0], (2, 3, 1))
    ctl = c.controller
    assert c.run(ctl.check_auto_rebalance(T0 + 4_999)).zk_writes == []  # first check at +5 s
    result = c.run(ctl.check_auto_rebalance(T0 + 5_000))
    assert [w.tp for w in result.zk_writes if isinstance(w, UpdatePartitionState)] == [T[0]]
    assert c.leadership(T[0]).leader == 1
    # Imbalanced again, but the next check is leader.imbalance.check.interval.seconds later.
    c.change_brokers([broker(1, epoch=400), broker(2), broker(3)])
    rejoin(c, T[0], (2, 3, 1))
    assert c.run(ctl.check_auto_rebalance(T0 + 304_999)).zk_writes == []
    c.run(ctl.check_auto_rebalance(T0 + 305_000))
    assert c.leadership(T[0]).leader == 1


def test_auto_rebalance_respects_the_imbalance_percentage() -> None:
    # Broker 1 is preferred for 10 partitions; one led elsewhere is 10 %, not above: no election.
    parts = {p: [1, 2] for p in range(10)}
    states = {TopicPartition("w", p): state(1, [1, 2], controller_epoch=0) for p in range(10)}
    states[TopicPartition("w", 0)] = state(2, [1, 2], controller_epoch=0)
    c = Cluster(KafkaController(1), ZkStore(states), [broker(1), broker(2)],
                [topic("w", parts)])
    c.failover()
    assert c.run(c.controller.check_auto_rebalance(T0 + 5_000)).zk_writes == []
    assert c.leadership(TopicPartition("w", 0)).leader == 2


def alter_cluster() -> Cluster:
    tp = T[0]
    c = Cluster(KafkaController(2), ZkStore({tp: state(1, [1, 2, 3], leader_epoch=4,
                                                       controller_epoch=0, zk_version=6)}),
                [broker(1), broker(2), broker(3)], [topic("t", {0: [1, 2, 3]})])
    c.failover()
    return c


def alter(c: Cluster, broker_id: int, broker_epoch: int, leader_epoch: int,
          isr: tuple[int, ...], partition_epoch: int) -> object:
    result = c.run(c.controller.on_alter_partition(broker_id, broker_epoch, [
        AlterPartitionItem(T[0], leader_epoch, isr, partition_epoch)]))
    return result.error if result.error is not Errors.NONE else result.alter_partition_results[T[0]]


def test_alter_partition_checks() -> None:
    c = alter_cluster()
    assert alter(c, 1, 100, 4, (1, 2), 6) is Errors.STALE_BROKER_EPOCH
    assert alter(c, 7, 107, 4, (1, 2), 6) is Errors.STALE_BROKER_EPOCH
    assert alter(c, 1, 101, 3, (1, 2), 6) is Errors.FENCED_LEADER_EPOCH
    assert alter(c, 1, 101, 5, (1, 2), 6) is Errors.NOT_CONTROLLER
    assert alter(c, 1, 101, 4, (1, 2), 5) is Errors.INVALID_UPDATE_VERSION
    c.change_brokers([broker(1), broker(2)])           # 3 leaves; its ISR entry goes too
    s = c.leadership(T[0])
    assert alter(c, 1, 101, s.leader_epoch, (1, 2, 3), s.zk_version) is Errors.INELIGIBLE_REPLICA
    assert c.zk.states[T[0]] == s


def test_alter_partition_bumps_only_the_zk_version() -> None:
    c = alter_cluster()
    got = alter(c, 1, 101, 4, (1, 2), 6)
    expected = state(1, [1, 2], leader_epoch=4, controller_epoch=1, zk_version=7)
    assert got == expected and c.leadership(T[0]) == expected
    # The same request again (its partition epoch now stale) answers the current state.
    assert alter(c, 1, 101, 4, (2, 1), 6) == expected
    assert c.zk.states[T[0]].zk_version == 7
