"""``TransactionState`` and ``TransactionMetadata``: one transactional id's state machine.

Java counterpart: ``TransactionMetadata.scala`` (``TransactionState``, ``TxnTransitMetadata``,
``TransactionMetadata``).

Theory of operation.  A transactional id is in one state at a time (ids as persisted in
``TransactionLogValue.transaction_status``)::

    Empty 0 --AddPartitions--> Ongoing 1 --EndTxn(commit)--> PrepareCommit 2 --markers--> CompleteCommit 4
                                   |     --EndTxn(abort)---> PrepareAbort 3  --markers--> CompleteAbort 5
                                   +--InitProducerId/timeout--> PrepareEpochFence 7 --> PrepareAbort 3
    Empty / CompleteCommit / CompleteAbort --expiry--> Dead 6 (a tombstone; the id is forgotten)

A change is made in two halves, as in Kafka.  ``prepare_*`` checks the move against the
legal predecessors below, records the target as ``pending_state`` and returns a
``TxnTransitMetadata`` (the state to persist); nothing else changes.  While a transition
is pending every other request for the id answers CONCURRENT_TRANSACTIONS.  Once the
record holding the transit is durable, ``complete_transition_to(transit)`` makes it the
current state; if the write fails, ``pending_state`` is cleared and the old state stands.
PrepareEpochFence is never persisted: Kafka passes through it in memory between fencing
the producer (epoch + 1) and writing PrepareAbort with that epoch; here the fence is one
transit straight to PrepareAbort at the bumped epoch, so a failed write leaves nothing
behind (Kafka's ``hasFailedEpochFence`` bookkeeping is not needed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 32767


class TransactionState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def state_name(self) -> str:
        """Kafka's name, as DescribeTransactions/ListTransactions report it."""
        return _NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        return _BY_NAME.get(name)

    @property
    def valid_previous_states(self) -> frozenset[TransactionState]:
        return _PREVIOUS[self]


_NAMES = {
    TransactionState.EMPTY: "Empty", TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit",
    TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMPLETE_COMMIT: "CompleteCommit",
    TransactionState.COMPLETE_ABORT: "CompleteAbort", TransactionState.DEAD: "Dead",
    TransactionState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}
_S = TransactionState
_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    # Empty/Complete*: transaction.version 2 aborts a transaction no partition reached
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE, _S.EMPTY,
                                 _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """Kafka keeps the last epoch free: a bump to 32767 would leave no room to fence."""
    return producer_epoch >= SHORT_MAX - 1


class IllegalTransitionError(Exception):
    """A transition the state machine forbids: a coordinator bug, never a client's."""


@dataclass(frozen=True, slots=True)
class TxnTransitMetadata:
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    txn_state: TransactionState
    topic_partitions: frozenset[tuple[str, int]]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0


@dataclass(slots=True)
class TransactionMetadata:
    """Owned by the coordinator shard (the event-loop thread)."""

    transactional_id: str
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    topic_partitions: set[tuple[str, int]] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    pending_state: TransactionState | None = None
    # transaction.version 2: the producer id that takes over when this transaction
    # completes (the epoch ran out), and the protocol the client spoke last
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0

    @property
    def supports_epoch_bump(self) -> bool:
        """The last transition came from a transaction.version 2 client."""
        return self.client_transaction_version >= 2

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def _prepare(self, state: TransactionState, producer_id: int, epoch: int, last_epoch: int,
                 timeout_ms: int, partitions: frozenset[tuple[str, int]], start_ms: int,
                 update_ms: int, *, last_producer_id: int | None = None,
                 next_producer_id: int = NO_PRODUCER_ID,
                 client_transaction_version: int | None = None) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransitionError(
                f"{self.transactional_id}: transition to {state.state_name} while "
                f"{self.pending_state.state_name} is pending")
        if producer_id < 0 or (state != _S.DEAD and epoch < 0):
            raise IllegalTransitionError(f"{self.transactional_id}: producer id {producer_id} "
                                         f"epoch {epoch}")
        if self.state not in state.valid_previous_states:
            raise IllegalTransitionError(f"{self.transactional_id}: {self.state.state_name} "
                                         f"-> {state.state_name} is not a legal transition")
        self.pending_state = state
        return TxnTransitMetadata(
            producer_id, self.producer_id if last_producer_id is None else last_producer_id,
            epoch, last_epoch, timeout_ms, state, partitions, start_ms, update_ms,
            next_producer_id, self.client_transaction_version
            if client_transaction_version is None else client_transaction_version)

    # ------------------------------------------------------------------ prepares
    def prepare_fence_producer_epoch(self, now_ms: int) -> TxnTransitMetadata:
        """Fence the producer of an Ongoing transaction and abort it: Kafka's two steps
        (PrepareEpochFence with epoch + 1, then PrepareAbort at that epoch) as one
        transit to PrepareAbort, since PrepareEpochFence is never persisted."""
        if self.producer_epoch >= SHORT_MAX:
            raise IllegalTransitionError(f"{self.transactional_id}: epoch would overflow")
        if self.state not in _S.PREPARE_EPOCH_FENCE.valid_previous_states:
            raise IllegalTransitionError(f"{self.transactional_id}: cannot fence in "
                                         f"{self.state.state_name}")
        transit = self._prepare(_S.PREPARE_ABORT, self.producer_id, self.producer_epoch + 1,
                                NO_PRODUCER_EPOCH, self.txn_timeout_ms,
                                frozenset(self.topic_partitions), self.txn_start_timestamp,
                                now_ms)
        return transit

    def prepare_increment_producer_epoch(self, timeout_ms: int, expected_epoch: int | None,
                                         now_ms: int) -> TxnTransitMetadata | None:
        """Empty with epoch + 1; None when ``expected_epoch`` (KIP-360) is neither the
        current nor the previous epoch: the caller answers PRODUCER_FENCED."""
        if self.is_producer_epoch_exhausted:
            raise IllegalTransitionError(f"{self.transactional_id}: epochs exhausted")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            # a retry of a bump whose answer was lost: hand out the same epoch again
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return None
        return self._prepare(_S.EMPTY, self.producer_id, epoch, last, timeout_ms,
                             frozenset(), -1, now_ms)

    def prepare_producer_id_rotation(self, new_producer_id: int, timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> TxnTransitMetadata:
        return self._prepare(_S.EMPTY, new_producer_id, 0,
                             self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                             timeout_ms, frozenset(), -1, now_ms)

    def prepare_add_partitions(self, partitions: set[tuple[str, int]], now_ms: int,
                               client_transaction_version: int | None = None
                               ) -> TxnTransitMetadata:
        start = now_ms if self.state in (_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT) \
            else self.txn_start_timestamp
        return self._prepare(_S.ONGOING, self.producer_id, self.producer_epoch,
                             self.last_producer_epoch, self.txn_timeout_ms,
                             frozenset(self.topic_partitions | partitions), start, now_ms,
                             last_producer_id=self.last_producer_id,
                             client_transaction_version=client_transaction_version)

    def prepare_abort_or_commit(self, state: TransactionState, now_ms: int, *,
                                client_transaction_version: int = 0,
                                next_producer_id: int = NO_PRODUCER_ID
                                ) -> TxnTransitMetadata:
        """With transaction.version 2 the epoch is bumped here, so the markers carry
        the new epoch and anything the client sent at the old one is fenced;
        ``next_producer_id`` is the id that takes over when the epoch ran out."""
        epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        if client_transaction_version >= 2:
            if self.producer_epoch >= SHORT_MAX:
                raise IllegalTransitionError(f"{self.transactional_id}: epoch would overflow")
            epoch, last_epoch = self.producer_epoch + 1, self.producer_epoch
        return self._prepare(state, self.producer_id, epoch, last_epoch, self.txn_timeout_ms,
                             frozenset(self.topic_partitions), self.txn_start_timestamp, now_ms,
                             last_producer_id=self.last_producer_id,
                             next_producer_id=next_producer_id,
                             client_transaction_version=client_transaction_version)

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        """The markers are written; a transaction whose epoch ran out hands over to its
        next producer id at epoch 0 (the old id becomes the previous one)."""
        state = _S.COMPLETE_COMMIT if self.state == _S.PREPARE_COMMIT else _S.COMPLETE_ABORT
        if self.supports_epoch_bump and self.next_producer_id != NO_PRODUCER_ID:
            return self._prepare(state, self.next_producer_id, 0, self.producer_epoch,
                                 self.txn_timeout_ms, frozenset(), self.txn_start_timestamp,
                                 now_ms, last_producer_id=self.producer_id)
        return self._prepare(state, self.producer_id, self.producer_epoch,
                             self.last_producer_epoch, self.txn_timeout_ms, frozenset(),
                             self.txn_start_timestamp, now_ms,
                             last_producer_id=self.last_producer_id)

    def prepare_dead(self) -> TxnTransitMetadata:
        return self._prepare(_S.DEAD, self.producer_id, self.producer_epoch,
                             self.last_producer_epoch, self.txn_timeout_ms, frozenset(),
                             self.txn_start_timestamp, self.txn_last_update_timestamp)

    # ------------------------------------------------------------------ completion
    def complete_transition_to(self, transit: TxnTransitMetadata) -> None:
        """The transit is durable: make it the current state."""
        if self.pending_state != transit.txn_state:
            raise IllegalTransitionError(
                f"{self.transactional_id}: completing {transit.txn_state.state_name} while "
                f"pending {self.pending_state}")
        self.apply(transit)

    def apply(self, transit: TxnTransitMetadata) -> None:
        """Take every field of ``transit`` (also how a loaded record becomes state)."""
        self.producer_id = transit.producer_id
        self.last_producer_id = transit.last_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.txn_timeout_ms = transit.txn_timeout_ms
        self.state = transit.txn_state
        self.topic_partitions = set(transit.topic_partitions)
        self.txn_start_timestamp = transit.txn_start_timestamp
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.next_producer_id = transit.next_producer_id
        self.client_transaction_version = transit.client_transaction_version
        self.pending_state = None

    def snapshot(self) -> TxnTransitMetadata:
        return TxnTransitMetadata(self.producer_id, self.last_producer_id, self.producer_epoch,
                                  self.last_producer_epoch, self.txn_timeout_ms, self.state,
                                  frozenset(self.topic_partitions), self.txn_start_timestamp,
                                  self.txn_last_update_timestamp, self.next_producer_id,
                                  self.client_transaction_version)

