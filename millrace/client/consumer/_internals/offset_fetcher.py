"""Offsets by time: position resets and validations, ``offsets_for_times``, beginning and
end offsets (Java ``OffsetFetcher``).

All of these are ListOffsets requests (v1+), one per partition leader, with the special
timestamps -2 (earliest) and -1 (latest; with ``read_committed`` the broker answers the last
stable offset).

* ``reset_positions_if_needed`` is asynchronous: it sends requests for partitions awaiting a
  reset and returns; each answer seeks its partition if that reset is still wanted.  A
  partition whose request is in flight or failed retriably waits (``next_retry_ms``) before
  it is asked again.  A non-retriable failure is raised from the next call.
* ``validate_positions_if_needed`` is asynchronous too (KIP-320): when the metadata
  changed, every assigned position is compared with its partition's current leader and
  epoch (``SubscriptionState.maybe_validate_position_for_current_leader``); positions
  awaiting validation are sent to their leader in OffsetsForLeaderEpoch requests, and
  each answer completes, moves or resets its position.  A truncation with no reset
  policy, or a non-retriable failure, is raised as ``LogTruncationError`` (or that
  failure) from the next call.  A leader too old for OffsetsForLeaderEpoch v3 cannot be
  asked: its positions are taken as they are, as Java does.
* ``offsets_for_times`` (and ``beginning_offsets``/``end_offsets``) block: retriable errors
  (no leader yet, leader moved) refresh metadata and retry until the timeout, after which
  ``KafkaTimeoutError`` is raised.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from millrace.client.cluster import Node, TopicPartition
from millrace.client.consumer._internals import offsets_for_leader_epoch_utils as epoch_utils
from millrace.client.consumer._internals.consumer_metadata import ConsumerMetadata
from millrace.client.consumer._internals.consumer_network_client import ConsumerNetworkClient
from millrace.client.consumer._internals.request_future import RequestFuture, Timer
from millrace.client.consumer._internals.subscription_state import (
    FetchPosition,
    LogTruncation,
    OffsetResetStrategy,
    SubscriptionState,
)
from millrace.client.consumer.errors import LogTruncationError
from millrace.client.metadata import LeaderAndEpoch
from millrace.client.network_client import ClientResponse
from millrace.common.errors import (
    Errors,
    LeaderNotAvailableError,
    UnsupportedVersionError,
    for_code,
)
from millrace.common.time import Time
from millrace.protocol import ListOffsetsRequest

log = logging.getLogger(__name__)

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1


class ListOffsetData(NamedTuple):
    offset: int
    timestamp: int | None
    leader_epoch: int | None


class _ListOffsetResult(NamedTuple):
    fetched: dict[TopicPartition, ListOffsetData | None]
    retry: set[TopicPartition]


class OffsetFetcher:
    def __init__(self, client: ConsumerNetworkClient, metadata: ConsumerMetadata,
                 subscriptions: SubscriptionState, time: Time, *, isolation_level: int = 0,
                 request_timeout_ms: int = 30_000, retry_backoff_ms: int = 100) -> None:
        self._client = client
        self._metadata = metadata
        self._subscriptions = subscriptions
        self._time = time
        self.isolation_level = isolation_level
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._cached_error: BaseException | None = None
        self._cached_validate_error: BaseException | None = None
        self._metadata_update_version = -1

    # ------------------------------------------------------------------ resets (async)
    def reset_positions_if_needed(self) -> None:
        error, self._cached_error = self._cached_error, None
        if error is not None:
            raise error
        now = self._time.milliseconds()
        wanted = self._subscriptions.partitions_needing_reset(now)
        if not wanted:
            return
        timestamps = {tp: strategy.value for tp, strategy in wanted.items()}
        self._subscriptions.set_next_allowed_retry(wanted, now + self._request_timeout_ms)
        by_node, unknown = self._group_by_leader(timestamps)
        if unknown:
            self._subscriptions.set_next_allowed_retry(unknown, now + self._retry_backoff_ms)
        for node, partitions in by_node.items():
            future = self._send_list_offsets(node, partitions)
            strategies = {tp: wanted[tp] for tp in partitions}
            future.add_listener(self._on_reset_success(strategies),
                                self._on_reset_failure(list(partitions)))

    def _on_reset_success(self, strategies: dict[TopicPartition, OffsetResetStrategy]) -> Any:
        def handle(result: _ListOffsetResult) -> None:
            if result.retry:
                self._subscriptions.set_next_allowed_retry(
                    result.retry, self._time.milliseconds() + self._retry_backoff_ms)
            for tp, data in result.fetched.items():
                if data is None:
                    continue
                position = FetchPosition(data.offset, data.leader_epoch)
                if self._subscriptions.maybe_seek_unvalidated(
                        tp, position, strategies[tp], self._metadata.current_leader(tp)):
                    log.info("resetting offset for partition %s to position %s", tp,
                             data.offset)
        return handle

    def _on_reset_failure(self, partitions: list[TopicPartition]) -> Any:
        def handle(error: BaseException) -> None:
            self._subscriptions.set_next_allowed_retry(
                partitions, self._time.milliseconds() + self._retry_backoff_ms)
            if not getattr(error, "retriable", False) and self._cached_error is None:
                self._cached_error = error
        return handle

    # ------------------------------------------------------------------ validation (async)
    def validate_positions_if_needed(self) -> None:
        """Validate the positions of partitions whose leader changed (KIP-320)."""
        error, self._cached_validate_error = self._cached_validate_error, None
        if error is not None:
            raise error
        self.validate_positions_on_metadata_change()
        now = self._time.milliseconds()
        wanted = self._subscriptions.partitions_needing_validation(now)
        if not wanted:
            return
        by_node: dict[Node, dict[TopicPartition, tuple[FetchPosition, LeaderAndEpoch]]] = {}
        for tp, (position, leader) in wanted.items():
            if leader.leader is None:
                self._metadata.request_update()
                continue
            by_node.setdefault(leader.leader, {})[tp] = (position, leader)
        for node, positions in by_node.items():
            if self._client.is_unavailable(node):
                self._metadata.request_update()
                continue
            self._subscriptions.set_next_allowed_retry(positions,
                                                       now + self._request_timeout_ms)
            future = self._client.send(node, epoch_utils.prepare_request(positions),
                                       min_version=epoch_utils.MIN_VERSION)
            future.add_listener(self._on_validate_success(positions),
                                self._on_validate_failure(positions))

    def validate_positions_on_metadata_change(self) -> None:
        """After a metadata update, check every position against its leader and epoch."""
        version = self._metadata.update_version
        if version == self._metadata_update_version:
            return
        self._metadata_update_version = version
        subscriptions = self._subscriptions
        for tp in subscriptions.assigned_partitions():
            subscriptions.maybe_validate_position_for_current_leader(
                tp, self._metadata.current_leader(tp))

    def _on_validate_success(self, positions: dict[TopicPartition,
                                                   tuple[FetchPosition, LeaderAndEpoch]]
                             ) -> Any:
        handle_failure = self._on_validate_failure(positions)

        def handle(response: ClientResponse) -> None:
            try:
                result = epoch_utils.handle_response(positions, response.body)
            except Exception as e:  # unauthorized
                handle_failure(e)
                return
            if result.partitions_to_retry:
                self._subscriptions.set_next_allowed_retry(
                    result.partitions_to_retry,
                    self._time.milliseconds() + self._retry_backoff_ms)
                self._metadata.request_update()
            truncations: list[LogTruncation] = []
            for tp, end in result.end_offsets.items():
                position, leader = positions[tp]
                truncation = self._subscriptions.maybe_complete_validation(
                    tp, position, leader, end.leader_epoch, end.end_offset)
                if truncation is not None:
                    truncations.append(truncation)
            if truncations and self._cached_validate_error is None:
                self._cached_validate_error = LogTruncationError(
                    {t.topic_partition: t.fetch_position.offset for t in truncations},
                    {t.topic_partition: t.divergent_offset for t in truncations
                     if t.divergent_offset is not None})
        return handle

    def _on_validate_failure(self, positions: dict[TopicPartition,
                                                   tuple[FetchPosition, LeaderAndEpoch]]
                             ) -> Any:
        def handle(error: BaseException) -> None:
            subscriptions = self._subscriptions
            if isinstance(error, UnsupportedVersionError):
                log.debug("skipping validation of %s: the leader does not support "
                          "OffsetsForLeaderEpoch v%d", sorted(map(str, positions)),
                          epoch_utils.MIN_VERSION)
                for tp in positions:
                    if subscriptions.awaiting_validation(tp):
                        subscriptions.complete_validation(tp)
                return
            subscriptions.set_next_allowed_retry(
                positions, self._time.milliseconds() + self._retry_backoff_ms)
            self._metadata.request_update()
            if not getattr(error, "retriable", False) and self._cached_validate_error is None:
                self._cached_validate_error = error
        return handle

    # ------------------------------------------------------------------ blocking lookups
    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int], timeout_ms: float
                          ) -> dict[TopicPartition, ListOffsetData | None]:
        """``{tp: timestamp}`` -> ``{tp: ListOffsetData or None}`` (None: no such record)."""
        remaining = dict(timestamps)
        result: dict[TopicPartition, ListOffsetData | None] = {}
        if not remaining:
            return result
        timer = Timer(self._time, timeout_ms)
        self._metadata.add_transient_topics(tp.topic for tp in remaining)
        try:
            while True:
                by_node, unknown = self._group_by_leader(remaining)
                retry = bool(unknown)
                for node, partitions in by_node.items():
                    future = self._send_list_offsets(node, partitions)
                    if not self._client.poll_until(future, timer.remaining_ms):
                        retry = True
                        break
                    if future.failed():
                        if not future.is_retriable():
                            raise future.exception
                        retry = True
                        continue
                    for tp, data in future.value.fetched.items():
                        result[tp] = data
                        remaining.pop(tp, None)
                    retry |= bool(future.value.retry)
                if not remaining:
                    return result
                timer.update()
                if timer.is_expired():
                    break
                # leaders unknown or moved: the refresh is the wait; otherwise back off
                if retry and self._metadata.update_requested():
                    self._client.await_metadata_update(timer.remaining_ms)
                else:
                    self._client.sleep(min(self._retry_backoff_ms, timer.remaining_ms))
                timer.update()
                if timer.is_expired():
                    break
        finally:
            self._metadata.clear_transient_topics()
        raise self._metadata.timeout_error(
            f"Failed to get offsets by times in {int(timeout_ms)}ms", timeout_ms)

    def beginning_or_end_offsets(self, partitions: Iterable[TopicPartition], timestamp: int,
                                 timeout_ms: float) -> dict[TopicPartition, int]:
        found = self.offsets_for_times({tp: timestamp for tp in partitions}, timeout_ms)
        return {tp: data.offset for tp, data in found.items() if data is not None}

    # ------------------------------------------------------------------ requests
    def _group_by_leader(self, timestamps: Mapping[TopicPartition, int]
                         ) -> tuple[dict[Node, dict[TopicPartition, int]], list[TopicPartition]]:
        cluster = self._metadata.fetch()
        by_node: dict[Node, dict[TopicPartition, int]] = {}
        unknown: list[TopicPartition] = []
        for tp, ts in timestamps.items():
            leader = cluster.leader_for(tp)
            if leader is None or self._client.is_unavailable(leader):
                unknown.append(tp)
                continue
            by_node.setdefault(leader, {})[tp] = ts
        if unknown:
            self._metadata.add_transient_topics(tp.topic for tp in unknown)
            self._metadata.request_update()
        return by_node, unknown

    def _send_list_offsets(self, node: Node, timestamps: Mapping[TopicPartition, int]
                           ) -> RequestFuture[_ListOffsetResult]:
        cluster = self._metadata.fetch()
        topics: dict[str, list[Any]] = {}
        partition_cls = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition
        for tp, ts in timestamps.items():
            info = cluster.partition(tp)
            topics.setdefault(tp.topic, []).append(partition_cls(
                partition_index=tp.partition, timestamp=ts,
                current_leader_epoch=info.leader_epoch if info is not None else -1))
        body = ListOffsetsRequest(
            replica_id=-1, isolation_level=self.isolation_level,
            topics=[ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=ps)
                    for t, ps in topics.items()],
            timeout_ms=self._request_timeout_ms)
        # read_committed needs v2+ (isolation level)
        min_version = 2 if self.isolation_level else 1
        future = self._client.send(node, body, min_version=min_version)
        asked = set(timestamps)
        return future.compose(lambda response, out: self._handle_list_offsets(
            response, asked, out))

    def _handle_list_offsets(self, response: ClientResponse, asked: set[TopicPartition],
                             out: RequestFuture[_ListOffsetResult]) -> None:
        fetched: dict[TopicPartition, ListOffsetData | None] = {}
        retry: set[TopicPartition] = set()
        for topic in response.body.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                if tp not in asked:
                    continue
                error = p.error_code
                if error == Errors.NONE:
                    if p.offset < 0:
                        fetched[tp] = None  # no record at or after the timestamp
                    else:
                        fetched[tp] = ListOffsetData(
                            p.offset, p.timestamp if p.timestamp >= 0 else None,
                            p.leader_epoch if p.leader_epoch >= 0 else None)
                elif error == Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT:
                    fetched[tp] = None
                elif error == Errors.TOPIC_AUTHORIZATION_FAILED:
                    out.raise_(for_code(error)(f"not authorized to read topic {tp.topic}"))
                    return
                else:
                    cls = for_code(error)
                    if not cls.retriable:
                        out.raise_(cls(f"ListOffsets for {tp} failed"))
                        return
                    log.debug("ListOffsets for %s: %s; will retry", tp, cls.name)
                    self._metadata.request_update()
                    retry.add(tp)
        missing = asked - set(fetched) - retry
        if missing:
            retry |= missing
            self._metadata.request_update()
        if retry and not fetched:
            out.raise_(LeaderNotAvailableError(
                f"ListOffsets must be retried for {sorted(map(str, retry))}"))
            return
        out.complete(_ListOffsetResult(fetched, retry))

