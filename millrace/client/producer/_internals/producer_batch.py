"""One batch of records for one partition (Java ``ProducerBatch`` + ``MemoryRecordsBuilder``).

``send`` encodes each record straight into the batch's ``bytearray`` behind a 61-byte
header placeholder with ``millrace.record.default_record.encode_record`` (the C codec
when it is built -- this is the producer's hot path).  The
batch keeps only what completion needs: one ``ProduceRequestResult`` and the records'
futures (with their callbacks).  The sender *closes* a batch when it drains it
(no more appends), *builds* it (header, compression, CRC) when it writes the request,
and completes it exactly once -- success, failure, or expiry.  A retried idempotent batch
may get new producer state (epoch bump) and is then rebuilt with a fresh CRC.

``records()`` fills in the header exactly as ``RecordBatchBuilder.build`` does (the unit
tests check the bytes are identical), compresses the records area if asked, and sets the
CRC-32C.

Size accounting: ``estimated_size`` is the uncompressed size so far; with compression
the limit for appends is ``batch.size`` divided by the topic's observed compression ratio (Java ``CompressionRatioEstimator``), so compressed
batches come out near ``batch.size``.

Owned by the thread holding the accumulator's lock until drained, then by the sender.
"""

from __future__ import annotations

import enum
import logging
import struct
from typing import Any

from millrace.client.cluster import TopicPartition
from millrace.client.producer._internals.batch_core import BatchCore
from millrace.client.producer._internals.future_record_metadata import (
    FutureRecordMetadata,
    ProduceRequestResult,
    RecordErrors,
)
from millrace.client.producer.producer_record import RecordMetadata
from millrace.record import HEADER_SIZE, CompressionType, RecordBatch, compress, compute_crc
from millrace.record.batch import (
    CRC_OFFSET,
    MAGIC,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TRANSACTIONAL_FLAG_MASK,
)

log = logging.getLogger(__name__)

_INT32_MAX = 0x7FFFFFFF
_HEADER = struct.Struct(">qiibIhiqqqhii")  # batch_header.py's layout


class FinalState(enum.Enum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    ABORTED = "aborted"


def increment_sequence(sequence: int, increment: int) -> int:
    """Sequence numbers wrap from int32 max to 0."""
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


class ProducerBatch(BatchCore):
    __slots__ = (
        "_built",
        "_closed",
        "_compression",
        "_compression_level",
        "_final_state",
        "_is_transactional",
        "_producer_state",
        "attempts",
        "buffer_size",
        "created_ms",
        "drained_ms",
        "is_split_batch",
        "journeys",
        "last_attempt_ms",
        "retry",
        "retry_backoff_ms",
        "sequence_has_been_reset",
        "topic_partition",
    )

    def __init__(self, tp: TopicPartition, created_ms: int, write_limit: int, *,
                 compression: CompressionType = CompressionType.NONE,
                 compression_level: int | None = None, is_split_batch: bool = False) -> None:
        # _buf, the write limit, record_count, full, produce_future, ...: batch_core.py
        super().__init__(bytearray(HEADER_SIZE), write_limit, ProduceRequestResult(tp))
        self.topic_partition = tp
        self._compression = compression
        self._compression_level = compression_level
        self._is_transactional = False
        self.created_ms = created_ms
        self.last_attempt_ms = created_ms
        self.drained_ms = 0
        self.attempts = 0
        self.retry = False
        self.retry_backoff_ms = 0
        self._final_state: FinalState | None = None
        self._closed = False
        self._built: bytes | None = None
        self.buffer_size = 0  # bytes reserved from the BufferPool (0 for split batches)
        self.is_split_batch = is_split_batch
        self.sequence_has_been_reset = False
        self._producer_state: tuple[int, int, int] | None = None  # (id, epoch, base sequence)
        # (RecordJourney, index) of its traced records (KafkaProducer.send_traced), else None
        self.journeys: list[tuple[Any, int]] | None = None

    # ------------------------------------------------------------------ appending
    def appended_size(self) -> int:
        return len(self._buf)

    def is_full(self) -> bool:
        return self.full

    def estimated_size_in_bytes(self) -> int:
        if self._built is not None:
            return len(self._built)
        return len(self._buf)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """No more appends (the sender drained it)."""
        self._closed = True
        self.full = True

    def records(self) -> bytes:
        """The wire form of the batch (built once; rebuilt after new producer state)."""
        built = self._built
        if built is None:
            built = self._built = self._build()
        return built

    def _build(self) -> bytes:
        codec = self._compression
        if codec == CompressionType.NONE:
            out = self._buf  # the header placeholder is filled in place
        else:
            with memoryview(self._buf) as view:
                payload = compress(codec, view[HEADER_SIZE:], self._compression_level)
            out = bytearray(HEADER_SIZE)
            out += payload
        attributes = int(codec)
        if self._is_transactional:
            attributes |= TRANSACTIONAL_FLAG_MASK
        producer_id, producer_epoch, base_sequence = self._producer_state or (
            NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE)
        _HEADER.pack_into(out, 0, 0, len(out) - 12, NO_PARTITION_LEADER_EPOCH, MAGIC, 0,
                          attributes, self.record_count - 1, self._base_timestamp,
                          self._max_timestamp, producer_id, producer_epoch, base_sequence,
                          self.record_count)
        struct.pack_into(">I", out, CRC_OFFSET, compute_crc(out))
        return bytes(out)

    @property
    def compression_ratio(self) -> float:
        """Built size / uncompressed size (1.0 before it is built)."""
        if self._built is None:
            return 1.0
        return len(self._built) / len(self._buf)

    # ------------------------------------------------------------------ idempotence
    def set_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int,
                           is_transactional: bool = False) -> None:
        self._is_transactional = is_transactional
        self._built = None
        self._producer_state = (producer_id, producer_epoch, base_sequence)

    def reset_producer_state(self, producer_id: int, producer_epoch: int,
                             base_sequence: int) -> None:
        """New epoch (or id) and sequence for a batch already sent once."""
        self.sequence_has_been_reset = True
        self.set_producer_state(producer_id, producer_epoch, base_sequence,
                                self._is_transactional)

    @property
    def is_transactional(self) -> bool:
        return self._is_transactional

    @property
    def has_sequence(self) -> bool:
        return self.base_sequence != NO_SEQUENCE

    @property
    def base_sequence(self) -> int:
        state = self._producer_state
        return NO_SEQUENCE if state is None else state[2]

    @property
    def last_sequence(self) -> int:
        return increment_sequence(self.base_sequence, self.record_count - 1)

    @property
    def producer_id(self) -> int:
        state = self._producer_state
        return -1 if state is None else state[0]

    @property
    def producer_epoch(self) -> int:
        state = self._producer_state
        return -1 if state is None else state[1]

    # ------------------------------------------------------------------ timing
    def has_reached_delivery_timeout(self, delivery_timeout_ms: int, now_ms: int) -> bool:
        return delivery_timeout_ms <= now_ms - self.created_ms

    def waited_time_ms(self, now_ms: int) -> int:
        return max(0, now_ms - self.last_attempt_ms)

    def queue_time_ms(self) -> int:
        return self.drained_ms - self.created_ms

    def drained(self, now_ms: int) -> None:
        self.drained_ms = max(self.drained_ms, now_ms)

    def reenqueued(self, now_ms: int, backoff_ms: int) -> None:
        self.attempts += 1
        self.last_attempt_ms = now_ms
        self.retry = True
        self.retry_backoff_ms = backoff_ms

    @property
    def in_retry(self) -> bool:
        return self.retry

    # ------------------------------------------------------------------ completion
    @property
    def is_done(self) -> bool:
        return self._final_state is not None

    @property
    def final_state(self) -> FinalState | None:
        return self._final_state

    def complete(self, base_offset: int, log_append_time: int) -> bool:
        """Success; returns False if the batch had already been completed."""
        return self._done(base_offset, log_append_time, None, None, FinalState.SUCCEEDED)

    def complete_exceptionally(self, error: Exception,
                               record_errors: RecordErrors | None = None) -> bool:
        return self._done(-1, -1, error, record_errors, FinalState.FAILED)

    def abort(self, error: Exception) -> None:
        self._done(-1, -1, error, None, FinalState.ABORTED)

    def _done(self, base_offset: int, log_append_time: int, error: Exception | None,
              record_errors: RecordErrors | None, state: FinalState) -> bool:
        if self._final_state is not None:
            if self._final_state is FinalState.SUCCEEDED and state is not FinalState.SUCCEEDED:
                log.debug("ignoring %s of %s: it already succeeded", state.value,
                          self.topic_partition)
            elif state is FinalState.SUCCEEDED:
                log.debug("%s was %s before the broker acknowledged it", self.topic_partition,
                          self._final_state.value)
            return False
        self._final_state = state
        result = self.produce_future
        result.set(base_offset, log_append_time, error, record_errors)
        if self._thunks:
            self._fire_callbacks(result)
        result.done()
        return True

    def _fire_callbacks(self, result: ProduceRequestResult) -> None:
        failed = result.error is not None
        tp = self.topic_partition
        for future in self._thunks:
            if failed:
                # as Java: -1 everywhere but the topic and partition
                metadata = RecordMetadata(tp.topic, tp.partition, -1, -1, -1, -1)
                error = result.error_for(future._index)
            else:
                metadata = future.metadata()
                error = None
            try:
                future._callback(metadata, error)
            except Exception:
                log.exception("error executing the user callback for a record to %s",
                              self.topic_partition)

    # ------------------------------------------------------------------ splitting
    def split(self, split_batch_size: int) -> list[ProducerBatch]:
        """Re-append every record into batches of at most ``split_batch_size`` bytes
        (MESSAGE_TOO_LARGE).  This batch then completes as *split*: its result redirects
        each record to its future in the new batch, where its callback moved too."""
        records = RecordBatch(self.records()).record_list()
        callbacks = {future._index: future._callback for future in self._thunks}
        journeys = dict((i, j) for j, i in self.journeys) if self.journeys is not None else None
        batches: list[ProducerBatch] = []
        redirect: list[FutureRecordMetadata] = []
        current: ProducerBatch | None = None
        for index, record in enumerate(records):
            callback = callbacks.get(index)
            new = current.try_append(record.timestamp, record.key, record.value,
                                     record.headers, callback, self.created_ms) \
                if current is not None else None
            if new is None:
                current = ProducerBatch(self.topic_partition, self.created_ms, split_batch_size,
                                        compression=self._compression,
                                        compression_level=self._compression_level,
                                        is_split_batch=True)
                batches.append(current)
                new = current.try_append(record.timestamp, record.key, record.value,
                                         record.headers, callback, self.created_ms)
                assert new is not None
            redirect.append(new)
            if journeys is not None and index in journeys:  # a traced record moves too
                assert current is not None
                if current.journeys is None:
                    current.journeys = []
                current.journeys.append((journeys[index], new._index))
        for batch in batches:
            batch.close()
        self._final_state = FinalState.ABORTED
        self._thunks = []
        self.produce_future.redirect = redirect
        self.produce_future.done()
        return batches

    def __repr__(self) -> str:
        return (f"ProducerBatch({self.topic_partition}, records={self.record_count}, "
                f"size={len(self._buf)}, attempts={self.attempts})")
