"""The transactional producer's state machine (the transactional half of Java's
``TransactionManager``); the idempotence half -- producer id, sequences, epoch bumps --
is the base class ``idempotence_manager.IdempotenceManager``.

Theory of operation (``transactional.id``, Java's classic protocol).  The manager runs
the state machine of ``txn_state.State``.  The application thread calls
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

Transaction version 2 (KIP-890 part 2).  When the brokers finalize the feature
``transaction.version`` at level 2 (ApiVersions v3+, kept in ``ApiVersions``), read at
each ``begin_transaction`` so that it never changes inside a transaction, the manager
sends no AddPartitionsToTxn and no AddOffsetsToTxn: a partition is part of the
transaction as soon as ``send`` touches it (Produce v12 adds it on the broker) and
offsets go straight to the group coordinator (TxnOffsetCommit v5 adds the group).
EndTxn v5 bumps the epoch on every commit and abort and answers the producer id and
epoch for the next transaction (a new id once the epoch is exhausted); the manager
takes them and restarts every partition's sequences at 0.  EndTxn is built once, so
its retries carry the old epoch, which the coordinator recognises as a retry.  A stale
EndTxn that arrives after the next transaction began carries an epoch below the
current one and is fenced, so it cannot end the next transaction (Jepsen's Bufstream
report, section 2.4).  An abortable error needs no InitProducerId bump: the abort's
EndTxn bumps the epoch.

The classic protocol's answer to the same hazard (librdkafka's proposed
``enable.kip890.safety``; Java has no counterpart for transaction.version 1): when an
EndTxn got no answer -- the request timed out or the connection dropped after it was
written -- its first copy may still reach the coordinator later, at the same epoch as
the next transaction.  So once its retry succeeds the transaction is completed with an
epoch bump (InitProducerId with the current id and epoch, KIP-360) before
``commit_transaction``/``abort_transaction`` return; the delayed copy is then fenced.

Without a ``transactional.id`` the producer is only idempotent and none of this runs.

Thread-safety: the idempotence state is owned by the sender thread (the accumulator
calls the drain hooks under its lock, on the sender thread); the transactional state is
guarded by ``_lock`` (lock order: accumulator, then manager).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from collections.abc import Mapping
from typing import Any

from millrace.client.api_versions import TRANSACTION_VERSION_FEATURE, ApiVersions
from millrace.client.cluster import Node, TopicPartition
from millrace.client.consumer.assignors.abstract import ConsumerGroupMetadata
from millrace.client.consumer.consumer_record import OffsetAndMetadata
from millrace.client.errors import IllegalStateError
from millrace.client.producer._internals.idempotence_manager import (
    MAX_EPOCH,
    NO_LAST_ACKED_SEQUENCE,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    IdempotenceManager,
)
from millrace.client.producer._internals.producer_batch import ProducerBatch
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
    InvalidProducerEpochError,
    KafkaError,
    ProducerFencedError,
    TransactionalIdAuthorizationError,
    UnsupportedVersionError,
)

log = logging.getLogger(__name__)


class TransactionManager(IdempotenceManager):
    def __init__(self, retry_backoff_ms: int = 100, transactional_id: str | None = None,
                 transaction_timeout_ms: int = 60000,
                 api_versions: ApiVersions | None = None) -> None:
        super().__init__(retry_backoff_ms)
        self._api_versions = api_versions or ApiVersions()
        self._latest_finalized_features_epoch = -1
        self._transaction_v2_enabled = False  # guarded by _lock
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

    # ------------------------------------------------------------------ idempotence hooks
    def transition_to_fatal_error(self, error: Exception) -> None:
        with self._lock:
            super().transition_to_fatal_error(error)
            if self.is_transactional:
                self._transition_to(State.FATAL_ERROR, error)
                if self._pending_transition is not None:
                    self._pending_transition[0].fail(error)

    def _on_lost_sequence(self, tp: TopicPartition, last_sequence: int) -> None:
        if not self.is_transactional:
            super()._on_lost_sequence(tp, last_sequence)
            return
        unacked = ("The client hasn't received acknowledgment for some previously "
                   "sent messages and can no longer retry them. ")
        if self.can_bump_epoch():
            self.require_epoch_bump()
            self.transition_to_abortable_error(KafkaError(
                unacked + "It is safe to abort the transaction and continue."))
        else:
            self.transition_to_fatal_error(KafkaError(unacked + "It isn't safe to continue."))

    def handle_failed_batch(self, batch: ProducerBatch, error: Exception,
                            adjust_sequence_numbers: bool) -> None:
        if not self.is_transactional:
            super().handle_failed_batch(batch, error, adjust_sequence_numbers)
            return
        self.remove_in_flight_batch(batch)
        self._maybe_transition_to_error_state(error, batch.has_sequence)

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
            self.maybe_update_transaction_v2_enabled()

    def maybe_update_transaction_v2_enabled(self) -> None:
        """Read ``transaction.version`` from the newest finalized features (Java
        ``maybeUpdateTransactionV2Enabled``); called between transactions only."""
        with self._lock:
            info = self._api_versions.finalized_features_info()
            if info.finalized_features_epoch <= self._latest_finalized_features_epoch:
                return
            self._latest_finalized_features_epoch = info.finalized_features_epoch
            level = info.finalized_features.get(TRANSACTION_VERSION_FEATURE, 0)
            enabled = level >= 2
            if enabled != self._transaction_v2_enabled:
                log.info("transaction.version %d: %s", level,
                         "transactions v2 (KIP-890)" if enabled else "classic transactions")
            self._transaction_v2_enabled = enabled

    @property
    def is_transaction_v2_enabled(self) -> bool:
        return self._transaction_v2_enabled

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
        if not self._epoch_bump_required or self._transaction_v2_enabled:
            return handler.result  # (v2: the EndTxn bumps the epoch itself)
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
            if self._transaction_v2_enabled:
                # TxnOffsetCommit v5 adds the group to the transaction itself
                offsets_handler = TxnOffsetCommitHandler(
                    self, TransactionalRequestResult("TxnOffsetCommit"), offsets,
                    group_metadata)
                self._transaction_started = True
                self._enqueue(offsets_handler)
                return offsets_handler.result
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

    def maybe_add_partition(self, tp: TopicPartition) -> bool:
        """Note ``tp`` for the transaction; True when it is new to it (the Sender has an
        AddPartitionsToTxn to send), so only then does ``send`` need to wake it."""
        with self._lock:
            self._maybe_fail_with_error()
            self._throw_if_pending_state("send")
            if not self.is_transactional:
                return False
            if not self.has_producer_id():
                raise IllegalStateError(f"Cannot add partition {tp} to transaction before "
                                        "completing a call to initTransactions")
            if self._state is not State.IN_TRANSACTION:
                raise IllegalStateError(f"Cannot add partition {tp} to transaction while in "
                                        f"state {self._state.name}")
            if tp in self._partitions_in_txn or tp in self._pending_partitions \
                    or tp in self._new_partitions:
                return False
            if self._transaction_v2_enabled:
                # Produce v12 adds the partition on the broker
                self._partitions_in_txn.add(tp)
                self._transaction_started = True
                return True
            self._new_partitions.add(tp)
            return True

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
                if isinstance(handler, EndTxnHandler):
                    handler.outcome_unknown = True  # it may still reach the coordinator
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

    def complete_transaction_with_new_epoch(self, producer_id: int,
                                            producer_epoch: int) -> None:
        """EndTxn v5 succeeded: the next transaction runs on the id and epoch it answered."""
        self.set_producer_id_and_epoch(producer_id, producer_epoch)
        self._partitions.clear()  # every partition starts again at sequence 0
        self._unresolved.clear()
        self._partitions_to_rewrite.clear()
        self._epoch_bump_required = False  # the coordinator bumped it
        self.complete_transaction()

    def complete_transaction_with_epoch_bump(self, result: TransactionalRequestResult) -> None:
        """A classic EndTxn succeeded after an attempt whose outcome is unknown: bump the
        epoch before the next transaction, so that attempt cannot end it."""
        log.info("EndTxn succeeded after an attempt without an answer: bumping the epoch "
                 "(producer id %d, epoch %d) before the next transaction", self.producer_id,
                 self.producer_epoch)
        self._epoch_bump_required = True
        self.complete_transaction()  # -> INITIALIZING
        self._enqueue(InitProducerIdHandler(self, self.producer_id, self.producer_epoch,
                                            result))

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


__all__ = ["MAX_EPOCH", "NO_LAST_ACKED_SEQUENCE", "NO_PRODUCER_EPOCH", "NO_PRODUCER_ID",
           "NO_SEQUENCE", "State", "TransactionManager", "is_fatal"]
