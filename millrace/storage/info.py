"""Value types passed between the log and its callers (Java: ``LogOffsetMetadata``,
``FetchDataInfo``, ``LogAppendInfo``, ``FileTimestampAndOffset``).

``FetchDataInfo`` is the zero-copy seam: it names a byte range of one segment file instead of
holding bytes.  The broker either sends the range with ``sendfile`` (``open_file()`` hands
out a private duplicate of the segment's descriptor, so the range stays readable even if
retention renames or unlinks the file meanwhile) or copies it with ``read()``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import BinaryIO, Protocol


class FetchIsolation(enum.Enum):
    """How far a read may go: followers read to the log end, consumers to the high
    watermark, read_committed consumers to the last stable offset (= HW until
    transactions exist)."""

    LOG_END = 0
    HIGH_WATERMARK = 1
    TXN_COMMITTED = 2


class AppendOrigin(enum.Enum):
    """Who is appending: a producer (all checks), the broker itself (coordinators writing
    control or offset records), or replication (offsets already assigned)."""

    CLIENT = 0
    COORDINATOR = 1
    REPLICATION = 2


@dataclass(frozen=True, slots=True)
class LogOffsetMetadata:
    """An offset and where it lives: the base offset of its segment and the byte position of
    its batch in that segment (the segment size when the offset is the segment's end)."""

    message_offset: int
    segment_base_offset: int = -1
    relative_position_in_segment: int = -1


class SegmentFile(Protocol):
    """What ``FetchDataInfo`` needs from a segment (implemented by ``LogSegment``)."""

    @property
    def path(self) -> str: ...

    def pread(self, position: int, length: int) -> bytes: ...

    def open_file(self) -> BinaryIO: ...


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    """The result of a read: ``length`` bytes at ``position`` of ``segment``'s log file.

    The range starts on a batch boundary and holds whole batches, except that the last one
    may be cut short by ``max_bytes`` exactly as Kafka does (clients drop a trailing partial
    batch).  ``first_entry_incomplete`` is set when the first batch alone exceeded
    ``max_bytes`` and ``min_one_message`` was false (nothing returned).
    """

    fetch_offset_metadata: LogOffsetMetadata
    segment: SegmentFile | None = None
    position: int = 0
    length: int = 0
    first_entry_incomplete: bool = False

    def __len__(self) -> int:
        return self.length

    @property
    def path(self) -> str | None:
        return self.segment.path if self.segment is not None else None

    def read(self) -> bytes:
        """Copy the range into memory (may be shorter if the segment was truncated since)."""
        if self.segment is None or self.length == 0:
            return b""
        return self.segment.pread(self.position, self.length)

    def open_file(self) -> BinaryIO:
        """A new unbuffered file object on the segment (caller closes it), for sendfile."""
        if self.segment is None:
            raise ValueError("empty FetchDataInfo has no file")
        return self.segment.open_file()

    @staticmethod
    def empty(offset: int, segment_base: int = -1, position: int = -1) -> FetchDataInfo:
        return FetchDataInfo(LogOffsetMetadata(offset, segment_base, position))


@dataclass(frozen=True, slots=True)
class LogAppendInfo:
    """What an append did.  ``log_append_time`` is the broker time stamped on the batches
    for LogAppendTime topics, else -1.  ``max_timestamp``/``offset_of_max_timestamp`` are
    per batch (the last offset of the batch holding the largest timestamp)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    log_start_offset: int
    num_records: int
    num_batches: int
    valid_bytes: int
    last_leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    """An answer to ListOffsets: the record's timestamp (-1 for the earliest/latest
    special queries), its offset, and the leader epoch of its batch (-1 if unknown)."""

    timestamp: int
    offset: int
    leader_epoch: int = -1


# ListOffsets special timestamps (Java: ListOffsetsRequest).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
