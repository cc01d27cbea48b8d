"""Per-producer idempotence state and its rules (Java: ``ProducerStateEntry``,
``ProducerAppendInfo``, ``BatchMetadata``).

Each partition log keeps, per producer id, the producer epoch and the metadata of the
producer's last 5 appended batches (first/last sequence, first/last offset, max
timestamp), so that a retried batch is recognised and answered with its original offsets
instead of being written twice.  Rules on an append from a client (see
``ProducerAppendInfo``; reference: kafka-protocol.md section 8.1):

1. same epoch and [base sequence, last sequence] equal to one of the cached batches: a
   duplicate; the log writes nothing and answers with the original batch's offsets
   (``ProducerStateEntry.find_duplicate_batch``, checked by ``Log.append_as_leader``);
2. epoch lower than the stored one: INVALID_PRODUCER_EPOCH (47);
3. a new, higher epoch: the first sequence must be 0, else OUT_OF_ORDER_SEQUENCE_NUMBER (45);
4. same epoch: base sequence = last sequence + 1 (0 after int32 max), else 45;
5. no state for the producer (new, expired or deleted by retention): any sequence.

Appends from replication update the state without checks (a replica never refuses what
its leader wrote; it only logs).  State changes only after the append reached the segment
(``ProducerStateManager.update``).

Transactions (Kafka's rules): a transactional batch from a producer with no open
transaction on the partition starts one at its first offset (``current_txn_first_offset``,
collected in ``started_transactions``); a non-transactional batch while one is open is
INVALID_TXN_STATE.  An end-transaction marker (a COMMIT or ABORT control batch, written by
the partition leader for the coordinator with origin COORDINATOR) ends it and yields a
``CompletedTxn(producer_id, first_offset, marker offset, is_aborted)``; a marker for a
producer without an open transaction ends nothing.  A marker from the coordinator with a
producer epoch older than the producer's is INVALID_PRODUCER_EPOCH (Kafka answers so since
2.7 instead of PRODUCER_FENCED), one with a coordinator epoch older than the last marker's
TRANSACTION_COORDINATOR_FENCED; replication only logs both.

The map of producer ids to entries, its snapshots and expiry are in
``producer_state_manager.py``; the snapshot file format is in ``producer_snapshot.py``.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from millrace.common.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from millrace.record.batch import NO_PRODUCER_EPOCH, NO_SEQUENCE, NO_TIMESTAMP, BatchHeader
from millrace.record.control import EndTransactionMarker
from millrace.storage.info import AppendOrigin
from millrace.storage.transaction_index import CompletedTxn

log = logging.getLogger("millrace.storage")

NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = (1 << 31) - 1


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``sequence - decrement`` with int32 wrap-around (Java ``DefaultRecordBatch``)."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class BatchMetadata(NamedTuple):
    """What is remembered of one appended batch (Java ``BatchMetadata``)."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class ProducerState(NamedTuple):
    """One active producer of a partition, as DescribeProducers reports it (Java
    ``DescribeProducersResponseData.ProducerState``)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


@dataclass(eq=True)
class ProducerStateEntry:
    """The state of one producer id on one partition: its epoch and its last 5 batches,
    oldest first."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = NO_TIMESTAMP
    current_txn_first_offset: int = -1  # -1: no open transaction
    batch_metadata: deque[BatchMetadata] = field(default_factory=deque)

    @staticmethod
    def empty(producer_id: int) -> ProducerStateEntry:
        return ProducerStateEntry(producer_id)

    @property
    def is_empty(self) -> bool:
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        return self.batch_metadata[0].first_offset if self.batch_metadata else -1

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    def with_producer_id(self, producer_id: int) -> ProducerStateEntry:
        """A copy with everything but the batches (what an append starts from)."""
        return ProducerStateEntry(producer_id, self.producer_epoch, self.coordinator_epoch,
                                  self.last_timestamp, self.current_txn_first_offset)

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(self.producer_id, self.producer_epoch, self.coordinator_epoch,
                                  self.last_timestamp, self.current_txn_first_offset,
                                  deque(self.batch_metadata))

    def add_batch(self, producer_epoch: int, last_seq: int, last_offset: int, offset_delta: int,
                  timestamp: int) -> None:
        self.maybe_update_producer_epoch(producer_epoch)
        self._add_batch_metadata(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def maybe_update_producer_epoch(self, producer_epoch: int) -> bool:
        """A new epoch forgets the batches of the old one."""
        if self.producer_epoch != producer_epoch:
            self.batch_metadata.clear()
            self.producer_epoch = producer_epoch
            return True
        return False

    def _add_batch_metadata(self, batch: BatchMetadata) -> None:
        if len(self.batch_metadata) == NUM_BATCHES_TO_RETAIN:
            self.batch_metadata.popleft()
        self.batch_metadata.append(batch)

    def update(self, next_entry: ProducerStateEntry) -> None:
        """Fold in the result of an append (``ProducerAppendInfo.updated_entry``)."""
        self.maybe_update_producer_epoch(next_entry.producer_epoch)
        for b in next_entry.batch_metadata:
            self._add_batch_metadata(b)
        self.coordinator_epoch = next_entry.coordinator_epoch
        self.current_txn_first_offset = next_entry.current_txn_first_offset
        self.last_timestamp = next_entry.last_timestamp

    def find_duplicate_batch(self, producer_epoch: int, base_sequence: int,
                             last_sequence: int) -> BatchMetadata | None:
        """The cached batch a retried batch duplicates, if any (same epoch, same range)."""
        if producer_epoch != self.producer_epoch:
            return None
        return self.batch_with_sequence_range(base_sequence, last_sequence)

    def batch_with_sequence_range(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for b in self.batch_metadata:
            if b.last_seq == last_seq and b.first_seq == first_seq:
                return b
        return None


class ProducerAppendInfo:
    """Checks and accumulates the batches of one producer in one append, starting from the
    producer's state after the last successful append (``current_entry``).  Nothing is
    changed in the manager until ``ProducerStateManager.update``."""

    __slots__ = ("current_entry", "origin", "producer_id", "started_transactions",
                 "topic_partition", "updated_entry")

    def __init__(self, topic_partition: str, producer_id: int,
                 current_entry: ProducerStateEntry, origin: AppendOrigin) -> None:
        self.topic_partition = topic_partition
        self.producer_id = producer_id
        self.current_entry = current_entry
        self.origin = origin
        self.updated_entry = current_entry.with_producer_id(producer_id)
        # first offsets of the transactions this append starts, in order
        self.started_transactions: list[int] = []

    def append(self, header: BatchHeader, first_offset: int, last_offset: int,
               timestamp: int, marker: EndTransactionMarker | None = None
               ) -> CompletedTxn | None:
        """One batch at [first_offset, last_offset] whose stored max timestamp is
        ``timestamp``; ``marker`` is what a control batch holds (None: a control batch of
        another kind, which changes nothing).  Raises the Kafka error for a batch that
        breaks a rule; returns the transaction a marker completed."""
        if header.is_control:
            if marker is None:
                return None
            return self.append_end_txn_marker(marker, header.producer_epoch, first_offset,
                                              timestamp)
        self.append_data_batch(header.producer_epoch, header.base_sequence,
                               header.last_sequence, timestamp, first_offset, last_offset,
                               header.is_transactional)
        return None

    def append_data_batch(self, epoch: int, first_seq: int, last_seq: int, timestamp: int,
                          first_offset: int, last_offset: int, is_transactional: bool) -> None:
        if self.origin == AppendOrigin.CLIENT:
            self._check_producer_epoch(epoch, first_offset)
            self._check_sequence(epoch, first_seq, first_offset)
        elif epoch < self.updated_entry.producer_epoch:
            log.warning("%s: epoch %d of producer %d at offset %d is older than the last seen "
                        "epoch %d (%s append)", self.topic_partition, epoch, self.producer_id,
                        first_offset, self.updated_entry.producer_epoch, self.origin.name)
        entry = self.updated_entry
        entry.add_batch(epoch, last_seq, last_offset, last_offset - first_offset, timestamp)
        if entry.current_txn_first_offset >= 0 and not is_transactional:
            raise InvalidTxnStateError(
                f"Expected transactional write from producer {self.producer_id} at offset "
                f"{first_offset} in partition {self.topic_partition}")
        if entry.current_txn_first_offset < 0 and is_transactional:
            entry.current_txn_first_offset = first_offset
            self.started_transactions.append(first_offset)

    def append_end_txn_marker(self, marker: EndTransactionMarker, epoch: int, offset: int,
                              timestamp: int) -> CompletedTxn | None:
        """A COMMIT/ABORT marker at ``offset``: ends the producer's open transaction (Java
        ``appendEndTxnMarker``).  Returns it, or None if none was open."""
        entry = self.updated_entry
        if epoch < entry.producer_epoch:
            message = (f"Epoch of producer {self.producer_id} at offset {offset} in "
                       f"{self.topic_partition} is {epoch}, which is smaller than the last "
                       f"seen epoch {entry.producer_epoch}")
            if self.origin != AppendOrigin.REPLICATION:
                raise InvalidProducerEpochError(message)
            log.warning("%s", message)
        if entry.coordinator_epoch > marker.coordinator_epoch:
            message = (f"Invalid coordinator epoch for producer {self.producer_id} at offset "
                       f"{offset} in {self.topic_partition}: {marker.coordinator_epoch} "
                       f"(zombie), {entry.coordinator_epoch} (current)")
            if self.origin != AppendOrigin.REPLICATION:
                raise TransactionCoordinatorFencedError(message)
            log.info("%s", message)
        entry.maybe_update_producer_epoch(epoch)
        completed = None
        if entry.current_txn_first_offset >= 0:
            completed = CompletedTxn(self.producer_id, entry.current_txn_first_offset, offset,
                                     not marker.committed)
        entry.coordinator_epoch = marker.coordinator_epoch
        entry.current_txn_first_offset = -1
        entry.last_timestamp = timestamp
        return completed

    def _check_producer_epoch(self, epoch: int, offset: int) -> None:
        current = self.updated_entry.producer_epoch
        if epoch < current:
            raise InvalidProducerEpochError(
                f"Epoch of producer {self.producer_id} at offset {offset} in "
                f"{self.topic_partition} is {epoch}, which is smaller than the last seen "
                f"epoch {current}")

    def _check_sequence(self, epoch: int, first_seq: int, offset: int) -> None:
        updated, current = self.updated_entry, self.current_entry
        if epoch != updated.producer_epoch:
            if first_seq != 0 and updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"Invalid sequence number for new epoch of producer {self.producer_id} at "
                    f"offset {offset} in partition {self.topic_partition}: {epoch} (request "
                    f"epoch), {first_seq} (seq. number), {updated.producer_epoch} (current "
                    "producer epoch)")
            return
        if not updated.is_empty:
            last_seq = updated.last_seq
        elif epoch == current.producer_epoch:
            last_seq = current.last_seq
        else:
            last_seq = NO_SEQUENCE
        # no epoch known (state deleted with the log or expired): any sequence is accepted
        if current.producer_epoch != NO_PRODUCER_EPOCH and not in_sequence(last_seq, first_seq):
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for producer {self.producer_id} at offset "
                f"{offset} in partition {self.topic_partition}: {first_seq} (incoming seq. "
                f"number), {last_seq} (current end sequence number)")

    def to_entry(self) -> ProducerStateEntry:
        return self.updated_entry
