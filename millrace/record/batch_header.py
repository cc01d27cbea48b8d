"""The 61-byte header of a v2 record batch: field offsets, attribute bits, decoding.

Java counterpart: the layout constants and accessors of
``org.apache.kafka.common.record.DefaultRecordBatch``.

Byte layout (all big-endian; the 61-byte header is never compressed)::

    offset  size  field
         0     8  baseOffset            int64   producers write 0, the leader assigns
         8     4  batchLength           int32   bytes after this field (= batch size - 12)
        12     4  partitionLeaderEpoch  int32   set by the leader; NOT covered by the CRC
        16     1  magic                 int8    2 (same position as a legacy message's magic)
        17     4  crc                   uint32  CRC-32C of bytes 21 .. end of batch
        21     2  attributes            int16   bits 0-2 codec, 3 timestamp type (1 = LogAppendTime),
                                                4 transactional, 5 control, 6 delete horizon set
        23     4  lastOffsetDelta       int32   records - 1 for a fresh batch
        27     8  baseTimestamp         int64   first record's timestamp (-1 when empty)
        35     8  maxTimestamp          int64   max record timestamp, or the LogAppendTime
        43     8  producerId            int64   -1 unless idempotent/transactional
        51     2  producerEpoch         int16
        53     4  baseSequence          int32
        57     4  recordsCount          int32
        61     …  records               uncompressed, or one compressed blob (codec in attributes)

The header is enough for the broker's hot path (offsets, sizes, CRC, producer state) without
touching the records; ``batch.py`` builds on it.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

from millrace.common.errors import CorruptBatchError
from millrace.record.compression import CompressionType

BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61
HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part not counted by batchLength
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
MAGIC = 2

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

_INT32_MAX = (1 << 31) - 1

_HEADER = struct.Struct(">qiibIhiqqqhii")

_Buffer = bytes | bytearray | memoryview
_Writable = bytearray | memoryview


class TimestampType(IntEnum):
    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class BatchHeader(NamedTuple):
    """The 61 header bytes of a v2 batch, decoded (field order = wire order)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def compression(self) -> CompressionType:
        return CompressionType.from_id(self.attributes & COMPRESSION_CODEC_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.attributes & TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies (batchLength + 12)."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; wraps from int32 max to 0 like Java's."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return _increment_sequence(self.base_sequence, self.last_offset_delta)


def _increment_sequence(sequence: int, increment: int) -> int:
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


def read_header(buf: _Buffer, pos: int = 0) -> BatchHeader:
    """Decode the header at ``pos``; needs 61 bytes and magic 2, else ``CorruptBatchError``."""
    if pos < 0 or len(buf) - pos < HEADER_SIZE:
        raise CorruptBatchError(
            f"record batch header needs {HEADER_SIZE} bytes, {max(len(buf) - pos, 0)} available"
        )
    header = BatchHeader(*_HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC:
        raise CorruptBatchError(f"record batch at position {pos} has magic {header.magic}, not 2")
    return header
