"""``TransactionCoordinator``: the transactions of the hosted ``__transaction_state``
partitions, as a pure, steppable shard.

Java counterpart: ``TransactionCoordinator`` (request rules) together with the cache half
of ``TransactionStateManager`` (``getTransactionState``, load/unload, timed-out and
expired ids).  No I/O, no clock, no threads: every call takes ``now_ms``.

Theory of operation -- the step/replay contract (as the group coordinator's):

* a request ``x(..., now_ms)`` checks the rules against the cached ``TransactionMetadata``
  and returns a ``TxnResult``: the ``__transaction_state`` records to write (at most one,
  the id's new state), the answer to send once they are durable, and ``on_failure`` for
  when the write fails (it drops the pending transition and gives the error answer);
* a prepared change is only *pending* (``TransactionMetadata.pending_state``); the owner
  writes the record, waits until the ISR has it, and feeds it to ``replay`` -- only there
  does the state change.  ``load`` rebuilds a partition's ids through the same ``replay``;
* a record that leaves an id in PrepareCommit/PrepareAbort (written now, or found on
  load) queues a ``TxnMarkerEntry`` (``take_markers``): the marker channel manager writes
  the markers and calls ``complete_markers``, whose record (CompleteCommit/Abort) ends
  the transaction;
* ``poll(now_ms)`` aborts transactions older than their timeout (epoch bump: the producer
  is fenced), expires idle ids (``transactional.id.expiration.ms``: a tombstone) and
  retries completions whose write failed.

Each hosted partition has a coordinator epoch -- the leader epoch of its
``__transaction_state`` partition -- carried in markers (so leaders refuse a deposed
coordinator's) and checked before a durable write is acted on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from millrace.broker.group.group_metadata_manager import partition_for
from millrace.broker.transaction.records import (
    TransactionLogValue,
    UnknownTxnRecordVersion,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from millrace.broker.transaction.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    SHORT_MAX,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from millrace.common.errors import Errors, ProtocolDecodeError

log = logging.getLogger("millrace.broker.transaction")

S = TransactionState


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    """The broker settings the coordinator reads (Kafka's ``TransactionStateManagerConfig``)."""

    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 7 * 24 * 3600 * 1000
    abort_timed_out_transactions_interval_ms: int = 10_000
    remove_expired_transactional_ids_interval_ms: int = 3_600_000

    @classmethod
    def from_kafka_config(cls, config: Any) -> TransactionConfig:
        return cls(
            config["transaction.max.timeout.ms"], config["transactional.id.expiration.ms"],
            config["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
            config["transaction.remove.expired.transaction.cleanup.interval.ms"])


@dataclass(frozen=True, slots=True)
class TxnRecord:
    partition: int
    key: bytes
    value: bytes | None


@dataclass(slots=True)
class TxnResult:
    """One step's outcome: ``records`` to make durable, then ``response`` (or, when the
    write fails, ``on_failure(error)``)."""

    response: Any
    records: list[TxnRecord] = field(default_factory=list)
    on_failure: Callable[[int], Any] | None = None
    partition: int = -1
    coordinator_epoch: int = -1


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    error: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class EndTxnResult:
    """EndTxn's answer; v5 carries the producer id and epoch for the next transaction."""

    error: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class TxnMarkerEntry:
    """Markers to write for one transaction (Kafka's ``TxnMarkerEntry`` + its id)."""

    transactional_id: str
    txn_partition: int
    coordinator_epoch: int
    producer_id: int
    producer_epoch: int
    committed: bool
    partitions: frozenset[tuple[str, int]]


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    transactional_id: str
    error: int
    state: str = ""
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    transaction_timeout_ms: int = 0
    transaction_start_time_ms: int = -1
    partitions: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str


def _to_value(t: TxnTransitMetadata) -> bytes:
    return encode_value(TransactionLogValue(
        t.producer_id, t.producer_epoch, t.txn_timeout_ms, int(t.txn_state),
        tuple(sorted(t.topic_partitions)), t.txn_last_update_timestamp,
        t.txn_start_timestamp, t.last_producer_id, t.next_producer_id,
        t.client_transaction_version), empty=t.txn_state == S.EMPTY)


class TransactionCoordinator:
    """Owned by one thread (the broker's event loop)."""

    def __init__(self, config: TransactionConfig, num_partitions: int,
                 generate_producer_id: Callable[[], int]) -> None:
        self.config = config
        self.num_partitions = num_partitions
        self._generate_producer_id = generate_producer_id
        self.transactions: dict[str, TransactionMetadata] = {}
        self.epochs: dict[int, int] = {}          # hosted partition -> coordinator epoch
        self.loading: dict[int, int] = {}         # partition being loaded -> its epoch
        self._pending: dict[str, TxnTransitMetadata] = {}  # transit awaiting its write
        self._markers: list[TxnMarkerEntry] = []
        self._completions_to_retry: dict[str, TxnMarkerEntry] = {}
        self._next_abort_check_ms: int | None = None
        self._next_expiry_check_ms: int | None = None

    # ================================================================== placement
    @property
    def hosted(self) -> frozenset[int]:
        return frozenset(self.epochs)

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def _lookup(self, transactional_id: str) -> tuple[int, TransactionMetadata | None]:
        """(error, metadata) as ``getTransactionState``: NOT_COORDINATOR or
        COORDINATOR_LOAD_IN_PROGRESS when this shard does not serve the id now."""
        partition = self.partition_for(transactional_id)
        if partition in self.loading:
            return Errors.COORDINATOR_LOAD_IN_PROGRESS, None
        if partition not in self.epochs:
            return Errors.NOT_COORDINATOR, None
        return Errors.NONE, self.transactions.get(transactional_id)

    # ================================================================== InitProducerId
    def init_producer_id(self, transactional_id: str, transaction_timeout_ms: int,
                         expected: tuple[int, int] | None, now_ms: int) -> TxnResult:
        """``expected``: the (producer id, epoch) a KIP-360 client passes, or None."""
        def error(code: int) -> TxnResult:
            return TxnResult(InitProducerIdResult(code))

        if not transactional_id:
            return error(Errors.INVALID_REQUEST)
        if not 0 < transaction_timeout_ms <= self.config.transaction_max_timeout_ms:
            return error(Errors.INVALID_TRANSACTION_TIMEOUT)
        err, md = self._lookup(transactional_id)
        if err:
            return error(err)
        if md is None:
            md = TransactionMetadata(transactional_id, self._generate_producer_id(),
                                     NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_PRODUCER_EPOCH,
                                     transaction_timeout_ms, S.EMPTY,
                                     txn_last_update_timestamp=now_ms)
            self.transactions[transactional_id] = md
        if md.pending_transition_in_progress:
            return error(Errors.CONCURRENT_TRANSACTIONS)
        if expected is not None and not self._valid_producer_id(md, expected):
            return error(Errors.PRODUCER_FENCED)
        if md.state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            return error(Errors.CONCURRENT_TRANSACTIONS)
        if md.state == S.ONGOING:
            # Fence the previous producer: abort its transaction with epoch + 1 (Kafka's
            # PrepareEpochFence then PrepareAbort); the caller retries and finds it done.
            transit = md.prepare_fence_producer_epoch(now_ms)
            return self._write(md, transit, InitProducerIdResult(Errors.CONCURRENT_TRANSACTIONS),
                               lambda code: InitProducerIdResult(code))
        if md.state not in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT):
            raise AssertionError(f"{transactional_id} found in {md.state.state_name}")
        if md.is_producer_epoch_exhausted and (expected is None
                                               or expected[1] == md.producer_epoch):
            transit = md.prepare_producer_id_rotation(
                self._generate_producer_id(), transaction_timeout_ms, now_ms,
                record_last_epoch=expected is not None)
        else:
            bump = md.prepare_increment_producer_epoch(
                transaction_timeout_ms, None if expected is None else expected[1], now_ms)
            if bump is None:
                return error(Errors.PRODUCER_FENCED)
            transit = bump
        return self._write(md, transit, InitProducerIdResult(
            Errors.NONE, transit.producer_id, transit.producer_epoch),
            lambda code: InitProducerIdResult(code))

    @staticmethod
    def _valid_producer_id(md: TransactionMetadata, expected: tuple[int, int]) -> bool:
        pid, epoch = expected
        return (md.producer_epoch == NO_PRODUCER_EPOCH or pid == md.producer_id
                or (pid == md.last_producer_id and is_epoch_exhausted(epoch)))

    # ================================================================== AddPartitions
    def add_partitions_to_txn(self, transactional_id: str, producer_id: int,
                              producer_epoch: int, partitions: Iterable[tuple[str, int]],
                              now_ms: int, client_transaction_version: int = 0
                              ) -> TxnResult:
        """Response: one error code for every partition (AddPartitionsToTxn v0-3,
        AddOffsetsToTxn, which adds the group's ``__consumer_offsets`` partition, and a
        leader's implicit add for a transaction.version 2 client, v4+ not verify-only)."""
        parts = set(partitions)
        if not transactional_id:
            return TxnResult(Errors.INVALID_REQUEST)
        err, md = self._lookup(transactional_id)
        if err:
            return TxnResult(err)
        if md is None or md.producer_id != producer_id:
            return TxnResult(Errors.INVALID_PRODUCER_ID_MAPPING)
        if md.producer_epoch != producer_epoch:
            return TxnResult(Errors.PRODUCER_FENCED)
        if md.pending_transition_in_progress or md.state in (S.PREPARE_COMMIT,
                                                              S.PREPARE_ABORT):
            return TxnResult(Errors.CONCURRENT_TRANSACTIONS)
        if md.state == S.ONGOING and parts <= md.topic_partitions:
            return TxnResult(Errors.NONE)
        return self._write(md, md.prepare_add_partitions(parts, now_ms,
                                                         client_transaction_version),
                           Errors.NONE, lambda code: code)

    def verify_partitions_in_txn(self, transactional_id: str, producer_id: int,
                                 producer_epoch: int, partitions: Iterable[tuple[str, int]]
                                 ) -> dict[tuple[str, int], int]:
        """AddPartitionsToTxn v4+ ``verify_only`` (KIP-890 part 1): which partitions the
        ongoing transaction holds (NONE) and which not (TRANSACTION_ABORTABLE)."""
        parts = list(partitions)
        err, md = self._lookup(transactional_id) if transactional_id else (
            Errors.INVALID_REQUEST, None)
        if not err:
            if md is None or md.producer_id != producer_id:
                err = Errors.INVALID_PRODUCER_ID_MAPPING
            elif md.producer_epoch != producer_epoch:
                err = Errors.PRODUCER_FENCED
            elif md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                err = Errors.CONCURRENT_TRANSACTIONS
        if err or md is None:
            return {tp: err for tp in parts}
        return {tp: Errors.NONE if tp in md.topic_partitions else Errors.TRANSACTION_ABORTABLE
                for tp in parts}

    # ================================================================== EndTxn
    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                committed: bool, now_ms: int, client_transaction_version: int = 0
                ) -> TxnResult:
        """Response: ``EndTxnResult`` (error, and the producer id/epoch the client uses
        next -- EndTxn v5).

        Classic clients (transaction.version < 2) must send the current epoch, and a
        retry of a finished commit/abort answers NONE.  With transaction.version 2 each
        commit and abort bumps the epoch (markers carry the new one; on overflow a new
        producer id takes over at completion), so the epoch tells transactions apart: in
        PrepareCommit/Abort and CompleteCommit/Abort only the previous epoch (a retry of
        the EndTxn that ended it) is accepted, in Ongoing and Empty only the current one;
        anything else is PRODUCER_FENCED -- an EndTxn delayed past the start of the next
        transaction can no longer end that transaction (the Jepsen Bufstream case)."""
        if not transactional_id:
            return TxnResult(EndTxnResult(Errors.INVALID_REQUEST))
        err, md = self._lookup(transactional_id)
        if err:
            return TxnResult(EndTxnResult(err))
        if md is None:
            return TxnResult(EndTxnResult(Errors.INVALID_PRODUCER_ID_MAPPING))
        v2 = md.supports_epoch_bump
        retry_on_overflow = (v2 and md.last_producer_id == producer_id
                             and producer_epoch == SHORT_MAX - 1 and md.producer_epoch == 0)
        retry_on_bump = v2 and md.producer_epoch == producer_epoch + 1
        state = md.state
        # transaction.version 2: the client's transaction started locally (a send touched
        # a partition) but no partition reached the coordinator -- the implicit add came
        # with a Produce that never arrived.  Its abort at the current epoch is legal and
        # bumps the epoch, like any other v2 abort (Kafka 4's "no partition added").
        empty_abort = (client_transaction_version >= 2 and not committed
                       and state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
                       and producer_epoch == md.producer_epoch)
        if (client_transaction_version >= 2 and producer_epoch == md.producer_epoch
                and state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)):
            # the next transaction's EndTxn while the previous one's markers are being
            # written: retriable, as for any request meeting a transition in flight
            return TxnResult(EndTxnResult(Errors.CONCURRENT_TRANSACTIONS))
        if not v2 or state in (S.ONGOING, S.EMPTY):
            valid_epoch = producer_epoch == md.producer_epoch
        elif state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            valid_epoch = retry_on_bump
        else:
            valid_epoch = retry_on_bump or retry_on_overflow or empty_abort
        if md.producer_id != producer_id and not retry_on_overflow:
            return TxnResult(EndTxnResult(Errors.INVALID_PRODUCER_ID_MAPPING))
        if not valid_epoch:
            return TxnResult(EndTxnResult(Errors.PRODUCER_FENCED))
        if md.pending_transition_in_progress:
            return TxnResult(EndTxnResult(Errors.CONCURRENT_TRANSACTIONS))
        if state == S.ONGOING or empty_abort:
            target = S.PREPARE_COMMIT if committed else S.PREPARE_ABORT
            next_pid = NO_PRODUCER_ID
            if client_transaction_version >= 2 and md.is_producer_epoch_exhausted:
                next_pid = self._generate_producer_id()
            transit = md.prepare_abort_or_commit(
                target, now_ms, client_transaction_version=client_transaction_version,
                next_producer_id=next_pid)
            answer = EndTxnResult(Errors.NONE, transit.producer_id, transit.producer_epoch) \
                if next_pid == NO_PRODUCER_ID else EndTxnResult(Errors.NONE, next_pid, 0)
            return self._write(md, transit, answer, lambda code: EndTxnResult(code))
        same = (state in (S.COMPLETE_COMMIT, S.PREPARE_COMMIT)) == committed
        if state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and same:
            # a retry after the transaction completed
            return TxnResult(EndTxnResult(Errors.NONE, md.producer_id, md.producer_epoch))
        if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) and same:
            return TxnResult(EndTxnResult(Errors.CONCURRENT_TRANSACTIONS))
        return TxnResult(EndTxnResult(Errors.INVALID_TXN_STATE))   # Empty, or the other outcome

    # ================================================================== markers
    def take_markers(self) -> list[TxnMarkerEntry]:
        """Transactions that reached PrepareCommit/PrepareAbort since the last call."""
        markers, self._markers = self._markers, []
        return markers

    def is_current(self, entry: TxnMarkerEntry) -> bool:
        """Whether markers for ``entry`` are still wanted from this coordinator."""
        md = self.transactions.get(entry.transactional_id)
        return (self.epochs.get(entry.txn_partition) == entry.coordinator_epoch
                and md is not None and md.producer_id == entry.producer_id
                and md.producer_epoch == entry.producer_epoch
                and md.state == (S.PREPARE_COMMIT if entry.committed else S.PREPARE_ABORT))

    def complete_markers(self, entry: TxnMarkerEntry, now_ms: int) -> TxnResult:
        """Every partition has its marker: write CompleteCommit/CompleteAbort."""
        self._completions_to_retry.pop(entry.transactional_id, None)
        md = self.transactions.get(entry.transactional_id)
        if md is None or not self.is_current(entry):
            return TxnResult(Errors.NOT_COORDINATOR)
        if md.pending_transition_in_progress:
            self._completions_to_retry[entry.transactional_id] = entry
            return TxnResult(Errors.CONCURRENT_TRANSACTIONS)

        def failed(code: int) -> int:
            if code != Errors.NOT_COORDINATOR:  # Kafka retries the completion write
                self._completions_to_retry[entry.transactional_id] = entry
            return code
        return self._write(md, md.prepare_complete(now_ms), Errors.NONE, failed)

    # ================================================================== timers
    def poll(self, now_ms: int) -> list[TxnResult]:
        """Abort timed-out transactions, expire idle ids, retry failed completions."""
        results: list[TxnResult] = []
        for entry in list(self._completions_to_retry.values()):
            results.append(self.complete_markers(entry, now_ms))
        if self._next_abort_check_ms is None:
            self._next_abort_check_ms = now_ms + self.config.abort_timed_out_transactions_interval_ms
            self._next_expiry_check_ms = now_ms + \
                self.config.remove_expired_transactional_ids_interval_ms
        if now_ms >= self._next_abort_check_ms:
            self._next_abort_check_ms = now_ms + \
                self.config.abort_timed_out_transactions_interval_ms
            results.extend(self.abort_timed_out_transactions(now_ms))
        if self._next_expiry_check_ms is not None and now_ms >= self._next_expiry_check_ms:
            self._next_expiry_check_ms = now_ms + \
                self.config.remove_expired_transactional_ids_interval_ms
            results.extend(self.remove_expired_transactional_ids(now_ms))
        return [r for r in results if r.records]

    def abort_timed_out_transactions(self, now_ms: int) -> list[TxnResult]:
        """Ongoing transactions started more than their timeout ago are aborted with the
        epoch bumped, so their producer is fenced (Kafka's ``abortTimedOutTransactions``)."""
        results = []
        for md in list(self.transactions.values()):
            if (md.state == S.ONGOING and not md.pending_transition_in_progress
                    and self.partition_for(md.transactional_id) in self.epochs
                    and md.txn_start_timestamp + md.txn_timeout_ms < now_ms):
                log.info("aborting transaction of %s (producer %d epoch %d): timed out "
                         "after %d ms", md.transactional_id, md.producer_id,
                         md.producer_epoch, md.txn_timeout_ms)
                results.append(self._write(md, md.prepare_fence_producer_epoch(now_ms), Errors.NONE,
                                           lambda code: code))
        return results

    def remove_expired_transactional_ids(self, now_ms: int) -> list[TxnResult]:
        """Ids idle for ``transactional.id.expiration.ms`` with no open transaction get a
        tombstone; replaying it forgets them."""
        results = []
        horizon = now_ms - self.config.transactional_id_expiration_ms
        for md in list(self.transactions.values()):
            partition = self.partition_for(md.transactional_id)
            if (md.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
                    and not md.pending_transition_in_progress and partition in self.epochs
                    and md.txn_last_update_timestamp <= horizon):
                transit = md.prepare_dead()
                self._pending[md.transactional_id] = transit
                results.append(TxnResult(
                    Errors.NONE, [TxnRecord(partition, encode_key(md.transactional_id), None)],
                    self._undo(md, lambda code: code), partition, self.epochs[partition]))
        return results

    # ================================================================== describe/list
    def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        if not transactional_id:
            return TransactionDescription(transactional_id, Errors.INVALID_REQUEST)
        err, md = self._lookup(transactional_id)
        if err:
            return TransactionDescription(transactional_id, err)
        if md is None or md.state == S.DEAD:
            return TransactionDescription(transactional_id, Errors.TRANSACTIONAL_ID_NOT_FOUND)
        return TransactionDescription(
            transactional_id, Errors.NONE, md.state.state_name, md.producer_id,
            md.producer_epoch, md.txn_timeout_ms, md.txn_start_timestamp,
            tuple(sorted(md.topic_partitions)))

    def list_transactions(self, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
                          duration_ms: int = -1, now_ms: int = 0
                          ) -> tuple[int, list[str], list[TransactionListing]]:
        """(error, unknown state filters, listings) as ``listTransactionStates``."""
        if self.loading:
            return Errors.COORDINATOR_LOAD_IN_PROGRESS, [], []
        wanted_states = set(states)
        unknown = sorted(s for s in wanted_states if S.from_name(s) is None)
        pids = set(producer_ids)
        listings = []
        for md in self.transactions.values():
            if self.partition_for(md.transactional_id) not in self.epochs:
                continue
            if wanted_states and md.state.state_name not in wanted_states:
                continue
            if pids and md.producer_id not in pids:
                continue
            if duration_ms >= 0 and (md.state != S.ONGOING
                                     or now_ms - md.txn_start_timestamp < duration_ms):
                continue
            listings.append(TransactionListing(md.transactional_id, md.producer_id,
                                               md.state.state_name))
        listings.sort(key=lambda t: t.transactional_id)
        return Errors.NONE, unknown, listings

    # ================================================================== load / replay
    def begin_loading(self, partitions: dict[int, int]) -> None:
        """``partitions``: partition -> coordinator epoch (its leader epoch)."""
        for partition, epoch in partitions.items():
            self.unload(partition)
            self.loading[partition] = epoch

    def load(self, partition: int, records: Iterable[tuple[bytes, bytes | None]]) -> int:
        """Replay ``partition``'s records and start serving it; returns how many."""
        if partition not in self.loading:
            return 0
        self.epochs[partition] = self.loading.pop(partition)
        count = 0
        for key, value in records:
            count += 1
            self.replay(partition, key, value, loading=True)
        for md in self.transactions.values():
            if (self.partition_for(md.transactional_id) == partition
                    and md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)):
                self._queue_markers(partition, md)   # resend what the old leader may not have
        return count

    def unload(self, partition: int) -> None:
        self.epochs.pop(partition, None)
        self.loading.pop(partition, None)
        for tid in [t for t in self.transactions if self.partition_for(t) == partition]:
            del self.transactions[tid]
            self._pending.pop(tid, None)
            self._completions_to_retry.pop(tid, None)
        self._markers = [m for m in self._markers if m.txn_partition != partition]

    def replay(self, partition: int, key: bytes, value: bytes | None, *,
               loading: bool = False) -> None:
        """Apply one durable record: the id's state becomes what it says."""
        try:
            tid = decode_key(key)
        except UnknownTxnRecordVersion as e:
            log.warning("__transaction_state-%d: skipping record: %s", partition, e)
            return
        except ProtocolDecodeError as e:
            log.error("__transaction_state-%d: undecodable key: %s", partition, e)
            return
        if partition not in self.epochs or self.partition_for(tid) != partition:
            return
        if value is None:
            self.transactions.pop(tid, None)
            self._pending.pop(tid, None)
            return
        v = decode_value(value)
        md = self.transactions.get(tid)
        pending = self._pending.get(tid)
        if not loading and md is not None and pending is not None \
                and _to_value(pending) == value:
            del self._pending[tid]
            md.complete_transition_to(pending)
        else:
            transit = TxnTransitMetadata(
                v.producer_id, v.previous_producer_id, v.producer_epoch, NO_PRODUCER_EPOCH,
                v.transaction_timeout_ms, S(v.transaction_status), frozenset(v.partitions),
                v.start_timestamp_ms, v.last_update_timestamp_ms, v.next_producer_id,
                v.client_transaction_version)
            if md is None:
                md = self.transactions[tid] = TransactionMetadata(
                    tid, v.producer_id, NO_PRODUCER_ID, v.producer_epoch, NO_PRODUCER_EPOCH,
                    v.transaction_timeout_ms, S(v.transaction_status))
            md.apply(transit)
            self._pending.pop(tid, None)
        if not loading and md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            self._queue_markers(partition, md)

    def _queue_markers(self, partition: int, md: TransactionMetadata) -> None:
        self._markers.append(TxnMarkerEntry(
            md.transactional_id, partition, self.epochs[partition], md.producer_id,
            md.producer_epoch, md.state == S.PREPARE_COMMIT, frozenset(md.topic_partitions)))

    # ================================================================== machinery
    def _write(self, md: TransactionMetadata, transit: TxnTransitMetadata, response: Any,
               on_failure: Callable[[int], Any]) -> TxnResult:
        """A result persisting ``transit`` as the id's record (state is pending until it
        is replayed)."""
        md.pending_state = transit.txn_state
        self._pending[md.transactional_id] = transit
        partition = self.partition_for(md.transactional_id)
        record = TxnRecord(partition, encode_key(md.transactional_id), _to_value(transit))
        return TxnResult(response, [record], self._undo(md, on_failure), partition,
                         self.epochs.get(partition, -1))

    def _undo(self, md: TransactionMetadata, on_failure: Callable[[int], Any]
              ) -> Callable[[int], Any]:
        def failed(code: int) -> Any:
            if self._pending.get(md.transactional_id) is not None:
                del self._pending[md.transactional_id]
                md.pending_state = None
            return on_failure(code)
        return failed
