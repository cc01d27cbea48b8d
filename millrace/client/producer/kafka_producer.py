"""The public producer (Java ``KafkaProducer``).

``send`` runs on the caller's thread: interceptors -> wait for the topic's metadata ->
key and value serializers -> partitioner -> ``RecordAccumulator.append``, which encodes
the record straight into its partition's open batch.  A background Sender thread drains
batches into ProduceRequests through the ``NetworkClient`` and completes each record's
future and callback.  See ``_internals/sender.py`` for the network side.  The common
case of all that (no interceptors, bytes or None key and value, no headers, a batch with
room) is one C call, ``_internals/send_path.py``'s ``SendPath``, bound as a plain
producer's ``send``; it runs the full ``_send`` for anything else.

Errors that happen inside ``send`` -- a serializer that rejects its input, a record
larger than ``max.request.size``, no metadata or no buffer memory within
``max.block.ms`` -- are raised by ``send`` itself and nothing is buffered (Java returns a
failed future for some of these; raising keeps Python callers from losing them).

Transactions (``transactional.id``): ``init_transactions`` once, then per transaction
``begin_transaction`` -> ``send``... -> optionally ``send_offsets_to_transaction`` ->
``commit_transaction`` (or ``abort_transaction``).  Each blocking call waits at most
``max.block.ms`` (or its ``timeout`` in seconds) and raises ``KafkaTimeoutError`` when
it runs out; calling the same method again resumes the wait.  After a fatal error
(``ProducerFencedError`` ...) every call raises and the producer can only be closed;
after any other error ``abort_transaction`` makes it usable again
(``millrace.client.producer.errors``).

Thread-safety: ``send``, ``flush``, ``partitions_for`` and ``metrics`` may be called from
any number of threads.  Callbacks run on the Sender thread and must be quick.
"""

from __future__ import annotations

import copy
import itertools
import logging
import threading
import time as _time
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Generic, TypeVar

from millrace.client.api_versions import ApiVersions
from millrace.client.client_utils import create_network_client
from millrace.client.cluster import Cluster, PartitionInfo, TopicPartition
from millrace.client.consumer.assignors.abstract import ConsumerGroupMetadata
from millrace.client.consumer.consumer_record import OffsetAndMetadata
from millrace.client.errors import BufferExhaustedError, IllegalStateError, SerializationError
from millrace.client.metadata import parse_bootstrap_servers
from millrace.client.metrics import Metrics, load_reporters
from millrace.client.producer._internals import journey as _journey
from millrace.client.producer._internals.batch_core import wall_clock_ms
from millrace.client.producer._internals.buffer_pool import BufferPool
from millrace.client.producer._internals.built_in_partitioner import partition_for_key
from millrace.client.producer._internals.future_record_metadata import FutureRecordMetadata
from millrace.client.producer._internals.producer_interceptors import (
    InterceptorCallback,
    ProducerInterceptors,
)
from millrace.client.producer._internals.producer_metadata import ProducerMetadata
from millrace.client.producer._internals.record_accumulator import RecordAccumulator
from millrace.client.producer._internals.send_path import SendPath
from millrace.client.producer._internals.sender import Sender
from millrace.client.producer._internals.sender_metrics import SenderMetrics
from millrace.client.producer._internals.transaction_manager import TransactionManager
from millrace.client.producer._internals.txn_state import TransactionalRequestResult
from millrace.client.producer.config import ProducerConfig
from millrace.client.producer.interceptor import ProducerInterceptor
from millrace.client.producer.partitioner import Partitioner
from millrace.client.producer.producer_record import Callback, ProducerRecord
from millrace.client.serialization import (
    ByteArraySerializer,
    Serializer,
    load_class,
    resolve_serializer,
)
from millrace.client.tracing import RecordJourney, now_us
from millrace.common.errors import ConfigError, RecordTooLargeError
from millrace.common.time import SYSTEM_TIME, SystemTime, Time
from millrace.record import HEADER_SIZE
from millrace.record.default_record import record_size_upper_bound

log = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")

_client_ids = itertools.count(1)
# a batch header plus a record's varints at their widest: the size bound of one record
_BATCH_AND_RECORD_OVERHEAD = HEADER_SIZE + 5 + 1 + 10 + 5 + 5 + 5 + 5


def _load_instance(value: Any, config_name: str, base: type) -> Any:
    if isinstance(value, str):
        value = load_class(value.strip(), config_name)
    if isinstance(value, type):
        if not issubclass(value, base):
            raise ConfigError(f"Invalid value {value.__name__} for configuration {config_name}: "
                              f"not a {base.__name__}")
        value = value()
    if not isinstance(value, base):
        raise ConfigError(f"Invalid value {value!r} for configuration {config_name}: "
                          f"not a {base.__name__}")
    return value


def _normalize_headers(headers: Any) -> list[tuple[str, bytes | None]]:
    items = headers.items() if isinstance(headers, Mapping) else headers
    out: list[tuple[str, bytes | None]] = []
    for item in items:
        try:
            key, value = item
        except (TypeError, ValueError):
            raise SerializationError(f"a header must be a (str, bytes) pair, not {item!r}") \
                from None
        if not isinstance(key, str):
            raise SerializationError(f"header key {key!r} is not a str")
        if value is not None and type(value) is not bytes:
            if isinstance(value, bytearray | memoryview):
                value = bytes(value)
            elif isinstance(value, str):
                value = value.encode("utf-8")
            else:
                raise SerializationError(f"header {key!r} has a {type(value).__name__} value; "
                                         "expected bytes or None")
        out.append((key, value))
    return out


class KafkaProducer(Generic[K, V]):
    """``KafkaProducer({"bootstrap.servers": "host:9092", ...})``; see ``ProducerConfig``."""

    def __init__(self, config: Mapping[str, Any] | None = None, *,
                 key_serializer: Serializer[K] | Any = None,
                 value_serializer: Serializer[V] | Any = None,
                 time: Time = SYSTEM_TIME, _selector: Any = None,
                 _start_thread: bool = True) -> None:
        self._closed = False
        self._io_thread: threading.Thread | None = None
        cfg = self._config = ProducerConfig(config or {})
        self.client_id = cfg["client.id"] or f"producer-{next(_client_ids)}"
        self._time = time
        self._max_block_ms = cfg["max.block.ms"]
        self._max_request_size = cfg["max.request.size"]
        self._total_memory = cfg["buffer.memory"]
        self._ignore_keys = cfg["partitioner.ignore.keys"]
        values = cfg.values
        self._metrics = Metrics(time, cfg["metrics.sample.window.ms"], cfg["metrics.num.samples"],
                                namespace="kafka.producer", tags={"client-id": self.client_id},
                                reporters=load_reporters(values["metric.reporters"], values))
        interceptors = [_load_instance(i, "interceptor.classes", ProducerInterceptor)
                        for i in self._interceptor_list(values["interceptor.classes"])]
        for interceptor in interceptors:
            interceptor.configure(values)
        self._interceptors = ProducerInterceptors(interceptors) if interceptors else None
        self._key_serializer = resolve_serializer(
            key_serializer if key_serializer is not None else values["key.serializer"],
            "key.serializer", values, True)
        self._value_serializer = resolve_serializer(
            value_serializer if value_serializer is not None else values["value.serializer"],
            "value.serializer", values, False)
        self._key_is_bytes = type(self._key_serializer) is ByteArraySerializer
        self._value_is_bytes = type(self._value_serializer) is ByteArraySerializer
        self._partitioner: Partitioner | None = None
        if values["partitioner.class"] is not None:
            self._partitioner = _load_instance(values["partitioner.class"], "partitioner.class",
                                               Partitioner)
            self._partitioner.configure(values)
        bootstrap = parse_bootstrap_servers(values["bootstrap.servers"])

        self._metadata = ProducerMetadata(cfg["retry.backoff.ms"], cfg["retry.backoff.max.ms"],
                                          cfg["metadata.max.age.ms"],
                                          cfg["metadata.max.idle.ms"])
        self._metadata.bootstrap(bootstrap)
        api_versions = ApiVersions()
        self._transaction_manager = (
            TransactionManager(cfg["retry.backoff.ms"], cfg.transactional_id,
                               cfg["transaction.timeout.ms"], api_versions)
            if cfg.idempotence else None)
        self._transactional = cfg.transactional_id is not None
        sender_metrics = SenderMetrics(self._metrics)
        pool = BufferPool(cfg["buffer.memory"], cfg["batch.size"],
                          sender_metrics.bufferpool_wait_time)
        sender_metrics.add_buffer_pool(pool)
        self._accumulator = RecordAccumulator(
            buffer_pool=pool, batch_size=cfg["batch.size"], compression=cfg.compression,
            compression_level=cfg.compression_level, linger_ms=cfg["linger.ms"],
            retry_backoff_ms=cfg["retry.backoff.ms"],
            retry_backoff_max_ms=cfg["retry.backoff.max.ms"],
            delivery_timeout_ms=cfg["delivery.timeout.ms"],
            adaptive_partitioning=cfg["partitioner.adaptive.partitioning.enable"],
            partition_availability_timeout_ms=cfg["partitioner.availability.timeout.ms"],
            transaction_manager=self._transaction_manager)
        max_in_flight = cfg["max.in.flight.requests.per.connection"]
        self._client = create_network_client(
            values, self._metadata, client_id=self.client_id,
            max_in_flight_requests_per_connection=max_in_flight, time=time, selector=_selector,
            api_versions=api_versions)
        self._metrics.add("requests-in-flight", "producer-metrics",
                          self._client.in_flight_request_count,
                          description="requests sent and not yet answered")
        self._metrics.add("metadata-age", "producer-metrics",
                          lambda: self._metadata.metadata_age_ms(self._time.milliseconds()) / 1e3,
                          description="seconds since the metadata was last refreshed")
        self._sender = Sender(
            self._client, self._metadata, self._accumulator,
            guarantee_message_order=max_in_flight == 1,
            max_request_size=cfg["max.request.size"], acks=cfg.acks, retries=cfg["retries"],
            metrics=sender_metrics, time=time, request_timeout_ms=cfg["request.timeout.ms"],
            retry_backoff_ms=cfg["retry.backoff.ms"],
            transaction_manager=self._transaction_manager,
            max_in_flight_requests=max_in_flight)
        # bound once: the per-record path avoids attribute chains
        # the system clock is read without a Python call on the per-record path
        self._clock_ms = wall_clock_ms if type(time) is SystemTime else time.milliseconds
        self._append = self._accumulator.append
        self._wakeup = self._client.wakeup
        self._send_errors = sender_metrics.record_error
        self._buffer_exhausted = sender_metrics.buffer_exhausted
        self._max_record_size = min(self._max_request_size, self._total_memory)
        # send()'s common case in one C call (send_path.py); anything else runs _send
        self._send_path: Any = None
        if SendPath is not None and self._interceptors is None and self._partitioner is None \
                and not self._transactional:
            self._send_path = SendPath(
                ProducerRecord, self._metadata, self._accumulator, self._wakeup,
                None if type(time) is SystemTime else time.milliseconds,
                self._max_record_size, _BATCH_AND_RECORD_OVERHEAD, self._key_is_bytes,
                self._value_is_bytes, self._ignore_keys, self._send)
            if type(self) is KafkaProducer:  # a subclass may override send: keep it
                self.send = self._send_path  # type: ignore[method-assign]
        if _start_thread:
            self._io_thread = threading.Thread(
                target=self._sender.run, daemon=True,
                name=f"millrace-producer-network-thread | {self.client_id}")
            self._io_thread.start()
        log.debug("producer %s started", self.client_id)

    @staticmethod
    def _interceptor_list(value: Any) -> list[Any]:
        if value is None:
            return []
        if isinstance(value, str):
            return [v.strip() for v in value.split(",") if v.strip()]
        if isinstance(value, list | tuple):
            return list(value)
        return [value]

    # ------------------------------------------------------------------ sending
    def send(self, record: ProducerRecord[K, V], callback: Callback | None = None
             ) -> FutureRecordMetadata:
        """Buffer ``record`` for sending; returns a future of its ``RecordMetadata``.

        ``callback(metadata, exception)`` runs on the Sender thread when the outcome is
        known.  Blocks only for metadata or buffer memory (``max.block.ms``).
        """
        send_path = self._send_path  # (a plain KafkaProducer has it as its send already)
        if send_path is not None:
            return send_path(record, callback)
        return self._send(record, callback)

    def send_traced(self, record: ProducerRecord[K, V], callback: Callback | None = None, *,
                    journey: RecordJourney | None = None
                    ) -> tuple[FutureRecordMetadata, RecordJourney]:
        """``send`` a record and trace its journey (``millrace.client.tracing``).

        The record goes with a ``traceparent`` header naming a new span of the journey: a
        new trace, or, when the record already carries a valid ``traceparent``, a child
        span in that trace (the old header is replaced).  ``record`` itself is not
        changed: a copy with the new headers is sent.  Traced records take the full
        Python ``send`` (never the C fast path), which records each stage; the journey's
        ``done`` is set once the callback ran (or ``send`` raised).
        """
        if journey is None:
            journey = RecordJourney.start(_journey.find_traceparent_value(record.headers))
        journey.topic = record.topic
        journey.client_id = self.client_id
        traced = copy.copy(record)
        traced.headers = _journey.with_traceparent(record.headers, journey.traceparent)
        try:
            future = self._send(traced, _journey.JourneyCallback(callback, journey), journey)
        except BaseException as e:
            journey.finish(e)
            raise
        return future, journey

    def _send(self, record: ProducerRecord[K, V], callback: Callback | None = None,
              journey: RecordJourney | None = None) -> FutureRecordMetadata:
        """``send``, every step of it (interceptors, serializers, metadata waits...);
        ``journey``: a traced record's, which gets a stage per step (send_traced)."""
        interceptors = self._interceptors
        if journey is not None:
            t_us = now_us()
        if interceptors is not None:
            record = interceptors.on_send(record)
            callback = InterceptorCallback(callback, interceptors)
        if journey is not None:
            _journey.traced_interceptors(journey, t_us, interceptors)
        if self._closed:
            raise IllegalStateError("Cannot perform operation after producer has been closed")
        try:
            # The hot path: everything below runs once per record.
            topic = record.topic
            partition = record.partition
            now = self._clock_ms()
            # touch the topic (metadata.max.idle.ms) and read its partition count from the
            # current snapshot: ProducerMetadata's fields, read here to save two calls
            metadata = self._metadata
            cluster = metadata._cluster
            tracked = metadata._topics
            if topic in tracked:
                tracked[topic] = now + metadata._idle_ms
                count = cluster.partition_counts.get(topic)
            else:
                count = None
            remaining: float = self._max_block_ms
            if count is None or (partition is not None and partition >= count):
                cluster, waited = self._wait_on_metadata(topic, partition, now, remaining)
                remaining = max(remaining - waited, 0)
                now = self._clock_ms()
                count = cluster.partition_count(topic)
                assert count is not None
            if journey is not None:
                t_us = now_us()
            headers = _normalize_headers(record.headers) if record.headers else ()
            key = record.key
            if key is None or (self._key_is_bytes and type(key) is bytes):
                key_bytes: bytes | None = key  # type: ignore[assignment]
            else:
                key_bytes = self._serialize(self._key_serializer, topic, key, headers, "key")
            value = record.value
            if value is None or (self._value_is_bytes and type(value) is bytes):
                value_bytes: bytes | None = value  # type: ignore[assignment]
            else:
                value_bytes = self._serialize(self._value_serializer, topic, value, headers,
                                              "value")
            if journey is not None:
                _journey.traced_serialize(journey, t_us, self._key_serializer,
                                          self._value_serializer, key_bytes, value_bytes)
                t_us = now_us()
                reason = _journey.partition_reason(partition, self._partitioner, key_bytes,
                                                   self._ignore_keys)
            if partition is None:
                if self._partitioner is not None:
                    partition = self._custom_partition(record, key_bytes, value_bytes, cluster,
                                                       count)
                elif key_bytes is not None and not self._ignore_keys:
                    partition = partition_for_key(key_bytes, count)
                else:
                    partition = -1  # the accumulator's sticky partition
            if headers:
                size = HEADER_SIZE + record_size_upper_bound(key_bytes, value_bytes, headers)
            else:
                size = _BATCH_AND_RECORD_OVERHEAD + (len(key_bytes) if key_bytes else 0) + \
                    (len(value_bytes) if value_bytes else 0)
            if size > self._max_record_size:
                self._record_too_large(size)
            timestamp = record.timestamp
            if self._transactional:
                assert self._transaction_manager is not None
                self._transaction_manager.fail_if_not_ready_for_send()
            if journey is not None:
                if partition >= 0:
                    _journey.traced_partition(journey, t_us, partition, reason)
                trace = _journey.AppendTrace(journey, self._accumulator.batch_size)
            else:
                trace = None
            future, wake = self._append(topic, partition, now if timestamp is None else timestamp,
                                        key_bytes, value_bytes, headers, callback, remaining, now,
                                        cluster, trace)
            if journey is not None and partition < 0:  # sticky: known once appended
                _journey.traced_partition(journey, t_us, future.topic_partition.partition,
                                          reason)
            if self._transactional:
                # after the append: only then is a sticky partition known (Java does the
                # same); the sender drains nothing of it before AddPartitionsToTxn.  Wake
                # the Sender for a partition new to the transaction, not for every record
                # (a wake-up per send cost ~1 us per record in bench/transactions.py).
                assert self._transaction_manager is not None
                if self._transaction_manager.maybe_add_partition(future.topic_partition):
                    wake = True
            if wake:
                self._wakeup()
            return future
        except Exception as e:
            if interceptors is not None:
                interceptors.on_send_error(record, None, e)
            self._send_errors.record(1)
            if isinstance(e, BufferExhaustedError):
                self._buffer_exhausted.record(1)
            raise

    @staticmethod
    def _serialize(serializer: Serializer[Any], topic: str, data: Any,
                   headers: Any, what: str) -> bytes | None:
        try:
            out = serializer.serialize(topic, data, headers or None)
        except SerializationError:
            raise
        except Exception as e:
            raise SerializationError(
                f"Can't convert {what} of class {type(data).__name__} with "
                f"{type(serializer).__name__} specified in {what}.serializer: {e}") from e
        if out is not None and type(out) is not bytes:
            if isinstance(out, bytearray | memoryview):
                return bytes(out)
            raise SerializationError(f"{type(serializer).__name__} returned a "
                                     f"{type(out).__name__} for the {what}, not bytes")
        return out

    def _record_too_large(self, size: int) -> None:
        if size > self._max_request_size:
            raise RecordTooLargeError(
                f"The message is {size} bytes when serialized which is larger than "
                f"{self._max_request_size}, which is the value of the max.request.size "
                "configuration.")
        raise RecordTooLargeError(
            f"The message is {size} bytes when serialized which is larger than the total "
            "memory buffer you have configured with the buffer.memory configuration.")

    def _custom_partition(self, record: ProducerRecord[K, V], key_bytes: bytes | None,
                          value_bytes: bytes | None, cluster: Cluster, count: int) -> int:
        assert self._partitioner is not None
        partition = self._partitioner.partition(record.topic, record.key, key_bytes,
                                                record.value, value_bytes, cluster)
        if not 0 <= partition < count:
            raise ValueError(f"The partitioner generated an invalid partition number: "
                             f"{partition}. Topic {record.topic} has {count} partitions.")
        return partition

    def _wait_on_metadata(self, topic: str, partition: int | None, now_ms: int,
                          max_wait_ms: float) -> tuple[Cluster, float]:
        """Block until the topic (and ``partition``) is in the metadata; (cluster, waited ms)."""
        metadata = self._metadata
        metadata.add(topic, now_ms)
        cluster = metadata.fetch()
        count = cluster.partition_count(topic)
        if count is not None and (partition is None or partition < count):
            return cluster, 0.0
        begin = _time.monotonic()
        while True:
            version = metadata.request_update()
            self._sender.wakeup()
            elapsed = (_time.monotonic() - begin) * 1000.0
            metadata.await_update(version, max_wait_ms - elapsed)
            if self._closed:
                raise IllegalStateError("Requested metadata update after close")
            auth_error = metadata.authentication_error()
            if auth_error is not None:  # a wrong password will not fix itself: no waiting
                raise auth_error
            elapsed = (_time.monotonic() - begin) * 1000.0
            cluster = metadata.fetch()
            error = metadata.topic_error(topic)
            if error is not None:
                raise error
            count = cluster.partition_count(topic)
            if count is not None and (partition is None or partition < count):
                return cluster, elapsed
            if elapsed >= max_wait_ms:
                if count is not None and partition is not None:
                    raise metadata.timeout_error(
                        f"Partition {partition} of topic {topic} with partition count {count} "
                        f"is not present in metadata after {int(max_wait_ms)} ms.", max_wait_ms)
                raise metadata.timeout_error(
                    f"Topic {topic} not present in metadata after {int(max_wait_ms)} ms.",
                    max_wait_ms)

    # ------------------------------------------------------------------ transactions
    def _require_transactions(self) -> TransactionManager:
        tm = self._transaction_manager
        if tm is None or not tm.is_transactional:
            raise IllegalStateError("Cannot use transactional methods without enabling "
                                    "transactions by setting the transactional.id configuration "
                                    "property")
        if self._closed:
            raise IllegalStateError("Cannot perform operation after producer has been closed")
        return tm

    def _await(self, result: TransactionalRequestResult, timeout: float | None) -> None:
        self._sender.wakeup()
        result.await_(self._max_block_ms / 1000.0 if timeout is None else timeout)

    def init_transactions(self, timeout: float | None = None) -> None:
        """Get the producer id and epoch of ``transactional.id`` from its coordinator; this
        fences earlier producers with the same id and completes (aborts, or finishes
        committing) any transaction they left open.  Call once, before the first
        transaction.  ``timeout`` in seconds (default ``max.block.ms``)."""
        tm = self._require_transactions()
        self._await(tm.initialize_transactions(), timeout)

    def begin_transaction(self) -> None:
        """Start a transaction (local only: the coordinator learns of it with the first
        partition or offsets added)."""
        self._require_transactions().begin_transaction()

    def send_offsets_to_transaction(
            self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
            group_metadata: ConsumerGroupMetadata | str,
            timeout: float | None = None) -> None:
        """Commit ``offsets`` (the next record to read, per partition) for the consumer
        group as part of this transaction: visible to the group only if it commits.  Pass
        ``consumer.group_metadata()`` so a member fenced by a rebalance cannot commit
        (KIP-447)."""
        if isinstance(group_metadata, str):
            group_metadata = ConsumerGroupMetadata(group_metadata)
        if not isinstance(group_metadata, ConsumerGroupMetadata):
            raise ValueError("Consumer group metadata could not be null")
        if group_metadata.generation_id > 0 and not group_metadata.member_id:
            raise ValueError(f"Passed in group metadata {group_metadata} has generationId > 0 "
                             "but member.id ")
        tm = self._require_transactions()
        if not offsets:
            return
        normalized = {tp: om if isinstance(om, OffsetAndMetadata) else OffsetAndMetadata(om)
                      for tp, om in offsets.items()}
        self._await(tm.send_offsets_to_transaction(normalized, group_metadata), timeout)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Send every buffered record, then commit.  A record that failed makes this raise
        (the transaction must then be aborted)."""
        tm = self._require_transactions()
        self._await(tm.begin_commit(), timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort: records not yet sent fail with ``TransactionAbortedError``; the ones
        written are marked aborted and skipped by read_committed consumers."""
        tm = self._require_transactions()
        log.info("aborting incomplete transaction")
        self._await(tm.begin_abort(), timeout)

    # ------------------------------------------------------------------ other API
    def partitions_for(self, topic: str) -> list[PartitionInfo]:
        """The topic's partitions (waits up to ``max.block.ms`` for metadata)."""
        if self._closed:
            raise IllegalStateError("Cannot perform operation after producer has been closed")
        cluster, _ = self._wait_on_metadata(topic, None, self._time.milliseconds(),
                                            self._max_block_ms)
        return list(cluster.partitions_for_topic(topic))

    def flush(self, timeout: float | None = None) -> None:
        """Send everything buffered now and wait until each record is complete."""
        if threading.current_thread() is self._io_thread:
            raise IllegalStateError("KafkaProducer.flush() invocation inside a callback is "
                                    "not permitted because it may lead to deadlock.")
        self._accumulator.begin_flush()
        self._sender.wakeup()
        self._accumulator.await_flush_completion(timeout)

    def metrics(self, raw: bool = False, flat: bool = False) -> dict[Any, Any]:
        """Java's producer metrics as kafka-python gives them: ``{group: {name: value}}``
        with groups ``producer-metrics``, ``producer-topic-metrics.<topic>`` and
        ``producer-node-metrics.node-<id>``.  ``raw=True``: ``{MetricName: value}`` (tags
        included); ``flat=True``: ``producer-metrics`` alone as ``{name: value}``."""
        return self._metrics.snapshot(raw=raw, flat=flat)

    def close(self, timeout: float | None = None) -> None:
        """Send what is buffered, then stop; after ``timeout`` seconds, abort the rest."""
        if self._closed:
            return
        if self._send_path is not None:  # every send now takes _send, which raises
            self._send_path.close()
        self._closed = True
        io_thread = self._io_thread
        from_callback = threading.current_thread() is io_thread
        if from_callback and timeout != 0:
            log.warning("overriding the close timeout to 0 ms: close() was called from a "
                        "callback, and the producer's thread cannot wait for itself")
            timeout = 0
        if timeout != 0:
            self._sender.initiate_close()
            if io_thread is not None:
                io_thread.join(timeout)
        if (io_thread is not None and io_thread.is_alive()) or timeout == 0:
            log.info("force-closing the producer with %s records still unsent",
                     "some" if self._accumulator.has_incomplete() else "no")
            self._sender.force_close()
            if io_thread is not None and not from_callback:
                io_thread.join()
        if io_thread is None:  # never started (tests): release the sockets here
            self._client.close()
        self._metadata.close()
        self._metrics.close()
        if self._interceptors is not None:
            self._interceptors.close()
        for component in (self._key_serializer, self._value_serializer, self._partitioner):
            if component is not None:
                try:
                    component.close()
                except Exception:
                    log.warning("failed to close %r", component, exc_info=True)
        log.debug("producer %s closed", self.client_id)

    def __enter__(self) -> KafkaProducer[K, V]:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
