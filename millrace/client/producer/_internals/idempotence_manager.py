"""Idempotent-producer state: producer id and epoch, per-partition sequences, epoch
bumps (the idempotence half of Java's ``TransactionManager`` with its ``TxnPartitionMap``).

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

A transactional producer (``transaction_manager.TransactionManager``, the subclass the
producer uses in both modes) replaces the local epoch bump by an abort: its overrides of
``_on_lost_sequence``, ``handle_failed_batch``, ``can_bump_epoch`` and
``transition_to_fatal_error`` move the transaction to an error state instead.

Thread-safety: owned by the sender thread (the accumulator calls the drain hooks under
its lock, on the sender thread).
"""

from __future__ import annotations

import bisect
import logging
from typing import Any

from millrace.client.cluster import TopicPartition
from millrace.client.producer._internals.producer_batch import ProducerBatch, increment_sequence
from millrace.common.errors import (
    Errors,
    OutOfOrderSequenceError,
    UnknownProducerIdError,
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


class IdempotenceManager:
    def __init__(self, retry_backoff_ms: int = 100) -> None:
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

    @property
    def is_transactional(self) -> bool:
        return False

    def can_bump_epoch(self) -> bool:
        return True

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
        if self._fatal_error is None:
            log.error("the %s producer cannot continue: %s",
                      "transactional" if self.is_transactional else "idempotent", error)
            self._fatal_error = error

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
            else:
                self._on_lost_sequence(tp, last_sequence)

    def _on_lost_sequence(self, tp: TopicPartition, last_sequence: int) -> None:
        """No batch after an unresolved one was acknowledged: the sequence is lost."""
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


__all__ = ["MAX_EPOCH", "NO_LAST_ACKED_SEQUENCE", "NO_PRODUCER_EPOCH", "NO_PRODUCER_ID",
           "NO_SEQUENCE", "IdempotenceManager"]
