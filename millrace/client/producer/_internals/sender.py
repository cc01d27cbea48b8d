"""The producer's network thread (Java ``Sender``).

Theory of operation.  ``run`` loops ``run_once`` until the producer closes, then keeps
going until every queued batch is sent and answered (or, on a forced close, aborts them).
One ``run_once``:

1. (idempotence) settle unresolved sequences, bump the epoch if a gap was seen, and get
   a producer id with InitProducerId if there is none -- nothing is drained until then;
2. ask the accumulator which leaders have sendable batches; refresh metadata for topics
   whose leader is unknown; keep the nodes the ``NetworkClient`` can send to now;
3. drain their batches (one ProduceRequest per node), fail batches that outlived
   ``delivery.timeout.ms`` (queued or in flight) with ``KafkaTimeoutError``;
4. write the requests and poll the network for at most the time until the next batch
   lingers out, a backoff ends or a batch expires.

Responses complete batches in their callbacks (on this thread): success completes every
record's future with base offset + index; a retriable error re-enqueues the batch after
an exponential ``retry.backoff.ms`` unless retries or ``delivery.timeout.ms`` ran out;
MESSAGE_TOO_LARGE splits the batch; NOT_LEADER_OR_FOLLOWER and friends refresh metadata.
With ``max.in.flight.requests.per.connection=1`` a partition is muted while its batch is
in flight, so a retry can never overtake.  acks=0 batches complete with offset -1 once
written.

Owned by its own thread; ``initiate_close``/``force_close``/``wakeup`` may be called from
any thread.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from millrace.client.cluster import TopicPartition
from millrace.client.errors import IllegalStateError, KafkaTimeoutError
from millrace.client.network_client import ClientRequest, ClientResponse, NetworkClient
from millrace.client.producer._internals import journey
from millrace.client.producer._internals.producer_batch import ProducerBatch
from millrace.client.producer._internals.record_accumulator import RecordAccumulator
from millrace.client.producer._internals.sender_metrics import SenderMetrics
from millrace.client.producer._internals.transaction_manager import TransactionManager
from millrace.common.errors import (
    ClusterAuthorizationFailedError,
    Errors,
    KafkaError,
    TopicAuthorizationFailedError,
    UnsupportedVersionError,
    for_code,
)
from millrace.common.time import SYSTEM_TIME, Time
from millrace.protocol import API, ApiKey

if TYPE_CHECKING:
    from millrace.client.metadata import Metadata

log = logging.getLogger(__name__)

# Java's InvalidMetadataException family: the leader moved or is unknown.
INVALID_METADATA_ERRORS = frozenset({
    Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.LEADER_NOT_AVAILABLE, Errors.NOT_LEADER_OR_FOLLOWER,
    Errors.NETWORK_EXCEPTION, Errors.KAFKA_STORAGE_ERROR, Errors.FENCED_LEADER_EPOCH,
    Errors.UNKNOWN_LEADER_EPOCH, Errors.UNKNOWN_TOPIC_ID, Errors.INCONSISTENT_TOPIC_ID})
PRODUCE_MIN_VERSION = 3  # record batches (magic 2)
PRODUCE_MAX_VERSION = 12  # 13 addresses topics by id
# v12 adds a transactional batch's partition to its transaction (KIP-890 part 2): a
# classic transactional producer stays below it, as Java's does
PRODUCE_LAST_BEFORE_TRANSACTION_V2_VERSION = 11
INIT_PRODUCER_ID_MAX_VERSION = 5
_FOREVER = 2**63 - 1

_PRODUCE = API[ApiKey.PRODUCE].request.cls
_TOPIC_DATA = _PRODUCE.TopicProduceData
_PARTITION_DATA = _TOPIC_DATA.PartitionProduceData


class Sender:
    def __init__(
        self,
        client: NetworkClient,
        metadata: Metadata,
        accumulator: RecordAccumulator,
        *,
        guarantee_message_order: bool = False,
        max_request_size: int = 1_048_576,
        acks: int = -1,
        retries: int = 2**31 - 1,
        metrics: SenderMetrics,
        time: Time = SYSTEM_TIME,
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
        transaction_manager: TransactionManager | None = None,
        max_in_flight_requests: int = 5,
    ) -> None:
        self._client = client
        self._metadata = metadata
        self._accumulator = accumulator
        self._guarantee_message_order = guarantee_message_order
        self._max_request_size = max_request_size
        self._acks = acks
        self._retries = retries
        self._metrics = metrics
        self._time = time
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._tm = transaction_manager
        self._in_flight_batches: dict[TopicPartition, list[ProducerBatch]] = {}
        self._next_expiry_check_ms = 0
        self._drained = False
        self._max_passes = max_in_flight_requests
        self.running = True
        self._forced = False

    # ------------------------------------------------------------------ the loop
    def run(self) -> None:
        log.debug("starting the producer I/O thread")
        while self.running:
            self._run_once_logged()
        log.debug("shutting down the producer I/O thread; sending the remaining records")
        tm = self._tm
        while not self._forced and (self._accumulator.has_undrained()
                                    or self._client.has_in_flight_requests()
                                    or (tm is not None and tm.has_pending_requests()
                                        and tm.has_ongoing_transaction())):
            self._run_once_logged()
        # a transaction the application neither committed nor aborted is aborted
        while not self._forced and tm is not None and tm.is_transactional and \
                tm.has_ongoing_transaction():
            if not tm.is_completing():
                log.info("aborting incomplete transaction due to shutdown")
                try:
                    tm.begin_abort()
                except Exception:
                    log.exception("could not abort the transaction while closing")
                    self._forced = True
                    break
            self._run_once_logged()
        if self._forced:
            if tm is not None and tm.is_transactional:
                tm.close()
            self._accumulator.abort_incomplete_batches(
                KafkaError("Producer is closed forcefully."))
        self._client.close()
        log.debug("the producer I/O thread has stopped")

    def _run_once_logged(self) -> None:
        try:
            self.run_once()
        except Exception:
            log.exception("uncaught error in the producer I/O thread")

    def run_once(self, now_ms: int | None = None) -> None:
        """One iteration: drain, send, poll.  Tests call it with a ``MockTime``."""
        now = self._time.milliseconds() if now_ms is None else now_ms
        tm = self._tm
        if tm is not None:
            if tm.is_transactional:
                if self._run_transactional(now):
                    return
            elif self._maybe_wait_for_producer_id(now):
                return
        poll_timeout = self._send_producer_data(now)
        if tm is not None and tm.is_transactional:
            delay = tm.next_request_delay_ms(now)
            if delay is not None:
                poll_timeout = min(poll_timeout, delay)
        # A backlog of full batches: keep writing while the connections take more
        # requests, then poll once (each poll is a system call, and in CPython a GIL
        # hand-over to the application thread).
        passes = 1
        while self._drained and passes < self._max_passes:
            poll_timeout = self._send_producer_data(now)
            passes += 1
        self._client.poll(poll_timeout, now)

    def initiate_close(self) -> None:
        self._accumulator.close()
        self.running = False
        self.wakeup()

    def force_close(self) -> None:
        self._forced = True
        self.initiate_close()

    def wakeup(self) -> None:
        self._client.wakeup()

    # ------------------------------------------------------------------ idempotence
    def _maybe_wait_for_producer_id(self, now: int) -> bool:
        """Handle the producer id; True when this iteration must not produce."""
        tm = self._tm
        assert tm is not None
        if tm.has_fatal_error():
            error = tm.fatal_error
            assert error is not None
            self._accumulator.abort_undrained_batches(error)
            self._client.poll(self._retry_backoff_ms, now)
            return True
        tm.maybe_resolve_sequences()
        tm.bump_idempotent_epoch_and_reset_id_if_needed()
        if tm.has_producer_id():
            return False
        self._fail_expired_batches(now)
        timeout = self._retry_backoff_ms
        if not tm.init_in_flight:
            if now < tm.init_retry_at_ms:
                timeout = tm.init_retry_at_ms - now
            else:
                node = self._client.least_loaded_node(now)
                if node is not None and self._client.ready(node, now):
                    self._send_init_producer_id(node.id, now)
        self._client.poll(timeout, now)
        return True

    # ------------------------------------------------------------------ transactions
    def _run_transactional(self, now: int) -> bool:
        """Transactional requests go first, one at a time; True: do not produce now."""
        tm = self._tm
        assert tm is not None
        tm.maybe_resolve_sequences()
        if tm.has_fatal_error():
            error = tm.fatal_error
            assert error is not None
            self._accumulator.abort_undrained_batches(error)
            self._client.poll(self._retry_backoff_ms, now)
            return True
        if tm.in_flight_request is not None:
            self._client.poll(self._retry_backoff_ms, now)
            return True
        if (tm.has_abortable_error() or tm.is_aborting()) and self._accumulator.has_incomplete():
            # queued batches of a transaction that will abort are never sent
            self._accumulator.abort_undrained_batches(tm.abort_error())
        handler = tm.next_request(self._accumulator.has_incomplete(), now)
        if handler is None:
            return False
        coordinator_type = handler.coordinator_type
        if coordinator_type is not None:
            node = tm.coordinator(coordinator_type)
            if node is None:
                handler.lookup_coordinator()
                tm.retry(handler, now)
                return True
        else:
            node = self._client.least_loaded_node(now)
            if node is None:
                tm.retry(handler, now)
                self._metadata.request_update()
                self._client.poll(self._retry_backoff_ms, now)
                return True
        if not self._client.ready(node, now):
            if coordinator_type is not None and self._client.connection_failed(node):
                handler.lookup_coordinator()
                tm.retry(handler, now)
            else:
                tm.retry(handler, now, backoff=False)  # still connecting
            self._client.poll(self._retry_backoff_ms, now)
            return True

        def on_response(response: ClientResponse) -> None:
            tm.handle_txn_response(handler, response.body, response.request.version,
                                   response.version_mismatch, response.disconnected,
                                   response.received_ms)

        request = ClientRequest(node.id, handler.request_body(), on_response, created_ms=now,
                                request_timeout_ms=self._request_timeout_ms,
                                min_version=handler.min_version,
                                max_version=handler.max_version)
        log.debug("sending transactional request %r to node %s", handler, node)
        tm.in_flight_request = handler
        try:
            self._client.send(request, now)
        except IllegalStateError:
            tm.in_flight_request = None
            handler.lookup_coordinator()
            tm.retry(handler, now)
        self._client.poll(self._retry_backoff_ms, now)
        return True

    def _send_init_producer_id(self, node_id: int, now: int) -> None:
        tm = self._tm
        assert tm is not None

        def on_response(response: ClientResponse) -> None:
            received = response.received_ms
            if response.version_mismatch is not None:
                tm.handle_init_producer_id_failure(UnsupportedVersionError(
                    "the broker does not support InitProducerId, which the idempotent "
                    f"producer needs: {response.version_mismatch}"), received)
            elif response.body is None:
                tm.handle_init_producer_id_failure(None, received)
            else:
                body = response.body
                tm.handle_init_producer_id_response(body.error_code, body.producer_id,
                                                    body.producer_epoch, received)

        tm.init_in_flight = True
        request = ClientRequest(node_id, tm.init_producer_id_request(), on_response,
                                created_ms=now, request_timeout_ms=self._request_timeout_ms,
                                max_version=INIT_PRODUCER_ID_MAX_VERSION)
        self._client.send(request, now)

    # ------------------------------------------------------------------ producing
    def _send_producer_data(self, now: int) -> int:
        cluster = self._metadata.fetch()
        accumulator = self._accumulator
        result = accumulator.ready(cluster, now)
        if result.unknown_leader_topics:
            log.debug("requesting a metadata update for topics with unknown leaders: %s",
                      sorted(result.unknown_leader_topics))
            self._metadata.request_update()
        ready_nodes = result.ready_nodes
        not_ready_timeout = _FOREVER
        for node in list(ready_nodes):
            if self._client.ready(node, now):
                accumulator.update_node_latency_stats(node.id, now, True)
            else:
                accumulator.update_node_latency_stats(node.id, now, False)
                ready_nodes.discard(node)
                not_ready_timeout = min(not_ready_timeout,
                                        self._client.poll_delay_ms(node, now))
        batches = accumulator.drain(cluster, ready_nodes, self._max_request_size, now)
        for node_id, node_batches in batches.items():
            for batch in node_batches:
                if batch.journeys is not None:
                    journey.drained(batch, node_id)
                self._in_flight_batches.setdefault(batch.topic_partition, []).append(batch)
                if self._guarantee_message_order:
                    accumulator.mute(batch.topic_partition)
        self._fail_expired_batches(now)
        poll_timeout = min(result.next_ready_check_delay_ms, not_ready_timeout,
                           self._next_expiry_check_ms - now)
        poll_timeout = max(poll_timeout, 0)
        self._drained = bool(batches)
        if batches:
            # More may be ready right away; come back after writing these.
            poll_timeout = 0
        for node_id, node_batches in batches.items():
            self._send_produce_request(node_id, node_batches, now)
        return poll_timeout

    def _fail_expired_batches(self, now: int) -> None:
        # A scan finds the oldest batch; nothing can expire before it does, nor before
        # ``delivery.timeout.ms`` after the scan (batches created since are younger).
        if now < self._next_expiry_check_ms:
            return
        self._accumulator.reset_next_batch_expiry_time()
        expired = self._expired_in_flight_batches(now)
        expired.extend(self._accumulator.expired_batches(now))
        for batch in expired:
            message = (f"Expiring {batch.record_count} record(s) for {batch.topic_partition}:"
                       f"{now - batch.created_ms} ms has passed since batch creation")
            had_sequence = batch.has_sequence
            self._fail_batch(batch, KafkaTimeoutError(message), adjust_sequences=False)
            if self._tm is not None and had_sequence:
                self._tm.mark_sequence_unresolved(batch)
        self._next_expiry_check_ms = min(self._accumulator.next_expiry_time_ms,
                                         now + self._accumulator.delivery_timeout_ms)

    def _expired_in_flight_batches(self, now: int) -> list[ProducerBatch]:
        expired: list[ProducerBatch] = []
        timeout = self._accumulator.delivery_timeout_ms
        for tp in list(self._in_flight_batches):
            batches = self._in_flight_batches[tp]
            while batches:
                batch = batches[0]
                if not batch.has_reached_delivery_timeout(timeout, now):
                    self._accumulator.maybe_update_next_batch_expiry_time(batch)
                    break
                batches.pop(0)
                if not batch.is_done:
                    expired.append(batch)
            if not batches:
                del self._in_flight_batches[tp]
        return expired

    def _send_produce_request(self, node_id: int, batches: list[ProducerBatch],
                              now: int) -> None:
        by_topic: dict[str, list[Any]] = {}
        by_tp: dict[TopicPartition, ProducerBatch] = {}
        traced = False
        for batch in batches:
            if batch.journeys is not None:
                traced = True
            tp = batch.topic_partition
            records = batch.records()
            self._accumulator.record_built(batch)
            by_topic.setdefault(tp.topic, []).append(
                _PARTITION_DATA(index=tp.partition, records=records))
            by_tp[tp] = batch
        transactional_id = self._tm.transactional_id if self._tm is not None else None
        body = _PRODUCE(transactional_id=transactional_id, acks=self._acks,
                        timeout_ms=self._request_timeout_ms,
                        topic_data=[_TOPIC_DATA(name=t, partition_data=p)
                                    for t, p in by_topic.items()])
        self._metrics.record_request(node_id, batches, now)

        def on_response(response: ClientResponse) -> None:
            self._handle_produce_response(response, by_tp)

        request = ClientRequest(node_id, body, on_response, created_ms=now,
                                expect_response=self._acks != 0,
                                request_timeout_ms=self._request_timeout_ms,
                                min_version=PRODUCE_MIN_VERSION,
                                max_version=self._produce_max_version())
        try:
            self._client.send(request, now)
        except IllegalStateError as e:  # the connection went away under us
            log.debug("could not send a produce request to node %d: %s", node_id, e)
            response = ClientResponse(request, now, disconnected=True)
            self._handle_produce_response(response, by_tp)
            return
        if traced:
            journey.request_sent(batches, node_id, journey.connection_address(
                self._client, self._metadata.fetch(), node_id), request.correlation_id,
                self._acks, request.send_completed, request.version)

    def _produce_max_version(self) -> int:
        tm = self._tm
        if tm is not None and tm.is_transactional and not tm.is_transaction_v2_enabled:
            return PRODUCE_LAST_BEFORE_TRANSACTION_V2_VERSION
        return PRODUCE_MAX_VERSION

    # ------------------------------------------------------------------ responses
    def _handle_produce_response(self, response: ClientResponse,
                                 batches: dict[TopicPartition, ProducerBatch]) -> None:
        now = response.received_ms
        request = response.request
        if response.disconnected:
            node = response.destination
            if response.timed_out:
                code = Errors.REQUEST_TIMED_OUT
                message = f"Disconnected from node {node} due to timeout"
            else:
                code, message = Errors.NETWORK_EXCEPTION, f"Disconnected from node {node}"
            log.debug("cancelled produce request %s: %s", request, message)
            for batch in batches.values():
                self._complete_batch(batch, code, -1, -1, -1, None, message, now,
                                     request.correlation_id, node)
            return
        if response.version_mismatch is not None:
            for batch in batches.values():
                self._fail_batch(batch, response.version_mismatch, adjust_sequences=True)
                self._unmute(batch)
            return
        body = response.body
        self._metrics.record_response(response.destination, response.request_latency_ms, body,
                                      now)
        if body is None:  # acks=0: done once written
            for batch in batches.values():
                self._complete_batch(batch, 0, -1, -1, -1, None, None, now,
                                     request.correlation_id, request.destination)
            return
        for topic in body.responses:
            for p in topic.partition_responses:
                found = batches.pop(TopicPartition(topic.name, p.index), None)
                if found is None:
                    log.warning("produce response for %s-%d that was not requested",
                                topic.name, p.index)
                    continue
                self._complete_batch(found, p.error_code, p.base_offset, p.log_append_time_ms,
                                     p.log_start_offset, p.record_errors, p.error_message, now,
                                     request.correlation_id, request.destination)
        for batch in batches.values():  # the broker left some out
            self._complete_batch(batch, Errors.NETWORK_EXCEPTION, -1, -1, -1, None,
                                 "no response for this partition", now, request.correlation_id,
                                 request.destination)

    def _complete_batch(self, batch: ProducerBatch, error_code: int, base_offset: int,
                        log_append_time: int, log_start_offset: int, record_errors: Any,
                        error_message: str | None, now: int, correlation_id: int,
                        node_id: int = -1) -> None:
        if batch.journeys is not None:
            journey.response_received(batch, node_id, error_code, base_offset, log_append_time)
        tp = batch.topic_partition
        tm = self._tm
        if error_code == Errors.MESSAGE_TOO_LARGE and batch.record_count > 1 and not batch.is_done:
            log.warning("got MESSAGE_TOO_LARGE for %s (correlation id %d): splitting the batch "
                        "of %d records and retrying", tp, correlation_id, batch.record_count)
            if tm is not None:
                tm.remove_in_flight_batch(batch)
            self._remove_from_in_flight(batch)
            self._accumulator.split_and_reenqueue(batch)
            self._accumulator.deallocate(batch)
            self._metrics.batch_split.record(1, now)
        elif error_code:
            cls = for_code(error_code)
            if self._can_retry(batch, error_code, log_start_offset, now):
                log.warning("got error produce response with correlation id %d on "
                            "topic-partition %s, retrying (%d attempts left). Error: %s",
                            correlation_id, tp, self._retries - batch.attempts - 1, cls.name)
                # A batch keeps its epoch and sequence when it is retried, even after the
                # epoch was bumped for another partition (KIP-360): its own partition still
                # knows them, and restarts at sequence 0 once its in-flight batches are done.
                self._reenqueue_batch(batch, now)
            elif error_code == Errors.DUPLICATE_SEQUENCE_NUMBER:
                self._complete_success(batch, base_offset, log_append_time)
            else:
                self._fail_batch(batch, self._error_for(batch, error_code, error_message),
                                 adjust_sequences=batch.attempts < self._retries,
                                 record_errors=self._record_errors(error_code, record_errors,
                                                                   error_message))
            if error_code in INVALID_METADATA_ERRORS:
                log.warning("received invalid metadata error %s in produce request on "
                            "partition %s; requesting a metadata update", cls.name, tp)
                self._metadata.request_update()
        else:
            self._complete_success(batch, base_offset, log_append_time)
        self._unmute(batch)

    def _unmute(self, batch: ProducerBatch) -> None:
        if self._guarantee_message_order:
            self._accumulator.unmute(batch.topic_partition)

    @staticmethod
    def _error_for(batch: ProducerBatch, error_code: int, message: str | None) -> Exception:
        if error_code == Errors.TOPIC_AUTHORIZATION_FAILED:
            return TopicAuthorizationFailedError(
                f"Not authorized to access topics: [{batch.topic_partition.topic}]")
        if error_code == Errors.CLUSTER_AUTHORIZATION_FAILED:
            return ClusterAuthorizationFailedError(
                "The producer is not authorized to do idempotent sends")
        return for_code(error_code)(message or "")

    @staticmethod
    def _record_errors(error_code: int, record_errors: Any, message: str | None) -> Any:
        """Per-record errors for INVALID_RECORD (Produce v8+ names the bad records)."""
        if error_code != Errors.INVALID_RECORD or not record_errors:
            return None
        cls = for_code(error_code)
        bad = {e.batch_index: e.batch_index_error_message for e in record_errors}

        def error_for(index: int) -> Exception:
            if index in bad:
                return cls(bad[index] or message or "")
            return KafkaError("Failed to append record because it was part of a batch which "
                              "had one more more invalid records")
        return error_for

    def _can_retry(self, batch: ProducerBatch, error_code: int, log_start_offset: int,
                   now: int) -> bool:
        if batch.has_reached_delivery_timeout(self._accumulator.delivery_timeout_ms, now):
            return False
        if batch.attempts >= self._retries or batch.is_done:
            return False
        if self._tm is not None:
            return self._tm.can_retry(error_code, log_start_offset, batch)
        return for_code(error_code).retriable

    def _reenqueue_batch(self, batch: ProducerBatch, now: int) -> None:
        self._accumulator.reenqueue(batch, now)
        self._remove_from_in_flight(batch)
        self._metrics.record_retries(batch, now)

    def _complete_success(self, batch: ProducerBatch, base_offset: int,
                          log_append_time: int) -> None:
        if self._tm is not None:
            self._tm.handle_completed_batch(batch, base_offset)
        if batch.complete(base_offset, log_append_time):
            self._remove_and_deallocate(batch)

    def _fail_batch(self, batch: ProducerBatch, error: Exception, *, adjust_sequences: bool,
                    record_errors: Any = None) -> None:
        self._metrics.record_errors(batch)
        if batch.complete_exceptionally(error, record_errors):
            if self._tm is not None:  # only the completion that took effect counts
                self._tm.handle_failed_batch(batch, error, adjust_sequences)
            self._remove_and_deallocate(batch)

    def _remove_and_deallocate(self, batch: ProducerBatch) -> None:
        self._remove_from_in_flight(batch)
        self._accumulator.deallocate(batch)

    def _remove_from_in_flight(self, batch: ProducerBatch) -> None:
        batches = self._in_flight_batches.get(batch.topic_partition)
        if batches is None:
            return
        try:
            batches.remove(batch)
        except ValueError:
            return
        if not batches:
            del self._in_flight_batches[batch.topic_partition]
