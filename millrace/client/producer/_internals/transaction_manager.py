"""Idempotent-producer state (the idempotence part of Java's ``TransactionManager``).

Theory of operation.  The producer gets a producer id and epoch from InitProducerId
once.  Every batch then carries (id, epoch, base sequence); sequences are per partition,
start at 0, grow by the record count and wrap from int32 max to 0.  The broker keeps the
last five batches per producer and partition, so up to five requests may be in flight
and a resent batch is recognised as a duplicate.

Sequences are assigned when a batch is *drained* (not when it is created), so a batch
keeps its sequence across retries; ``drain`` only sends a retried batch when it is the
lowest unacknowledged sequence of its partition, which restores the order (at the cost
of one request in flight until the retry is through).

When a sequence gap is certain -- OUT_OF_ORDER_SEQUENCE_NUMBER for the batch right after
the last acknowledged one, UNKNOWN_PRODUCER_ID, or a batch that failed after it was
sent -- the producer bumps its epoch locally (KIP-360: a broker accepts a higher epoch
that starts at sequence 0), renumbers the affected partition's unacknowledged batches
from 0 and retries them.  Other partitions move to the new epoch lazily, once their
in-flight batches are done.  At epoch 32767 the producer asks for a new id instead.
A batch that expired after being sent leaves its sequence *unresolved*: new batches of
that partition wait until the in-flight ones settle; if a later one was acknowledged the
expired batch was written, otherwise the epoch is bumped.

Transactions (``transactional.id``, Java's classic protocol).  The manager then also
runs the state machine of ``txn_state.State``.  The application thread calls
``initialize_transactions``, ``begin_transaction``, ``maybe_add_partition`` (from
``send``), ``send_offsets_to_transaction``, ``begin_commit`` and ``begin_abort``; these
check the state, change it and queue request handlers (``txn_request_handlers``).  The
sender thread takes one handler at a time (``next_request``, ordered FindCoordinator <
InitProducerId < AddPartitions/AddOffsets < EndTxn < epoch bump), sends it to its
coordinator and hands the answer back.  Partitions a ``send`` touched are added with
one AddPartitionsToTxn before anything is drained for them
(``is_send_to_partition_allowed``); EndTxn waits until no batch is incomplete.  An error
that fails the transaction but not the producer moves it to ABORTABLE_ERROR (queued
batches fail, ``begin_abort`` is the way out, with an epoch bump by InitProducerId with
the current id and epoch when sequences may be out of step, KIP-360); a fatal one to
FATAL_ERROR, after which every call raises.

Thread-safety: the idempotence state is owned by the sender thread (the accumulator
calls the drain hooks under its lock, on the sender thread); the transactional state is
guarded by ``_lock`` (lock order: accumulator, then manager).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import logging
import threading
from collections.abc import Mapping
from typing import Any

from millrace.client.cluster import Node, TopicPartition
from millrace.client.consumer.assignors.abstract import ConsumerGroupMetadata
from millrace.client.consumer.consumer_record import OffsetAndMetadata
from millrace.client.errors import IllegalStateError
from millrace.client.producer._internals.producer_batch import ProducerBatch, increment_sequence
from millrace.client.producer._internals.txn_request_handlers import (
    AddOffsetsToTxnHandler,
    AddPartitionsToTxnHandler,
    CoordinatorType,
    EndTxnHandler,
    FindCoordinatorHandler,
    InitProducerIdHandler,
    TxnOffsetCommitHandler,
    TxnRequestHandler,
)
from millrace.client.producer._internals.txn_state import (
    State,
    TransactionalRequestResult,
    is_transition_valid,
)
from millrace.client.producer.errors import TransactionAbortedError, is_fatal
from millrace.common.errors import (
    ClusterAuthorizationFailedError,
    Errors,
    InvalidProducerEpochError,
    KafkaError,
    OutOfOrderSequenceError,
    ProducerFencedError,
    TransactionalIdAuthorizationError,
    UnknownProducerIdError,
    UnsupportedVersionError,
    for_code,
)
from millrace.protocol import API, ApiKey

log = logging.getLogger(__name__)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_LAST_ACKED_SEQUENCE = -1
MAX_EPOCH = 32767
_INT32_MAX = 0x7FFFFFFF


class _PartitionEntry:
    __slots__ = ("in_flight", "last_acked_offset", "last_acked_sequence", "next_sequence",
                 "producer_epoch", "producer_id")

    def __init__(self, producer_id: int, producer_epoch: int) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.next_sequence = 0
        self.last_acked_sequence = NO_LAST_ACKED_SEQUENCE
        self.last_acked_offset = -1
        self.in_flight: list[ProducerBatch] = []  # sorted by base sequence


class TransactionManager:
    def __init__(self, retry_backoff_ms: int = 100, transactional_id: str | None = None,
                 transaction_timeout_ms: int = 60000) -> None:
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._lock = threading.RLock()
        self._state = State.UNINITIALIZED  # guarded by _lock (the rest of this block too)
        self._last_error: Exception | None = None
        self._pending: list[tuple[int, int, TxnRequestHandler]] = []  # heap
        self._order = itertools.count()
        self._pending_transition: tuple[TransactionalRequestResult, State, str] | None = None
        self._new_partitions: set[TopicPartition] = set()
        self._pending_partitions: set[TopicPartition] = set()
        self._partitions_in_txn: set[TopicPartition] = set()
        self._transaction_started = False
        self._coordinators: dict[CoordinatorType, Node | None] = {}
        self.coordinator_supports_bumping_epoch = False
        self.in_flight_request: TxnRequestHandler | None = None  # sender thread
        self._response_ms = 0  # when the answer being handled arrived
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self._retry_backoff_ms = retry_backoff_ms
        self._partitions: dict[TopicPartition, _PartitionEntry] = {}
        self._epoch_bump_required = False
        self._partitions_to_rewrite: set[TopicPartition] = set()
        self._unresolved: dict[TopicPartition, int] = {}  # tp -> last sequence in doubt
        self._fatal_error: Exception | None = None
        self.init_in_flight = False
        self.init_retry_at_ms = 0

    # ------------------------------------------------------------------ producer id
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    def has_producer_id_and_epoch(self, producer_id: int, producer_epoch: int) -> bool:
        return self.producer_id == producer_id and self.producer_epoch == producer_epoch

    def set_producer_id_and_epoch(self, producer_id: int, producer_epoch: int) -> None:
        log.info("producer id %d, epoch %d", producer_id, producer_epoch)
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch

    @property
    def fatal_error(self) -> Exception | None:
        return self._fatal_error

    def has_fatal_error(self) -> bool:
        return self._fatal_error is not None

    def transition_to_fatal_error(self, error: Exception) -> None:
        with self._lock:
            if self._fatal_error is None:
                log.error("the %s producer cannot continue: %s",
                          "transactional" if self.is_transactional else "idempotent", error)
                self._fatal_error = error
            if self.is_transactional:
                self._transition_to(State.FATAL_ERROR, error)
                if self._pending_transition is not None:
                    self._pending_transition[0].fail(error)

    def init_producer_id_request(self) -> Any:
        return API[ApiKey.INIT_PRODUCER_ID].request.cls(
            transactional_id=None, transaction_timeout_ms=_INT32_MAX,
            producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH)

    def handle_init_producer_id_response(self, error_code: int, producer_id: int,
                                         producer_epoch: int, now_ms: int) -> None:
        self.init_in_flight = False
        if error_code == Errors.NONE:
            self.set_producer_id_and_epoch(producer_id, producer_epoch)
            return
        cls = for_code(error_code)
        if cls.retriable:
            log.debug("InitProducerId failed with %s; retrying", cls.name)
            self.init_retry_at_ms = now_ms + self._retry_backoff_ms
            return
        self.transition_to_fatal_error(cls(f"InitProducerId failed: {cls.name}"))

    def handle_init_producer_id_failure(self, error: Exception | None, now_ms: int) -> None:
        """The request never got an answer (disconnect) or cannot be sent (no version)."""
        self.init_in_flight = False
        if error is not None:
            self.transition_to_fatal_error(error)
        else:
            self.init_retry_at_ms = now_ms + self._retry_backoff_ms

    # ------------------------------------------------------------------ epoch bumps
    def request_epoch_bump_for_partition(self, tp: TopicPartition) -> None:
        self._epoch_bump_required = True
        self._partitions_to_rewrite.add(tp)

    def bump_idempotent_epoch_and_reset_id_if_needed(self) -> None:
        if not self._epoch_bump_required:
            return
        self._epoch_bump_required = False
        if not self.has_producer_id():
            return  # a new id is coming anyway; partitions reset lazily
        if self.producer_epoch >= MAX_EPOCH:
            log.info("epoch %d exhausted: requesting a new producer id", self.producer_epoch)
            self.producer_id = NO_PRODUCER_ID
            self.producer_epoch = NO_PRODUCER_EPOCH
        else:
            self.producer_epoch += 1
            log.info("bumped the producer epoch to %d", self.producer_epoch)
            for tp in self._partitions_to_rewrite:
                self._start_sequences_at_beginning(tp)
                self._unresolved.pop(tp, None)
        self._partitions_to_rewrite.clear()

    def _start_sequences_at_beginning(self, tp: TopicPartition) -> None:
        entry = self._entry(tp)
        sequence = 0
        for batch in entry.in_flight:
            batch.reset_producer_state(self.producer_id, self.producer_epoch, sequence)
            sequence = increment_sequence(sequence, batch.record_count)
        entry.producer_id = self.producer_id
        entry.producer_epoch = self.producer_epoch
        entry.next_sequence = sequence
        entry.last_acked_sequence = NO_LAST_ACKED_SEQUENCE

    # ------------------------------------------------------------------ drain hooks
    def _entry(self, tp: TopicPartition) -> _PartitionEntry:
        entry = self._partitions.get(tp)
        if entry is None:
            entry = self._partitions[tp] = _PartitionEntry(self.producer_id, self.producer_epoch)
        return entry

    def sequence_number(self, tp: TopicPartition) -> int:
        return self._entry(tp).next_sequence

    def increment_sequence_number(self, tp: TopicPartition, count: int) -> None:
        entry = self._entry(tp)
        entry.next_sequence = increment_sequence(entry.next_sequence, count)

    def has_stale_producer_id_and_epoch(self, tp: TopicPartition) -> bool:
        entry = self._entry(tp)
        return (entry.producer_id, entry.producer_epoch) != (self.producer_id,
                                                             self.producer_epoch)

    def maybe_update_producer_id_and_epoch(self, tp: TopicPartition) -> None:
        """A partition still on an old id/epoch restarts at sequence 0 once it is idle."""
        entry = self._entry(tp)
        if self.has_stale_producer_id_and_epoch(tp) and not entry.in_flight:
            entry.producer_id = self.producer_id
            entry.producer_epoch = self.producer_epoch
            entry.next_sequence = 0
            entry.last_acked_sequence = NO_LAST_ACKED_SEQUENCE

    def add_in_flight_batch(self, batch: ProducerBatch) -> None:
        if not batch.has_sequence:
            raise ValueError("can't track a batch without a sequence number")
        entry = self._entry(batch.topic_partition)
        keys = [b.base_sequence for b in entry.in_flight]
        entry.in_flight.insert(bisect.bisect_right(keys, batch.base_sequence), batch)

    def remove_in_flight_batch(self, batch: ProducerBatch) -> None:
        entry = self._partitions.get(batch.topic_partition)
        if entry is not None and batch in entry.in_flight:
            entry.in_flight.remove(batch)

    def has_in_flight_batches(self, tp: TopicPartition) -> bool:
        entry = self._partitions.get(tp)
        return entry is not None and bool(entry.in_flight)

    def first_in_flight_sequence(self, tp: TopicPartition) -> int:
        entry = self._partitions.get(tp)
        if entry is None or not entry.in_flight:
            return NO_SEQUENCE
        return entry.in_flight[0].base_sequence

    def last_acked_sequence(self, tp: TopicPartition) -> int:
        entry = self._partitions.get(tp)
        return entry.last_acked_sequence if entry is not None else NO_LAST_ACKED_SEQUENCE

    def has_unresolved_sequence(self, tp: TopicPartition) -> bool:
        return tp in self._unresolved

    def has_unresolved_sequences(self) -> bool:
        return bool(self._unresolved)

    def mark_sequence_unresolved(self, batch: ProducerBatch) -> None:
        tp = batch.topic_partition
        log.debug("marking sequence %d of %s unresolved", batch.last_sequence, tp)
        self._unresolved[tp] = max(self._unresolved.get(tp, -1), batch.last_sequence)

    def maybe_resolve_sequences(self) -> None:
        for tp, last_sequence in list(self._unresolved.items()):
            entry = self._entry(tp)
            if entry.in_flight:
                continue
            del self._unresolved[tp]
            if entry.last_acked_sequence >= last_sequence:
                log.debug("sequence %d of %s resolved: a later batch was acknowledged",
                          last_sequence, tp)
            elif self.is_transactional:
                unacked = ("The client hasn't received acknowledgment for some previously "
                           "sent messages and can no longer retry them. ")
                if self.can_bump_epoch():
                    self.require_epoch_bump()
                    self.transition_to_abortable_error(KafkaError(
                        unacked + "It is safe to abort the transaction and continue."))
                else:
                    self.transition_to_fatal_error(KafkaError(
                        unacked + "It isn't safe to continue."))
            else:
                log.info("sequence %d of %s is lost: bumping the epoch", last_sequence, tp)
                self.request_epoch_bump_for_partition(tp)

    # ------------------------------------------------------------------ outcomes
    def handle_completed_batch(self, batch: ProducerBatch, base_offset: int) -> None:
        tp = batch.topic_partition
        entry = self._entry(tp)
        if (batch.producer_id, batch.producer_epoch) == (entry.producer_id,
                                                          entry.producer_epoch):
            if batch.last_sequence > entry.last_acked_sequence or \
                    entry.last_acked_sequence - batch.last_sequence > _INT32_MAX // 2:
                entry.last_acked_sequence = batch.last_sequence
            if base_offset >= 0:
                entry.last_acked_offset = base_offset + batch.record_count - 1
        self.remove_in_flight_batch(batch)

    def handle_failed_batch(self, batch: ProducerBatch, error: Exception,
                            adjust_sequence_numbers: bool) -> None:
        self.remove_in_flight_batch(batch)
        if self.is_transactional:
            self._maybe_transition_to_error_state(error, batch.has_sequence)
            return
        if not batch.has_sequence:
            return
        if isinstance(error, OutOfOrderSequenceError | UnknownProducerIdError):
            self.request_epoch_bump_for_partition(batch.topic_partition)
        elif adjust_sequence_numbers:
            # the broker did not take it: later sequences have a gap now
            self.request_epoch_bump_for_partition(batch.topic_partition)
        else:
            self.mark_sequence_unresolved(batch)

    def _is_next_sequence(self, tp: TopicPartition, sequence: int) -> bool:
        return sequence == increment_sequence(self.last_acked_sequence(tp), 1)

    def can_retry(self, error_code: int, log_start_offset: int, batch: ProducerBatch) -> bool:
        if batch.producer_id != self.producer_id:
            return False
        tp = batch.topic_partition
        if error_code == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER:
            unresolved = self.has_unresolved_sequence(tp)
            if not unresolved and (batch.sequence_has_been_reset
                                   or not self._is_next_sequence(tp, batch.base_sequence)):
                return True  # an earlier batch failed; this one follows it back
            if self.is_transactional:
                return False  # the transaction aborts, with an epoch bump
            if not unresolved or batch.base_sequence == increment_sequence(
                    self._unresolved[tp], 1):
                self.request_epoch_bump_for_partition(tp)
            return True
        if error_code == Errors.UNKNOWN_PRODUCER_ID:
            if log_start_offset == -1 or batch.sequence_has_been_reset:
                return True
            if self.is_transactional:
                return False
            self.request_epoch_bump_for_partition(tp)
            return True
        cls = for_code(error_code)
        return cls.retriable

    # ------------------------------------------------------------------ transactions
    @property
    def is_transactional(self) -> bool:
        return self.transactional_id is not None

    @property
    def state(self) -> State:
        return self._state

    @property
    def last_error(self) -> Exception | None:
        return self._last_error

    def _transition_to(self, target: State, error: Exception | None = None) -> None:
        # called with _lock held
        if not is_transition_valid(self._state, target):
            raise IllegalStateError(f"TransactionalId {self.transactional_id}: Invalid "
                                    f"transition attempted from state {self._state.name} "
                                    f"to state {target.name}")
        if target in (State.FATAL_ERROR, State.ABORTABLE_ERROR):
            assert error is not None
            self._last_error = error
        else:
            self._last_error = None
        log.debug("transition from %s to %s", self._state.name, target.name)
        self._state = target

    def _ensure_transactional(self) -> None:
        if not self.is_transactional:
            raise IllegalStateError("Transactional method invoked on a non-transactional "
                                    "producer.")

    def _maybe_fail_with_error(self) -> None:
        if self._state not in (State.ABORTABLE_ERROR, State.FATAL_ERROR):
            return
        error = self._last_error
        who = (f"Producer with transactionalId '{self.transactional_id}' and producer id "
               f"{self.producer_id}, epoch {self.producer_epoch}")
        if isinstance(error, ProducerFencedError):
            raise ProducerFencedError(f"{who} has been fenced by another producer with the "
                                      "same transactionalId")
        if isinstance(error, InvalidProducerEpochError):
            raise InvalidProducerEpochError(f"{who} attempted to produce with an old epoch")
        if isinstance(error, IllegalStateError):
            raise IllegalStateError(f"{who} cannot execute transactional method because of "
                                    f"previous invalid state transition attempt: {error}")
        raise KafkaError(f"Cannot execute transactional method because we are in an error "
                         f"state: {error}") from error

    def _throw_if_pending_state(self, operation: str) -> None:
        pending = self._pending_transition
        if pending is None:
            return
        if pending[0].is_acked:
            self._pending_transition = None
            return
        raise IllegalStateError(f"Cannot attempt operation `{operation}` because the previous "
                                f"call to `{pending[2]}` timed out and must be retried")

    def _cached_result(self, make: Any, next_state: State, operation: str
                       ) -> TransactionalRequestResult:
        """Java's handleCachedTransactionRequestResult: a timed-out call is resumed."""
        self._ensure_transactional()
        pending = self._pending_transition
        if pending is not None:
            if pending[0].is_acked:
                self._pending_transition = None
            elif next_state is not pending[1]:
                raise IllegalStateError(f"Cannot attempt operation `{operation}` because the "
                                        f"previous call to `{pending[2]}` timed out and must "
                                        "be retried")
            else:
                return pending[0]
        result: TransactionalRequestResult = make()
        self._pending_transition = (result, next_state, operation)
        return result

    def initialize_transactions(self, producer_id: int = NO_PRODUCER_ID,
                                producer_epoch: int = NO_PRODUCER_EPOCH
                                ) -> TransactionalRequestResult:
        with self._lock:
            self._maybe_fail_with_error()
            epoch_bump = producer_id != NO_PRODUCER_ID

            def make() -> TransactionalRequestResult:
                if not epoch_bump:
                    self._transition_to(State.INITIALIZING)
                    log.info("invoking InitProducerId for the first time in order to acquire "
                             "a producer id")
                else:
                    log.info("invoking InitProducerId with producer id %d, epoch %d to bump "
                             "the epoch", producer_id, producer_epoch)
                handler = InitProducerIdHandler(self, producer_id, producer_epoch)
                self._enqueue(handler)
                return handler.result
            return self._cached_result(make, State.INITIALIZING, "initTransactions")

    def begin_transaction(self) -> None:
        with self._lock:
            self._ensure_transactional()
            self._throw_if_pending_state("beginTransaction")
            self._maybe_fail_with_error()
            self._transition_to(State.IN_TRANSACTION)

    def begin_commit(self) -> TransactionalRequestResult:
        with self._lock:
            def make() -> TransactionalRequestResult:
                self._maybe_fail_with_error()
                self._transition_to(State.COMMITTING_TRANSACTION)
                return self._begin_completing_transaction(committed=True)
            return self._cached_result(make, State.COMMITTING_TRANSACTION, "commitTransaction")

    def begin_abort(self) -> TransactionalRequestResult:
        with self._lock:
            def make() -> TransactionalRequestResult:
                if self._state is not State.ABORTABLE_ERROR:
                    self._maybe_fail_with_error()
                self._transition_to(State.ABORTING_TRANSACTION)
                self._new_partitions.clear()  # nothing new needs adding to an abort
                return self._begin_completing_transaction(committed=False)
            return self._cached_result(make, State.ABORTING_TRANSACTION, "abortTransaction")

    def _begin_completing_transaction(self, committed: bool) -> TransactionalRequestResult:
        if self._new_partitions:
            self._enqueue(self._add_partitions_handler())
        handler = EndTxnHandler(self, committed)
        self._enqueue(handler)
        if not self._epoch_bump_required:
            return handler.result
        return self.initialize_transactions(self.producer_id, self.producer_epoch)

    def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                                    group_metadata: ConsumerGroupMetadata
                                    ) -> TransactionalRequestResult:
        with self._lock:
            self._ensure_transactional()
            self._throw_if_pending_state("sendOffsetsToTransaction")
            self._maybe_fail_with_error()
            if self._state is not State.IN_TRANSACTION:
                raise IllegalStateError("Cannot send offsets if a transaction is not in "
                                        f"progress (currentState= {self._state.name})")
            handler = AddOffsetsToTxnHandler(self, offsets, group_metadata)
            self._enqueue(handler)
            return handler.result

    def fail_if_not_ready_for_send(self) -> None:
        """Before a record is appended (Java ``failIfNotReadyForSend``)."""
        with self._lock:
            if self._state in (State.ABORTABLE_ERROR, State.FATAL_ERROR):
                raise KafkaError("Cannot perform send because at least one previous "
                                 "transactional or idempotent request has failed with "
                                 f"errors: {self._last_error}") from self._last_error
            if self.is_transactional:
                if not self.has_producer_id():
                    raise IllegalStateError("Cannot perform a 'send' before completing a "
                                            "call to initTransactions when transactions are "
                                            "enabled.")
                if self._state is not State.IN_TRANSACTION:
                    raise IllegalStateError(f"Cannot call send in state {self._state.name}")

    def maybe_add_partition(self, tp: TopicPartition) -> None:
        with self._lock:
            self._maybe_fail_with_error()
            self._throw_if_pending_state("send")
            if not self.is_transactional:
                return
            if not self.has_producer_id():
                raise IllegalStateError(f"Cannot add partition {tp} to transaction before "
                                        "completing a call to initTransactions")
            if self._state is not State.IN_TRANSACTION:
                raise IllegalStateError(f"Cannot add partition {tp} to transaction while in "
                                        f"state {self._state.name}")
            if tp in self._partitions_in_txn or tp in self._pending_partitions:
                return
            self._new_partitions.add(tp)

    def is_send_to_partition_allowed(self, tp: TopicPartition) -> bool:
        if self._fatal_error is not None:
            return False
        return not self.is_transactional or tp in self._partitions_in_txn

    def partitions_in_transaction(self) -> set[TopicPartition]:
        with self._lock:
            return set(self._partitions_in_txn)

    def is_completing(self) -> bool:
        return self._state in (State.COMMITTING_TRANSACTION, State.ABORTING_TRANSACTION)

    def is_aborting(self) -> bool:
        return self._state is State.ABORTING_TRANSACTION

    def has_abortable_error(self) -> bool:
        return self._state is State.ABORTABLE_ERROR

    def has_ongoing_transaction(self) -> bool:
        return self._state in (State.IN_TRANSACTION, State.COMMITTING_TRANSACTION,
                               State.ABORTING_TRANSACTION, State.ABORTABLE_ERROR)

    def has_pending_requests(self) -> bool:
        return bool(self._pending)

    def can_bump_epoch(self) -> bool:
        return not self.is_transactional or self.coordinator_supports_bumping_epoch

    def require_epoch_bump(self) -> None:
        self._epoch_bump_required = True

    def transition_to_abortable_error(self, error: Exception) -> None:
        with self._lock:
            if self._state is State.ABORTING_TRANSACTION:
                log.debug("already aborting; not recording %s", error)
                return
            if self._state is State.FATAL_ERROR:
                return
            log.info("transiting to abortable error state due to %s", error)
            self._transition_to(State.ABORTABLE_ERROR, error)

    def _maybe_transition_to_error_state(self, error: Exception, had_sequence: bool) -> None:
        if isinstance(error, ClusterAuthorizationFailedError | TransactionalIdAuthorizationError
                      | ProducerFencedError | UnsupportedVersionError):
            self.transition_to_fatal_error(error)
            return
        with self._lock:
            # a batch the broker may or may not have: sequences restart after the abort
            if had_sequence and self.can_bump_epoch() and not self.is_completing():
                self._epoch_bump_required = True
            self.transition_to_abortable_error(error)

    # sender-thread side: the request queue
    def _enqueue(self, handler: TxnRequestHandler) -> None:
        heapq.heappush(self._pending, (int(handler.priority), next(self._order), handler))

    def retry(self, handler: TxnRequestHandler, now_ms: int | None = None, *,
              backoff: bool = True) -> None:
        """Queue ``handler`` again; with ``backoff`` not before ``retry.backoff.ms``."""
        with self._lock:
            if backoff:
                handler.is_retry = True
                now = self._response_ms if now_ms is None else now_ms
                handler.not_before_ms = now + handler.retry_backoff_ms()
            self._enqueue(handler)

    def lookup_coordinator(self, coordinator_type: CoordinatorType, key: str) -> None:
        with self._lock:
            self._coordinators[coordinator_type] = None
            self._enqueue(FindCoordinatorHandler(self, coordinator_type, key))

    def coordinator(self, coordinator_type: CoordinatorType) -> Node | None:
        return self._coordinators.get(coordinator_type)

    def set_coordinator(self, coordinator_type: CoordinatorType, node: Node) -> None:
        log.info("discovered %s coordinator %s:%d", coordinator_type.name.lower(), node.host,
                 node.port)
        self._coordinators[coordinator_type] = node

    def _add_partitions_handler(self) -> AddPartitionsToTxnHandler:
        self._pending_partitions |= self._new_partitions
        self._new_partitions.clear()
        return AddPartitionsToTxnHandler(self, sorted(self._pending_partitions))

    def next_request(self, has_incomplete_batches: bool, now_ms: int) -> TxnRequestHandler | None:
        """The next handler to send, or None (nothing due, or EndTxn waits for batches)."""
        with self._lock:
            if self._new_partitions:
                self._enqueue(self._add_partitions_handler())
            if not self._pending:
                return None
            handler = self._pending[0][2]
            if handler.is_end_txn and has_incomplete_batches:
                return None
            if handler.not_before_ms > now_ms:
                return None
            heapq.heappop(self._pending)
            # in an error state nothing more is sent, except a coordinator lookup that an
            # abort will need
            if self._state is State.FATAL_ERROR or (
                    self._state is State.ABORTABLE_ERROR
                    and not isinstance(handler, FindCoordinatorHandler)):
                assert self._last_error is not None
                handler.fail(self._last_error)
                return None
            if handler.is_end_txn and not self._transaction_started:
                # nothing was added: the coordinator has no transaction to end
                handler.result.done()
                if self._state is not State.FATAL_ERROR:
                    self.complete_transaction()
                return heapq.heappop(self._pending)[2] if self._pending else None
            return handler

    def next_request_delay_ms(self, now_ms: int) -> int | None:
        with self._lock:
            if not self._pending:
                return None
            return max(self._pending[0][2].not_before_ms - now_ms, 0)

    def handle_txn_response(self, handler: TxnRequestHandler, body: Any, version: int,
                            error: Exception | None, disconnected: bool, now_ms: int) -> None:
        """The sender's callback for a transactional request."""
        with self._lock:
            if self.in_flight_request is not handler:
                handler.fatal_error(KafkaError("Detected more than one in-flight "
                                               "transactional request."))
                return
            self.in_flight_request = None
            if disconnected:
                handler.lookup_coordinator()
                self.retry(handler, now_ms)
            elif error is not None:
                handler.fatal_error(error)
            elif body is None:
                handler.fatal_error(KafkaError("Could not execute transactional request for "
                                               "unknown reasons"))
            else:
                self._response_ms = now_ms
                handler.handle_response(body, version)

    # handlers' outcomes (called with _lock held)
    def complete_init_producer_id(self, producer_id: int, producer_epoch: int,
                                  epoch_bump: bool) -> None:
        self.set_producer_id_and_epoch(producer_id, producer_epoch)
        self._transition_to(State.READY)
        if epoch_bump:
            self._partitions.clear()  # every partition starts again at sequence 0
            self._unresolved.clear()

    def partitions_added(self, partitions: list[TopicPartition], ok: bool) -> None:
        self._pending_partitions.difference_update(partitions)
        if ok:
            self._partitions_in_txn.update(partitions)
            self._transaction_started = True

    def offsets_added(self, handler: TxnOffsetCommitHandler) -> None:
        self._enqueue(handler)
        self._transaction_started = True

    def complete_transaction(self) -> None:
        self._transition_to(State.INITIALIZING if self._epoch_bump_required else State.READY)
        self._epoch_bump_required = False
        self._transaction_started = False
        self._new_partitions.clear()
        self._pending_partitions.clear()
        self._partitions_in_txn.clear()

    def abort_error(self) -> Exception:
        """What queued batches fail with while the transaction aborts."""
        return self._last_error or TransactionAbortedError()

    def close(self) -> None:
        """Forced close: every pending call fails."""
        with self._lock:
            error = KafkaError("The producer closed forcefully")
            for _, _, handler in self._pending:
                handler.fatal_error(error)
            self._pending.clear()
            if self._pending_transition is not None:
                self._pending_transition[0].fail(error)


__all__ = ["NO_PRODUCER_EPOCH", "NO_PRODUCER_ID", "State", "TransactionManager", "is_fatal"]
