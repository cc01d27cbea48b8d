"""Record batches, message format v2 (magic 2): builder, reader and in-place broker helpers.

Java counterparts: ``org.apache.kafka.common.record.DefaultRecordBatch`` (layout, validation,
``setLastOffset``/``setPartitionLeaderEpoch``/``setMaxTimestamp``), ``DefaultRecord`` (the record
encoding) and ``MemoryRecordsBuilder`` (``RecordBatchBuilder`` here).

Byte layout: the 61-byte header (see ``batch_header.py`` for every field) followed by the
records, uncompressed or as one compressed blob (codec in attributes bits 0-2); each record
is encoded as ``default_record.py`` describes.  The CRC-32C covers attributes .. end, so
baseOffset and partitionLeaderEpoch can be rewritten in place without recomputing it.

Varints are zig-zag (see ``varint.py``).  A record's absolute offset is baseOffset + offsetDelta;
its timestamp is baseTimestamp + timestampDelta (CreateTime) or maxTimestamp for every record
(LogAppendTime).

The reader trusts no length: every length is checked against the bytes that are really there
before anything is sliced, so hostile input raises ``CorruptBatchError`` and never allocates
more than its own size (plus the decompression cap).  ``RecordBatch.records`` does not check
the CRC (``validate`` does; consumers call it when ``check.crcs`` is on).

Objects here are not thread-safe; a builder is owned by one thread (the producer's
accumulator hands a batch to the sender only after it is closed).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence

from crc32c import crc32c

from millrace.common.errors import CorruptBatchError
from millrace.record.batch_header import (
    ATTRIBUTES_OFFSET,
    BASE_OFFSET_OFFSET,
    BASE_SEQUENCE_OFFSET,
    BASE_TIMESTAMP_OFFSET,
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_FLAG_MASK,
    HEADER_SIZE,
    LAST_OFFSET_DELTA_OFFSET,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    MIN_BATCH_LENGTH,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    PARTITION_LEADER_EPOCH_OFFSET,
    PRODUCER_EPOCH_OFFSET,
    PRODUCER_ID_OFFSET,
    RECORDS_COUNT_OFFSET,
    RECORDS_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    BatchHeader,
    TimestampType,
    read_header,
)
from millrace.record.compression import (
    DEFAULT_MAX_DECOMPRESSED,
    CompressionType,
    compress,
    decompress,
)
from millrace.record.default_record import (
    MIN_RECORD_SIZE,
    Record,
    decode_records,
    encode_record,
    record_size_upper_bound,
)

__all__ = [  # the header names are re-exported: this is the module to import
    "ATTRIBUTES_OFFSET",
    "BASE_OFFSET_OFFSET",
    "BASE_SEQUENCE_OFFSET",
    "BASE_TIMESTAMP_OFFSET",
    "COMPRESSION_CODEC_MASK",
    "CONTROL_FLAG_MASK",
    "CRC_OFFSET",
    "DELETE_HORIZON_FLAG_MASK",
    "HEADER_SIZE",
    "LAST_OFFSET_DELTA_OFFSET",
    "LENGTH_OFFSET",
    "LOG_OVERHEAD",
    "MAGIC",
    "MAGIC_OFFSET",
    "MAX_TIMESTAMP_OFFSET",
    "MIN_BATCH_LENGTH",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "PARTITION_LEADER_EPOCH_OFFSET",
    "PRODUCER_EPOCH_OFFSET",
    "PRODUCER_ID_OFFSET",
    "RECORDS_COUNT_OFFSET",
    "RECORDS_OFFSET",
    "TIMESTAMP_TYPE_MASK",
    "TRANSACTIONAL_FLAG_MASK",
    "BatchHeader",
    "Record",
    "RecordBatch",
    "RecordBatchBuilder",
    "TimestampType",
    "compute_crc",
    "iter_batches",
    "read_header",
    "record_size_upper_bound",
    "set_base_offset",
    "set_last_offset",
    "set_log_append_time",
    "set_partition_leader_epoch",
    "validate_batch",
]

_MIN_LEGACY_LENGTH = 14  # smallest v0 message after its length field
_INT32_MAX = (1 << 31) - 1
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")
_HEADER = struct.Struct(">qiibIhiqqqhii")

_Buffer = bytes | bytearray | memoryview
_Writable = bytearray | memoryview


class RecordBatchBuilder:
    """Accumulates records into one v2 batch (Java ``MemoryRecordsBuilder``).

    Records are encoded straight into one ``bytearray`` behind a header placeholder; ``build``
    fills the header in, compresses the records area if asked, and computes the CRC.  Offset
    deltas are 0, 1, 2 … (``append_with_offset`` may skip some); the first record's timestamp
    is the base timestamp.  Owned by one thread at a time.
    """

    __slots__ = (
        "_base_offset",
        "_base_sequence",
        "_base_timestamp",
        "_buf",
        "_built",
        "_compression",
        "_count",
        "_is_control",
        "_is_transactional",
        "_last_delta",
        "_level",
        "_max_timestamp",
        "_partition_leader_epoch",
        "_producer_epoch",
        "_producer_id",
        "_timestamp_type",
    )

    def __init__(
        self,
        *,
        compression: CompressionType = CompressionType.NONE,
        timestamp_type: TimestampType = TimestampType.CREATE_TIME,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        is_control: bool = False,
        base_offset: int = 0,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
        compression_level: int | None = None,
    ) -> None:
        if timestamp_type == TimestampType.NO_TIMESTAMP_TYPE:
            raise ValueError("a v2 batch needs CREATE_TIME or LOG_APPEND_TIME")
        self._compression = CompressionType(compression)
        self._level = compression_level
        self._timestamp_type = TimestampType(timestamp_type)
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._is_transactional = is_transactional
        self._is_control = is_control
        self._base_offset = base_offset
        self._partition_leader_epoch = partition_leader_epoch
        self._buf = bytearray(HEADER_SIZE)
        self._count = 0
        self._last_delta = -1
        self._base_timestamp = NO_TIMESTAMP
        self._max_timestamp = NO_TIMESTAMP
        self._built: bytes | None = None

    @property
    def record_count(self) -> int:
        return self._count

    @property
    def compression(self) -> CompressionType:
        return self._compression

    @property
    def max_timestamp(self) -> int:
        return self._max_timestamp

    def set_producer_state(
        self, producer_id: int, producer_epoch: int, base_sequence: int, is_transactional: bool
    ) -> None:
        """Stamp idempotence/transaction fields (Java ``setProducerState``), e.g. on retry."""
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._is_transactional = is_transactional
        self._built = None

    def append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] = (),
    ) -> int:
        """Encode one record at the next offset delta; returns its encoded size in bytes."""
        if timestamp < 0 and timestamp != NO_TIMESTAMP:
            raise ValueError(f"invalid negative timestamp {timestamp}")
        if self._count == 0:
            self._base_timestamp = timestamp
        delta = self._last_delta + 1
        size = encode_record(self._buf, delta, timestamp - self._base_timestamp,
                             key, value, headers)
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        self._last_delta = delta
        self._count += 1
        self._built = None
        return size

    def append_with_offset(
        self,
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] = (),
    ) -> int:
        """Append at an absolute ``offset`` above the last one (Java ``appendWithOffset``).

        Leaves gaps for the log cleaner; lastOffsetDelta then exceeds recordsCount - 1.
        """
        delta = offset - self._base_offset
        if not self._last_delta < delta <= _INT32_MAX:
            raise ValueError(f"offset {offset} is not above the last offset "
                             f"{self._base_offset + self._last_delta} of this batch")
        previous, self._last_delta = self._last_delta, delta - 1
        try:
            return self.append(timestamp, key, value, headers)
        except BaseException:
            self._last_delta = previous
            raise

    def estimated_size_in_bytes(self) -> int:
        """Size of the batch built now, before compression (exact when uncompressed)."""
        return len(self._buf)

    @staticmethod
    def estimate_size_in_bytes(
        key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]] = ()
    ) -> int:
        """Upper bound of a batch holding only this record: header + widest record encoding.

        Java ``DefaultRecordBatch.estimateBatchSizeUpperBound``; the producer sizes a new
        batch buffer with ``max(batch.size, this)``.
        """
        return HEADER_SIZE + record_size_upper_bound(key, value, headers)

    def has_room_for(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]],
        limit: int,
    ) -> bool:
        """Whether one more record keeps the (uncompressed) batch within ``limit`` bytes.

        An empty builder always has room, so an oversize record still gets its own batch.
        """
        if self._count == 0:
            return True
        return len(self._buf) + record_size_upper_bound(key, value, headers) <= limit

    def build(self) -> bytes:
        """The complete batch: header, (compressed) records, CRC-32C.  Cached until changed."""
        if self._built is not None:
            return self._built
        codec = self._compression
        if codec == CompressionType.NONE:
            out = self._buf  # header placeholder is filled in place
        else:
            with memoryview(self._buf) as view:
                payload = compress(codec, view[HEADER_SIZE:], self._level)
            out = bytearray(HEADER_SIZE)
            out += payload
        attributes = int(codec)
        if self._timestamp_type == TimestampType.LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_MASK
        if self._is_transactional:
            attributes |= TRANSACTIONAL_FLAG_MASK
        if self._is_control:
            attributes |= CONTROL_FLAG_MASK
        _HEADER.pack_into(
            out, 0,
            self._base_offset, len(out) - LOG_OVERHEAD, self._partition_leader_epoch, MAGIC, 0,
            attributes, self._last_delta, self._base_timestamp, self._max_timestamp,
            self._producer_id, self._producer_epoch, self._base_sequence, self._count,
        )
        with memoryview(out) as view:
            crc = crc32c(view[ATTRIBUTES_OFFSET:])
        _UINT32.pack_into(out, CRC_OFFSET, crc)
        self._built = bytes(out)
        return self._built


class RecordBatch:
    """A read-only view of one v2 batch inside a buffer (Java ``DefaultRecordBatch``)."""

    __slots__ = ("_buf", "_pos", "header")

    def __init__(self, buf: _Buffer, pos: int = 0) -> None:
        self.header = read_header(buf, pos)
        self._buf = buf
        self._pos = pos

    def __repr__(self) -> str:
        h = self.header
        return (f"RecordBatch(base_offset={h.base_offset}, last_offset={h.last_offset}, "
                f"count={h.records_count}, size={h.size}, attributes={h.attributes:#x})")

    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def last_offset(self) -> int:
        return self.header.last_offset

    @property
    def next_offset(self) -> int:
        return self.header.next_offset

    @property
    def size(self) -> int:
        return self.header.size

    @property
    def magic(self) -> int:
        return MAGIC

    @property
    def records_count(self) -> int:
        return self.header.records_count

    @property
    def producer_id(self) -> int:
        return self.header.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.header.producer_epoch

    @property
    def max_timestamp(self) -> int:
        return self.header.max_timestamp

    @property
    def is_control(self) -> bool:
        return self.header.is_control

    @property
    def is_transactional(self) -> bool:
        return self.header.is_transactional

    @property
    def compression(self) -> CompressionType:
        return self.header.compression

    @property
    def timestamp_type(self) -> TimestampType:
        return self.header.timestamp_type

    @property
    def buffer(self) -> memoryview:
        """The batch's bytes (raises ``CorruptBatchError`` if the buffer ends early)."""
        end = self._pos + self.header.size
        if end > len(self._buf):
            raise CorruptBatchError(f"record batch truncated: {self.header.size} bytes declared, "
                                    f"{len(self._buf) - self._pos} available")
        return memoryview(self._buf)[self._pos : end]

    def validate(self) -> None:
        """Size, magic, codec, count and CRC checks; raises ``CorruptBatchError`` naming why."""
        _check(self._buf, self._pos, self.header, check_offsets=False)

    def is_valid(self) -> bool:
        try:
            self.validate()
        except CorruptBatchError:
            return False
        return True

    def records(self, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> Iterator[Record]:
        """Decode every record (all of them, before the first is returned)."""
        return iter(self.record_list(max_decompressed))

    def record_list(self, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> list[Record]:
        data, start, end, append_time = self.records_area(max_decompressed)
        h = self.header
        return decode_records(data, start, end, h.records_count, h.base_offset,
                              h.base_timestamp, append_time)

    def records_area(self, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
                     ) -> tuple[bytes, int, int, int | None]:
        """``(data, start, end, LogAppendTime or None)``: the records area, decompressed if
        need be, for ``default_record``'s decoders (e.g. a run at a time)."""
        h = self.header
        if h.batch_length < MIN_BATCH_LENGTH:
            raise CorruptBatchError(f"record batch length {h.batch_length} is below the minimum "
                                    f"{MIN_BATCH_LENGTH}")
        start = self._pos + HEADER_SIZE
        end = self._pos + h.size
        if end > len(self._buf):
            raise CorruptBatchError(f"record batch truncated: {h.size} bytes declared, "
                                    f"{len(self._buf) - self._pos} available")
        codec = h.compression
        buf = self._buf
        if codec != CompressionType.NONE:
            with memoryview(buf) as view:
                data = decompress(codec, view[start:end], max_decompressed)
            start, end = 0, len(data)
        elif type(buf) is bytes:
            data = buf
        else:
            with memoryview(buf) as view:
                data = bytes(view[start:end])
            start, end = 0, len(data)
        append_time = h.max_timestamp if h.attributes & TIMESTAMP_TYPE_MASK else None
        return data, start, end, append_time


# ------------------------------------------------------------------ broker hot path
def _check(buf: _Buffer, pos: int, h: BatchHeader, *, check_offsets: bool) -> None:
    if h.batch_length < MIN_BATCH_LENGTH:
        raise CorruptBatchError(f"record batch length {h.batch_length} is below the minimum "
                                f"{MIN_BATCH_LENGTH}")
    if pos + h.size > len(buf):
        raise CorruptBatchError(f"record batch truncated: {h.size} bytes declared, "
                                f"{len(buf) - pos} available")
    codec = h.attributes & COMPRESSION_CODEC_MASK
    if codec > CompressionType.ZSTD:
        raise CorruptBatchError(f"unknown compression codec id {codec}")
    count = h.records_count
    if count < 0:
        raise CorruptBatchError(f"negative record count {count}")
    if codec == 0 and count > (h.size - HEADER_SIZE) // MIN_RECORD_SIZE:
        raise CorruptBatchError(f"record batch claims {count} records in "
                                f"{h.size - HEADER_SIZE} bytes")
    crc = _crc(buf, pos, h.size)
    if crc != h.crc:
        raise CorruptBatchError(f"record batch CRC mismatch: stored {h.crc:#010x}, "
                                f"computed {crc:#010x}")
    if check_offsets and (count <= 0 or h.last_offset_delta + 1 != count):
        raise CorruptBatchError(f"record batch has {count} records but lastOffsetDelta "
                                f"{h.last_offset_delta}; a client batch needs count = delta + 1 > 0")


def _crc(buf: _Buffer, pos: int, size: int) -> int:
    with memoryview(buf) as view:
        return int(crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size]))


def validate_batch(buf: _Buffer, pos: int = 0, *, check_offsets: bool = False) -> BatchHeader:
    """Check a batch without decoding its records (Java ``ensureValid`` + the append checks).

    Magic, minimum length, completeness, codec id, count sanity and CRC always.  The produce
    path passes ``check_offsets=True`` to also require ``lastOffsetDelta + 1 == recordsCount
    > 0`` (a fresh client batch); it is off by default because compacted batches stored in
    a log legitimately have gaps, and recovery must accept them.
    """
    header = read_header(buf, pos)
    _check(buf, pos, header, check_offsets=check_offsets)
    return header


def compute_crc(buf: _Buffer, pos: int = 0) -> int:
    """CRC-32C of the batch at ``pos`` as it should be stored (attributes .. end)."""
    if pos < 0 or len(buf) - pos < HEADER_SIZE:
        raise CorruptBatchError("record batch header truncated")
    (length,) = _INT32.unpack_from(buf, pos + LENGTH_OFFSET)
    if length < MIN_BATCH_LENGTH or pos + LOG_OVERHEAD + length > len(buf):
        raise CorruptBatchError(f"record batch length {length} does not fit the buffer")
    return _crc(buf, pos, length + LOG_OVERHEAD)


def set_base_offset(buf: _Writable, pos: int, base_offset: int) -> None:
    """Rewrite baseOffset in place (outside the CRC, so the CRC stays valid)."""
    _INT64.pack_into(buf, pos + BASE_OFFSET_OFFSET, base_offset)


def set_last_offset(buf: _Writable, pos: int, last_offset: int) -> None:
    """Set baseOffset so that baseOffset + lastOffsetDelta == ``last_offset`` (Java's way)."""
    (delta,) = _INT32.unpack_from(buf, pos + LAST_OFFSET_DELTA_OFFSET)
    _INT64.pack_into(buf, pos + BASE_OFFSET_OFFSET, last_offset - delta)


def set_partition_leader_epoch(buf: _Writable, pos: int, epoch: int) -> None:
    """Rewrite partitionLeaderEpoch in place (outside the CRC)."""
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(buf: _Writable, pos: int, timestamp: int) -> None:
    """Mark the batch LogAppendTime with ``timestamp`` as maxTimestamp, recomputing the CRC.

    Validate the batch first: the new CRC covers whatever bytes are there.
    """
    (attributes,) = _INT16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    (current,) = _INT64.unpack_from(buf, pos + MAX_TIMESTAMP_OFFSET)
    if attributes & TIMESTAMP_TYPE_MASK and current == timestamp:
        return
    _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp)
    _UINT32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos))


def iter_batches(buf: _Buffer, pos: int = 0) -> Iterator[tuple[int, BatchHeader]]:
    """Walk concatenated v2 batches, yielding ``(position, header)`` for each complete one.

    Stops silently at a trailing partial batch (fetch responses may end with one).  A length
    below the minimum, or a magic other than 2, raises ``CorruptBatchError``; legacy (v0/v1)
    data is read with ``millrace.record.memory_records.MemoryRecords``.  CRCs are not checked.
    """
    end = len(buf)
    unpack_length = _INT32.unpack_from
    while end - pos >= LOG_OVERHEAD:
        (length,) = unpack_length(buf, pos + LENGTH_OFFSET)
        if length < MIN_BATCH_LENGTH:
            if length >= _MIN_LEGACY_LENGTH and end - pos > MAGIC_OFFSET and \
                    buf[pos + MAGIC_OFFSET] in (0, 1):
                raise CorruptBatchError(f"legacy (magic {buf[pos + MAGIC_OFFSET]}) message at "
                                        f"position {pos}; expected record batches (magic 2)")
            raise CorruptBatchError(f"record batch at position {pos} has length {length}, "
                                    f"below the minimum {MIN_BATCH_LENGTH}")
        if pos + LOG_OVERHEAD + length > end:
            return
        yield pos, read_header(buf, pos)
        pos += LOG_OVERHEAD + length
