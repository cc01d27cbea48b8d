"""Committed offsets: OffsetCommit and OffsetFetch for the group (the offset half of Java's
``ConsumerCoordinator``, kept in its own module; mixed into ``ConsumerCoordinator``).

* ``commit_offsets_sync`` retries retriable failures (coordinator moved or loading) until
  its timer runs out; ``commit_offsets_async`` sends once and queues the user's callback,
  which runs on the application thread in the next ``poll``/``commit_sync``/``close``, in
  the order the commits were made.
* A member of an auto-assigned group commits with its generation and member id.  If it is
  not in a stable generation the commit is refused before sending: during a rebalance with
  ``RebalanceInProgressError`` (retry after ``poll``), otherwise with
  ``CommitFailedError``.  ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID from the coordinator mean
  the group moved on without this member: ``CommitFailedError`` and the generation is reset
  (the next ``poll`` rejoins and reports the partitions lost).
* With manual assignment the commit carries generation -1 and no member id.
* Auto-commit sends the positions of all assigned partitions every
  ``auto.commit.interval.ms``, before a rebalance and on close.
* OffsetFetch asks with ``require_stable`` under read_committed, so offsets of a pending
  transaction answer UNSTABLE_OFFSET_COMMIT and are retried.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from millrace.client.cluster import Node, TopicPartition
from millrace.client.consumer._internals.consumer_metrics import GroupCoordinatorMetrics
from millrace.client.consumer._internals.request_future import RequestFuture, Timer
from millrace.client.consumer.consumer_record import OffsetAndMetadata
from millrace.client.consumer.errors import CommitFailedError
from millrace.client.consumer.interceptor import ConsumerInterceptors
from millrace.client.network_client import ClientResponse
from millrace.common.errors import (
    CoordinatorNotAvailableError,
    Errors,
    KafkaError,
    RebalanceInProgressError,
    TopicAuthorizationFailedError,
    for_code,
)
from millrace.protocol import OffsetCommitRequest, OffsetFetchRequest

if TYPE_CHECKING:
    from millrace.client.consumer._internals.abstract_coordinator import Generation
    from millrace.client.consumer._internals.consumer_network_client import (
        ConsumerNetworkClient,
    )
    from millrace.client.consumer._internals.subscription_state import SubscriptionState
    from millrace.common.time import Time

log = logging.getLogger(__name__)

CommitCallback = Callable[[Mapping[TopicPartition, OffsetAndMetadata], BaseException | None],
                          None]
Offsets = dict[TopicPartition, OffsetAndMetadata]

OFFSET_COMMIT_MAX_VERSION = 9  # v10 names topics by id
OFFSET_FETCH_MAX_VERSION = 7  # v8+ is the batched multi-group form


class RetriableCommitFailedError(KafkaError):
    """An async commit failed for a reason that may pass (coordinator moving, loading)."""

    name = "RETRIABLE_COMMIT_FAILED"
    retriable = True


class OffsetCommitter:
    # provided by ConsumerCoordinator / AbstractCoordinator
    _client: ConsumerNetworkClient
    _subscriptions: SubscriptionState
    _time: Time
    group_id: str
    retry_backoff_ms: int
    sensors: GroupCoordinatorMetrics

    def check_and_get_coordinator(self) -> Node | None:
        raise NotImplementedError

    def coordinator_unknown(self) -> bool:
        raise NotImplementedError

    def ensure_coordinator_ready(self, timer: Timer) -> bool:
        raise NotImplementedError

    def lookup_coordinator(self) -> RequestFuture[None]:
        raise NotImplementedError

    def mark_coordinator_unknown(self, reason: str, disconnect: bool = False) -> None:
        raise NotImplementedError

    def request_rejoin(self, reason: str) -> None:
        raise NotImplementedError

    def commit_generation(self) -> tuple[Generation, str | None] | BaseException:
        raise NotImplementedError

    def handle_stale_generation(self, sent: Generation) -> bool:
        raise NotImplementedError

    def __init__(self, *, auto_commit_enabled: bool, auto_commit_interval_ms: int,
                 interceptors: ConsumerInterceptors | None, require_stable: bool) -> None:
        self.auto_commit_enabled = auto_commit_enabled
        self.auto_commit_interval_ms = auto_commit_interval_ms
        self._interceptors = interceptors
        self._require_stable = require_stable
        self._next_auto_commit_ms = self._time.milliseconds() + auto_commit_interval_ms
        self._completed_commits: deque[tuple[CommitCallback | None, Offsets,
                                             BaseException | None]] = deque()
        self._pending_async_commits = 0
        self._pending_fetch: tuple[frozenset[TopicPartition],
                                   RequestFuture[dict[TopicPartition,
                                                      OffsetAndMetadata | None]]] | None = None

    @staticmethod
    def not_in_group_error(rebalancing: bool) -> BaseException:
        if rebalancing:
            return RebalanceInProgressError(
                "Offset commit cannot be completed since the consumer is undergoing a "
                "rebalance for auto partition assignment. You can try completing the "
                "rebalance by calling poll() and then retry the operation.")
        return CommitFailedError(
            "Offset commit cannot be completed since the consumer is not part of an active "
            "group for auto partition assignment; it is likely that the consumer was kicked "
            "out of the group.")

    # ------------------------------------------------------------------ commits
    def commit_offsets_sync(self, offsets: Offsets, timer: Timer) -> bool:
        self.invoke_completed_offset_commit_callbacks()
        if not offsets:
            return True
        while True:
            if self.coordinator_unknown() and not self.ensure_coordinator_ready(timer):
                return False
            future = self._send_offset_commit_request(offsets)
            self._client.poll_until(future, timer.remaining_ms)
            # earlier async commits complete first, keeping callbacks in commit order
            self.invoke_completed_offset_commit_callbacks()
            if future.succeeded():
                if self._interceptors is not None:
                    self._interceptors.on_commit(offsets)
                return True
            if future.failed() and not future.is_retriable():
                raise future.exception
            timer.update()
            if timer.is_expired():
                return False
            self._client.sleep(min(self.retry_backoff_ms, timer.remaining_ms))
            timer.update()

    def commit_offsets_async(self, offsets: Offsets, callback: CommitCallback | None
                             ) -> RequestFuture[None]:
        self.invoke_completed_offset_commit_callbacks()
        out: RequestFuture[None] = RequestFuture()
        self._pending_async_commits += 1

        def done(error: BaseException | None) -> None:
            self._pending_async_commits -= 1
            if error is not None and getattr(error, "retriable", False) and \
                    not isinstance(error, RetriableCommitFailedError):
                error = RetriableCommitFailedError(f"offset commit failed with a retriable "
                                                   f"error: {error}")
            if error is None and self._interceptors is not None:
                self._interceptors.on_commit(offsets)
            self._completed_commits.append((callback, offsets, error))
            if error is None:
                out.complete(None)
            else:
                out.raise_(error)

        def send(_: Any = None) -> None:
            self._send_offset_commit_request(offsets).add_listener(lambda _: done(None), done)

        if self.coordinator_unknown():
            self.lookup_coordinator().add_listener(send, done)
        else:
            send()
        return out

    def invoke_completed_offset_commit_callbacks(self) -> None:
        completed = self._completed_commits
        while completed:
            callback, offsets, error = completed.popleft()
            if callback is not None:
                callback(offsets, error)
            elif error is not None:
                log.warning("group %s: asynchronous offset commit of %s failed: %s",
                            self.group_id, {str(tp): om.offset for tp, om in offsets.items()},
                            error)

    def reset_auto_commit_deadline(self, now_ms: int) -> None:
        self._next_auto_commit_ms = now_ms + self.auto_commit_interval_ms

    def maybe_auto_commit_offsets_async(self, now_ms: int) -> None:
        if not self.auto_commit_enabled or now_ms < self._next_auto_commit_ms:
            return
        self._next_auto_commit_ms = now_ms + self.auto_commit_interval_ms
        offsets = self._subscriptions.all_consumed()
        if not offsets:
            return

        def on_done(committed: Mapping[TopicPartition, OffsetAndMetadata],
                    error: BaseException | None) -> None:
            if error is None:
                log.debug("group %s: auto-committed %s", self.group_id,
                          {str(tp): om.offset for tp, om in committed.items()})
            elif getattr(error, "retriable", False):
                log.debug("group %s: auto-commit failed (%s); retrying soon", self.group_id,
                          error)
                self._next_auto_commit_ms = min(self._next_auto_commit_ms,
                                                self._time.milliseconds()
                                                + self.retry_backoff_ms)
            else:
                log.warning("group %s: asynchronous auto-commit of offsets failed: %s",
                            self.group_id, error)
        self.commit_offsets_async(offsets, on_done)

    def maybe_auto_commit_offsets_sync(self, timer: Timer) -> None:
        if not self.auto_commit_enabled:
            return
        offsets = self._subscriptions.all_consumed()
        try:
            if not self.commit_offsets_sync(offsets, timer):
                log.debug("group %s: auto-commit of offsets timed out before completion",
                          self.group_id)
        except KafkaError as e:
            log.warning("group %s: synchronous auto-commit of offsets %s failed: %s",
                        self.group_id, {str(tp): om.offset for tp, om in offsets.items()}, e)

    def close_commits(self, timer: Timer) -> None:
        self.maybe_auto_commit_offsets_sync(timer)
        while self._pending_async_commits > 0 and timer.not_expired():
            if self.coordinator_unknown() and not self.ensure_coordinator_ready(timer):
                break
            self._client.poll(timer.remaining_ms, lambda: self._pending_async_commits > 0)
            self.invoke_completed_offset_commit_callbacks()
            timer.update()
        self.invoke_completed_offset_commit_callbacks()

    def _send_offset_commit_request(self, offsets: Offsets) -> RequestFuture[None]:
        if not offsets:
            return RequestFuture.of(None)
        coordinator = self.check_and_get_coordinator()
        if coordinator is None:
            return RequestFuture.failure(CoordinatorNotAvailableError("coordinator unknown"))
        found = self.commit_generation()
        if isinstance(found, BaseException):
            return RequestFuture.failure(found)
        generation, instance_id = found
        by_topic: dict[str, list[Any]] = {}
        partition_cls = OffsetCommitRequest.OffsetCommitRequestTopic \
            .OffsetCommitRequestPartition
        for tp, om in offsets.items():
            by_topic.setdefault(tp.topic, []).append(partition_cls(
                partition_index=tp.partition, committed_offset=om.offset,
                committed_leader_epoch=om.leader_epoch if om.leader_epoch is not None else -1,
                committed_metadata=om.metadata))
        body = OffsetCommitRequest(
            group_id=self.group_id, generation_id_or_member_epoch=generation.generation_id,
            member_id=generation.member_id, group_instance_id=instance_id,
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps)
                    for t, ps in by_topic.items()])
        log.debug("group %s: committing %s in generation %d", self.group_id,
                  {str(tp): om.offset for tp, om in offsets.items()}, generation.generation_id)
        return self._client.send(coordinator, body, max_version=OFFSET_COMMIT_MAX_VERSION) \
            .compose(lambda response, out: self._handle_offset_commit(response, out,
                                                                      generation))

    def _handle_offset_commit(self, response: ClientResponse, out: RequestFuture[None],
                              sent: Generation) -> None:
        self.sensors.commit.record(response.request_latency_ms, response.received_ms)
        unauthorized: set[str] = set()
        for topic in response.body.topics:
            for p in topic.partitions:
                error = p.error_code
                if error == Errors.NONE:
                    continue
                cls = for_code(error)
                if error == Errors.TOPIC_AUTHORIZATION_FAILED:
                    unauthorized.add(topic.name)
                    continue
                if error in (Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR,
                             Errors.REQUEST_TIMED_OUT):
                    self.mark_coordinator_unknown(cls.name)
                elif error == Errors.REBALANCE_IN_PROGRESS:
                    self.request_rejoin("the group is rebalancing; offset commit rejected")
                elif error in (Errors.UNKNOWN_MEMBER_ID, Errors.ILLEGAL_GENERATION):
                    if self.handle_stale_generation(sent):
                        out.raise_(self.not_in_group_error(True))
                    else:
                        out.raise_(CommitFailedError())
                    return
                elif error == Errors.GROUP_AUTHORIZATION_FAILED:
                    out.raise_(cls(f"not authorized to access group {self.group_id}"))
                    return
                out.raise_(cls(f"offset commit for {topic.name}-{p.partition_index} failed"))
                return
        if unauthorized:
            out.raise_(TopicAuthorizationFailedError(
                f"not authorized to commit to topics {sorted(unauthorized)}"))
            return
        out.complete(None)

    # ------------------------------------------------------------------ committed offsets
    def fetch_committed_offsets(self, partitions: set[TopicPartition], timer: Timer
                                ) -> dict[TopicPartition, OffsetAndMetadata | None] | None:
        """The committed offsets (None per partition without one); None on timeout."""
        if not partitions:
            return {}
        wanted = frozenset(partitions)
        while True:
            if not self.ensure_coordinator_ready(timer):
                return None
            pending = self._pending_fetch
            if pending is not None and pending[0] == wanted:
                future = pending[1]
            else:
                future = self._send_offset_fetch_request(wanted)
                self._pending_fetch = (wanted, future)
            self._client.poll_until(future, timer.remaining_ms)
            if not future.is_done:
                return None
            self._pending_fetch = None
            if future.succeeded():
                return future.value
            if not future.is_retriable():
                raise future.exception
            timer.update()
            if timer.is_expired():
                return None
            self._client.sleep(min(self.retry_backoff_ms, timer.remaining_ms))
            timer.update()

    def _send_offset_fetch_request(self, partitions: frozenset[TopicPartition]
                                   ) -> RequestFuture[dict[TopicPartition,
                                                           OffsetAndMetadata | None]]:
        coordinator = self.check_and_get_coordinator()
        if coordinator is None:
            return RequestFuture.failure(CoordinatorNotAvailableError("coordinator unknown"))
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        body = OffsetFetchRequest(
            group_id=self.group_id, require_stable=self._require_stable,
            topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                    for t, ps in by_topic.items()])
        min_version = 7 if self._require_stable else 1
        return self._client.send(coordinator, body, min_version=min_version,
                                 max_version=OFFSET_FETCH_MAX_VERSION).compose(
            lambda response, out: self._handle_offset_fetch(response, out, partitions))

    def _handle_offset_fetch(self, response: ClientResponse,
                             out: RequestFuture[dict[TopicPartition, OffsetAndMetadata | None]],
                             partitions: frozenset[TopicPartition]) -> None:
        body = response.body
        if body.error_code:
            error = body.error_code
            if error in (Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR):
                self.mark_coordinator_unknown(for_code(error).name)
            out.raise_(for_code(error)(f"OffsetFetch for group {self.group_id}"))
            return
        found: dict[TopicPartition, OffsetAndMetadata | None] = {tp: None for tp in partitions}
        for topic in body.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                if p.error_code:
                    cls = for_code(p.error_code)
                    if p.error_code == Errors.UNSTABLE_OFFSET_COMMIT:
                        log.info("group %s: the committed offset of %s is unstable (a "
                                 "transaction is pending); will retry", self.group_id, tp)
                    out.raise_(cls(f"OffsetFetch for {tp} failed"))
                    return
                if p.committed_offset >= 0:
                    epoch = p.committed_leader_epoch
                    found[tp] = OffsetAndMetadata(p.committed_offset, p.metadata or "",
                                                  epoch if epoch >= 0 else None)
        out.complete(found)
