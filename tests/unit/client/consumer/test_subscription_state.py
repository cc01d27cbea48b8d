"""SubscriptionState: exclusive modes, the per-partition fetch state machine, pause,
resets, consumed positions and group subscriptions."""

from __future__ import annotations

import re

import pytest
from consumergen import subscriptions, tps

from millrace.client.cluster import Node, TopicPartition
from millrace.client.consumer._internals.subscription_state import (
    FetchPosition,
    LogTruncation,
    OffsetResetStrategy,
    SubscriptionState,
)
from millrace.client.consumer.consumer_record import OffsetAndMetadata
from millrace.client.consumer.errors import NoOffsetForPartitionError
from millrace.client.errors import IllegalStateError
from millrace.client.metadata import LeaderAndEpoch

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def test_subscribe_and_assign_are_exclusive() -> None:
    s = subscriptions()
    s.subscribe(["t"])
    with pytest.raises(IllegalStateError, match="mutually exclusive"):
        s.assign_from_user([T0])
    with pytest.raises(IllegalStateError):
        s.subscribe_pattern(re.compile("t.*"))
    s.unsubscribe()
    assert s.assign_from_user([T0])
    with pytest.raises(IllegalStateError):
        s.subscribe(["t"])


def test_assignment_keeps_state_of_partitions_kept() -> None:
    s = subscriptions()
    s.assign_from_user([T0, T1])
    s.seek(T0, 42)
    assert not s.assign_from_user([T1, T0]), "same set: no change"
    s.assign_from_user([T0, TopicPartition("u", 0)])
    assert s.position(T0) == FetchPosition(42)
    assert not s.is_assigned(T1)


def test_partition_states() -> None:
    s = subscriptions("latest")
    s.assign_from_user([T0, T1])
    assert s.initializing_partitions() == [T0, T1]
    assert not s.has_all_fetch_positions() and s.fetchable_partitions() == []
    s.seek(T0, 5)
    s.reset_initializing_positions()
    assert s.is_offset_reset_needed(T1)
    assert s.partitions_needing_reset(now_ms=0) == {T1: OffsetResetStrategy.LATEST}
    # a ListOffsets answer for a reset nobody wants any more is ignored
    assert not s.maybe_seek_unvalidated(T1, FetchPosition(9), OffsetResetStrategy.EARLIEST)
    assert s.maybe_seek_unvalidated(T1, FetchPosition(9, 3), OffsetResetStrategy.LATEST)
    assert s.has_all_fetch_positions()
    assert s.fetchable_partitions() == [T0, T1]
    assert s.all_consumed() == {T0: OffsetAndMetadata(5), T1: OffsetAndMetadata(9, "", 3)}


def test_retry_backoff_hides_partitions_from_reset() -> None:
    s = subscriptions()
    s.assign_from_user([T0])
    s.request_offset_reset(T0)
    s.set_next_allowed_retry([T0], 1000)
    assert s.partitions_needing_reset(999) == {}
    assert s.partitions_needing_reset(1000) == {T0: OffsetResetStrategy.EARLIEST}


def test_no_reset_policy_raises_naming_the_partitions() -> None:
    s = subscriptions("none")
    s.assign_from_user([T0, T1])
    s.seek(T1, 0)
    with pytest.raises(NoOffsetForPartitionError) as e:
        s.reset_initializing_positions()
    assert e.value.partitions == {T0}
    assert "t-0" in str(e.value)
    assert not s.has_default_offset_reset_policy()


def test_pause_and_pending_revocation_stop_fetching() -> None:
    s = subscriptions()
    s.assign_from_user([T0, T1])
    s.seek(T0, 0)
    s.seek(T1, 0)
    s.pause(T0)
    assert s.fetchable_partitions() == [T1] and s.paused_partitions() == {T0}
    s.resume(T0)
    s.mark_pending_revocation([T1])
    assert s.fetchable_partitions() == [T0]
    with pytest.raises(IllegalStateError):
        s.pause(TopicPartition("x", 0))


def test_set_position_only_while_fetching() -> None:
    s = subscriptions()
    s.assign_from_user([T0])
    with pytest.raises(IllegalStateError):
        s.set_position(T0, FetchPosition(1))
    s.seek(T0, 0)
    s.set_position(T0, FetchPosition(7, 2))
    assert s.position(T0) == FetchPosition(7, 2)


def test_move_partition_to_end_rotates_fetch_order() -> None:
    s = subscriptions()
    s.assign_from_user(tps("t", 0, 1, 2))
    for p in tps("t", 0, 1, 2):
        s.seek(p, 0)
    s.move_partition_to_end(T0)
    assert s.fetchable_partitions() == tps("t", 1, 2, 0)


def test_group_subscription_and_metadata_topics() -> None:
    s = subscriptions()
    s.subscribe(["a"])
    assert s.group_subscribe(["a", "b"])
    assert not s.group_subscribe(["b"])
    assert s.metadata_topics() == {"a", "b"}
    s.reset_group_subscription()
    assert s.metadata_topics() == {"a"}
    with pytest.raises(IllegalStateError, match="non-subscribed"):
        s.assign_from_subscribed([TopicPartition("b", 0)])


def test_pattern_subscription() -> None:
    s = subscriptions()
    s.subscribe_pattern(re.compile(r"orders\..*"))
    assert s.matches_subscribed_pattern("orders.eu")
    assert not s.matches_subscribed_pattern("orders")
    assert s.subscribe_from_pattern(["orders.eu"])
    assert not s.subscribe_from_pattern(["orders.eu"])
    assert s.subscription == {"orders.eu"}
    assert s.has_pattern_subscription() and s.has_auto_assigned_partitions()


def test_lag_uses_the_high_watermark_or_the_last_stable_offset() -> None:
    s = subscriptions()
    s.assign_from_user([T0])
    s.seek(T0, 10)
    s.update_fetch_metadata(T0, high_watermark=25, log_start_offset=0, last_stable_offset=20)
    assert s.partition_lag(T0, read_committed=False) == 15
    assert s.partition_lag(T0, read_committed=True) == 10


# ---------------------------------------------------------------------- validation (KIP-320)
LEADER0, LEADER1 = Node(0, "a", 9092), Node(1, "b", 9092)


def validating(reset: str = "earliest") -> SubscriptionState:
    """T0 fetching at 10, the record before it written in epoch 3, checked against node 0
    in epoch 3; then the metadata names node 1 in epoch 4."""
    s = subscriptions(reset)
    s.assign_from_user([T0])
    s.seek(T0, 10, 3)
    assert s.maybe_validate_position_for_current_leader(T0, LeaderAndEpoch(LEADER0, 3))
    s.complete_validation(T0)
    assert s.fetchable_partitions() == [T0]
    assert s.maybe_validate_position_for_current_leader(T0, LeaderAndEpoch(LEADER1, 4))
    return s


def test_a_seek_without_a_known_leader_fetches_until_a_leader_is_seen() -> None:
    s = subscriptions()
    s.assign_from_user([T0])
    s.seek(T0, 10, 3)
    assert s.fetchable_partitions() == [T0] and s.current_leader(T0) is None
    # the first leader seen, with an epoch, is asked first
    assert s.maybe_validate_position_for_current_leader(T0, LeaderAndEpoch(LEADER0, 3))
    assert s.awaiting_validation(T0) and s.fetchable_partitions() == []


def test_a_leader_change_sends_the_position_to_validation() -> None:
    s = validating()
    assert s.awaiting_validation(T0)
    assert s.position(T0) is None and not s.has_all_fetch_positions()
    assert s.fetchable_partitions() == [] and s.all_consumed() == {}
    assert s.partitions_needing_validation(0) == {
        T0: (FetchPosition(10, 3), LeaderAndEpoch(LEADER1, 4))}
    # the same leader again changes nothing; a backoff hides it
    assert s.maybe_validate_position_for_current_leader(T0, LeaderAndEpoch(LEADER1, 4))
    s.set_next_allowed_retry([T0], 500)
    assert s.partitions_needing_validation(499) == {}
    assert T0 in s.partitions_needing_validation(500)
    # epoch 3 ends at 12 on the new leader: nothing we read is gone
    assert s.maybe_complete_validation(T0, FetchPosition(10, 3), LeaderAndEpoch(LEADER1, 4),
                                       3, 12) is None
    assert s.position(T0) == FetchPosition(10, 3) and s.fetchable_partitions() == [T0]
    assert s.current_leader(T0) == LeaderAndEpoch(LEADER1, 4)


def test_the_end_offset_equal_to_the_position_is_no_truncation() -> None:
    s = validating("none")
    assert s.maybe_complete_validation(T0, FetchPosition(10, 3), LeaderAndEpoch(LEADER1, 4),
                                       3, 10) is None
    assert s.position(T0) == FetchPosition(10, 3)


@pytest.mark.parametrize("leader", [
    LeaderAndEpoch(LEADER1, None),  # an epoch-less leader (an old broker)
    LeaderAndEpoch(LEADER1, 4),
])
def test_positions_that_cannot_be_checked_keep_fetching(leader: LeaderAndEpoch) -> None:
    s = subscriptions()
    s.assign_from_user([T0])
    s.seek(T0, 10)  # no epoch: a plain seek or an old committed offset
    if leader.epoch is None:
        s.seek(T0, 10, 3)
    assert not s.maybe_validate_position_for_current_leader(T0, leader)
    assert s.position(T0) is not None and s.current_leader(T0) == leader


def test_no_leader_and_pending_resets_are_left_alone() -> None:
    s = validating()
    s.complete_validation(T0)
    assert not s.maybe_validate_position_for_current_leader(T0, LeaderAndEpoch(None, 5))
    assert s.current_leader(T0) == LeaderAndEpoch(LEADER1, 4)
    s.request_offset_reset(T0)
    assert not s.maybe_validate_position_for_current_leader(T0, LeaderAndEpoch(LEADER0, 5))
    assert s.is_offset_reset_needed(T0)


def test_truncation_with_a_reset_policy_moves_to_the_divergence_point() -> None:
    """Records 7..9 of epoch 3 are not in the new leader's log: read its log from 7."""
    s = validating("earliest")
    assert s.maybe_complete_validation(T0, FetchPosition(10, 3), LeaderAndEpoch(LEADER1, 4),
                                       2, 7) is None
    assert s.position(T0) == FetchPosition(7, 2) and s.fetchable_partitions() == [T0]


def test_truncation_without_a_reset_policy_is_reported() -> None:
    s = validating("none")
    truncation = s.maybe_complete_validation(T0, FetchPosition(10, 3),
                                             LeaderAndEpoch(LEADER1, 4), 2, 7)
    assert truncation == LogTruncation(T0, FetchPosition(10, 3), OffsetAndMetadata(7, "", 2))
    assert s.awaiting_validation(T0), "nothing is fetched until the application seeks"
    s.seek(T0, 7)
    assert s.position(T0) == FetchPosition(7)


def test_an_unknown_epoch_resets_or_is_reported_without_a_divergent_offset() -> None:
    s = validating("latest")
    assert s.maybe_complete_validation(T0, FetchPosition(10, 3), LeaderAndEpoch(LEADER1, 4),
                                       -1, -1) is None
    assert s.partitions_needing_reset(0) == {T0: OffsetResetStrategy.LATEST}
    s = validating("none")
    assert s.maybe_complete_validation(T0, FetchPosition(10, 3), LeaderAndEpoch(LEADER1, 4),
                                       -1, -1) == LogTruncation(T0, FetchPosition(10, 3), None)


def test_answers_for_an_old_position_or_leader_are_ignored() -> None:
    s = validating("none")
    # the leader moved again while the request was out
    assert s.maybe_validate_position_for_current_leader(T0, LeaderAndEpoch(LEADER0, 5))
    assert s.maybe_complete_validation(T0, FetchPosition(10, 3), LeaderAndEpoch(LEADER1, 4),
                                       2, 7) is None
    assert s.awaiting_validation(T0)
    # the application seeked elsewhere (with an epoch: validated again)
    s.seek(T0, 20, 5)
    assert s.maybe_complete_validation(T0, FetchPosition(10, 3), LeaderAndEpoch(LEADER0, 5),
                                       2, 7) is None
    assert s.partitions_needing_validation(0) == {
        T0: (FetchPosition(20, 5), LeaderAndEpoch(LEADER0, 5))}


def test_a_seek_with_the_metadatas_leader_is_validated_at_once() -> None:
    s = subscriptions()
    s.assign_from_user([T0, T1])
    s.seek(T0, 10, 3, LeaderAndEpoch(LEADER0, 3))
    s.seek(T1, 10, None, LeaderAndEpoch(LEADER0, 3))  # nothing to check it with
    assert s.awaiting_validation(T0) and s.fetchable_partitions() == [T1]
    assert s.current_leader(T1) == LeaderAndEpoch(LEADER0, 3)
    # an unknown leader keeps the one the partition had
    s.seek(T1, 12, None, LeaderAndEpoch(None, None))
    assert s.current_leader(T1) == LeaderAndEpoch(LEADER0, 3)
