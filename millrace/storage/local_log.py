"""The segments of one partition directory (Java: ``LocalLog``).

Layout: ``<log.dir>/<topic>-<partition>/`` holding segments named by base offset (see
``segment.py``), sorted by base offset; the last one is the *active* segment, the only one
appended to.  A ``LocalLog`` keeps the segment list and two offsets:

* ``log_end_offset`` (LEO): the offset the next appended record gets;
* ``recovery_point``: everything below it is fsync'd; recovery after a crash starts at the
  segment holding it.  It only moves after an ``fdatasync`` (``mark_flushed``).

It rolls, appends whole buffers to the active segment, reads byte ranges, truncates,
flushes and deletes segments.  What the offsets mean to producers and consumers (log
start offset, high watermark, producer state, batch validation, retention policy) is the
business of ``Log`` (Java: ``UnifiedLog``), which owns one ``LocalLog``.

Deletion is deferred: a segment taken out of the list is renamed to ``*.deleted`` and its
files are removed after ``file.delete.delay.ms``; its descriptors stay open until then, so
a ``FetchDataInfo`` handed out before keeps reading valid bytes.

Not thread-safe: the owning ``Log`` calls everything under its lock, except ``sync`` (the
fsync of the segments picked by ``segments_to_flush``), which it runs outside the lock.
"""

from __future__ import annotations

import logging
import os
import shutil
from bisect import bisect_right
from collections.abc import Callable, Sequence

from millrace.common.time import Time
from millrace.record.batch import BatchHeader
from millrace.storage.checkpoint import fsync_dir
from millrace.storage.config import LogConfig
from millrace.storage.info import FetchDataInfo, LogOffsetMetadata, TimestampAndOffset
from millrace.storage.segment import DELETED_SUFFIX, SWAP_SUFFIX, AppendedBatch, LogSegment

log = logging.getLogger("millrace.storage")


class LocalLog:
    """The segment list of one partition (see the module docstring).  Owned by a ``Log``,
    which calls it under its lock."""

    def __init__(self, dir: str, topic: str, partition: int, config: LogConfig,
                 segments: list[LogSegment], *, next_offset: int, recovery_point: int,
                 now_ms: int, time: Time) -> None:
        self.dir = dir
        self.topic = topic
        self.partition = partition
        self.config = config
        self._time = time
        self._segments = segments
        self._bases: list[int] = [s.base_offset for s in segments]
        self._next_offset = next_offset
        self.recovery_point = recovery_point
        self.last_flush_ms = now_ms
        self._dir_dirty = False
        self._pending_deletes: list[tuple[int, LogSegment]] = []

    # ------------------------------------------------------------------ state
    @property
    def segments(self) -> list[LogSegment]:
        """The live list, oldest first (read it under the owner's lock; do not modify)."""
        return self._segments

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self._next_offset

    @property
    def size(self) -> int:
        return sum(s.size for s in self._segments)

    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        active = self._segments[-1]
        return LogOffsetMetadata(self._next_offset, active.base_offset, active.size)

    def segment_index(self, offset: int) -> int:
        """Index of the segment that would hold ``offset`` (the first one below its base)."""
        return max(bisect_right(self._bases, offset) - 1, 0)

    def segments_from(self, offset: int) -> list[LogSegment]:
        """The segment that would hold ``offset`` and every later one."""
        return self._segments[self.segment_index(offset):]

    def find_batch(self, offset: int) -> tuple[LogSegment, int, BatchHeader] | None:
        """The segment, position and header of the first batch whose last offset is >=
        ``offset``, searching from the segment that would hold it."""
        for seg in self.segments_from(offset):
            found = seg.translate_offset(offset)
            if found is not None:
                return seg, found[0], found[1]
        return None

    def offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """Where ``offset`` is: its segment and the position of the batch holding it (the
        log end's position for offsets at or past the log end)."""
        if offset >= self._next_offset:
            return self.log_end_offset_metadata()
        found = self.find_batch(offset)
        if found is not None:
            return LogOffsetMetadata(offset, found[0].base_offset, found[1])
        active = self._segments[-1]
        return LogOffsetMetadata(offset, active.base_offset, active.size)

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int
                                 ) -> TimestampAndOffset | None:
        """The first record at or after ``start_offset`` with a timestamp >= ``timestamp``."""
        for seg in self._segments:
            if seg.size and seg.largest_timestamp >= timestamp:
                found = seg.find_offset_by_timestamp(timestamp, start_offset)
                if found is not None:
                    return found
        return None

    def offset_of_max_timestamp(self, start_offset: int) -> TimestampAndOffset | None:
        """The record with the largest timestamp (the first segment holding it wins)."""
        best: LogSegment | None = None
        for seg in self._segments:
            if seg.size and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        if best is None or best.max_timestamp < 0:
            return None
        return best.find_offset_by_timestamp(best.max_timestamp,
                                             max(start_offset, best.base_offset))

    # ------------------------------------------------------------------ append / roll / read
    def should_roll(self, size: int, max_ts: int, max_offset: int, first_offset: int,
                    now_ms: int) -> bool:
        """Whether an append of ``size`` bytes at [first_offset, max_offset] needs a new
        active segment: the segment's roll rule, or an empty active segment whose base is
        too far below the batch for 32-bit relative offsets."""
        active = self._segments[-1]
        if active.should_roll(self.config, size, max_ts, max_offset, now_ms):
            return True
        return active.size == 0 and active.base_offset < first_offset and (
            max_offset - active.base_offset > (1 << 31) - 1)

    def append(self, records: bytes | bytearray | memoryview,
               entries: Sequence[AppendedBatch], last_offset: int) -> None:
        """Write ``records`` (batches with offsets assigned, described by ``entries``) to
        the active segment; the log end moves past ``last_offset``."""
        self._segments[-1].append(records, entries)
        self._next_offset = last_offset + 1

    def roll(self, new_base: int, now_ms: int) -> LogSegment:
        """Make a segment starting at ``new_base`` (at least the log end) the active one and
        return it.  An empty active segment is kept if it already starts there, otherwise
        replaced; a non-empty one becomes inactive."""
        new_base = max(new_base, self._next_offset)
        active = self._segments[-1]
        if active.size == 0:
            if active.base_offset == new_base:
                return active
            # an empty active segment below the new base: replace it
            self._segments.pop()
            self._bases.pop()
            active.delete()
        else:
            active.on_become_inactive()
            active.write_index_buffers()
        seg = LogSegment(self.dir, new_base, self.config, now_ms=now_ms, create=True)
        self._segments.append(seg)
        self._bases.append(new_base)
        self._dir_dirty = True
        log.info("%s-%d: rolled new segment at offset %d", self.topic, self.partition, new_base)
        return seg

    def read(self, fetch_offset: int, max_bytes: int, bound: LogOffsetMetadata,
             min_one_message: bool) -> FetchDataInfo:
        """Batches from the one holding ``fetch_offset`` (within the log), at most
        ``max_bytes`` (the first batch whole with ``min_one_message``), none at or past
        ``bound``."""
        for seg in self.segments_from(fetch_offset):
            if seg.base_offset > bound.segment_base_offset:
                break
            max_pos = (bound.relative_position_in_segment
                       if seg.base_offset == bound.segment_base_offset else seg.size)
            info = seg.read(fetch_offset, max_bytes, max_pos, min_one_message)
            if info is not None:
                return info
        return FetchDataInfo.empty(fetch_offset)

    # ------------------------------------------------------------------ truncation
    def truncate_to(self, offset: int) -> None:
        """Remove every record at or after ``offset`` (below the log end, not below the
        first segment's base)."""
        log.info("%s-%d: truncating log from %d to %d", self.topic, self.partition,
                 self._next_offset, offset)
        doomed = []
        while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
            doomed.append(self._segments.pop())
            self._bases.pop()
        self.schedule_delete(doomed, None, "truncation")
        active = self._segments[-1]
        active.truncate_to(offset)
        self._next_offset = max(active.read_next_offset(), active.base_offset)
        self.recovery_point = min(self.recovery_point, self._next_offset)

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and start empty at ``new_offset``."""
        log.info("%s-%d: truncating fully and starting at %d", self.topic, self.partition,
                 new_offset)
        self.schedule_delete(self._segments, None, "full truncation")
        seg = LogSegment(self.dir, new_offset, self.config,
                         now_ms=self._time.milliseconds(), create=True)
        self._segments = [seg]
        self._bases = [new_offset]
        self._next_offset = new_offset
        self.recovery_point = new_offset
        self._dir_dirty = True

    # ------------------------------------------------------------------ deletion
    def deletable_prefix(self, predicate: Callable[[LogSegment, LogSegment], bool],
                         high_watermark: int) -> int:
        """How many of the oldest segments may go: each with ``predicate(segment, next)``
        true and the next one starting at or below ``high_watermark`` (never the active
        one)."""
        count = 0
        for i in range(len(self._segments) - 1):
            seg, nxt = self._segments[i], self._segments[i + 1]
            if nxt.base_offset > high_watermark or not predicate(seg, nxt):
                break
            count += 1
        return count

    def remove_oldest(self, count: int) -> list[LogSegment]:
        """Take the first ``count`` segments out of the list (then ``schedule_delete``
        them); the caller keeps at least the active one."""
        doomed = self._segments[:count]
        del self._segments[:count]
        del self._bases[:count]
        return doomed

    def schedule_delete(self, doomed: list[LogSegment], now_ms: int | None, reason: str) -> None:
        """Rename segments already removed from the list to ``*.deleted`` and remove their
        files after file.delete.delay.ms (their descriptors stay open until then, so reads
        handed out before keep working)."""
        now = self._time.milliseconds() if now_ms is None else now_ms
        delay = self.config.file_delete_delay_ms
        for seg in doomed:
            log.info("%s-%d: deleting segment %d (%d bytes): %s", self.topic, self.partition,
                     seg.base_offset, seg.size, reason)
            seg.change_file_suffixes("", DELETED_SUFFIX)
            self._pending_deletes.append((now + delay, seg))
        if doomed:
            for seg in self.pop_due_deletes(now):
                seg.delete()

    def pop_due_deletes(self, now_ms: int, force: bool = False) -> list[LogSegment]:
        """Forget the deleted segments whose file.delete.delay.ms has passed (all with
        ``force``) and return them; the caller removes their files."""
        due = [seg for at, seg in self._pending_deletes if force or at <= now_ms]
        self._pending_deletes = [(at, seg) for at, seg in self._pending_deletes
                                 if not (force or at <= now_ms)]
        return due

    def replace_segments(self, new: LogSegment, old: list[LogSegment], now_ms: int) -> bool:
        """Swap ``old`` (consecutive segments, not the active one) for ``new``, whose files
        carry the ``.swap`` suffix.  False if the list no longer holds them so."""
        try:
            i = next(k for k, s in enumerate(self._segments) if s is old[0])
        except StopIteration:
            return False
        if self._segments[i:i + len(old)] != old or i + len(old) >= len(self._segments):
            return False
        self.schedule_delete(old, now_ms, "replaced by a cleaned segment")
        new.change_file_suffixes(SWAP_SUFFIX, "")
        self._segments[i:i + len(old)] = [new]
        self._bases[i:i + len(old)] = [new.base_offset]
        self._dir_dirty = True
        return True

    # ------------------------------------------------------------------ flush / close
    def segments_to_flush(self, upto: int) -> tuple[list[LogSegment], bool]:
        """The segments holding offsets in [recovery point, ``upto``), with their index
        buffers written, and whether the directory needs an fsync (the flag is cleared).
        Under the owner's lock; pass the result to ``sync`` outside it."""
        first = self.segment_index(self.recovery_point)
        last = self.segment_index(max(upto - 1, 0))
        todo = self._segments[first:last + 1]
        for seg in todo:
            seg.write_index_buffers()
        dir_dirty, self._dir_dirty = self._dir_dirty, False
        return todo, dir_dirty

    def sync(self, segments: list[LogSegment], dir_dirty: bool) -> None:
        """fsync ``segments`` and, if ``dir_dirty``, the directory (outside the lock)."""
        for seg in segments:
            seg.sync()
        if dir_dirty:
            fsync_dir(self.dir)

    def mark_flushed(self, upto: int, now_ms: int) -> None:
        if upto > self.recovery_point:
            self.recovery_point = upto
        self.last_flush_ms = now_ms

    def close(self, sync: bool) -> None:
        """Close every segment and the descriptors of those waiting for deletion; with
        ``sync`` the active segment's final index entries are fsync'd first."""
        active = self._segments[-1]
        try:
            if sync:
                active.on_become_inactive()
                active.flush()
        finally:
            for seg in self._segments:
                seg.close()
            for _, seg in self._pending_deletes:
                seg.close_handlers()
            self._pending_deletes.clear()

    def close_handlers(self) -> None:
        """Close every file without writing anything (the log dir is offline: buffered
        index entries are dropped; the next start rebuilds what it needs from the log)."""
        for seg in self._segments:
            seg.close_handlers()
        for _, seg in self._pending_deletes:
            seg.close_handlers()
        self._pending_deletes.clear()

    def rename_dir(self, new_dir: str) -> None:
        """Move the (closed) directory."""
        os.replace(self.dir, new_dir)
        self.dir = new_dir

    def delete_dir(self) -> None:
        """Remove the (closed) directory and everything in it."""
        shutil.rmtree(self.dir, ignore_errors=True)
