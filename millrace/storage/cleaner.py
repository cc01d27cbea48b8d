"""Log compaction (Java: ``LogCleaner``, ``Cleaner``, ``LogCleanerManager``), steppable.

For logs whose ``cleanup.policy`` includes ``compact``, only the latest record of each key
is kept.  Each log has a *first dirty offset* (``cleaner-offset-checkpoint`` in its log
dir): records below it were compacted before, records from it on are new.  A log is
cleanable up to its first *uncleanable* segment: the active segment, a segment not entirely
below the last stable offset (the high watermark, or the first offset of the oldest
transaction still open or not yet replicated: an open transaction's records must not be
compacted before its outcome is known), or one with records younger than
``min.compaction.lag.ms``.

``clean_once(now_ms)`` picks the log with the largest dirty ratio (dirty bytes / cleanable
bytes) at or above ``min.cleanable.dirty.ratio`` (or one holding tombstones that have
expired), then:

1. builds the offset map: key -> offset of its latest record in the dirty range, leaving
   out control batches and the records of aborted transactions, so an aborted record never
   shadows the committed one before it;
2. groups the cleanable segments so each group fits one segment (``segment.bytes``, 32-bit
   relative offsets) and rewrites each group into ``<base>.log.cleaned``: a record survives
   if no later record has its key; a tombstone (null value) also needs to be younger than
   ``delete.retention.ms`` (by its timestamp); records without a key are dropped, the data
   batches of aborted transactions are dropped whole (read_committed never sees them), and
   control batches are kept with the segments' ``.txnindex`` entries;
3. fsyncs the new segment, renames it ``.swap`` and swaps it in under the log's lock (old
   segments become ``.deleted``); a crash at any point is finished or undone by the loader.

Batches are never re-encoded when all their records survive (the bytes are copied).  A
partly surviving batch is rebuilt with ``RecordBatchBuilder``: since that builder writes
offset deltas 0..n-1, each run of consecutive surviving offsets becomes its own batch, with
the original base offset, codec, timestamp type, producer id/epoch (sequence shifted to the
run) and partition leader epoch.  Every rewritten batch therefore satisfies
``lastOffsetDelta + 1 == recordsCount``.

Transactions.  Which batches are aborted is decided by the read_committed walk the consumer
uses (``AbortedTransactionFilter``): batches in offset order against the aborted
transactions ``(producer id, first offset)`` the log collects from its ``.txnindex`` files
for the range (Java: ``CleanedTransactionMetadata``).  Each walk starts at a segment base
and takes the transactions whose marker lies at or after it, so a transaction that began
in an earlier segment is still recognised.  Everything cleaned is below the last stable
offset, so every transaction it holds is complete (its marker may lie further on).

Not done (yet): the dedupe-buffer size cap (the map holds every dirty key), max.compaction.lag.ms,
removal of transaction markers (Kafka drops a marker once its transaction has no data left
and ``delete.retention.ms`` has passed, with its ``.txnindex`` entry; here every control
batch and every entry is carried into the cleaned segment for ever), and empty-batch
retention of producer state (Kafka keeps a producer's last batch, emptied, so its state
can be rebuilt from the log).  The
"expired tombstones" eligibility is remembered in memory only.

I/O errors: an ``OSError`` while cleaning or writing the checkpoint takes the log dir
offline through the log manager's ``LogDirFailureChannel`` (as Kafka's cleaner does); the
logs of an offline dir are never picked again.

Threading: no thread inside; the broker calls ``clean_once``.  Old segments are read with
``pread`` only (safe next to appends and fetches); the swap takes the log's lock and is
abandoned if the log changed meanwhile.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass

from millrace.common.errors import CorruptBatchError, KafkaStorageError
from millrace.common.time import SYSTEM_TIME, Time
from millrace.record.aborted_transactions import AbortedTransactionFilter
from millrace.record.batch import (
    BatchHeader,
    Record,
    RecordBatch,
    RecordBatchBuilder,
    TimestampType,
    iter_batches,
)
from millrace.storage.checkpoint import CLEANER_OFFSET_CHECKPOINT, OffsetCheckpointFile
from millrace.storage.log import Log
from millrace.storage.log_dir_failure_channel import io_error_of
from millrace.storage.log_manager import LogManager
from millrace.storage.segment import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    AppendedBatch,
    LogSegment,
    file_name,
)
from millrace.storage.transaction_index import TXN_INDEX_SUFFIX

log = logging.getLogger("millrace.storage.cleaner")

_READ_CHUNK = 1024 * 1024
_WRITE_CHUNK = 1024 * 1024
_INT32_MAX = (1 << 31) - 1


@dataclass(frozen=True)
class CleanResult:
    topic: str
    partition: int
    first_dirty_offset: int
    end_offset: int  # new first dirty offset
    bytes_read: int
    bytes_written: int
    records_read: int
    records_kept: int
    segments_before: int
    segments_after: int


@dataclass(frozen=True)
class _Candidate:
    log: Log
    first_dirty: int
    end_offset: int
    segments: tuple[LogSegment, ...]
    ratio: float


def _iter_segment_batches(seg: LogSegment) -> Iterator[tuple[BatchHeader, bytes]]:
    """Every whole batch of an (inactive) segment, read in chunks with pread only."""
    end = seg.size
    pos = 0
    while pos < end:
        chunk = seg.pread(pos, min(_READ_CHUNK, end - pos))
        if not chunk:
            break
        consumed = 0
        for p, h in iter_batches(chunk):
            yield h, chunk[p:p + h.size]
            consumed = p + h.size
        if consumed == 0:  # a batch larger than the chunk
            head = seg.pread(pos, 12)
            size = int.from_bytes(head[8:12], "big") + 12
            data = seg.pread(pos, size)
            batches = list(iter_batches(data))
            if not batches:
                break
            h = batches[0][1]
            yield h, data
            consumed = h.size
        pos += consumed


class LogCleaner:
    """Compacts the LogManager's compacted logs, one log per ``clean_once`` step."""

    def __init__(self, log_manager: LogManager, *, time: Time = SYSTEM_TIME) -> None:
        self.log_manager = log_manager
        self._time = time
        self._dirty: dict[tuple[str, int], int] | None = None
        self._tombstone_deadline: dict[tuple[str, int], int] = {}

    # ------------------------------------------------------------------ checkpoints
    def _first_dirty_map(self) -> dict[tuple[str, int], int]:
        if self._dirty is None:
            self._dirty = {}
            for d in self.log_manager.log_dirs:
                try:
                    self._dirty.update(OffsetCheckpointFile(
                        os.path.join(d, CLEANER_OFFSET_CHECKPOINT)).read())
                except Exception as e:  # a bad file only costs a re-clean
                    log.warning("ignoring %s in %s: %s", CLEANER_OFFSET_CHECKPOINT, d, e)
        return self._dirty

    def _write_checkpoints(self) -> None:
        dirty = self._first_dirty_map()
        for d, logs in self.log_manager.logs_by_dir().items():
            if not self.log_manager.is_online(d):
                continue
            entries = {(lg.topic, lg.partition): dirty[(lg.topic, lg.partition)]
                       for lg in logs if (lg.topic, lg.partition) in dirty}
            try:
                OffsetCheckpointFile(os.path.join(d, CLEANER_OFFSET_CHECKPOINT)).write(entries)
            except OSError as e:
                self.log_manager.failure_channel.maybe_add_offline_log_dir(
                    d, f"writing {CLEANER_OFFSET_CHECKPOINT} in log dir {d} failed", e)

    def first_dirty_offset(self, lg: Log) -> int:
        off = self._first_dirty_map().get((lg.topic, lg.partition), lg.log_start_offset)
        if off < lg.log_start_offset or off > lg.log_end_offset:
            off = lg.log_start_offset  # truncated or moved: start over
        return off

    # ------------------------------------------------------------------ choosing
    def _candidate(self, lg: Log, now: int) -> _Candidate | None:
        cfg = lg.config
        if not cfg.compact or lg.closed or lg.offline:
            return None
        stats = lg.segment_stats()
        segs = [st[0] for st in stats]
        first_dirty = self.first_dirty_offset(lg)
        lso = lg.last_stable_offset
        lag = cfg.min_compaction_lag_ms
        clean_bytes = dirty_bytes = 0
        cleanable: list[LogSegment] = []
        for (seg, size, largest_ts), nxt in zip(stats, segs[1:]):
            if nxt.base_offset > lso or (lag > 0 and now - largest_ts < lag):
                break
            cleanable.append(seg)
            if nxt.base_offset <= first_dirty:
                clean_bytes += size
            else:
                dirty_bytes += size
        if not cleanable:
            return None
        end_offset = segs[len(cleanable)].base_offset
        deadline = self._tombstone_deadline.get((lg.topic, lg.partition), 1 << 62)
        if first_dirty >= end_offset and deadline > now:
            return None
        total = clean_bytes + dirty_bytes
        ratio = dirty_bytes / total if total else 0.0
        expired = deadline <= now
        if not expired and (dirty_bytes == 0 or ratio < cfg.min_cleanable_dirty_ratio):
            return None
        return _Candidate(lg, first_dirty, end_offset, tuple(cleanable),
                          ratio if not expired else max(ratio, 1.0))

    def clean_once(self, now_ms: int | None = None) -> CleanResult | None:
        """Clean the dirtiest eligible log, if any.  Returns what was done."""
        now = self._time.milliseconds() if now_ms is None else now_ms
        best: _Candidate | None = None
        for lg in self.log_manager.all_logs():
            c = self._candidate(lg, now)
            if c is not None and (best is None or c.ratio > best.ratio):
                best = c
        if best is None:
            return None
        return self._clean(best, now)

    def clean_log(self, lg: Log, now_ms: int | None = None, force: bool = True
                  ) -> CleanResult | None:
        """Clean one log now (ignoring the dirty ratio when ``force``)."""
        now = self._time.milliseconds() if now_ms is None else now_ms
        c = self._candidate(lg, now)
        if c is None and force and lg.config.compact and not lg.closed:
            segs = lg.segments
            lso = lg.last_stable_offset
            cleanable = tuple(s for s, n in itertools.pairwise(segs) if n.base_offset <= lso)
            if cleanable:
                c = _Candidate(lg, self.first_dirty_offset(lg),
                               segs[len(cleanable)].base_offset, cleanable, 0.0)
        return self._clean(c, now) if c is not None else None

    # ------------------------------------------------------------------ cleaning
    def _clean(self, c: _Candidate, now: int) -> CleanResult | None:
        lg = c.log
        tp = (lg.topic, lg.partition)
        try:
            key_map = self._build_offset_map(c)
            groups = self._group_segments(c.segments, lg.config.segment_bytes)
            stats = [0, 0, 0, 0]  # bytes read, bytes written, records read, records kept
            deadline = [1 << 62]
            after = 0
            # one walk, in offset order, across every group
            aborted = _aborted_transaction_filter(lg, c.segments[0].base_offset, c.end_offset)
            for group in groups:
                new = self._clean_group(lg, group, key_map, aborted, now, stats, deadline)
                if new is None:
                    return None
                after += 1
        except (KafkaStorageError, CorruptBatchError, OSError) as e:
            log.warning("%s-%d: cleaning abandoned: %s", lg.topic, lg.partition, e)
            cause = io_error_of(e)
            # ENOENT: the log was deleted under the cleaner (a topic deletion), not a disk
            if cause is not None and not isinstance(cause, FileNotFoundError):
                self.log_manager.failure_channel.maybe_add_offline_log_dir(
                    lg.parent_dir, f"cleaning {lg.topic}-{lg.partition} failed", cause)
            return None
        self._first_dirty_map()[tp] = c.end_offset
        if deadline[0] < (1 << 62):
            self._tombstone_deadline[tp] = deadline[0]
        else:
            self._tombstone_deadline.pop(tp, None)
        self._write_checkpoints()
        result = CleanResult(lg.topic, lg.partition, c.first_dirty, c.end_offset, stats[0],
                             stats[1], stats[2], stats[3], len(c.segments), after)
        log.info("%s-%d: cleaned offsets [%d, %d): %d -> %d bytes, %d -> %d records",
                 lg.topic, lg.partition, lg.log_start_offset, c.end_offset, stats[0], stats[1],
                 stats[2], stats[3])
        return result

    @staticmethod
    def _build_offset_map(c: _Candidate) -> dict[bytes, int]:
        """key -> offset of its latest record in [first dirty, end), leaving out control
        batches and the records of aborted transactions (an aborted record must never
        shadow a committed one)."""
        key_map: dict[bytes, int] = {}
        aborted: AbortedTransactionFilter | None = None
        for seg, nxt_base in zip(c.segments, [s.base_offset for s in c.segments[1:]]
                                 + [c.end_offset]):
            if nxt_base <= c.first_dirty:
                continue
            if aborted is None:  # the walk starts at the first segment read
                aborted = _aborted_transaction_filter(c.log, seg.base_offset, c.end_offset)
            for h, data in _iter_segment_batches(seg):
                batch = RecordBatch(data, 0)
                if aborted.is_batch_aborted(batch) or h.is_control \
                        or h.last_offset < c.first_dirty:
                    continue
                for rec in batch.records():
                    if rec.key is not None and rec.offset >= c.first_dirty:
                        key_map[rec.key] = rec.offset
        return key_map

    @staticmethod
    def _group_segments(segs: tuple[LogSegment, ...], max_size: int) -> list[list[LogSegment]]:
        groups: list[list[LogSegment]] = []
        for i, seg in enumerate(segs):
            nxt_base = segs[i + 1].base_offset if i + 1 < len(segs) else None
            g = groups[-1] if groups else None
            if (g is not None and sum(s.size for s in g) + seg.size <= max_size
                    and (nxt_base is None or nxt_base - g[0].base_offset <= _INT32_MAX)):
                g.append(seg)
            else:
                groups.append([seg])
        return groups

    def _clean_group(self, lg: Log, group: list[LogSegment], key_map: dict[bytes, int],
                     aborted: AbortedTransactionFilter, now: int, stats: list[int],
                     deadline: list[int]) -> LogSegment | None:
        cfg = lg.config
        base = group[0].base_offset
        for suffix in (CLEANED_SUFFIX, SWAP_SUFFIX):
            for kind in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                path = os.path.join(lg.dir, file_name(base, kind) + suffix)
                if os.path.exists(path):
                    os.unlink(path)
        new = LogSegment(lg.dir, base, cfg, now_ms=now, suffix=CLEANED_SUFFIX, create=True)
        try:
            horizon = now - cfg.delete_retention_ms
            buf = bytearray()
            entries: list[AppendedBatch] = []
            for seg in group:
                for h, data in _iter_segment_batches(seg):
                    stats[0] += len(data)
                    batch = RecordBatch(data, 0)
                    if aborted.is_batch_aborted(batch):
                        stats[2] += h.records_count  # never visible to read_committed
                        continue
                    if h.is_control:
                        self._add(buf, entries, data, h.last_offset, h.max_timestamp)
                        continue
                    records = batch.record_list()
                    stats[2] += len(records)
                    kept = []
                    for r in records:
                        if r.key is None or key_map.get(r.key, -1) > r.offset:
                            continue
                        if r.value is None:
                            if r.timestamp < horizon:
                                continue
                            deadline[0] = min(deadline[0], r.timestamp + cfg.delete_retention_ms)
                        kept.append(r)
                    stats[3] += len(kept)
                    if len(kept) == len(records):
                        self._add(buf, entries, data, h.last_offset, h.max_timestamp)
                    else:
                        for run in _runs(kept):
                            self._add(buf, entries, _rebuild(h, run), run[-1].offset,
                                      max(r.timestamp for r in run))
                    if len(buf) >= _WRITE_CHUNK:
                        new.append(buf, entries)
                        stats[1] += len(buf)
                        buf, entries = bytearray(), []
            if entries:
                new.append(buf, entries)
                stats[1] += len(buf)
            # every control batch is kept, so every aborted transaction stays indexed
            # (its marker still ends it for a read_committed walk; its data is gone)
            for seg in group:
                for txn in seg.txn_index.entries:
                    new.txn_index.append(txn)
            new.on_become_inactive()
            new.flush()
            mtime = max(os.stat(s.path).st_mtime for s in group)
            os.utime(new.path, (mtime, mtime))
            new.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
            if not lg.replace_segments(new, group, now):
                log.info("%s-%d: log changed during cleaning; discarding the result",
                         lg.topic, lg.partition)
                new.delete()
                return None
        except BaseException:
            new.delete()
            raise
        return new

    @staticmethod
    def _add(buf: bytearray, entries: list[AppendedBatch], data: bytes | bytearray,
             last_offset: int, max_ts: int) -> None:
        entries.append(AppendedBatch(len(buf), len(data), last_offset, max_ts))
        buf += data


def _aborted_transaction_filter(lg: Log, start: int, end: int) -> AbortedTransactionFilter:
    """The read_committed walk for batches read in offset order from ``start`` (a
    segment's base) up to ``end``, over the aborted transactions of the log's
    ``.txnindex`` files overlapping that range (Java: ``collectAbortedTransactions``)."""
    return AbortedTransactionFilter(
        (t.producer_id, t.first_offset) for t in lg.collect_aborted_transactions(start, end))


def _runs(records: list[Record]) -> list[list[Record]]:
    """Split records into runs of consecutive offsets."""
    runs: list[list[Record]] = []
    for r in records:
        if runs and runs[-1][-1].offset + 1 == r.offset:
            runs[-1].append(r)
        else:
            runs.append([r])
    return runs


def _rebuild(h: BatchHeader, run: list[Record]) -> bytes:
    """A batch holding ``run`` (consecutive offsets) with ``h``'s batch-level fields."""
    shift = run[0].offset - h.base_offset
    seq = h.base_sequence
    if seq >= 0:
        seq = (seq + shift) % (_INT32_MAX + 1)
    builder = RecordBatchBuilder(
        compression=h.compression,
        timestamp_type=(TimestampType.LOG_APPEND_TIME if h.attributes & 0x08
                        else TimestampType.CREATE_TIME),
        producer_id=h.producer_id, producer_epoch=h.producer_epoch, base_sequence=seq,
        is_transactional=h.is_transactional, base_offset=run[0].offset,
        partition_leader_epoch=h.partition_leader_epoch)
    for r in run:
        builder.append(r.timestamp, r.key, r.value, r.headers)
    return builder.build()
