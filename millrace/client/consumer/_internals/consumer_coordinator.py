"""The consumer's side of the group protocol (Java ``ConsumerCoordinator``).

On top of ``AbstractCoordinator`` (membership) this adds what "consumer" groups mean:

* the member metadata is a ConsumerProtocol Subscription per configured assignor; the
  rebalance protocol is the most capable one *all* assignors support, so the default
  ``[range, cooperative-sticky]`` rebalances eagerly, as in Java (KIP-429 upgrade path);
* ``on_join_prepare``: commit (auto-commit), then revoke -- everything (EAGER) or only
  partitions of topics no longer subscribed (COOPERATIVE) -- or report partitions *lost*
  when the generation was reset;
* the leader decodes every member's Subscription, watches the union of their topics,
  runs the assignor chosen by the coordinator and (COOPERATIVE) checks that no partition
  moves directly from one member to another;
* ``on_join_complete``: adopt the assignment; COOPERATIVE revokes what was taken away and
  asks for the follow-up rebalance;
* offsets: OffsetCommit (sync, async, auto every ``auto.commit.interval.ms``) with the
  current generation -- a stale generation makes it ``CommitFailedError`` -- and
  OffsetFetch for partitions without a position;
* the leader rejoins when the partition count of a subscribed topic changes; everyone
  rejoins when its subscription (or the pattern's match) changes.

Listener callbacks and commit callbacks run on the application thread.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Collection, Mapping
from typing import Any

from millrace.client.cluster import Cluster, TopicPartition
from millrace.client.consumer._internals.abstract_coordinator import (
    AbstractCoordinator,
    Generation,
    MemberState,
)
from millrace.client.consumer._internals.consumer_metadata import ConsumerMetadata
from millrace.client.consumer._internals.consumer_metrics import GroupCoordinatorMetrics
from millrace.client.consumer._internals.consumer_network_client import ConsumerNetworkClient
from millrace.client.consumer._internals.offset_commit import OffsetCommitter
from millrace.client.consumer._internals.request_future import RequestFuture, Timer
from millrace.client.consumer._internals.subscription_state import (
    FetchPosition,
    SubscriptionState,
)
from millrace.client.consumer.assignors import (
    ConsumerGroupMetadata,
    ConsumerPartitionAssignor,
    RebalanceProtocol,
)
from millrace.client.consumer.consumer_record import OffsetAndMetadata
from millrace.client.consumer.interceptor import ConsumerInterceptors
from millrace.client.errors import IllegalStateError
from millrace.common.errors import KafkaError
from millrace.common.time import Time
from millrace.protocol.consumer_protocol import (
    ASSIGNMENT_VERSION,
    PROTOCOL_TYPE,
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

log = logging.getLogger(__name__)

CommitCallback = Callable[[Mapping[TopicPartition, OffsetAndMetadata], BaseException | None],
                          None]


def common_protocol(assignors: list[ConsumerPartitionAssignor]) -> RebalanceProtocol | None:
    supported = set(RebalanceProtocol)
    for assignor in assignors:
        supported &= set(assignor.supported_protocols())
    return max(supported) if supported else None


class ConsumerCoordinator(AbstractCoordinator, OffsetCommitter):
    def __init__(self, client: ConsumerNetworkClient, metadata: ConsumerMetadata,
                 subscriptions: SubscriptionState, assignors: list[ConsumerPartitionAssignor],
                 time: Time, *, group_id: str, group_instance_id: str | None = None,
                 client_id: str = "", client_rack: str | None = None,
                 session_timeout_ms: int = 45_000, rebalance_timeout_ms: int = 300_000,
                 heartbeat_interval_ms: int = 3000, retry_backoff_ms: int = 100,
                 request_timeout_ms: int = 30_000, auto_commit_enabled: bool = True,
                 auto_commit_interval_ms: int = 5000, leave_group_on_close: bool = True,
                 interceptors: ConsumerInterceptors | None = None,
                 require_stable: bool = False, start_heartbeat_thread: bool = True,
                 metrics: GroupCoordinatorMetrics | None = None) -> None:
        AbstractCoordinator.__init__(
            self, client, time, group_id=group_id, group_instance_id=group_instance_id,
            client_id=client_id, session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms, retry_backoff_ms=retry_backoff_ms,
            request_timeout_ms=request_timeout_ms, leave_group_on_close=leave_group_on_close,
            start_heartbeat_thread=start_heartbeat_thread, metrics=metrics)
        OffsetCommitter.__init__(self, auto_commit_enabled=auto_commit_enabled,
                                 auto_commit_interval_ms=auto_commit_interval_ms,
                                 interceptors=interceptors, require_stable=require_stable)
        self._metadata = metadata
        self._subscriptions = subscriptions
        self.assignors = assignors
        self.client_rack = client_rack
        self.protocol = common_protocol(assignors)
        self._joined_subscription: frozenset[str] | None = None
        self._is_leader = False
        self._assignment_snapshot: dict[str, int] | None = None
        self._metadata_snapshot: dict[str, int] = {}
        self._metadata_version_seen = -1
        self._join_prepare_deadline: int | None = None
        self._join_prepare_commit: RequestFuture[None] | None = None
        self._listener_errors: deque[BaseException] = deque()

    # ------------------------------------------------------------------ polling
    def poll(self, timer: Timer, wait_for_join: bool = False) -> bool:
        """The application thread's share of group work; False if not done in time."""
        self.invoke_completed_offset_commit_callbacks()
        subscriptions = self._subscriptions
        if subscriptions.has_auto_assigned_partitions():
            if self.protocol is None:
                raise IllegalStateError("the configured assignors have no common rebalance "
                                        "protocol")
            self.poll_heartbeat(timer.current_ms)
            if self.coordinator_unknown() and not self.ensure_coordinator_ready(timer):
                return False
            self._maybe_update_metadata_snapshot()
            if self.rejoin_needed_or_pending():
                if subscriptions.has_pattern_subscription() and \
                        self._metadata.update_requested():
                    self._client.await_metadata_update(timer.remaining_ms)
                    self._maybe_update_metadata_snapshot()
                join_timer = timer if wait_for_join else Timer(self._time, 0)
                if not self.ensure_active_group(join_timer):
                    timer.update()
                    return False
                timer.update()
        elif self.auto_commit_enabled and self.coordinator_unknown():
            self.lookup_coordinator()  # manual assignment: only needed for commits
        self.maybe_auto_commit_offsets_async(timer.current_ms)
        return True

    def time_to_next_poll(self, now_ms: int) -> int:
        wait = super().time_to_next_poll(now_ms)
        if self.auto_commit_enabled:
            wait = min(wait, max(self._next_auto_commit_ms - now_ms, 0))
        return wait

    def _maybe_update_metadata_snapshot(self) -> None:
        version = self._metadata.update_version
        if version == self._metadata_version_seen:
            return
        self._metadata_version_seen = version
        cluster = self._metadata.fetch()
        self.update_pattern_subscription(cluster)
        snapshot = {}
        for topic in self._subscriptions.metadata_topics():
            count = cluster.partition_count(topic)
            if count:
                snapshot[topic] = count
        self._metadata_snapshot = snapshot

    def update_pattern_subscription(self, cluster: Cluster) -> None:
        subscriptions = self._subscriptions
        if not subscriptions.has_pattern_subscription():
            return
        include_internal = self._metadata.include_internal_topics
        topics = [t for t in cluster.topics if subscriptions.matches_subscribed_pattern(t)
                  and (include_internal or t not in cluster.internal_topics)]
        if subscriptions.subscribe_from_pattern(topics):
            log.info("group %s: pattern subscription now matches %s", self.group_id,
                     sorted(topics))
            self._metadata.request_update()

    def rejoin_needed_or_pending(self) -> bool:
        if not self._subscriptions.has_auto_assigned_partitions():
            return False
        snapshot = self._assignment_snapshot
        if snapshot is not None and any(self._metadata_snapshot.get(t, count) != count
                                         for t, count in snapshot.items()):
            self.request_rejoin("the metadata (partition counts) of subscribed topics changed")
            self._assignment_snapshot = None
            return True
        joined = self._joined_subscription
        if joined is not None and joined != self._subscriptions.subscription:
            self.request_rejoin(f"the subscription changed from {sorted(joined)} to "
                                f"{sorted(self._subscriptions.subscription)}")
            self._joined_subscription = None
            return True
        return super().rejoin_needed_or_pending()

    # ------------------------------------------------------------------ protocol hooks
    def protocol_type(self) -> str:
        return PROTOCOL_TYPE

    def metadata(self) -> list[tuple[str, bytes]]:
        topics = sorted(self._subscriptions.subscription)
        self._joined_subscription = frozenset(topics)
        owned = sorted(self._subscriptions.assigned_partitions())
        with self._lock:
            generation_id = self.generation.generation_id
        return [(a.name, encode_subscription(Subscription(
                    topics, a.subscription_user_data(set(topics)), owned, generation_id,
                    self.client_rack)))
                for a in self.assignors]

    def _assignor(self, name: str | None) -> ConsumerPartitionAssignor:
        for assignor in self.assignors:
            if assignor.name == name:
                return assignor
        raise IllegalStateError(f"Coordinator selected invalid assignment protocol: {name}")

    def on_join_prepare(self, timer: Timer, generation_id: int, member_id: str) -> bool:
        if generation_id >= 0 and self.auto_commit_enabled and \
                not self._commit_before_rebalance(timer):
            return False
        self._join_prepare_deadline = None
        assigned = self._subscriptions.assigned_partitions()
        if generation_id < 0 or not member_id:
            if assigned:
                log.info("group %s: giving away all assigned partitions as lost since the "
                         "generation/member id has been reset", self.group_id)
                self._invoke_listener("lost", assigned)
                self._subscriptions.assign_from_subscribed([])
        elif self.protocol is RebalanceProtocol.EAGER:
            self._invoke_listener("revoked", assigned)
            self._subscriptions.assign_from_subscribed([])
        else:
            subscribed = self._subscriptions.subscription
            revoked = [tp for tp in assigned if tp.topic not in subscribed]
            if revoked:
                self._invoke_listener("revoked", revoked)
                self._subscriptions.assign_from_subscribed(
                    [tp for tp in assigned if tp.topic in subscribed])
        self._is_leader = False
        self._subscriptions.reset_group_subscription()
        self._raise_listener_error()
        return True

    def _commit_before_rebalance(self, timer: Timer) -> bool:
        """Auto-commit before revoking (bounded by the rebalance timeout); False = retry."""
        now = timer.update()
        if self._join_prepare_deadline is None:
            self._join_prepare_deadline = now + self.rebalance_timeout_ms
        if self._join_prepare_commit is None:
            self._join_prepare_commit = self.commit_offsets_async(
                self._subscriptions.all_consumed(), None)
        future = self._join_prepare_commit
        self._client.poll_until(future, min(timer.remaining_ms,
                                            max(self._join_prepare_deadline - now, 0)))
        now = timer.update()
        if now >= self._join_prepare_deadline:
            log.error("group %s: asynchronous auto-commit of offsets failed: join prepare "
                      "timeout; will continue to join group", self.group_id)
        elif not future.is_done or (future.failed() and future.is_retriable()):
            if future.is_done:
                self._join_prepare_commit = None
            self._client.sleep(min(timer.remaining_ms, self.retry_backoff_ms))
            timer.update()
            return False
        elif future.failed():
            log.error("group %s: asynchronous auto-commit of offsets failed: %s; will "
                      "continue to join group", self.group_id, future.exception)
        self._join_prepare_commit = None
        return True

    def perform_assignment(self, leader_id: str, protocol: str,
                           members: list[Any]) -> dict[str, bytes]:
        assignor = self._assignor(protocol)
        subscriptions: dict[str, Subscription] = {}
        all_topics: set[str] = set()
        for member in members:
            subscription = decode_subscription(member.metadata)
            subscription.group_instance_id = member.group_instance_id
            subscriptions[member.member_id] = subscription
            all_topics.update(subscription.topics)
        if self._subscriptions.group_subscribe(all_topics) or \
                not all_topics <= self._metadata.fetch().topics:
            # the leader must know every member's topics before it can assign them
            self._client.await_metadata_update(self.request_timeout_ms)
        cluster = self._metadata.fetch()
        partitions_per_topic = {t: n for t in all_topics
                                if (n := cluster.partition_count(t) or 0) > 0}
        self._is_leader = True
        self._assignment_snapshot = dict(partitions_per_topic)
        log.info("group %s: performing assignment using strategy %s with subscriptions %s",
                 self.group_id, protocol, {m: s.topics for m, s in subscriptions.items()})
        assignments = assignor.assign(partitions_per_topic, subscriptions)
        if self.protocol is RebalanceProtocol.COOPERATIVE:
            _validate_cooperative_assignment(subscriptions, assignments)
        out = {}
        for member in subscriptions:
            assignment = assignments.get(member)
            if assignment is None:
                assignment = Assignment([])
            log.info("group %s: assigned to %s: %s", self.group_id, member,
                     [str(tp) for tp in assignment.partitions])
            version = min(subscriptions[member].version, ASSIGNMENT_VERSION)
            out[member] = encode_assignment(assignment, version)
        return out

    def on_join_complete(self, generation_id: int, member_id: str, protocol: str | None,
                         assignment: bytes) -> None:
        if not self._is_leader:
            self._assignment_snapshot = None
        assignor = self._assignor(protocol)
        decoded = decode_assignment(assignment)
        assigned = list(dict.fromkeys(decoded.partitions))
        if not self._subscriptions.check_assignment_matched_subscription(assigned):
            log.warning("group %s: received an assignment %s that does not match the "
                        "subscription %s; rejoining", self.group_id,
                        [str(tp) for tp in assigned], sorted(self._subscriptions.subscription))
            self.request_rejoin("the assignment does not match the subscription")
            return
        owned = set(self._subscriptions.assigned_partitions())
        assignor.on_assignment(decoded, ConsumerGroupMetadata(
            self.group_id, generation_id, member_id, self.group_instance_id))
        self.reset_auto_commit_deadline(self._time.milliseconds())
        added = [tp for tp in assigned if tp not in owned]
        revoked = sorted(owned - set(assigned))
        log.info("group %s: generation %d: adding newly assigned partitions %s%s",
                 self.group_id, generation_id, [str(tp) for tp in added],
                 f", revoking {[str(tp) for tp in revoked]}" if revoked else "")
        if self.protocol is RebalanceProtocol.COOPERATIVE and revoked:
            self._invoke_listener("revoked", revoked)
        self._subscriptions.assign_from_subscribed(assigned)
        self._invoke_listener("assigned", added, always=True)
        if self.protocol is RebalanceProtocol.COOPERATIVE and revoked:
            self.request_rejoin("need to revoke partitions and re-join")
        self._raise_listener_error()

    def on_leave_prepare(self) -> None:
        dropped = self._subscriptions.assigned_partitions()
        if not self._subscriptions.has_auto_assigned_partitions() or not dropped:
            return
        with self._lock:
            generation = self.generation
        if generation.generation_id < 0 or not generation.member_id or \
                self.rebalance_in_progress():
            self._invoke_listener("lost", dropped)
        else:
            self._invoke_listener("revoked", dropped)
        self._subscriptions.assign_from_subscribed([])
        self._raise_listener_error()

    # ------------------------------------------------------------------ listener
    def _invoke_listener(self, kind: str, partitions: Collection[TopicPartition],
                         always: bool = False) -> None:
        listener = self._subscriptions.rebalance_listener
        if listener is None or (not partitions and not always):
            return
        parts = sorted(partitions)
        try:
            if kind == "assigned":
                listener.on_partitions_assigned(parts)
            elif kind == "revoked":
                listener.on_partitions_revoked(parts)
            else:
                listener.on_partitions_lost(parts)
        except Exception as e:
            log.error("group %s: user's rebalance listener failed on partitions %s %s",
                      self.group_id, kind, [str(tp) for tp in parts], exc_info=True)
            self._listener_errors.append(e)

    def _raise_listener_error(self) -> None:
        if self._listener_errors:
            error = self._listener_errors.popleft()
            self._listener_errors.clear()
            raise KafkaError(f"User rebalance callback throws an error: {error}") from error

    # ------------------------------------------------------------------ committed offsets
    def refresh_committed_offsets_if_needed(self, timer: Timer) -> bool:
        """Seek partitions without a position to their committed offsets."""
        initializing = set(self._subscriptions.initializing_partitions())
        if not initializing:
            return True
        offsets = self.fetch_committed_offsets(initializing, timer)
        if offsets is None:
            return False
        for tp, om in offsets.items():
            if om is not None:
                log.info("group %s: setting offset for partition %s to the committed offset "
                         "%d", self.group_id, tp, om.offset)
                self._subscriptions.seek_if_initializing(
                    tp, FetchPosition(om.offset, om.leader_epoch),
                    self._metadata.current_leader(tp))
        return True

    def commit_generation(self) -> tuple[Generation, str | None] | BaseException:
        """The generation a commit must carry, or why it cannot be sent now."""
        if not self._subscriptions.has_auto_assigned_partitions():
            return Generation(-1, "", None), None
        generation = self.generation_if_stable()
        if generation is not None:
            return generation, self.group_instance_id
        return self.not_in_group_error(self.rebalance_in_progress())

    def handle_stale_generation(self, sent: Generation) -> bool:
        """ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID on a commit: True = a rebalance is
        already under way (retry after it), False = this member was fenced."""
        with self._lock:
            if self.generation != sent and self.state is MemberState.PREPARING_REBALANCE:
                return True
            self._reset_state_and_rejoin("the offset commit was rejected for a stale "
                                         "generation")
            return False

    def close(self, timer: Timer) -> None:
        try:
            self.close_commits(timer)
        finally:
            super().close(timer)

    def group_metadata(self) -> ConsumerGroupMetadata:
        with self._lock:
            generation = self.generation
        return ConsumerGroupMetadata(self.group_id, generation.generation_id,
                                     generation.member_id, self.group_instance_id)


def _validate_cooperative_assignment(subscriptions: Mapping[str, Subscription],
                                     assignments: Mapping[str, Any]) -> None:
    """No partition may move straight from one member to another in one rebalance."""
    previous = {tp: member for member, s in subscriptions.items() for tp in s.owned_partitions}
    for member, assignment in assignments.items():
        for tp in assignment.partitions:
            owner = previous.get(tp)
            if owner is not None and owner != member:
                raise IllegalStateError(f"Assignor supporting the COOPERATIVE protocol "
                                        f"violates its requirements: {tp} moves from {owner} "
                                        f"to {member} in one rebalance")
