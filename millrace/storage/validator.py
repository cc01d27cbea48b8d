"""Checks on appended record batches (Java: ``LogValidator`` and ``analyzeAndValidateRecords``).

Per batch, never per record (except that compacted topics need every record's key): the
header fields, the size limit and the CRC.  The leader path returns the batches for offset
assignment; the follower path returns what the segment needs to index them.  Errors are the
Kafka errors the Produce response carries:

* ``CorruptRecordError`` (CORRUPT_MESSAGE): bad CRC, a truncated batch, trailing bytes.
* ``RecordTooLargeError`` (MESSAGE_TOO_LARGE): a batch over ``max.message.bytes``.
* ``InvalidRecordError`` (INVALID_RECORD): magic 0/1, ``lastOffsetDelta + 1 != count``, an
  empty batch, a control batch or a producer id without a sequence from a client, a record
  without a key on a compacted topic.
* ``InvalidTimestampError`` (INVALID_TIMESTAMP): a CreateTime outside
  [now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms], or a client
  setting LogAppendTime itself.  The bounds are checked against the batch's max timestamp
  and its base (first record's) timestamp, not every record's: the header has no minimum.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from millrace.common.errors import (
    CorruptBatchError,
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
)
from millrace.record.batch import (
    HEADER_SIZE,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    BatchHeader,
    RecordBatch,
    iter_batches,
    validate_batch,
)
from millrace.storage.config import LogConfig
from millrace.storage.info import AppendOrigin
from millrace.storage.segment import AppendedBatch

_TIMESTAMP_TYPE_MASK = 0x08
_INT32 = struct.Struct(">i")


def validate_leader_batches(buf: bytearray | bytes | memoryview, cfg: LogConfig, now: int,
                            origin: AppendOrigin) -> list[tuple[int, BatchHeader]]:
    """(position, header) of every batch in ``buf``; raises on the first bad one."""
    out: list[tuple[int, BatchHeader]] = []
    n = len(buf)
    pos = 0
    client = origin == AppendOrigin.CLIENT
    before = cfg.message_timestamp_before_max_ms
    after = cfg.message_timestamp_after_max_ms
    check_create_time = not cfg.log_append_time
    max_size = cfg.max_message_bytes
    while pos < n:
        if pos == 0 and n > MAGIC_OFFSET and buf[MAGIC_OFFSET] in (0, 1):
            raise InvalidRecordError(f"magic {buf[pos + MAGIC_OFFSET]} is not supported; "
                                     "only record batches (magic 2) are")
        if n - pos < HEADER_SIZE:
            raise CorruptRecordError(f"{n - pos} trailing bytes at position {pos} are not a "
                                     "whole record batch")
        if buf[pos + MAGIC_OFFSET] != 2:
            raise CorruptRecordError(f"unknown magic {buf[pos + MAGIC_OFFSET]} at position "
                                     f"{pos}")
        size = _INT32.unpack_from(buf, pos + LENGTH_OFFSET)[0] + LOG_OVERHEAD
        if size < HEADER_SIZE or pos + size > n:
            raise CorruptRecordError(f"record batch at position {pos} claims {size} "
                                     f"bytes, {n - pos} available")
        if size > max_size:
            raise RecordTooLargeError(f"record batch of {size} bytes exceeds "
                                      f"max.message.bytes {max_size}")
        try:
            h = validate_batch(buf, pos, check_offsets=False)
        except CorruptBatchError as e:
            raise CorruptRecordError(str(e)) from None
        if h.records_count <= 0 or h.last_offset_delta + 1 != h.records_count:
            raise InvalidRecordError(f"record batch has {h.records_count} records and "
                                     f"lastOffsetDelta {h.last_offset_delta}")
        if client:
            if h.is_control:
                raise InvalidRecordError("clients cannot write control batches")
            if h.producer_id >= 0 and h.base_sequence < 0:
                raise InvalidRecordError(f"invalid sequence {h.base_sequence} for producer "
                                         f"{h.producer_id}")
            if h.attributes & _TIMESTAMP_TYPE_MASK:
                raise InvalidTimestampError("producers cannot set LogAppendTime")
            if check_create_time:
                if h.max_timestamp > now + after:
                    raise InvalidTimestampError(
                        f"timestamp {h.max_timestamp} is more than {after} ms after the "
                        f"broker time {now} (message.timestamp.after.max.ms)")
                if 0 <= h.base_timestamp < now - before or (
                        h.max_timestamp >= 0 and h.max_timestamp < now - before):
                    raise InvalidTimestampError(
                        f"timestamp is more than {before} ms before the broker time {now} "
                        "(message.timestamp.before.max.ms)")
            if cfg.compact:
                _check_keys(buf, pos)
        out.append((pos, h))
        pos += size
    return out


def _check_keys(buf: bytearray | bytes | memoryview, pos: int) -> None:
    try:
        for rec in RecordBatch(buf, pos).records():
            if rec.key is None:
                raise InvalidRecordError("compacted topic cannot accept a record without key")
    except CorruptBatchError as e:
        raise CorruptRecordError(str(e)) from None


@dataclass
class FollowerBatches:
    """What a replicated buffer holds: its whole batches (a trailing partial one excluded)."""

    entries: list[AppendedBatch] = field(default_factory=list)
    first_offset: int = -1
    last_offset: int = -1
    max_timestamp: int = -1
    offset_of_max_timestamp: int = -1
    num_records: int = 0
    last_leader_epoch: int = -1
    valid_bytes: int = 0


def analyze_follower_batches(records: bytes | bytearray | memoryview) -> FollowerBatches:
    """Check CRCs and that offsets increase; stop silently at a trailing partial batch."""
    fb = FollowerBatches()
    expected = -1
    try:
        for pos, h in iter_batches(records):
            validate_batch(records, pos, check_offsets=False)
            if h.base_offset < expected or h.last_offset_delta < 0:
                raise InvalidRecordError(f"batch offsets {h.base_offset}..{h.last_offset} "
                                         f"are not increasing (expected >= {expected})")
            if not fb.entries:
                fb.first_offset = h.base_offset
            fb.entries.append(AppendedBatch(pos, h.size, h.last_offset, h.max_timestamp))
            if h.max_timestamp > fb.max_timestamp:
                fb.max_timestamp, fb.offset_of_max_timestamp = h.max_timestamp, h.last_offset
            fb.num_records += h.records_count
            fb.last_leader_epoch = h.partition_leader_epoch
            fb.last_offset = h.last_offset
            expected = h.next_offset
            fb.valid_bytes = pos + h.size
    except CorruptBatchError as e:
        raise CorruptRecordError(str(e)) from None
    return fb
