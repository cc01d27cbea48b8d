"""Legacy message sets (magic 0 and 1): read-only.

Java counterparts: ``org.apache.kafka.common.record.LegacyRecord`` and
``AbstractLegacyRecordBatch`` (each top-level message acts as a "batch"; a compressed one is a
wrapper whose value holds an inner message set).  Nothing writes this format any more
(Kafka 4 accepts only v2); a fetch may still return it from old data on disk.

Byte layout of one entry (big-endian)::

    offset        int64   absolute offset (a v1 wrapper carries its LAST inner offset)
    messageSize   int32   bytes that follow
    crc           uint32  CRC-32 (IEEE, zlib) of magic .. end of message
    magic         int8    0 or 1
    attributes    int8    bits 0-2 codec, bit 3 timestamp type (v1: 1 = LogAppendTime)
    timestamp     int64   v1 only
    keyLength     int32   -1 = null
    key
    valueLength   int32   -1 = null
    value                 for a compressed wrapper: the compressed inner message set

Inner messages of a v1 wrapper carry relative offsets 0..n-1: absolute = wrapper offset -
last inner offset + inner offset.  v0 inner offsets are absolute already.  LZ4 wrappers in v0
carry Kafka 0.8/0.9's broken LZ4 header checksum (KAFKA-3160), repaired before decoding.
Nested compression is rejected.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

from millrace.common.errors import CorruptBatchError
from millrace.record.batch import LOG_OVERHEAD, MAGIC_OFFSET, Record, TimestampType
from millrace.record.compression import (
    DEFAULT_MAX_DECOMPRESSED,
    CompressionType,
    decompress,
    repair_legacy_lz4_header,
)

__all__ = ["LegacyRecordBatch", "iter_legacy_records", "next_entry"]

MIN_MESSAGE_SIZE_V0 = 4 + 1 + 1 + 4 + 4  # crc, magic, attributes, key length, value length
MIN_MESSAGE_SIZE_V1 = MIN_MESSAGE_SIZE_V0 + 8  # + timestamp

_ENTRY = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")

_Buffer = bytes | bytearray | memoryview
# offset, magic, attributes, timestamp, key, value
_Message = tuple[int, int, int, int, bytes | None, bytes | None]


def next_entry(buf: _Buffer, pos: int, end: int) -> int | None:
    """Size of the log entry (batch or message) at ``pos``, or None if it is incomplete.

    Raises ``CorruptBatchError`` for a length below the smallest legacy message.
    """
    if end - pos < LOG_OVERHEAD:
        return None
    (length,) = _INT32.unpack_from(buf, pos + 8)
    if length < MIN_MESSAGE_SIZE_V0:
        raise CorruptBatchError(f"log entry at position {pos} has length {length}, below the "
                                f"minimum {MIN_MESSAGE_SIZE_V0}")
    size = LOG_OVERHEAD + length
    return size if pos + size <= end else None


def _parse(buf: _Buffer, pos: int, end: int, check_crc: bool) -> tuple[_Message, int]:
    """Parse the complete message at ``pos`` (ending by ``end``); returns it and its end."""
    if end - pos < LOG_OVERHEAD + MIN_MESSAGE_SIZE_V0:
        raise CorruptBatchError(f"legacy message at position {pos} is truncated")
    offset, size, crc, magic, attributes = _ENTRY.unpack_from(buf, pos)
    msg_end = pos + LOG_OVERHEAD + size
    if magic not in (0, 1):
        raise CorruptBatchError(f"legacy message at position {pos} has magic {magic}")
    if size < (MIN_MESSAGE_SIZE_V1 if magic else MIN_MESSAGE_SIZE_V0) or msg_end > end:
        raise CorruptBatchError(f"legacy message at position {pos} has bad size {size}")
    if check_crc:
        with memoryview(buf) as view:
            actual = zlib.crc32(view[pos + MAGIC_OFFSET : msg_end])
        if actual != crc:
            raise CorruptBatchError(f"legacy message CRC mismatch at position {pos}: stored "
                                    f"{crc:#010x}, computed {actual:#010x}")
    i = pos + MAGIC_OFFSET + 2
    timestamp = -1
    if magic:
        (timestamp,) = _INT64.unpack_from(buf, i)
        i += 8
    key, i = _read_bytes(buf, i, msg_end, "key")
    value, i = _read_bytes(buf, i, msg_end, "value")
    if i != msg_end:
        raise CorruptBatchError(f"legacy message at position {pos} has {msg_end - i} extra bytes")
    return (offset, magic, attributes, timestamp, key, value), msg_end


def _read_bytes(buf: _Buffer, i: int, end: int, what: str) -> tuple[bytes | None, int]:
    if end - i < 4:
        raise CorruptBatchError(f"legacy message {what} length is truncated")
    (n,) = _INT32.unpack_from(buf, i)
    i += 4
    if n == -1:
        return None, i
    if n < 0 or n > end - i:
        raise CorruptBatchError(f"legacy message {what} length {n} exceeds the message")
    return bytes(buf[i : i + n]), i + n


class LegacyRecordBatch:
    """One top-level v0/v1 message: a single record, or a compressed wrapper of several."""

    __slots__ = ("_buf", "_pos", "_size", "attributes", "key", "magic", "offset", "timestamp",
                 "value")

    def __init__(self, buf: _Buffer, pos: int = 0) -> None:
        (self.offset, self.magic, self.attributes, self.timestamp, self.key,
         self.value), end = _parse(buf, pos, len(buf), check_crc=False)
        self._buf = buf
        self._pos = pos
        self._size = end - pos

    def __repr__(self) -> str:
        return (f"LegacyRecordBatch(offset={self.offset}, magic={self.magic}, "
                f"attributes={self.attributes:#x}, size={self._size})")

    @property
    def size(self) -> int:
        return self._size

    @property
    def compression(self) -> CompressionType:
        return CompressionType.from_id(self.attributes & 0x07)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == 0:
            return TimestampType.NO_TIMESTAMP_TYPE
        if self.attributes & 0x08:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def last_offset(self) -> int:
        return self.offset

    @property
    def next_offset(self) -> int:
        return self.offset + 1

    @property
    def base_offset(self) -> int:
        """First offset inside (decompresses a wrapper, as Java does)."""
        if self.compression == CompressionType.NONE:
            return self.offset
        return self.record_list()[0].offset

    @property
    def max_timestamp(self) -> int:
        return self.timestamp

    is_control = False
    is_transactional = False
    producer_id = -1
    producer_epoch = -1
    partition_leader_epoch = -1

    def validate(self) -> None:
        """Check the (outer) CRC; inner message CRCs are checked by ``records``."""
        _parse(self._buf, self._pos, len(self._buf), check_crc=True)

    def is_valid(self) -> bool:
        try:
            self.validate()
        except CorruptBatchError:
            return False
        return True

    def records(self, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> Iterator[Record]:
        return iter(self.record_list(max_decompressed))

    def record_list(self, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> list[Record]:
        codec = self.compression
        if codec == CompressionType.NONE:
            return [Record(self.offset, self.timestamp, self.key, self.value, ())]
        if self.value is None:
            raise CorruptBatchError("compressed legacy message has a null value")
        payload: bytes = self.value
        if codec == CompressionType.LZ4 and self.magic == 0:
            payload = repair_legacy_lz4_header(payload)
        data = decompress(codec, payload, max_decompressed)
        inner: list[_Message] = []
        pos, end = 0, len(data)
        while pos < end:
            message, pos = _parse(data, pos, end, check_crc=True)
            if message[2] & 0x07:
                raise CorruptBatchError("compressed legacy message contains a compressed message")
            inner.append(message)
        if not inner:
            raise CorruptBatchError("compressed legacy message holds no messages")
        shift = self.offset - inner[-1][0] if self.magic > 0 else 0
        append_time = self.magic > 0 and bool(self.attributes & 0x08)
        return [
            Record(offset + shift, self.timestamp if append_time else timestamp, key, value, ())
            for offset, _magic, _attributes, timestamp, key, value in inner
        ]


def iter_legacy_records(
    buf: _Buffer, pos: int = 0, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
) -> Iterator[Record]:
    """Every record of a v0/v1 message set (wrappers expanded); stops at a partial entry."""
    end = len(buf)
    while True:
        size = next_entry(buf, pos, end)
        if size is None:
            return
        yield from LegacyRecordBatch(buf, pos).records(max_decompressed)
        pos += size
