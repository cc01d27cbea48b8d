"""What the consumer reads and where it stands in each partition (Java ``SubscriptionState``).

The consumer either subscribes (to topics or a pattern; the group assigns partitions) or
assigns partitions itself; the two are exclusive until ``unsubscribe``.  Per assigned
partition a ``TopicPartitionState`` keeps the fetch position, the leader (and its epoch) the
position was last checked against, and Java's ``FetchStates``::

    INITIALIZING --seek / committed offset found--> FETCHING or AWAIT_VALIDATION
    INITIALIZING --no committed offset--> AWAIT_RESET --ListOffsets answered--> FETCHING
                                                     (or AWAIT_VALIDATION)
    FETCHING --OFFSET_OUT_OF_RANGE, seek_to_beginning/end--> AWAIT_RESET
    FETCHING --the metadata names another leader or epoch--> AWAIT_VALIDATION
    AWAIT_VALIDATION --OffsetsForLeaderEpoch: the epoch ends at or after the position-->
                     FETCHING
    AWAIT_VALIDATION --it ends before the position (the log was truncated)--> FETCHING at
                     that end offset, or AWAIT_RESET when the leader has no such epoch;
                     with ``auto.offset.reset=none`` it stays and ``LogTruncationError``
                     is raised

Validation (KIP-320).  A position carries the leader epoch of the record before it.  A
new leader may not have everything the old one handed out (an unclean election, a
leader that lost its disk), so when the leader or its epoch changes, a position with an
epoch waits in AWAIT_VALIDATION until the new leader says where that epoch ends in its
log; a position past that point was read from a log that no longer exists.  A position
without an epoch (a plain ``seek``, an old committed offset) or a leader whose epoch is
unknown cannot be checked and goes straight to FETCHING.  The answer is applied only if
the position and the leader are still the ones it was asked for.

A partition is *fetchable* when it has a valid position (FETCHING), is not paused and is
not about to be revoked (cooperative rebalancing).  ``group_subscription`` is the union of every member's
topics, tracked by the group leader so its metadata covers what it must assign.

Threading: mutated by the application thread and by completion handlers that may run on the
heartbeat thread (ListOffsets answers), so every method takes ``_lock``.
"""

from __future__ import annotations

import enum
import re
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, NamedTuple

from millrace.client.cluster import TopicPartition
from millrace.client.consumer.consumer_record import OffsetAndMetadata
from millrace.client.consumer.errors import NoOffsetForPartitionError
from millrace.client.errors import IllegalStateError
from millrace.client.metadata import LeaderAndEpoch

if TYPE_CHECKING:
    from millrace.client.consumer.listener import ConsumerRebalanceListener


class SubscriptionType(enum.Enum):
    NONE = 0
    AUTO_TOPICS = 1
    AUTO_PATTERN = 2
    USER_ASSIGNED = 3


class OffsetResetStrategy(enum.Enum):
    """``auto.offset.reset``; the value is the ListOffsets timestamp it asks for."""

    EARLIEST = -2
    LATEST = -1
    NONE = 0

    @staticmethod
    def of(name: str) -> OffsetResetStrategy:
        return OffsetResetStrategy[name.upper()]


class FetchState(enum.Enum):
    INITIALIZING = 0
    FETCHING = 1
    AWAIT_RESET = 2
    AWAIT_VALIDATION = 3

    @property
    def requires_position(self) -> bool:
        return self is FetchState.FETCHING or self is FetchState.AWAIT_VALIDATION


class FetchPosition(NamedTuple):
    """The next offset to fetch and the leader epoch of the record before it, if known."""

    offset: int
    offset_epoch: int | None = None


UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LogTruncation(NamedTuple):
    """A truncation found by validation with no reset policy to recover from it: the
    position that was checked and, when the leader knows it, the first offset (with its
    epoch) known to diverge from what was read."""

    topic_partition: TopicPartition
    fetch_position: FetchPosition
    divergent_offset: OffsetAndMetadata | None


_SUBSCRIPTION_EXCLUSIVE = ("Subscription to topics, partitions and pattern are mutually "
                           "exclusive")


class TopicPartitionState:
    __slots__ = ("current_leader", "high_watermark", "last_stable_offset", "log_start_offset",
                 "next_retry_ms", "paused", "pending_revocation", "position", "reset_strategy",
                 "state")

    def __init__(self) -> None:
        self.state = FetchState.INITIALIZING
        self.position: FetchPosition | None = None
        # the leader the position was last validated against; None until one is known
        self.current_leader: LeaderAndEpoch | None = None
        self.reset_strategy: OffsetResetStrategy | None = None
        self.paused = False
        self.pending_revocation = False
        self.high_watermark: int | None = None
        self.log_start_offset: int | None = None
        self.last_stable_offset: int | None = None
        self.next_retry_ms = 0

    @property
    def has_valid_position(self) -> bool:
        return self.state is FetchState.FETCHING and self.position is not None

    @property
    def is_fetchable(self) -> bool:
        return (not self.paused and not self.pending_revocation
                and self.state is FetchState.FETCHING and self.position is not None)

    def seek_validated(self, position: FetchPosition) -> None:
        self.position = position
        self.state = FetchState.FETCHING
        self.reset_strategy = None
        self.next_retry_ms = 0

    def seek_unvalidated(self, position: FetchPosition,
                         current: LeaderAndEpoch | None = None) -> None:
        """Java's ``seekUnvalidated``: ``current`` is the metadata's leader now (kept as
        it was when unknown); a position with an epoch is then validated against it."""
        self.seek_validated(position)
        if current is not None and current.leader is not None:
            self.current_leader = current
        self._validate_position()

    def _validate_position(self) -> None:
        """AWAIT_VALIDATION if the position's epoch can be checked with the leader's."""
        position, leader = self.position, self.current_leader
        if position is not None and position.offset_epoch is not None and \
                leader is not None and leader.epoch is not None:
            self.state = FetchState.AWAIT_VALIDATION
        else:
            self.state = FetchState.FETCHING
        self.next_retry_ms = 0

    def maybe_validate_position(self, current: LeaderAndEpoch) -> bool:
        """The metadata names ``current`` as the leader: a position checked against
        another leader or epoch is validated again.  True if it awaits validation."""
        if self.state is FetchState.AWAIT_RESET or current.leader is None:
            return False
        if self.position is not None and self.current_leader != current:
            self.current_leader = current
            self._validate_position()
        return self.state is FetchState.AWAIT_VALIDATION

    def complete_validation(self) -> None:
        if self.position is not None:
            self.state = FetchState.FETCHING
            self.next_retry_ms = 0

    def reset(self, strategy: OffsetResetStrategy) -> None:
        self.state = FetchState.AWAIT_RESET
        self.reset_strategy = strategy
        self.position = None
        self.next_retry_ms = 0


class SubscriptionState:
    def __init__(self, default_reset_strategy: OffsetResetStrategy) -> None:
        self._lock = threading.RLock()
        self.default_reset_strategy = default_reset_strategy
        self.subscription_type = SubscriptionType.NONE
        self._subscription: frozenset[str] = frozenset()
        self._group_subscription: frozenset[str] = frozenset()
        self._pattern: re.Pattern[str] | None = None
        self._assignment: dict[TopicPartition, TopicPartitionState] = {}
        self.rebalance_listener: ConsumerRebalanceListener | None = None
        self.assignment_version = 0  # bumped on every change of the assignment

    # ------------------------------------------------------------------ subscribing
    def _set_type(self, kind: SubscriptionType) -> None:
        if self.subscription_type is SubscriptionType.NONE:
            self.subscription_type = kind
        elif self.subscription_type is not kind:
            raise IllegalStateError(_SUBSCRIPTION_EXCLUSIVE)

    def subscribe(self, topics: Iterable[str],
                  listener: ConsumerRebalanceListener | None = None) -> bool:
        with self._lock:
            self._set_type(SubscriptionType.AUTO_TOPICS)
            self.rebalance_listener = listener
            return self.change_subscription(topics)

    def subscribe_pattern(self, pattern: re.Pattern[str],
                          listener: ConsumerRebalanceListener | None = None) -> None:
        with self._lock:
            self._set_type(SubscriptionType.AUTO_PATTERN)
            self.rebalance_listener = listener
            self._pattern = pattern

    def subscribe_from_pattern(self, topics: Iterable[str]) -> bool:
        with self._lock:
            if self.subscription_type is not SubscriptionType.AUTO_PATTERN:
                raise IllegalStateError("not subscribed to a pattern")
            return self.change_subscription(topics)

    def change_subscription(self, topics: Iterable[str]) -> bool:
        with self._lock:
            new = frozenset(topics)
            if new == self._subscription:
                return False
            self._subscription = new
            return True

    def group_subscribe(self, topics: Iterable[str]) -> bool:
        """The leader watches every member's topics; True if that adds topics."""
        with self._lock:
            if not self.has_auto_assigned_partitions():
                raise IllegalStateError(_SUBSCRIPTION_EXCLUSIVE)
            union = self._group_subscription | frozenset(topics)
            added = not union <= self._subscription | self._group_subscription
            self._group_subscription = union
            return added

    def reset_group_subscription(self) -> None:
        with self._lock:
            self._group_subscription = frozenset()

    @property
    def subscription(self) -> frozenset[str]:
        return self._subscription

    @property
    def pattern(self) -> re.Pattern[str] | None:
        return self._pattern

    def metadata_topics(self) -> frozenset[str]:
        """Topics whose metadata the consumer needs."""
        with self._lock:
            if self.subscription_type is SubscriptionType.USER_ASSIGNED:
                return frozenset(tp.topic for tp in self._assignment)
            return self._subscription | self._group_subscription

    def matches_subscribed_pattern(self, topic: str) -> bool:
        pattern = self._pattern
        return pattern is not None and pattern.fullmatch(topic) is not None

    def unsubscribe(self) -> None:
        with self._lock:
            self._subscription = frozenset()
            self._group_subscription = frozenset()
            self._assignment = {}
            self._pattern = None
            self.subscription_type = SubscriptionType.NONE
            self.rebalance_listener = None
            self.assignment_version += 1

    def has_auto_assigned_partitions(self) -> bool:
        return self.subscription_type in (SubscriptionType.AUTO_TOPICS,
                                          SubscriptionType.AUTO_PATTERN)

    def has_pattern_subscription(self) -> bool:
        return self.subscription_type is SubscriptionType.AUTO_PATTERN

    def is_user_assigned(self) -> bool:
        return self.subscription_type is SubscriptionType.USER_ASSIGNED

    # ------------------------------------------------------------------ assignment
    def assign_from_user(self, partitions: Iterable[TopicPartition]) -> bool:
        """Manual assignment; states of partitions kept are kept.  True if it changed."""
        with self._lock:
            wanted = list(dict.fromkeys(partitions))
            self._set_type(SubscriptionType.USER_ASSIGNED)
            if not wanted and not self._assignment:
                return False
            if set(wanted) == set(self._assignment):
                return False
            self._replace_assignment(wanted)
            return True

    def assign_from_subscribed(self, partitions: Iterable[TopicPartition]) -> None:
        """The group's assignment (only partitions of subscribed topics)."""
        with self._lock:
            if not self.has_auto_assigned_partitions():
                raise IllegalStateError("Attempt to dynamically assign partitions while "
                                        "manual assignment in use")
            wanted = list(dict.fromkeys(partitions))
            for tp in wanted:
                if tp.topic not in self._subscription:
                    raise IllegalStateError(f"Assigned partition {tp} for non-subscribed "
                                            "topic")
            self._replace_assignment(wanted)

    def _replace_assignment(self, partitions: list[TopicPartition]) -> None:
        old = self._assignment
        self._assignment = {tp: old.get(tp) or TopicPartitionState() for tp in partitions}
        for state in self._assignment.values():
            state.pending_revocation = False
        self.assignment_version += 1

    def check_assignment_matched_subscription(self, partitions: Iterable[TopicPartition]
                                              ) -> bool:
        subscription = self._subscription
        return all(tp.topic in subscription for tp in partitions)

    def assigned_partitions(self) -> list[TopicPartition]:
        with self._lock:
            return list(self._assignment)

    def num_assigned_partitions(self) -> int:
        return len(self._assignment)

    def is_assigned(self, tp: TopicPartition) -> bool:
        return tp in self._assignment

    def _state(self, tp: TopicPartition) -> TopicPartitionState:
        state = self._assignment.get(tp)
        if state is None:
            raise IllegalStateError(f"No current assignment for partition {tp}")
        return state

    def move_partition_to_end(self, tp: TopicPartition) -> None:
        """Fairness: partitions that just returned data go to the back of the fetch order."""
        with self._lock:
            state = self._assignment.pop(tp, None)
            if state is not None:
                self._assignment[tp] = state

    def mark_pending_revocation(self, partitions: Iterable[TopicPartition]) -> None:
        with self._lock:
            for tp in partitions:
                state = self._assignment.get(tp)
                if state is not None:
                    state.pending_revocation = True

    # ------------------------------------------------------------------ pause / resume
    def pause(self, tp: TopicPartition) -> None:
        with self._lock:
            self._state(tp).paused = True

    def resume(self, tp: TopicPartition) -> None:
        with self._lock:
            self._state(tp).paused = False

    def is_paused(self, tp: TopicPartition) -> bool:
        state = self._assignment.get(tp)
        return state is not None and state.paused

    def paused_partitions(self) -> set[TopicPartition]:
        with self._lock:
            return {tp for tp, s in self._assignment.items() if s.paused}

    # ------------------------------------------------------------------ positions
    def seek(self, tp: TopicPartition, offset: int, offset_epoch: int | None = None,
             current_leader: LeaderAndEpoch | None = None) -> None:
        """The user's seek (Java ``seekUnvalidated``): with an epoch, the position is
        validated against the leader before it is fetched from."""
        with self._lock:
            self._state(tp).seek_unvalidated(FetchPosition(offset, offset_epoch),
                                             current_leader)

    def seek_validated(self, tp: TopicPartition, position: FetchPosition) -> None:
        with self._lock:
            self._state(tp).seek_validated(position)

    def seek_if_initializing(self, tp: TopicPartition, position: FetchPosition,
                             current_leader: LeaderAndEpoch | None = None) -> None:
        """A committed offset arrived: use it unless the user seeked meanwhile."""
        with self._lock:
            state = self._assignment.get(tp)
            if state is not None and state.state is FetchState.INITIALIZING:
                state.seek_unvalidated(position, current_leader)

    def maybe_seek_unvalidated(self, tp: TopicPartition, position: FetchPosition,
                               requested: OffsetResetStrategy,
                               current_leader: LeaderAndEpoch | None = None) -> bool:
        """A ListOffsets answer for a reset: apply it if that reset is still wanted."""
        with self._lock:
            state = self._assignment.get(tp)
            if state is None or state.state is not FetchState.AWAIT_RESET or \
                    state.reset_strategy is not requested:
                return False
            state.seek_unvalidated(position, current_leader)
            return True

    def position(self, tp: TopicPartition) -> FetchPosition | None:
        state = self._assignment.get(tp)
        return state.position if state is not None and state.has_valid_position else None

    def set_position(self, tp: TopicPartition, position: FetchPosition) -> None:
        """Advance after records were handed out (only while FETCHING)."""
        with self._lock:
            state = self._state(tp)
            if state.state is not FetchState.FETCHING:
                raise IllegalStateError(f"cannot set the position of {tp} while "
                                        f"{state.state.name}")
            state.position = position

    # ------------------------------------------------------------------ validation
    def current_leader(self, tp: TopicPartition) -> LeaderAndEpoch | None:
        state = self._assignment.get(tp)
        return state.current_leader if state is not None else None

    def maybe_validate_position_for_current_leader(self, tp: TopicPartition,
                                                   current: LeaderAndEpoch) -> bool:
        """Java's name; True if ``tp`` now awaits validation against ``current``."""
        with self._lock:
            state = self._assignment.get(tp)
            return state is not None and state.maybe_validate_position(current)

    def awaiting_validation(self, tp: TopicPartition) -> bool:
        state = self._assignment.get(tp)
        return state is not None and state.state is FetchState.AWAIT_VALIDATION

    def complete_validation(self, tp: TopicPartition) -> None:
        with self._lock:
            self._state(tp).complete_validation()

    def partitions_needing_validation(self, now_ms: int
                                      ) -> dict[TopicPartition,
                                                tuple[FetchPosition, LeaderAndEpoch]]:
        """Positions awaiting validation and out of their retry backoff, with the leader
        each is to be checked against."""
        with self._lock:
            return {tp: (s.position, s.current_leader)
                    for tp, s in self._assignment.items()
                    if s.state is FetchState.AWAIT_VALIDATION and s.next_retry_ms <= now_ms
                    and s.position is not None and s.current_leader is not None}

    def maybe_complete_validation(self, tp: TopicPartition, requested: FetchPosition,
                                  requested_leader: LeaderAndEpoch, end_epoch: int,
                                  end_offset: int) -> LogTruncation | None:
        """Apply an OffsetsForLeaderEpoch answer: the requested epoch ends at
        ``end_offset`` in the leader's log (``end_epoch`` is the largest epoch the
        leader has at or below it).  Returns the truncation to report when there is no
        reset policy to recover with."""
        with self._lock:
            state = self._assignment.get(tp)
            if state is None or state.state is not FetchState.AWAIT_VALIDATION:
                return None
            position = state.position
            assert position is not None
            if position != requested or state.current_leader != requested_leader:
                return None  # moved since the request: a newer one will be sent
            if end_offset == UNDEFINED_EPOCH_OFFSET or end_epoch == UNDEFINED_EPOCH:
                # the leader has nothing at or below our epoch: no point known to agree
                if self.has_default_offset_reset_policy():
                    state.reset(self.default_reset_strategy)
                    return None
                return LogTruncation(tp, position, None)
            if end_offset < position.offset:
                divergent = FetchPosition(end_offset, end_epoch)
                if self.has_default_offset_reset_policy():
                    state.seek_validated(divergent)  # read the new leader's log from there
                    return None
                return LogTruncation(tp, position,
                                     OffsetAndMetadata(end_offset, "", end_epoch))
            state.complete_validation()
            return None

    # ------------------------------------------------------------------ resets
    def request_offset_reset(self, tp: TopicPartition,
                             strategy: OffsetResetStrategy | None = None) -> None:
        with self._lock:
            self._state(tp).reset(strategy or self.default_reset_strategy)

    def has_default_offset_reset_policy(self) -> bool:
        return self.default_reset_strategy is not OffsetResetStrategy.NONE

    def is_offset_reset_needed(self, tp: TopicPartition) -> bool:
        state = self._assignment.get(tp)
        return state is not None and state.state is FetchState.AWAIT_RESET

    def partitions_needing_reset(self, now_ms: int) -> dict[TopicPartition, OffsetResetStrategy]:
        with self._lock:
            return {tp: s.reset_strategy for tp, s in self._assignment.items()
                    if s.state is FetchState.AWAIT_RESET and s.reset_strategy is not None
                    and s.next_retry_ms <= now_ms and not s.paused}

    def set_next_allowed_retry(self, partitions: Iterable[TopicPartition],
                               next_retry_ms: int) -> None:
        with self._lock:
            for tp in partitions:
                state = self._assignment.get(tp)
                if state is not None:
                    state.next_retry_ms = next_retry_ms

    def has_all_fetch_positions(self) -> bool:
        with self._lock:
            return all(s.has_valid_position for s in self._assignment.values())

    def initializing_partitions(self) -> list[TopicPartition]:
        with self._lock:
            return [tp for tp, s in self._assignment.items()
                    if s.state is FetchState.INITIALIZING]

    def reset_initializing_positions(self) -> None:
        """Partitions still without a position get the default reset strategy; with
        ``auto.offset.reset=none`` that is ``NoOffsetForPartitionError``."""
        with self._lock:
            missing = []
            for tp, state in self._assignment.items():
                if state.state is FetchState.INITIALIZING:
                    if self.default_reset_strategy is OffsetResetStrategy.NONE:
                        missing.append(tp)
                    else:
                        state.reset(self.default_reset_strategy)
            if missing:
                raise NoOffsetForPartitionError(missing)

    def fetchable_partitions(self, include: Callable[[TopicPartition], bool] | None = None
                             ) -> list[TopicPartition]:
        with self._lock:
            return [tp for tp, s in self._assignment.items()
                    if s.is_fetchable and (include is None or include(tp))]

    def is_fetchable(self, tp: TopicPartition) -> bool:
        state = self._assignment.get(tp)
        return state is not None and state.is_fetchable

    def all_consumed(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """Positions of every partition that has one: what auto-commit commits."""
        with self._lock:
            return {tp: OffsetAndMetadata(s.position.offset, "", s.position.offset_epoch)
                    for tp, s in self._assignment.items()
                    if s.has_valid_position and s.position is not None}

    # ------------------------------------------------------------------ fetch metadata
    def update_fetch_metadata(self, tp: TopicPartition, high_watermark: int,
                              log_start_offset: int, last_stable_offset: int) -> None:
        state = self._assignment.get(tp)
        if state is None:
            return
        if high_watermark >= 0:
            state.high_watermark = high_watermark
        if log_start_offset >= 0:
            state.log_start_offset = log_start_offset
        if last_stable_offset >= 0:
            state.last_stable_offset = last_stable_offset

    def partition_lag(self, tp: TopicPartition, read_committed: bool) -> int | None:
        state = self._assignment.get(tp)
        if state is None or state.position is None:
            return None
        end = state.last_stable_offset if read_committed else state.high_watermark
        return None if end is None else end - state.position.offset

    def partition_lead(self, tp: TopicPartition) -> int | None:
        """The position's distance from the log start (Java ``partitionLead``)."""
        state = self._assignment.get(tp)
        if state is None or state.position is None or state.log_start_offset is None:
            return None
        return state.position.offset - state.log_start_offset

    def partition_end_offset(self, tp: TopicPartition, read_committed: bool) -> int | None:
        state = self._assignment.get(tp)
        if state is None:
            return None
        return state.last_stable_offset if read_committed else state.high_watermark
