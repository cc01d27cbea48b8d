"""The public consumer (Java ``KafkaConsumer``).

``poll`` is the heart, on the application thread::

    loop until records or the timeout:
        coordinator.poll       find the coordinator, (re)join the group when needed,
                               auto-commit when due
        update fetch positions validate positions whose leader changed (KIP-320:
                               OffsetsForLeaderEpoch), committed offsets for new
                               partitions, else auto.offset.reset (ListOffsets); all
                               asynchronous
        collect buffered fetches; if none, send fetches and wait for I/O
    send the next fetches (fetch ahead), then interceptors -> records

A background heartbeat thread keeps the group membership alive between polls; see
``_internals/abstract_coordinator.py`` and ``_internals/heartbeat_thread.py``.  Without ``group.id`` there is no coordinator:
only ``assign`` works and offsets cannot be committed.

Thread-safety: not thread-safe, as in Java.  Calling from two threads at once raises
``IllegalStateError`` (every public call enters ``_internals/thread_guard.py``); only
``wakeup`` may be called from any thread (the blocked call then raises ``WakeupError``).
"""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import TracebackType
from typing import Any, Generic, TypeVar

from millrace.client.cluster import PartitionInfo, TopicPartition
from millrace.client.consumer._internals.consumer_coordinator import ConsumerCoordinator
from millrace.client.consumer._internals.consumer_utils import create_components
from millrace.client.consumer._internals.offset_fetcher import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
)
from millrace.client.consumer._internals.request_future import Timer
from millrace.client.consumer._internals.subscription_state import (
    OffsetResetStrategy,
    SubscriptionType,
)
from millrace.client.consumer._internals.thread_guard import ThreadGuard
from millrace.client.consumer.assignors import load_assignors
from millrace.client.consumer.assignors.abstract import ConsumerGroupMetadata
from millrace.client.consumer.config import ConsumerConfig
from millrace.client.consumer.consumer_record import (
    ConsumerRecords,
    OffsetAndMetadata,
    OffsetAndTimestamp,
)
from millrace.client.consumer.deserialization import resolve
from millrace.client.consumer.interceptor import ConsumerInterceptor, ConsumerInterceptors
from millrace.client.consumer.listener import ConsumerRebalanceListener
from millrace.client.errors import IllegalStateError
from millrace.client.serialization import Deserializer, load_class
from millrace.common.errors import ConfigError, InvalidGroupIdError
from millrace.common.time import SYSTEM_TIME, Time

log = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")

_client_ids = itertools.count(1)
CommitCallback = Callable[[Mapping[TopicPartition, OffsetAndMetadata], BaseException | None],
                          None]
PartitionLike = TopicPartition | tuple[str, int]


def _tp(p: PartitionLike) -> TopicPartition:
    return p if isinstance(p, TopicPartition) else TopicPartition(p[0], p[1])


def _offsets(offsets: Mapping[PartitionLike, OffsetAndMetadata | int]
             ) -> dict[TopicPartition, OffsetAndMetadata]:
    out = {}
    for tp, om in offsets.items():
        om = om if isinstance(om, OffsetAndMetadata) else OffsetAndMetadata(int(om))
        if om.offset < 0:
            raise ValueError(f"invalid negative offset {om.offset} for partition {tp}")
        out[_tp(tp)] = om
    return out


def _load_interceptor(value: Any) -> ConsumerInterceptor:
    if isinstance(value, str):
        value = load_class(value.strip(), "interceptor.classes")
    if isinstance(value, type) and issubclass(value, ConsumerInterceptor):
        value = value()
    if not isinstance(value, ConsumerInterceptor):
        raise ConfigError(f"Invalid value {value!r} for configuration interceptor.classes: "
                          "not a ConsumerInterceptor")
    return value


class KafkaConsumer(Generic[K, V]):
    """``KafkaConsumer("topic", bootstrap_servers="host:9092", group_id="g")`` or
    ``KafkaConsumer(config={"bootstrap.servers": ..., "group.id": ...})``.

    Keyword settings use Kafka's names with ``_`` for ``.``; see ``ConsumerConfig``.
    Positional strings are topics to subscribe to.
    """

    def __init__(self, *topics: str | Mapping[str, Any],
                 config: Mapping[str, Any] | None = None,
                 key_deserializer: Deserializer[K] | Callable[[bytes], K] | Any = None,
                 value_deserializer: Deserializer[V] | Callable[[bytes], V] | Any = None,
                 listener: ConsumerRebalanceListener | None = None,
                 time: Time = SYSTEM_TIME, _selector: Any = None, **configs: Any) -> None:
        props: dict[str, Any] = {}
        topic_names: list[str] = []
        for t in topics:
            if isinstance(t, Mapping):
                props.update(t)
            else:
                topic_names.append(t)
        props.update(config or {})
        props.update({k.replace("_", "."): v for k, v in configs.items()})
        cfg = self._config = ConsumerConfig(props)
        v = cfg.values
        self.client_id = v["client.id"] or f"consumer-{v['group.id'] or ''}-{next(_client_ids)}"
        self.group_id: str | None = v["group.id"]
        self._time = time
        self._default_api_timeout_ms = v["default.api.timeout.ms"]
        self._request_timeout_ms = v["request.timeout.ms"]
        interceptors = [_load_interceptor(i) for i in v["interceptor.classes"]]
        for interceptor in interceptors:
            interceptor.configure(v)
        self._interceptors = ConsumerInterceptors(interceptors)
        self._key_deserializer = resolve(
            key_deserializer if key_deserializer is not None else v["key.deserializer"],
            "key.deserializer", v, True)
        self._value_deserializer = resolve(
            value_deserializer if value_deserializer is not None else v["value.deserializer"],
            "value.deserializer", v, False)
        parts = create_components(
            cfg, client_id=self.client_id, time=time, key_deserializer=self._key_deserializer,
            value_deserializer=self._value_deserializer, interceptors=self._interceptors,
            assignors=load_assignors(v["partition.assignment.strategy"]), selector=_selector)
        self._subscriptions = parts.subscriptions
        self._metadata = parts.metadata
        self._client = parts.client
        self._metrics = parts.metrics
        self._fetch_metrics = parts.fetch_metrics
        self._poll_metrics = parts.poll_metrics
        self._fetcher = parts.fetcher
        self._offset_fetcher = parts.offset_fetcher
        self._topic_metadata_fetcher = parts.topic_metadata_fetcher
        self._coordinator = parts.coordinator
        self._guard = ThreadGuard()
        if topic_names:
            try:
                self.subscribe(topic_names, listener)
            except BaseException:
                self._guard.closed = True
                self._client.close()  # no sockets left behind by a failed constructor
                raise
        log.debug("consumer %s created (group %s)", self.client_id, self.group_id)

    # ------------------------------------------------------------------ subscribing
    def subscribe(self, topics: Iterable[str] | str | re.Pattern[str],
                  listener: ConsumerRebalanceListener | None = None) -> None:
        """Join the group for these topics (or every topic matching a pattern; a string
        starting with ``^`` is a pattern, as in librdkafka).  Replaces the previous
        subscription; an empty list unsubscribes."""
        with self._guard:
            if self._coordinator is None:
                raise InvalidGroupIdError("To use the group management or offset commit APIs, "
                                          "you must provide a valid group.id in the consumer "
                                          "configuration.")
            if isinstance(topics, str) and topics.startswith("^"):
                topics = re.compile(topics)
            if isinstance(topics, re.Pattern):
                self._fetcher.clear_buffered_data_for(set(self._subscriptions
                                                          .assigned_partitions()))
                self._subscriptions.subscribe_pattern(topics, listener)
                self._coordinator.update_pattern_subscription(self._metadata.fetch())
                self._metadata.request_update_for_new_topics()
                return
            names = [topics] if isinstance(topics, str) else list(topics)
            if not names:
                self._unsubscribe()
                return
            for name in names:
                if not name or not name.strip():
                    raise ValueError("Topic collection to subscribe to cannot contain null or "
                                     "empty topic")
            unassigned = {tp for tp in self._subscriptions.assigned_partitions()
                          if tp.topic not in names}
            self._fetcher.clear_buffered_data_for(unassigned)
            if self._subscriptions.subscribe(names, listener):
                self._metadata.request_update_for_new_topics()

    def assign(self, partitions: Iterable[PartitionLike]) -> None:
        """Read exactly these partitions, without group management.  Replaces the previous
        assignment; an empty collection unsubscribes."""
        with self._guard:
            wanted = [_tp(p) for p in partitions]
            if not wanted:
                self._unsubscribe()
                return
            for tp in wanted:
                if not tp.topic or not tp.topic.strip():
                    raise ValueError("Topic partitions to assign to cannot have null or empty "
                                     "topic")
            current = set(self._subscriptions.assigned_partitions())
            self._fetcher.clear_buffered_data_for(current - set(wanted))
            if self._coordinator is not None:
                # offsets of partitions given up are committed first, as in Java
                self._coordinator.maybe_auto_commit_offsets_async(self._time.milliseconds())
            if self._subscriptions.assign_from_user(wanted):
                self._metadata.request_update_for_new_topics()

    def unsubscribe(self) -> None:
        with self._guard:
            self._unsubscribe()

    def _unsubscribe(self) -> None:
        self._fetcher.clear_buffered_data_for(set(self._subscriptions.assigned_partitions()))
        if self._coordinator is not None:
            self._coordinator.on_leave_prepare()
            self._coordinator.maybe_leave_group("the consumer unsubscribed from all topics")
        self._subscriptions.unsubscribe()

    def subscription(self) -> set[str]:
        return set(self._subscriptions.subscription)

    def assignment(self) -> set[TopicPartition]:
        return set(self._subscriptions.assigned_partitions())

    # ------------------------------------------------------------------ polling
    def poll(self, timeout_ms: float) -> ConsumerRecords[K, V]:
        """Records fetched for the assigned partitions (at most ``max.poll.records``),
        waiting up to ``timeout_ms`` for some to arrive."""
        with self._guard:
            subscriptions = self._subscriptions
            if subscriptions.subscription_type is SubscriptionType.NONE:
                raise IllegalStateError("Consumer is not subscribed to any topics or assigned "
                                        "any partitions")
            timer = Timer(self._time, timeout_ms)
            self._poll_metrics.record_poll_start(timer.current_ms)
            try:
                return self._poll(timer)
            finally:
                self._poll_metrics.record_poll_end(self._time.milliseconds())

    def _poll(self, timer: Timer) -> ConsumerRecords[K, V]:
        while True:
            self._client.maybe_trigger_wakeup()
            self._update_assignment_metadata_if_needed(timer)
            records = self._poll_for_fetches(timer)
            if records:
                # fetch ahead: the next response travels while the application works
                if self._fetcher.send_fetches() > 0 or self._client.has_pending_requests():
                    self._client.transmit_sends()
                out: ConsumerRecords[K, V] = ConsumerRecords(records)
                self._fetch_metrics.records_consumed.record(out.count(), timer.current_ms)
                return self._interceptors.on_consume(out) \
                    if self._interceptors.interceptors else out
            timer.update()
            if timer.is_expired():
                return ConsumerRecords()

    def _update_assignment_metadata_if_needed(self, timer: Timer) -> bool:
        if self._coordinator is not None and not self._coordinator.poll(timer):
            return False
        return self._update_fetch_positions(timer)

    def _update_fetch_positions(self, timer: Timer) -> bool:
        # a leader change since the last poll: check the positions read from the old one
        self._offset_fetcher.validate_positions_if_needed()
        subscriptions = self._subscriptions
        if subscriptions.has_all_fetch_positions():
            return True
        if self._coordinator is not None and \
                not self._coordinator.refresh_committed_offsets_if_needed(timer):
            return False
        subscriptions.reset_initializing_positions()
        self._offset_fetcher.reset_positions_if_needed()
        return True

    def _poll_for_fetches(self, timer: Timer) -> dict[TopicPartition, list[Any]]:
        fetcher = self._fetcher
        records = fetcher.collect_fetch()
        if records:
            return records
        fetcher.send_fetches()
        timeout = timer.remaining_ms
        coordinator = self._coordinator
        if coordinator is not None and not coordinator.rejoin_needed_or_pending():
            timeout = min(timeout, coordinator.time_to_next_poll(timer.update()))
        if not self._subscriptions.has_all_fetch_positions():
            timeout = min(timeout, self._client.retry_backoff_ms)
        self._client.poll(timeout, lambda: not fetcher.has_available_fetches())
        timer.update()
        if coordinator is not None and coordinator.rejoin_needed_or_pending():
            return {}
        return fetcher.collect_fetch()

    def __iter__(self) -> Iterator[Any]:
        """Every record, polling as needed, until the consumer is closed (or woken up)."""
        while not self._guard.closed:
            yield from self.poll(1000)

    # ------------------------------------------------------------------ commits
    def commit_sync(self, offsets: Mapping[PartitionLike, OffsetAndMetadata | int] | None = None,
                    timeout_ms: float | None = None) -> None:
        """Commit ``offsets`` (default: the positions of every assigned partition, i.e. what
        the last polls returned) and wait for the answer."""
        with self._guard:
            coordinator = self._require_coordinator()
            to_commit = _offsets(offsets) if offsets is not None \
                else self._subscriptions.all_consumed()
            timeout = self._default_api_timeout_ms if timeout_ms is None else timeout_ms
            if not coordinator.commit_offsets_sync(to_commit, Timer(self._time, timeout)):
                raise self._metadata.timeout_error(
                    f"Timeout of {int(timeout)}ms expired before successfully committing "
                    "offsets", timeout)

    def commit_async(self, offsets: Mapping[PartitionLike, OffsetAndMetadata | int]
                     | None = None, callback: CommitCallback | None = None) -> None:
        """Commit without waiting; ``callback(offsets, error)`` runs in a later call
        (poll, commit_sync or close) on this thread."""
        with self._guard:
            coordinator = self._require_coordinator()
            to_commit = _offsets(offsets) if offsets is not None \
                else self._subscriptions.all_consumed()
            coordinator.commit_offsets_async(to_commit, callback)
            self._client.transmit_sends()

    def committed(self, partitions: Iterable[PartitionLike] | PartitionLike,
                  timeout_ms: float | None = None
                  ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The last committed offsets of these partitions (None: nothing committed)."""
        with self._guard:
            coordinator = self._require_coordinator()
            if isinstance(partitions, TopicPartition) or (
                    isinstance(partitions, tuple) and len(partitions) == 2
                    and isinstance(partitions[0], str)):
                wanted = [_tp(partitions)]
            else:
                wanted = [_tp(p) for p in partitions]
            timeout = self._default_api_timeout_ms if timeout_ms is None else timeout_ms
            found = coordinator.fetch_committed_offsets(set(wanted), Timer(self._time, timeout))
            if found is None:
                raise self._metadata.timeout_error(
                    f"Timeout of {int(timeout)}ms expired before the last committed offset "
                    f"for partitions {wanted} could be determined", timeout)
            return {tp: found.get(tp) for tp in wanted}

    def _require_coordinator(self) -> ConsumerCoordinator:
        if self._coordinator is None:
            raise InvalidGroupIdError("To use the group management or offset commit APIs, you "
                                      "must provide a valid group.id in the consumer "
                                      "configuration.")
        return self._coordinator

    # ------------------------------------------------------------------ positions
    def position(self, partition: PartitionLike, timeout_ms: float | None = None) -> int:
        """The offset of the next record that will be fetched (resolving it if needed)."""
        with self._guard:
            tp = _tp(partition)
            if not self._subscriptions.is_assigned(tp):
                raise IllegalStateError(f"You can only check the position for partitions "
                                        f"assigned to this consumer: {tp}")
            timeout = self._default_api_timeout_ms if timeout_ms is None else timeout_ms
            timer = Timer(self._time, timeout)
            while True:
                position = self._subscriptions.position(tp)
                if position is not None:
                    return position.offset
                self._update_fetch_positions(timer)
                self._client.poll(min(timer.remaining_ms, self._client.retry_backoff_ms))
                timer.update()
                if timer.is_expired():
                    raise self._metadata.timeout_error(
                        f"Timeout of {int(timeout)}ms expired before the position for "
                        f"partition {tp} could be determined", timeout)

    def seek(self, partition: PartitionLike, offset: int | OffsetAndMetadata) -> None:
        """Fetch from ``offset`` on the next poll."""
        with self._guard:
            tp = _tp(partition)
            om = offset if isinstance(offset, OffsetAndMetadata) else OffsetAndMetadata(offset)
            if om.offset < 0:
                raise ValueError("seek offset must not be a negative number")
            log.info("seeking to offset %d for partition %s", om.offset, tp)
            self._fetcher.clear_buffered_data_for({tp})
            self._subscriptions.seek(tp, om.offset, om.leader_epoch,
                                     self._metadata.current_leader(tp))

    def seek_to_beginning(self, partitions: Iterable[PartitionLike] | None = None) -> None:
        self._seek_to(partitions, OffsetResetStrategy.EARLIEST)

    def seek_to_end(self, partitions: Iterable[PartitionLike] | None = None) -> None:
        self._seek_to(partitions, OffsetResetStrategy.LATEST)

    def _seek_to(self, partitions: Iterable[PartitionLike] | None,
                 strategy: OffsetResetStrategy) -> None:
        """Lazy, as in Java: the offset is looked up by the next poll or position."""
        with self._guard:
            tps = self._subscriptions.assigned_partitions() if partitions is None \
                else [_tp(p) for p in partitions]
            self._fetcher.clear_buffered_data_for(set(tps))
            for tp in tps:
                self._subscriptions.request_offset_reset(tp, strategy)

    def offsets_for_times(self, timestamps: Mapping[PartitionLike, int],
                          timeout_ms: float | None = None
                          ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """Per partition, the earliest offset whose timestamp is >= the given one."""
        with self._guard:
            wanted = {_tp(tp): ts for tp, ts in timestamps.items()}
            for tp, ts in wanted.items():
                if ts < 0:
                    raise ValueError(f"The target time for partition {tp} is {ts}. The "
                                     "target time cannot be negative.")
            timeout = self._default_api_timeout_ms if timeout_ms is None else timeout_ms
            found = self._offset_fetcher.offsets_for_times(wanted, timeout)
            return {tp: (OffsetAndTimestamp(d.offset, d.timestamp if d.timestamp is not None
                                            else -1, d.leader_epoch) if d else None)
                    for tp, d in ((tp, found.get(tp)) for tp in wanted)}

    def beginning_offsets(self, partitions: Iterable[PartitionLike],
                          timeout_ms: float | None = None) -> dict[TopicPartition, int]:
        return self._list_offsets(partitions, EARLIEST_TIMESTAMP, timeout_ms)

    def end_offsets(self, partitions: Iterable[PartitionLike],
                    timeout_ms: float | None = None) -> dict[TopicPartition, int]:
        """The offset after the last record (the last stable offset with read_committed)."""
        return self._list_offsets(partitions, LATEST_TIMESTAMP, timeout_ms)

    def _list_offsets(self, partitions: Iterable[PartitionLike], timestamp: int,
                      timeout_ms: float | None) -> dict[TopicPartition, int]:
        with self._guard:
            timeout = self._default_api_timeout_ms if timeout_ms is None else timeout_ms
            return self._offset_fetcher.beginning_or_end_offsets(
                [_tp(p) for p in partitions], timestamp, timeout)

    # ------------------------------------------------------------------ flow control
    def pause(self, partitions: Iterable[PartitionLike]) -> None:
        """Stop fetching these partitions (their positions and assignment are kept)."""
        with self._guard:
            for p in partitions:
                self._subscriptions.pause(_tp(p))

    def resume(self, partitions: Iterable[PartitionLike]) -> None:
        with self._guard:
            for p in partitions:
                self._subscriptions.resume(_tp(p))

    def paused(self) -> set[TopicPartition]:
        return self._subscriptions.paused_partitions()

    def enforce_rebalance(self, reason: str | None = None) -> None:
        with self._guard:
            coordinator = self._require_coordinator()
            if not self._subscriptions.has_auto_assigned_partitions():
                raise IllegalStateError("Tried to force a rebalance but consumer does not have "
                                        "a group.")
            coordinator.request_rejoin(reason or "rebalance enforced by user")

    # ------------------------------------------------------------------ metadata
    def partitions_for(self, topic: str, timeout_ms: float | None = None
                       ) -> list[PartitionInfo]:
        with self._guard:
            cluster = self._metadata.fetch()
            if cluster.partition_count(topic) is None:
                timeout = self._default_api_timeout_ms if timeout_ms is None else timeout_ms
                self._metadata.add_transient_topics([topic])
                try:
                    timer = Timer(self._time, timeout)
                    while cluster.partition_count(topic) is None and timer.not_expired():
                        self._client.await_metadata_update(timer.remaining_ms)
                        cluster = self._metadata.fetch()
                        timer.update()
                        if topic in cluster.topic_errors and cluster.partition_count(topic) \
                                is None and timer.not_expired():
                            self._client.sleep(min(self._client.retry_backoff_ms,
                                                   timer.remaining_ms))
                finally:
                    self._metadata.clear_transient_topics()
                unreachable = self._metadata.reachability.error(
                    self._metadata.bootstrap_addresses, timeout)
                if unreachable is not None:  # not "no such topic": nothing answered at all
                    raise unreachable
            return list(cluster.partitions_for_topic(topic))

    def list_topics(self, timeout_ms: float | None = None) -> dict[str, list[PartitionInfo]]:
        """Every topic the broker lists (internal ones with ``exclude.internal.topics=false``)
        and its partitions; a request of its own, the cached metadata stays as it is."""
        with self._guard:
            timeout = self._default_api_timeout_ms if timeout_ms is None else timeout_ms
            return self._topic_metadata_fetcher.all_topics(
                timeout, include_internal=self._metadata.include_internal_topics)

    # ------------------------------------------------------------------ lifecycle
    def wakeup(self) -> None:
        """Make the current (or next) blocking call raise ``WakeupError``; any thread."""
        self._client.wakeup()

    def close(self, timeout_ms: float = 30_000) -> None:
        """Commit (with auto-commit), leave the group, stop the heartbeat thread and close
        the connections, waiting at most ``timeout_ms`` for the group steps."""
        self._guard.acquire()
        try:
            if self._guard.closed:
                return
            self._guard.closed = True
            self._client.disable_wakeups()
            error: BaseException | None = None
            if self._coordinator is not None:
                try:
                    self._coordinator.close(Timer(self._time, min(timeout_ms,
                                                                  self._request_timeout_ms)))
                except Exception as e:
                    log.warning("failed to close the coordinator", exc_info=True)
                    error = e
            self._fetcher.close()
            self._client.close()
            self._metrics.close()
            self._interceptors.close()
            for d in (self._key_deserializer, self._value_deserializer):
                try:
                    d.close()
                except Exception:
                    log.warning("failed to close a deserializer", exc_info=True)
            log.debug("consumer %s closed", self.client_id)
            if error is not None and not isinstance(error, Exception):
                raise error
        finally:
            self._guard.release()

    @property
    def closed(self) -> bool:
        return self._guard.closed

    def __enter__(self) -> KafkaConsumer[K, V]:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def group_metadata(self) -> ConsumerGroupMetadata:
        """This member's group id, generation, member id and group instance id: pass it
        to ``KafkaProducer.send_offsets_to_transaction`` so the coordinator refuses the
        offsets of a member that a rebalance fenced (KIP-447)."""
        return self._require_coordinator().group_metadata()

    def metrics(self, raw: bool = False, flat: bool = False) -> dict[Any, Any]:
        """Java's consumer metrics as kafka-python gives them: ``{group: {name: value}}``
        with groups ``consumer-metrics``, ``consumer-coordinator-metrics``,
        ``consumer-fetch-manager-metrics`` and, per partition,
        ``consumer-fetch-manager-metrics.<topic>-<partition>``.  ``raw=True``:
        ``{MetricName: value}`` (tags included); ``flat=True``: the client-wide metrics as
        ``{name: value}``.  Any thread may call it."""
        return self._metrics.snapshot(raw=raw, flat=flat)

