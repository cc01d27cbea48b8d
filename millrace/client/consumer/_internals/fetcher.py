"""Fetching records for the assigned partitions (Java ``Fetcher`` / ``FetchCollector``).

Theory of operation.  ``send_fetches`` builds one FetchRequest per leader for the
partitions that are fetchable (assigned, positioned and validated, not paused) and have
nothing buffered yet, at their current positions, skipping nodes that still have a fetch
in flight.  A partition is fetched from the leader its position was validated against,
with that leader's epoch as ``current_leader_epoch`` (KIP-320): a broker that is no longer
the leader, or leads in another epoch, refuses (NOT_LEADER_OR_FOLLOWER,
FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH) instead of serving a log that may have
diverged.  Those errors refresh the metadata; a new leader or epoch there sends the
position through validation (``OffsetFetcher.validate_positions_if_needed``) before it is
fetched again.  A position whose leader was never known takes the metadata's leader
here, through the same check.  Fetch
sessions are not used: every request is a full fetch (session id 0, epoch -1), which any
broker accepts.  The response handler -- on whichever thread polled the network -- only
queues one ``CompletedFetch`` per partition.

``collect_fetch`` (application thread) drains the queue up to ``max.poll.records``:
the head fetch is first *initialized* (its error handled, stale data dropped: the position
moved since the request, the partition was paused or revoked), then records are taken from
it and the position advances.  Errors: NOT_LEADER_OR_FOLLOWER and friends refresh
metadata; OFFSET_OUT_OF_RANGE resets the position per ``auto.offset.reset`` or, with
``none``, raises ``OffsetOutOfRangeError``; an error that must reach the application is
raised with the fetch left at the head of the queue, after handing out what was collected
before it.

Fetching ahead: ``KafkaConsumer.poll`` calls ``send_fetches`` again right before returning
records, so the next response is on its way while the application works.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from typing import Any

from millrace.client.cluster import Node, TopicPartition
from millrace.client.consumer._internals.completed_fetch import CompletedFetch
from millrace.client.consumer._internals.consumer_network_client import ConsumerNetworkClient
from millrace.client.consumer._internals.fetch_metrics import FetchMetrics
from millrace.client.consumer._internals.subscription_state import (
    FetchPosition,
    SubscriptionState,
)
from millrace.client.consumer.consumer_record import ConsumerRecord
from millrace.client.consumer.errors import OffsetOutOfRangeError
from millrace.client.metadata import Metadata
from millrace.client.network_client import ClientResponse
from millrace.client.serialization import ByteArrayDeserializer, Deserializer
from millrace.common.errors import Errors, for_code
from millrace.protocol import FetchRequest

log = logging.getLogger(__name__)

FETCH_MAX_VERSION = 12  # v13+ names topics by id, which this client does not track
_REFRESH_METADATA = frozenset({
    Errors.UNKNOWN_TOPIC_OR_PARTITION,
    Errors.LEADER_NOT_AVAILABLE,
    Errors.NOT_LEADER_OR_FOLLOWER,
    Errors.REPLICA_NOT_AVAILABLE,
    Errors.KAFKA_STORAGE_ERROR,
    Errors.FENCED_LEADER_EPOCH,
    Errors.UNKNOWN_LEADER_EPOCH,
    Errors.OFFSET_NOT_AVAILABLE,
    Errors.UNKNOWN_TOPIC_ID,
    Errors.INCONSISTENT_TOPIC_ID,
})
_LOG_AND_RETRY = frozenset({Errors.UNKNOWN_SERVER_ERROR, Errors.CORRUPT_MESSAGE})


class Fetcher:
    def __init__(self, client: ConsumerNetworkClient, metadata: Metadata,
                 subscriptions: SubscriptionState, *, fetch_min_bytes: int = 1,
                 fetch_max_bytes: int = 52_428_800, fetch_max_wait_ms: int = 500,
                 max_partition_fetch_bytes: int = 1_048_576, max_poll_records: int = 500,
                 check_crcs: bool = True, isolation_level: int = 0, client_rack: str = "",
                 key_deserializer: Deserializer[Any] | None = None,
                 value_deserializer: Deserializer[Any] | None = None,
                 request_timeout_ms: int = 30_000, metrics: FetchMetrics | None = None
                 ) -> None:
        self._client = client
        self._metrics = metrics
        self._metadata = metadata
        self._subscriptions = subscriptions
        self.fetch_min_bytes = fetch_min_bytes
        self.fetch_max_bytes = fetch_max_bytes
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.max_poll_records = max_poll_records
        self.check_crcs = check_crcs
        self.isolation_level = isolation_level
        self.client_rack = client_rack
        # bytes need no deserializer: skipping the call is the hot path
        self._key_deserializer = None if isinstance(key_deserializer, ByteArrayDeserializer) \
            else key_deserializer
        self._value_deserializer = None if isinstance(value_deserializer,
                                                      ByteArrayDeserializer) \
            else value_deserializer
        # the fetch response's timeout: the long poll plus the request timeout
        self._request_timeout_ms = request_timeout_ms + fetch_max_wait_ms
        self._completed: deque[CompletedFetch] = deque()
        self._next_in_line: CompletedFetch | None = None
        self._lock = threading.Lock()
        self._pending_nodes: set[int] = set()  # guarded by _lock

    # ------------------------------------------------------------------ sending
    def send_fetches(self) -> int:
        """Send a FetchRequest to every leader with fetchable partitions; returns how many."""
        requests = self._prepare_fetch_requests()
        for node, (body, offsets) in requests.items():
            with self._lock:
                self._pending_nodes.add(node.id)
            future = self._client.send(node, body, timeout_ms=self._request_timeout_ms,
                                       min_version=4, max_version=FETCH_MAX_VERSION)
            future.add_listener(self._on_success(node, offsets), self._on_failure(node))
        return len(requests)

    def _buffered_partitions(self) -> set[TopicPartition]:
        buffered = {f.partition for f in list(self._completed)}
        nxt = self._next_in_line
        if nxt is not None and not nxt.is_consumed:
            buffered.add(nxt.partition)
        return buffered

    def _prepare_fetch_requests(self) -> dict[Node, tuple[Any, dict[TopicPartition, int]]]:
        buffered = self._buffered_partitions()
        subscriptions = self._subscriptions
        with self._lock:
            pending = set(self._pending_nodes)
        by_node: dict[Node, dict[str, list[Any]]] = {}
        offsets_by_node: dict[Node, dict[TopicPartition, int]] = {}
        partition_cls = FetchRequest.FetchTopic.FetchPartition
        for tp in subscriptions.fetchable_partitions(lambda tp: tp not in buffered):
            current = subscriptions.current_leader(tp)
            if current is None:  # first fetch since the position was set
                current = self._metadata.current_leader(tp)
                if current.leader is not None and \
                        subscriptions.maybe_validate_position_for_current_leader(tp, current):
                    continue  # validated first, by the OffsetFetcher
            leader = current.leader
            position = subscriptions.position(tp)
            if position is None:
                continue
            if leader is None:
                log.debug("no leader known for %s; requesting a metadata update", tp)
                self._metadata.request_update()
                continue
            if leader.id in pending or self._client.is_unavailable(leader):
                continue
            epoch = current.epoch if current.epoch is not None else -1
            by_node.setdefault(leader, {}).setdefault(tp.topic, []).append(partition_cls(
                partition=tp.partition, fetch_offset=position.offset,
                current_leader_epoch=epoch, log_start_offset=-1,
                partition_max_bytes=self.max_partition_fetch_bytes))
            offsets_by_node.setdefault(leader, {})[tp] = position.offset
        out: dict[Node, tuple[Any, dict[TopicPartition, int]]] = {}
        for node, topics in by_node.items():
            body = FetchRequest(
                replica_id=-1, max_wait_ms=self.fetch_max_wait_ms,
                min_bytes=self.fetch_min_bytes, max_bytes=self.fetch_max_bytes,
                isolation_level=self.isolation_level, session_id=0, session_epoch=-1,
                topics=[FetchRequest.FetchTopic(topic=t, partitions=ps)
                        for t, ps in topics.items()],
                forgotten_topics_data=[], rack_id=self.client_rack)
            out[node] = (body, offsets_by_node[node])
        return out

    def _on_success(self, node: Node, offsets: dict[TopicPartition, int]) -> Any:
        def handle(response: ClientResponse) -> None:
            with self._lock:
                self._pending_nodes.discard(node.id)
            body = response.body
            if body.error_code:
                log.info("fetch from node %s failed: %s", node.id,
                         for_code(body.error_code).name)
                return
            metrics = self._metrics
            if metrics is not None:
                size = sum(len(p.records) for t in body.responses for p in t.partitions
                           if p.records)
                metrics.record_fetch(response.request_latency_ms, size,
                                     getattr(body, "throttle_time_ms", 0) or 0,
                                     response.received_ms)
            completed = self._completed
            isolation, crcs = self.isolation_level, self.check_crcs
            kd, vd = self._key_deserializer, self._value_deserializer
            for topic in body.responses:
                name = topic.topic
                for p in topic.partitions:
                    tp = TopicPartition(name, p.partition_index)
                    offset = offsets.get(tp)
                    if offset is None:
                        continue  # not asked for (a broker bug); ignore
                    completed.append(CompletedFetch(
                        tp, p, offset, isolation_level=isolation, check_crcs=crcs,
                        key_deserializer=kd, value_deserializer=vd))
        return handle

    def _on_failure(self, node: Node) -> Any:
        def handle(error: BaseException) -> None:
            with self._lock:
                self._pending_nodes.discard(node.id)
            log.debug("fetch request to node %s failed: %s", node.id, error)
        return handle

    # ------------------------------------------------------------------ collecting
    def has_available_fetches(self) -> bool:
        nxt = self._next_in_line
        return bool(self._completed) or (nxt is not None and not nxt.is_consumed)

    def has_pending_fetches(self) -> bool:
        with self._lock:
            return bool(self._pending_nodes)

    def collect_fetch(self) -> dict[TopicPartition, list[ConsumerRecord[Any, Any]]]:
        """Up to ``max.poll.records`` records from the buffered fetches, positions advanced."""
        out: dict[TopicPartition, list[ConsumerRecord[Any, Any]]] = {}
        remaining = self.max_poll_records
        completed = self._completed
        if self._metrics is not None:
            subscriptions = self._subscriptions
            self._metrics.maybe_update_assignment(subscriptions.assignment_version,
                                                  subscriptions.assigned_partitions)
        try:
            while remaining > 0:
                nxt = self._next_in_line
                if nxt is None or nxt.is_consumed:
                    if not completed:
                        break
                    head = completed[0]
                    if not head.initialized:
                        self._next_in_line = self._initialize(head)
                    else:
                        self._next_in_line = head
                    completed.popleft()
                    continue
                records = self._fetch_records(nxt, remaining)
                if records:
                    tp = nxt.partition
                    existing = out.get(tp)
                    if existing is None:
                        out[tp] = records
                    else:
                        existing.extend(records)
                    remaining -= len(records)
        except Exception:
            if not out:
                raise
        return out

    def _fetch_records(self, fetch: CompletedFetch, max_records: int
                       ) -> list[ConsumerRecord[Any, Any]]:
        subscriptions = self._subscriptions
        tp = fetch.partition
        if not subscriptions.is_assigned(tp) or not subscriptions.is_fetchable(tp):
            log.debug("dropping fetched data for %s: not assigned or not fetchable", tp)
            fetch.drain()
            return []
        position = subscriptions.position(tp)
        if position is None or position.offset != fetch.next_fetch_offset:
            log.debug("dropping fetched data for %s at %d: the position is now %s", tp,
                      fetch.next_fetch_offset, position)
            fetch.drain()
            return []
        try:
            records = fetch.fetch_records(max_records)
        finally:
            if fetch.next_fetch_offset != position.offset:
                subscriptions.set_position(tp, FetchPosition(fetch.next_fetch_offset,
                                                             fetch.last_epoch))
        if records:
            subscriptions.move_partition_to_end(tp)
        if self._metrics is not None:  # once per fetched partition, with records or none
            self._metrics.record_partition(
                tp, subscriptions.partition_lag(tp, self.isolation_level == 1),
                subscriptions.partition_lead(tp))
        return records

    def _initialize(self, fetch: CompletedFetch) -> CompletedFetch | None:
        """Handle the partition's error code; None when there is nothing to hand out.
        Raises (leaving the fetch queued) for errors the application must see."""
        tp = fetch.partition
        subscriptions = self._subscriptions
        error = fetch.error_code
        if error == Errors.NONE:
            position = subscriptions.position(tp)
            if position is None or position.offset != fetch.fetch_offset:
                log.debug("discarding stale fetch for %s at %d", tp, fetch.fetch_offset)
                return None
            subscriptions.update_fetch_metadata(tp, fetch.high_watermark,
                                                fetch.log_start_offset,
                                                fetch.last_stable_offset)
            fetch.initialized = True
            return fetch
        fetch.initialized = True
        if error in _REFRESH_METADATA:
            log.debug("fetch for %s: %s; refreshing metadata", tp, for_code(error).name)
            self._metadata.request_update()
        elif error == Errors.OFFSET_OUT_OF_RANGE:
            position = subscriptions.position(tp)
            if position is None or position.offset != fetch.fetch_offset:
                log.debug("discarding stale out-of-range error for %s", tp)
            elif subscriptions.has_default_offset_reset_policy():
                log.info("fetch position %d is out of range for partition %s; resetting",
                         fetch.fetch_offset, tp)
                subscriptions.request_offset_reset(tp)
            else:
                fetch.initialized = False  # raise again on the next poll, until a seek
                raise OffsetOutOfRangeError({tp: fetch.fetch_offset})
        elif error == Errors.TOPIC_AUTHORIZATION_FAILED:
            fetch.initialized = False
            raise for_code(error)(f"not authorized to read topic {tp.topic}")
        elif error in _LOG_AND_RETRY:
            log.warning("unknown server error while fetching %s at offset %d", tp,
                        fetch.fetch_offset)
        else:
            fetch.initialized = False
            raise for_code(error)(f"unexpected error fetching {tp}")
        return None

    def clear_buffered_data_for(self, partitions: set[TopicPartition]) -> None:
        """Drop buffered data of partitions no longer assigned (or seeked elsewhere)."""
        nxt = self._next_in_line
        if nxt is not None and nxt.partition in partitions:
            nxt.drain()
            self._next_in_line = None
        keep = [f for f in list(self._completed) if f.partition not in partitions]
        self._completed.clear()
        self._completed.extend(keep)

    def close(self) -> None:
        self._completed.clear()
        self._next_in_line = None
