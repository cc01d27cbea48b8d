"""Sparse segment indexes (Java: ``OffsetIndex``, ``TimeIndex``), in Kafka's file format.

``.index`` — 8-byte entries, big-endian::

    relative offset  int32   (offset - segment base offset): the LAST offset of a batch
    position         int32   byte position of that batch in the .log file

``.timeindex`` — 12-byte entries, big-endian::

    timestamp        int64   largest record timestamp seen in the segment so far
    relative offset  int32   last offset of the batch that first reached it

Entries are added at most once per ``index.interval.bytes`` of appended log, so the files
are small; both are strictly increasing in their key.  The entries live in memory (``array``s
of int32/int64, searched with ``bisect`` in O(log n)), loaded lazily on first use, so an old
segment nobody reads costs neither memory nor a file descriptor.  New entries are buffered
and written to the end of the file by ``write_buffer()`` (called by the segment on flush, roll
and close), so the append path makes no index system calls.  Files are never preallocated.

The log is the source of truth: an index that fails ``sanity_check`` (size not a multiple of
the entry size, keys not increasing, a position past the end of the log) is rebuilt from the
log by ``LogSegment.recover``.  Not thread-safe: owned by a segment, mutated under its log's
lock.
"""

from __future__ import annotations

import contextlib
import os
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
INT32_MAX = (1 << 31) - 1
_LITTLE = sys.byteorder == "little"


class CorruptIndexError(Exception):
    """An index file does not hold a well-formed index for its log."""


class _IndexFile:
    """The file half of an index.  Entries are loaded lazily (on first use) and the file
    descriptor is opened only to write, so an untouched old segment costs no memory and no
    descriptor."""

    entry_size = 0

    def __init__(self, path: str, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.entry_size)
        self._fd = -1  # opened on the first write (or truncation), then kept
        self._created_unsynced = False  # made by create() and not synced since
        self._loaded = False
        self._written = 0  # entries already in the file
        self._buffer = bytearray()  # encoded entries not yet written

    # subclasses: _load_entries(data), _clear(), entries
    def _load_entries(self, data: bytes) -> None:
        raise NotImplementedError

    def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            data = b""
        self._loaded = True
        if len(data) % self.entry_size:
            self._load_entries(b"")
            raise CorruptIndexError(f"{self.path}: size {len(data)} is not a multiple of "
                                    f"{self.entry_size}")
        self._load_entries(data)
        self._written = len(data) // self.entry_size

    def _file(self) -> int:
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._fd

    def create(self) -> None:
        """Make sure the file exists (as Kafka, a new segment has empty index files).  The
        descriptor is not kept: a partition nobody writes to holds none for its indexes
        (the next ``flush`` still syncs the new file, as it did with the descriptor held)."""
        if self._fd < 0:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                empty = os.fstat(fd).st_size == 0
            finally:
                os.close(fd)
            self._created_unsynced = True
            if empty and not self._loaded:  # what loading it would find: no entries
                self._loaded = True
                self._load_entries(b"")
                self._written = 0

    def write_buffer(self) -> None:
        if self._buffer:
            data = bytes(self._buffer)
            _pwrite_all(self._file(), data, self._written * self.entry_size)
            self._written += len(data) // self.entry_size
            self._buffer.clear()

    def flush(self) -> None:
        self.write_buffer()
        if self._fd >= 0:
            os.fdatasync(self._fd)
        elif self._created_unsynced:  # made by create() and never written: sync it as made
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:  # deleted (or renamed away) meanwhile: nothing to sync
                fd = -1
            if fd >= 0:
                try:
                    os.fdatasync(fd)
                finally:
                    os.close(fd)
        self._created_unsynced = False

    def _truncate_file(self, entries: int) -> None:
        """Make the file hold exactly ``entries`` entries (buffer already cleared)."""
        if entries < self._written or not self._loaded:
            os.ftruncate(self._file(), entries * self.entry_size)
            self._written = entries

    def rename(self, new_path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.replace(self.path, new_path)
        self.path = new_path

    def close(self) -> None:
        self._created_unsynced = False
        try:
            self.write_buffer()
        finally:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def discard(self) -> None:
        """Close without writing buffered entries."""
        self._buffer.clear()
        self.close()

    @property
    def size_in_bytes(self) -> int:
        return self.entries * self.entry_size

    @property
    def entries(self) -> int:
        raise NotImplementedError

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries


class OffsetIndex(_IndexFile):
    """Maps offsets to byte positions in the segment's log file."""

    entry_size = 8

    def __init__(self, path: str, base_offset: int, max_index_size: int) -> None:
        super().__init__(path, base_offset, max_index_size)
        self._rel = array("i")  # offsets relative to base_offset, as on disk
        self._positions = array("i")

    def _load_entries(self, data: bytes) -> None:
        a = array("i", data)  # interleaved (relative offset, position), big-endian
        if _LITTLE:
            a.byteswap()
        self._rel = a[0::2]
        self._positions = a[1::2]

    @property
    def entries(self) -> int:
        self._ensure_loaded()
        return len(self._rel)

    @property
    def is_full(self) -> bool:  # every append's roll check asks: one call, not three
        if not self._loaded:
            self._ensure_loaded()
        return len(self._rel) >= self.max_entries

    @property
    def last_offset(self) -> int:
        self._ensure_loaded()
        return self.base_offset + self._rel[-1] if self._rel else self.base_offset

    def entry(self, n: int) -> tuple[int, int]:
        self._ensure_loaded()
        return self.base_offset + self._rel[n], self._positions[n]

    def append(self, offset: int, position: int) -> None:
        """Add an entry; ``offset`` must be larger than the last one."""
        if self.is_full:
            raise CorruptIndexError(f"{self.path}: index is full ({self.entries} entries)")
        rel = offset - self.base_offset
        if self._rel and rel <= self._rel[-1]:
            raise CorruptIndexError(f"{self.path}: offset {offset} not larger than last "
                                    f"entry {self.base_offset + self._rel[-1]}")
        if not 0 <= rel <= INT32_MAX:
            raise CorruptIndexError(f"{self.path}: offset {offset} out of relative range")
        self._rel.append(rel)
        self._positions.append(position)
        self._buffer += _OFFSET_ENTRY.pack(rel, position)

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry with offset <= target; (base, 0) if none."""
        self._ensure_loaded()
        rel = target_offset - self.base_offset
        if rel < 0:
            return self.base_offset, 0
        i = bisect_right(self._rel, min(rel, INT32_MAX))
        if i == 0:
            return self.base_offset, 0
        return self.base_offset + self._rel[i - 1], self._positions[i - 1]

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        self._ensure_loaded()
        rel = offset - self.base_offset
        keep = 0 if rel <= 0 else bisect_left(self._rel, min(rel, INT32_MAX + 1))
        self.truncate_entries(keep)

    def truncate_entries(self, keep: int) -> None:
        self._ensure_loaded()
        if keep < len(self._rel):
            self._buffer.clear()
            self._truncate_file(min(keep, self._written))
            del self._rel[keep:]
            del self._positions[keep:]
            for i in range(self._written, keep):
                self._buffer += _OFFSET_ENTRY.pack(self._rel[i], self._positions[i])

    def reset(self) -> None:
        """Drop every entry (and whatever the file held, even if it did not load)."""
        self._loaded = True
        self._buffer.clear()
        self._rel = array("i")
        self._positions = array("i")
        self._written = 1  # force the file to be cut to 0
        self._truncate_file(0)

    def sanity_check(self, log_size: int) -> None:
        self._ensure_loaded()
        prev_rel = -1
        prev_pos = -1
        for rel, pos in zip(self._rel, self._positions):
            if rel <= prev_rel or pos <= prev_pos or pos >= log_size:
                raise CorruptIndexError(
                    f"{self.path}: bad entry (offset {self.base_offset + rel}, position {pos}) "
                    f"after relative offset {prev_rel}, position {prev_pos}; log size {log_size}")
            prev_rel, prev_pos = rel, pos


class TimeIndex(_IndexFile):
    """Maps timestamps to the offset from which a search for them may start."""

    entry_size = 12

    def __init__(self, path: str, base_offset: int, max_index_size: int) -> None:
        super().__init__(path, base_offset, max_index_size)
        self._timestamps = array("q")
        self._rel = array("i")

    def _load_entries(self, data: bytes) -> None:
        self._timestamps = array("q")
        self._rel = array("i")
        for ts, rel in _TIME_ENTRY.iter_unpack(data):
            self._timestamps.append(ts)
            self._rel.append(rel)

    @property
    def entries(self) -> int:
        self._ensure_loaded()
        return len(self._rel)

    @property
    def is_full(self) -> bool:  # every append's roll check asks: one call, not three
        if not self._loaded:
            self._ensure_loaded()
        return len(self._rel) >= self.max_entries

    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry; (-1, base) when empty."""
        self._ensure_loaded()
        if not self._rel:
            return -1, self.base_offset
        return self._timestamps[-1], self.base_offset + self._rel[-1]

    def entry(self, n: int) -> tuple[int, int]:
        self._ensure_loaded()
        return self._timestamps[n], self.base_offset + self._rel[n]

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> bool:
        """Add (timestamp, offset) if ``timestamp`` is larger than the last entry's."""
        self._ensure_loaded()
        if timestamp < 0 or (self._timestamps and timestamp <= self._timestamps[-1]):
            return False
        if not skip_full_check and self.is_full:
            return False
        rel = offset - self.base_offset
        if self._rel and rel < self._rel[-1]:
            raise CorruptIndexError(f"{self.path}: offset {offset} smaller than last entry "
                                    f"{self.base_offset + self._rel[-1]}")
        if not 0 <= rel <= INT32_MAX:
            raise CorruptIndexError(f"{self.path}: offset {offset} out of relative range")
        self._timestamps.append(timestamp)
        self._rel.append(rel)
        self._buffer += _TIME_ENTRY.pack(timestamp, rel)
        return True

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the last entry with timestamp <= target; (-1, base) if none."""
        self._ensure_loaded()
        i = bisect_right(self._timestamps, target_timestamp)
        if i == 0:
            return -1, self.base_offset
        return self._timestamps[i - 1], self.base_offset + self._rel[i - 1]

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        self._ensure_loaded()
        rel = offset - self.base_offset
        keep = 0 if rel <= 0 else bisect_left(self._rel, min(rel, INT32_MAX + 1))
        self.truncate_entries(keep)

    def truncate_entries(self, keep: int) -> None:
        self._ensure_loaded()
        if keep < len(self._rel):
            self._buffer.clear()
            self._truncate_file(min(keep, self._written))
            del self._timestamps[keep:]
            del self._rel[keep:]
            for i in range(self._written, keep):
                self._buffer += _TIME_ENTRY.pack(self._timestamps[i], self._rel[i])

    def reset(self) -> None:
        self._loaded = True
        self._buffer.clear()
        self._timestamps = array("q")
        self._rel = array("i")
        self._written = 1
        self._truncate_file(0)

    def sanity_check(self, last_offset: int) -> None:
        self._ensure_loaded()
        prev_ts = -1
        prev_rel = 0
        last_rel = last_offset - self.base_offset
        for ts, rel in zip(self._timestamps, self._rel):
            if ts <= prev_ts or rel < prev_rel or rel > last_rel:
                raise CorruptIndexError(
                    f"{self.path}: bad entry (timestamp {ts}, offset {self.base_offset + rel}) "
                    f"after timestamp {prev_ts}, relative offset {prev_rel}; last log offset "
                    f"{last_offset}")
            prev_ts, prev_rel = ts, rel


def _pwrite_all(fd: int, data: bytes | bytearray | memoryview, position: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, position)
        view = view[n:]
        position += n
