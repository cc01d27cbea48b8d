"""One log segment (Java: ``LogSegment``): ``<base>.log`` plus its ``.index``/``.timeindex``.

Files (``<base>`` = base offset, 20 digits zero-padded, as Kafka names them)::

    00000000000000001234.log        record batches, back to back, exactly as received
                                    (v2 header: 8-byte base offset, 4-byte length, ...)
    00000000000000001234.index      sparse offset -> position (see index.py)
    00000000000000001234.timeindex  sparse max timestamp -> offset
    00000000000000001234.txnindex   aborted transactions whose ABORT marker is here
                                    (only once there is one; transaction_index.py)

The log file is written with ``os.pwrite`` at the segment's known size and read with
``os.pread``; nothing is buffered in user space, so a batch is in the page cache (and
survives a process kill) as soon as ``append`` returns.  ``flush`` makes it durable
(``fdatasync``).  Finding an offset: the offset index gives the position of a batch at or
before it, then a short scan of batch headers (at most ``index.interval.bytes``, usually one
``pread``) finds the first batch whose last offset is >= the target.

Indexes are checked on first use (``sanity_check``); one that fails is rebuilt from the log.
Recovery (``recover``) re-reads every batch from position 0 and checks it (size sane,
CRC/magic/count via ``validate_batch``, offsets increasing and inside the segment),
rebuilding the indexes along the way; everything from the first bad byte on is truncated.

Not thread-safe on its own: the owning ``Log`` calls everything under its lock, except
``pread``/``open_file``/``sync`` which may run on any thread.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
from collections.abc import Iterator, Sequence
from typing import BinaryIO, NamedTuple

from millrace.common.errors import CorruptBatchError, KafkaStorageError
from millrace.record.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    RecordBatch,
    read_header,
    validate_batch,
)
from millrace.storage.config import LogConfig
from millrace.storage.index import INT32_MAX, CorruptIndexError, OffsetIndex, TimeIndex
from millrace.storage.info import FetchDataInfo, LogOffsetMetadata, TimestampAndOffset
from millrace.storage.transaction_index import (
    TXN_INDEX_SUFFIX,
    AbortedTxn,
    CompletedTxn,
    TransactionIndex,
    TxnIndexSearchResult,
)

log = logging.getLogger("millrace.storage")

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_SCAN_CHUNK = 16 * 1024
_RECOVER_CHUNK = 1024 * 1024


def file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


class AppendedBatch(NamedTuple):
    """Per-batch facts an appender already knows: where the batch is in the appended buffer,
    its size, its last offset and its max timestamp."""

    position: int
    size: int
    last_offset: int
    max_timestamp: int


class LogSegment:
    """A segment of a partition log.  Owned by its ``Log``."""

    def __init__(self, dir: str, base_offset: int, config: LogConfig, *, now_ms: int,
                 suffix: str = "", create: bool = True) -> None:
        self.dir = dir
        self.base_offset = base_offset
        self._index_interval = config.index_interval_bytes
        self._roll_jitter_ms = (random.randrange(config.segment_jitter_ms)
                                if config.segment_jitter_ms > 0 else 0)
        self._log_path = os.path.join(dir, file_name(base_offset, LOG_SUFFIX) + suffix)
        self._fd = os.open(self._log_path, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
        self._offset_index = OffsetIndex(
            os.path.join(dir, file_name(base_offset, INDEX_SUFFIX) + suffix),
            base_offset, config.segment_index_bytes)
        self._time_index = TimeIndex(
            os.path.join(dir, file_name(base_offset, TIME_INDEX_SUFFIX) + suffix),
            base_offset, config.segment_index_bytes)
        self._txn_index = TransactionIndex(
            os.path.join(dir, file_name(base_offset, TXN_INDEX_SUFFIX) + suffix), base_offset)
        try:
            st = os.fstat(self._fd)
            if create:
                self._offset_index.create()
                self._time_index.create()
        except BaseException:
            self.close_handlers()
            raise
        self._size = st.st_size
        self._created_ms = now_ms if self._size == 0 else int(st.st_mtime * 1000)
        self._bytes_since_last_index_entry = 0
        self._rolling_based_timestamp: int | None = None
        self._max_timestamp: int | None = None  # loaded lazily from the time index
        self._offset_of_max_timestamp = base_offset
        self._checked = False  # indexes sanity-checked (or rebuilt)

    # ------------------------------------------------------------------ properties
    @property
    def path(self) -> str:
        return self._log_path

    @property
    def offset_index(self) -> OffsetIndex:
        self._ensure_indexes()
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        self._ensure_indexes()
        return self._time_index

    @property
    def txn_index(self) -> TransactionIndex:
        return self._txn_index

    @property
    def size(self) -> int:
        return self._size

    @property
    def closed(self) -> bool:
        return self._fd < 0

    @property
    def max_timestamp(self) -> int:
        """Largest record timestamp appended (-1 if none is known)."""
        self._ensure_indexes()
        if self._max_timestamp is None:
            self._max_timestamp, self._offset_of_max_timestamp = self._time_index.last_entry()
        return self._max_timestamp

    @property
    def offset_of_max_timestamp(self) -> int:
        _ = self.max_timestamp
        return self._offset_of_max_timestamp

    @property
    def largest_timestamp(self) -> int:
        """What retention compares with: the max timestamp, else the file's mtime."""
        ts = self.max_timestamp
        if ts >= 0:
            return ts
        try:
            return int(os.stat(self._log_path).st_mtime * 1000)
        except FileNotFoundError:
            return -1

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self._size}, path={self.path!r})"

    def _ensure_indexes(self) -> None:
        if self._checked:
            return
        self._checked = True
        try:
            self.sanity_check()
        except CorruptIndexError as e:
            log.warning("%s: rebuilding indexes: %s", self._log_path, e)
            self.recover()

    # ------------------------------------------------------------------ writing
    def append(self, data: bytes | bytearray | memoryview, batches: Sequence[AppendedBatch]) -> None:
        """Write ``data`` (whole batches, offsets already assigned) at the end of the segment
        and add index entries.  One ``pwrite`` for the whole buffer; per-batch work is only
        arithmetic.  On an I/O error the partial write is cut off and KafkaStorageError
        raised, so the log never keeps bytes the caller was told failed."""
        if not batches:
            return
        physical = self._size
        max_ts = self.max_timestamp
        try:
            _pwrite_all(self._fd, data, physical)
        except OSError as e:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, physical)
            raise KafkaStorageError(f"append to {self._log_path} failed: {e}") from e
        if physical == 0:
            self._rolling_based_timestamp = batches[0].max_timestamp
        oi, ti = self._offset_index, self._time_index
        interval = self._index_interval
        since = self._bytes_since_last_index_entry
        off_of_max = self._offset_of_max_timestamp
        for b in batches:
            if b.max_timestamp > max_ts:
                max_ts = b.max_timestamp
                off_of_max = b.last_offset
            if since > interval:
                oi.append(b.last_offset, physical + b.position)
                ti.maybe_append(max_ts, off_of_max)
                since = 0
            since += b.size
        self._bytes_since_last_index_entry = since
        self._max_timestamp, self._offset_of_max_timestamp = max_ts, off_of_max
        self._size = physical + len(data)

    def update_txn_index(self, completed: CompletedTxn, last_stable_offset: int) -> None:
        """A marker in this segment ended ``completed``: an aborted one is indexed here
        (Java ``LogSegment.updateTxnIndex``)."""
        if completed.is_aborted:
            self._txn_index.append(AbortedTxn(completed.producer_id, completed.first_offset,
                                              completed.last_offset, last_stable_offset))

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int
                             ) -> TxnIndexSearchResult:
        return self._txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)

    def should_roll(self, config: LogConfig, messages_size: int, max_timestamp: int,
                    max_offset: int, now_ms: int) -> bool:
        """Kafka's roll rule: full by size, old by time, an index full, or offsets that no
        longer fit a 32-bit relative offset.  An empty segment never rolls."""
        if self._size == 0:
            return False
        if self._size > config.segment_bytes - messages_size:
            return True
        waited = self.time_waited_for_roll(now_ms, max_timestamp)
        if waited > config.segment_ms - self._roll_jitter_ms:
            return True
        return (self.offset_index.is_full or self.time_index.is_full
                or not 0 <= max_offset - self.base_offset <= INT32_MAX)

    def time_waited_for_roll(self, now_ms: int, max_timestamp_in_messages: int) -> int:
        """Age for segment.ms: record time since the first batch when it has a timestamp,
        else wall time since the segment was created (Kafka's rule)."""
        if self._rolling_based_timestamp is None and self._size > 0:
            first = next(self._iter_headers(0), None)
            self._rolling_based_timestamp = first[1].max_timestamp if first else -1
        rb = self._rolling_based_timestamp
        if rb is not None and rb >= 0:
            return max_timestamp_in_messages - rb
        return now_ms - self._created_ms

    def on_become_inactive(self) -> None:
        """Called when a newer segment is rolled: record the final max timestamp."""
        ts = self.max_timestamp
        self._time_index.maybe_append(ts, self._offset_of_max_timestamp, skip_full_check=True)

    def write_index_buffers(self) -> None:
        """Write buffered index entries to their files (no fsync).  Under the log's lock."""
        self._offset_index.write_buffer()
        self._time_index.write_buffer()

    def sync(self) -> None:
        """fdatasync the log and index files (may run outside the log's lock)."""
        try:
            os.fdatasync(self._fd)
            self._offset_index.flush()
            self._time_index.flush()
            self._txn_index.flush()
        except OSError as e:
            if self.closed:
                return
            raise KafkaStorageError(f"flush of {self._log_path} failed: {e}") from e

    def flush(self) -> None:
        self.write_index_buffers()
        self.sync()

    # ------------------------------------------------------------------ reading
    def pread(self, position: int, length: int) -> bytes:
        fd = self._fd
        if fd < 0:
            raise KafkaStorageError(f"segment {self._log_path} is closed")
        chunks = []
        while length > 0:
            chunk = os.pread(fd, length, position)
            if not chunk:
                break
            chunks.append(chunk)
            position += len(chunk)
            length -= len(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def open_file(self) -> BinaryIO:
        """A read-only file object of its own on the log file (even once deleted).

        Its own file offset matters: asyncio's ``sendfile`` fallback (every TLS transport)
        seeks (not at offset 0) and then reads at the file offset, from a worker thread,
        across awaits.  A ``dup`` of the segment's descriptor shares one offset with every
        other reader, so concurrent or successive fetches over TLS sent each other's
        bytes (CRC mismatches on followers, stalled consumers).  Reopening
        ``/proc/self/fd/<fd>`` makes a new open file description on the same inode."""
        fd = self._fd
        if fd < 0:
            raise KafkaStorageError(f"segment {self._log_path} is closed")
        try:
            own = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:  # no /proc (not Linux): a shared offset, as before
            own = os.dup(fd)
        return os.fdopen(own, "rb", buffering=0)

    def _iter_headers(self, start: int, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch from ``start`` up to ``end`` (default: the
        segment size), reading in chunks; stops at a partial or unreadable header."""
        end = self._size if end is None else end
        pos = start
        buf = b""
        buf_start = 0
        while pos + HEADER_SIZE <= end:
            rel = pos - buf_start
            if rel < 0 or rel + HEADER_SIZE > len(buf):
                buf = self.pread(pos, min(_SCAN_CHUNK, end - pos))
                buf_start, rel = pos, 0
                if len(buf) < HEADER_SIZE:
                    return
            try:
                header = read_header(buf, rel)
            except CorruptBatchError:
                return
            if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
                return
            yield pos, header
            pos += header.size

    def iter_batches(self, start_position: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of every batch from ``start_position``."""
        self._ensure_indexes()
        return self._iter_headers(start_position)

    def _translate(self, offset: int) -> tuple[int, BatchHeader] | None:
        _, pos = self._offset_index.lookup(offset)
        for p, header in self._iter_headers(pos):
            if header.last_offset >= offset:
                return p, header
        return None

    def translate_offset(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= ``offset``."""
        self._ensure_indexes()
        return self._translate(offset)

    def read(self, start_offset: int, max_size: int, max_position: int | None = None,
             min_one_message: bool = False) -> FetchDataInfo | None:
        """Up to ``max_size`` bytes from the batch holding ``start_offset``, ending before
        ``max_position``; None if the segment has no batch at or after the offset.

        With ``min_one_message`` the first batch is returned whole even if larger than
        ``max_size``; without, a first batch larger than ``max_size`` gives an empty result
        with ``first_entry_incomplete`` (Kafka returns the cut bytes, which no client uses).
        The last batch of the range may be cut short by ``max_size``, as in Kafka.
        """
        if max_size < 0:
            raise ValueError(f"invalid max size {max_size}")
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        pos, header = found
        meta = LogOffsetMetadata(start_offset, self.base_offset, pos)
        max_position = self._size if max_position is None else max_position
        if pos >= max_position:
            return FetchDataInfo(meta)
        if min_one_message:
            max_size = max(max_size, header.size)
        elif header.size > max_size:
            return FetchDataInfo(meta, first_entry_incomplete=True)
        return FetchDataInfo(meta, self, pos, min(max_position - pos, max_size))

    def read_next_offset(self) -> int:
        """The offset after the last batch (the base offset for an empty segment)."""
        self._ensure_indexes()
        return self._next_offset()

    def _next_offset(self) -> int:
        _, pos = self._offset_index.lookup(1 << 62)
        nxt = self.base_offset
        for _, header in self._iter_headers(pos):
            nxt = header.next_offset
        return nxt

    def batch_at(self, position: int) -> tuple[BatchHeader, bytes]:
        """The header and full bytes of the batch at ``position``."""
        header = read_header(self.pread(position, HEADER_SIZE), 0)
        return header, self.pread(position, header.size)

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int
                                 ) -> TimestampAndOffset | None:
        """The first record with timestamp >= ``timestamp`` and offset >= ``starting_offset``."""
        _, ts_offset = self.time_index.lookup(timestamp)
        _, pos = self._offset_index.lookup(max(ts_offset, starting_offset))
        for p, header in self._iter_headers(pos):
            if header.max_timestamp < timestamp or header.last_offset < starting_offset:
                continue
            _, data = self.batch_at(p)
            for rec in RecordBatch(data, 0).records():
                if rec.timestamp >= timestamp and rec.offset >= starting_offset:
                    return TimestampAndOffset(rec.timestamp, rec.offset,
                                              header.partition_leader_epoch)
        return None

    # ------------------------------------------------------------------ truncation/recovery
    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose last offset is >= ``offset`` (a batch straddling it goes
        too, so the log ends on a batch boundary at or below ``offset``); returns bytes
        removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        pos = found[0]
        removed = self._size - pos
        self._offset_index.truncate_to(found[1].base_offset)
        self._time_index.truncate_to(found[1].base_offset)
        self._txn_index.truncate_to(found[1].base_offset)
        os.ftruncate(self._fd, pos)
        self._size = pos
        self._bytes_since_last_index_entry = 0
        if pos == 0:
            self._rolling_based_timestamp = None
        self._recompute_max_timestamp()
        return removed

    def _recompute_max_timestamp(self) -> None:
        """Max timestamp from the last time index entry plus the batches after it."""
        ts, off = self._time_index.last_entry()
        _, pos = self._offset_index.lookup(off)
        for _, header in self._iter_headers(pos):
            if header.max_timestamp > ts:
                ts, off = header.max_timestamp, header.last_offset
        self._max_timestamp, self._offset_of_max_timestamp = ts, off

    def sanity_check(self) -> None:
        """Raise CorruptIndexError if an index cannot be trusted for this log: structural
        checks on both; the last offset entry must point at the batch it names, and the
        last time entry must name the last offset of a batch with that max timestamp (how
        ``append`` writes them) -- a zeroed one-entry time index passes the structural
        check, and would make the segment's max timestamp 0."""
        self._offset_index.sanity_check(self._size)
        oi = self._offset_index
        if oi.entries:
            off, pos = oi.entry(oi.entries - 1)
            header = next(self._iter_headers(pos), (0, None))[1]
            if header is None or header.last_offset != off:
                raise CorruptIndexError(f"{oi.path}: last entry (offset {off}, position {pos}) "
                                        "does not name a batch of the log")
        ti = self._time_index
        if ti.entries:
            ti.sanity_check(self._next_offset() - 1)
            ts, off = ti.last_entry()
            found = self._translate(off)
            if found is None or found[1].last_offset != off or found[1].max_timestamp != ts:
                raise CorruptIndexError(f"{ti.path}: last entry (timestamp {ts}, offset {off}) "
                                        "does not name a batch with that timestamp")

    def recover(self, max_batch_size: int | None = None) -> int:
        """Rebuild both indexes from the log, checking every batch; truncate the log at the
        first invalid byte.  Returns the number of bytes truncated."""
        self._checked = True
        self._offset_index.reset()
        self._time_index.reset()
        self._bytes_since_last_index_entry = 0
        self._max_timestamp, self._offset_of_max_timestamp = -1, self.base_offset
        self._rolling_based_timestamp = None
        file_size = os.fstat(self._fd).st_size
        valid = 0
        next_min_offset = self.base_offset
        buf = b""
        buf_start = 0
        reason = ""
        while valid < file_size:
            remaining = file_size - valid
            if remaining < HEADER_SIZE:
                reason = f"{remaining} trailing bytes, shorter than a batch header"
                break
            rel = valid - buf_start
            if rel < 0 or rel + HEADER_SIZE > len(buf):
                buf = self.pread(valid, min(_RECOVER_CHUNK, remaining))
                buf_start, rel = valid, 0
            try:
                header = read_header(buf, rel)
            except CorruptBatchError as e:
                reason = str(e)
                break
            size = header.size
            if size < HEADER_SIZE or size > remaining or (
                    max_batch_size is not None and size > max_batch_size):
                reason = f"batch claims {size} bytes, {remaining} left"
                break
            if rel + size > len(buf):
                buf = self.pread(valid, max(min(_RECOVER_CHUNK, remaining), size))
                buf_start, rel = valid, 0
            try:
                validate_batch(buf, rel, check_offsets=False)
            except CorruptBatchError as e:
                reason = str(e)
                break
            last_offset = header.last_offset
            if (header.base_offset < next_min_offset or header.last_offset_delta < 0
                    or last_offset - self.base_offset > INT32_MAX):
                reason = (f"batch has offsets {header.base_offset}..{last_offset}, expected "
                          f">= {next_min_offset}")
                break
            self._size = valid
            self.append_recovered(size, last_offset, header.max_timestamp)
            next_min_offset = last_offset + 1
            valid += size
        self._size = valid
        truncated = file_size - valid
        if truncated:
            log.warning("%s: truncating %d bytes at position %d: %s", self._log_path,
                        truncated, valid, reason)
            os.ftruncate(self._fd, valid)
        self.on_become_inactive()
        self.write_index_buffers()
        return truncated

    def append_recovered(self, size: int, last_offset: int, max_timestamp: int) -> None:
        """Index bookkeeping for a batch already in the file at position ``size``."""
        if self._size == 0:
            self._rolling_based_timestamp = max_timestamp
        assert self._max_timestamp is not None
        if max_timestamp > self._max_timestamp:
            self._max_timestamp = max_timestamp
            self._offset_of_max_timestamp = last_offset
        if self._bytes_since_last_index_entry > self._index_interval:
            if not self._offset_index.is_full:
                self._offset_index.append(last_offset, self._size)
            self._time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += size

    # ------------------------------------------------------------------ file lifecycle
    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename the three files (e.g. ``.log`` -> ``.log.deleted``); descriptors stay open."""
        def renamed(path: str) -> str:
            if old_suffix and path.endswith(old_suffix):
                path = path[: len(path) - len(old_suffix)]
            return path + new_suffix

        new_log = renamed(self._log_path)
        os.replace(self._log_path, new_log)
        self._log_path = new_log
        self._offset_index.rename(renamed(self._offset_index.path))
        self._time_index.rename(renamed(self._time_index.path))
        self._txn_index.rename(renamed(self._txn_index.path))

    def close(self) -> None:
        """Record the final timestamp entry, write index buffers, close the files."""
        try:
            if self._fd >= 0 and self._checked:
                self.on_become_inactive()
        finally:
            self._offset_index.close()
            self._time_index.close()
            self._txn_index.close()
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def close_handlers(self) -> None:
        """Close the files without writing anything (for segments being deleted)."""
        self._offset_index.discard()
        self._time_index.discard()
        self._txn_index.close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        """Close and unlink the files."""
        paths = (self._log_path, self._offset_index.path, self._time_index.path,
                 self._txn_index.path)
        self.close_handlers()
        for p in paths:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(p)


def _pwrite_all(fd: int, data: bytes | bytearray | memoryview, position: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, position)
        view = view[n:]
        position += n
