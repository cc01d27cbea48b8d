"""The election algorithms of Kafka's PartitionLeaderElectionAlgorithms, one table row each."""

from __future__ import annotations

from millrace.broker.controller.election import (
    ElectedLeader,
    LeaderRecoveryState,
    controlled_shutdown_leader,
    new_partition_leader,
    offline_partition_leader,
    preferred_replica_leader,
    reassignment_leader,
)


def test_new_partition_takes_the_first_live_replica() -> None:
    assert new_partition_leader([3, 1, 2], {1, 2}) == ElectedLeader(1, (1, 2))
    assert new_partition_leader([3], {1, 2}) is None


def test_offline_clean_election_picks_first_live_isr_member_in_ar_order() -> None:
    # AR order decides, not ISR order.
    assert offline_partition_leader([1, 2, 3], [3, 2], {2, 3}, False) == ElectedLeader(2, (3, 2))
    # 3 is live but not in the ISR; the ISR keeps only live members.
    assert offline_partition_leader([1, 2, 3], [1, 2], {2, 3}, False) == ElectedLeader(2, (2,))


def test_offline_without_live_isr_member_needs_unclean() -> None:
    assert offline_partition_leader([1, 2, 3], [1], {2, 3}, False) is None
    assert offline_partition_leader([1, 2, 3], [1], {2, 3}, True) == ElectedLeader(
        2, (2,), LeaderRecoveryState.RECOVERING)
    assert offline_partition_leader([1, 2], [1], {3}, True) is None


def test_preferred_needs_ar0_live_and_in_sync() -> None:
    assert preferred_replica_leader([1, 2], [2, 1], {1, 2}) == ElectedLeader(1, (2, 1))
    assert preferred_replica_leader([1, 2], [2], {1, 2}) is None
    assert preferred_replica_leader([1, 2], [2, 1], {2}) is None


def test_controlled_shutdown_skips_shutting_down_brokers() -> None:
    assert controlled_shutdown_leader([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1}) == ElectedLeader(
        2, (2, 3))
    assert controlled_shutdown_leader([1, 2], [1], {1, 2}, {1}) is None


def test_reassignment_leader_comes_from_the_target_set() -> None:
    assert reassignment_leader([4, 5], [1, 5, 4], {1, 4, 5}) == ElectedLeader(4, (1, 5, 4))
    assert reassignment_leader([4, 5], [1], {1, 4, 5}) is None
