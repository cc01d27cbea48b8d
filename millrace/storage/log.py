"""One partition's log (Java: ``UnifiedLog``): what the segments of a partition directory
mean to producers and consumers.

The directory itself, its segment list, the log end offset and the recovery point are a
``LocalLog`` (``local_log.py``; opening and recovering it: ``log_loader.py``).  ``Log`` adds
the offsets and state that give the records their meaning::

    log_start_offset <= high_watermark <= log_end_offset      recovery_point <= log_end_offset

* ``log_end_offset`` (LEO): the offset the next appended record gets.
* ``high_watermark``: consumers read below it.  It is advanced by the caller (the replica
  layer: on one node, after each append), never by the log itself.
* ``recovery_point``: everything below it is fsync'd (see ``local_log.py``).
* ``log_start_offset``: DeleteRecords and retention move it up; reads below it fail.

Appends (leader): the buffer's batches are checked one by one (size, CRC, magic 2, counts,
timestamps; no record is decoded except on compacted topics, where keys are required), then
offsets are assigned by rewriting each batch header in place (base offset and partition
leader epoch are outside the CRC; LogAppendTime topics also get the timestamp and a new
CRC), the active segment is rolled if needed and the whole buffer is written with one
``pwrite``.  Records are never re-encoded.

Idempotence (``producer_state.py``): each log has a ``ProducerStateManager``.  A client
batch with a producer id is checked against its producer's epoch and sequence before
anything is written (``producer_state_analysis.py``, batch by batch as offsets are
assigned); a retry of one of the producer's last 5 batches is not written again
and the append returns the original batch's offsets (``num_batches == 0`` tells it was a
duplicate); a gap raises OutOfOrderSequenceError, a stale epoch InvalidProducerEpochError.
The state is updated only after the write.  Snapshots are taken on every roll and on close;
loading and ``truncate_to`` rebuild the state from the latest snapshot plus a replay.

Transactions (``log_transactions.py``): each log keeps a ``LogTransactions`` over its
producer state and segments: the last stable offset (min(first unstable offset, high
watermark)), recomputed after every append, high-watermark move, truncation and load;
markers completing transactions (aborted ones indexed in the ``.txnindex``); the aborted
transactions of a read_committed fetch; KIP-890 verification guards.  read_committed reads
stop at the LSO (``FetchIsolation.TXN_COMMITTED``).

Leader epochs (``leader_epoch_cache.py``): each log keeps a ``LeaderEpochFileCache``, the
offset where each leader epoch's records begin, in ``leader-epoch-checkpoint``.  A leader
append records (epoch, first offset) when its epoch is new, a follower append the epoch of
each batch it receives, both before the bytes are written; truncation drops the entries
past the new end, a moving log start clips the first entry, and ``end_offset_for_epoch``
answers OffsetForLeaderEpoch from it (a follower truncates to that answer after a leader
change, never to its high watermark: KIP-101, KIP-279).

Threading model: a ``Log`` is shared by the broker's asyncio thread (append, read, list
offsets) and background threads (retention, flush, the cleaner).  Every access to the
``LocalLog`` (segment list, log end, recovery point) and the other offsets is guarded by
``_lock`` (an ``RLock``); each call holds it for in-memory work and short
``pread``/``pwrite`` calls only.  CRC checks of an append run before taking it;
``fdatasync`` in ``flush`` runs outside it, timed into ``flush_timer`` if one is bound
(the broker's ``LogFlushRateAndTimeMs``; any thread that flushes updates it).  A ``FetchDataInfo`` is read after the lock is
released: segment files are only appended to, and deleted segments keep their descriptors
open for ``file.delete.delay.ms``, so a pending read stays valid.

I/O errors (``log_dir_failure_channel.py``): a method that writes is marked
``@reports_io_errors``; its first I/O error takes the log dir offline, and every log of
that dir then refuses reads and writes with ``KafkaStorageError``.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from time import perf_counter
from typing import Protocol

from millrace.common.errors import InvalidRecordError, KafkaStorageError, OffsetOutOfRangeError
from millrace.common.time import SYSTEM_TIME, Time
from millrace.record.batch import (
    iter_batches,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)
from millrace.storage.config import LogConfig
from millrace.storage.info import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    AppendOrigin,
    FetchDataInfo,
    FetchIsolation,
    LogAppendInfo,
    LogOffsetMetadata,
    TimestampAndOffset,
)
from millrace.storage.leader_epoch_cache import EpochEntry, LeaderEpochFileCache
from millrace.storage.local_log import LocalLog
from millrace.storage.log_dir_failure_channel import (
    LogDirErrorHandler,
    LogDirFailureChannel,
    reports_io_errors,
)
from millrace.storage.log_loader import (
    load_log,
    parse_topic_partition_name,
    rebuild_producer_state,
)
from millrace.storage.log_transactions import LogTransactions, end_txn_marker
from millrace.storage.producer_state import BatchMetadata, ProducerState
from millrace.storage.producer_state_analysis import ProducerStateAnalysis
from millrace.storage.producer_state_manager import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ProducerStateManager,
    VerificationGuard,
)
from millrace.storage.segment import AppendedBatch, LogSegment
from millrace.storage.transaction_index import AbortedTxn
from millrace.storage.validator import analyze_follower_batches, validate_leader_batches

log = logging.getLogger("millrace.storage")


class FlushTimer(Protocol):
    """Where a flush's duration goes, in milliseconds: the broker binds its
    ``LogFlushStats`` timer here (storage never imports the broker)."""

    def update(self, ms: float) -> None: ...


class Log:
    """A partition log.  Thread-safe (see the module docstring)."""

    def __init__(self, dir: str, config: LogConfig, *, recovery_point: int = 0,
                 log_start_offset: int = 0, high_watermark: int = 0,
                 had_clean_shutdown: bool = False, time: Time = SYSTEM_TIME,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                 failure_channel: LogDirFailureChannel | None = None,
                 flush_timer: FlushTimer | None = None) -> None:
        path = os.path.abspath(dir)
        # where each flush's duration goes (the broker's LogFlushRateAndTimeMs); None: nowhere
        self.flush_timer = flush_timer
        self.topic, self.partition = parse_topic_partition_name(os.path.basename(path))
        # the log dir this partition dir lives in, and where its I/O errors are reported
        self.parent_dir = os.path.dirname(path)
        self.log_dir_errors = LogDirErrorHandler(failure_channel, self.parent_dir,
                                                 f"{self.topic}-{self.partition}")
        os.makedirs(path, exist_ok=True)
        self._lock = threading.RLock()
        self._time = time
        now = time.milliseconds()
        # guarded by _lock:
        self._producer_state = ProducerStateManager(
            path, producer_id_expiration_ms, f"{self.topic}-{self.partition}")
        loaded = load_log(path, config, recovery_point=recovery_point,
                          log_start_offset=log_start_offset,
                          had_clean_shutdown=had_clean_shutdown, now_ms=now,
                          producer_state=self._producer_state)
        # all guarded by _lock:
        # Recovered (or trusted) data is made durable before the recovery point covers it.
        self._local = LocalLog(path, self.topic, self.partition, config, loaded.segments,
                               next_offset=loaded.next_offset,
                               recovery_point=min(max(recovery_point, loaded.log_start_offset),
                                                  loaded.next_offset),
                               now_ms=now, time=time)
        self._log_start_offset = loaded.log_start_offset
        self._high_watermark = min(max(high_watermark, self._log_start_offset),
                                   loaded.next_offset)
        self._hw_metadata: LogOffsetMetadata | None = None
        self._lso_metadata: LogOffsetMetadata | None = None
        self._txns = LogTransactions(self._local, self._producer_state)
        self._txns.on_high_watermark_updated(self._high_watermark, self._log_start_offset)
        self._epoch_cache = loaded.leader_epoch_cache
        self._closed = False
        self.truncated_on_load = loaded.truncated_bytes
        if not had_clean_shutdown:
            self.flush()

    # ------------------------------------------------------------------ state
    @property
    def dir(self) -> str:
        return self._local.dir

    @property
    def config(self) -> LogConfig:
        return self._local.config

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self._local.config = config

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._local.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def recovery_point(self) -> int:
        return self._local.recovery_point

    @property
    def last_stable_offset(self) -> int:
        """LSO: read_committed consumers read below it (min of the first unstable offset
        and the high watermark; the high watermark when no transaction is unstable)."""
        return self._txns.last_stable_offset(self._high_watermark)

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open or not yet replicated transaction."""
        return self._txns.first_unstable_offset

    def _update_first_unstable_offset(self) -> None:
        self._txns.update_first_unstable_offset(self._log_start_offset)

    @property
    def last_flush_ms(self) -> int:
        return self._local.last_flush_ms

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        with self._lock:
            return tuple(self._local.segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._local.active_segment

    @property
    def size(self) -> int:
        with self._lock:
            return self._local.size

    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        with self._lock:
            return self._local.log_end_offset_metadata()

    def update_high_watermark(self, hw: int) -> int:
        """Set the high watermark, clamped to [log start, log end]; returns the new value."""
        with self._lock:
            hw = min(max(hw, self._log_start_offset), self._local.log_end_offset)
            if hw != self._high_watermark:
                self._high_watermark = hw
                self._hw_metadata = None
                self._txns.on_high_watermark_updated(hw, self._log_start_offset)
            return hw

    def maybe_increment_high_watermark(self, hw: int) -> bool:
        """Move the high watermark up only (replica layer); True if it moved."""
        with self._lock:
            before = self._high_watermark
            return hw > before and self.update_high_watermark(hw) > before

    # ------------------------------------------------------------------ leader epochs
    @property
    def leader_epoch_cache(self) -> LeaderEpochFileCache:
        """Where each leader epoch starts (thread-safe on its own; the replica layer calls
        ``assign(epoch, log_end_offset)`` on becoming leader, KAFKA-7415)."""
        return self._epoch_cache

    @reports_io_errors("leader epoch checkpoint")
    def maybe_assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> None:
        """Record that ``leader_epoch`` starts at ``start_offset`` (a new leader does it
        before writing anything, KAFKA-7415); the checkpoint file is rewritten."""
        with self._lock:
            self._check_open()
            self._epoch_cache.assign(leader_epoch, start_offset)

    @property
    def latest_epoch(self) -> int:
        """The newest leader epoch with an entry in the cache; -1 if there is none."""
        return self._epoch_cache.latest_epoch

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch <= ``leader_epoch``, where it ends in this
        log); the latest epoch ends at the log end; (-1, -1) when undefined."""
        with self._lock:
            return self._epoch_cache.end_offset_for(leader_epoch, self._local.log_end_offset)

    def __repr__(self) -> str:
        return (f"Log({self.topic}-{self.partition}, start={self._log_start_offset}, "
                f"hw={self._high_watermark}, end={self._local.log_end_offset})")

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"log {self.dir} is closed")
        self.log_dir_errors.check_online()

    @property
    def offline(self) -> bool:
        """The log dir had an I/O error: nothing is read from or written to this log any
        more in this process."""
        return self.log_dir_errors.offline

    # ------------------------------------------------------------------ producer state
    @property
    def producer_state_manager(self) -> ProducerStateManager:
        """The idempotence state (not thread-safe: for tests and tools)."""
        return self._producer_state

    def maybe_start_transaction_verification(self, producer_id: int
                                             ) -> VerificationGuard | None:
        """None when ``producer_id`` has an open transaction here (no verification
        needed); otherwise the guard to verify with (KIP-890, ``VerificationGuard``)."""
        with self._lock:
            return self._txns.maybe_start_verification(producer_id)

    def active_producers(self) -> list[ProducerState]:
        """Producers with state on this partition (DescribeProducers): id, epoch, last
        sequence, last timestamp, coordinator epoch, current transaction start offset."""
        with self._lock:
            return self._producer_state.active_producers()

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        """Forget producers idle for producer.id.expiration.ms; returns how many."""
        now = self._time.milliseconds() if now_ms is None else now_ms
        with self._lock:
            if self._closed:
                return 0
            return self._producer_state.remove_expired_producers(now)

    @reports_io_errors("producer snapshot")
    def take_producer_snapshot(self, sync: bool = False) -> str:
        """Write a producer state snapshot at the log end now; returns its path."""
        with self._lock:
            self._check_open()
            self._producer_state.update_map_end_offset(self._local.log_end_offset)
            return self._producer_state.take_snapshot(sync=sync)

    # ------------------------------------------------------------------ appends
    @reports_io_errors("append")
    def append_as_leader(self, records: bytes | bytearray | memoryview, leader_epoch: int,
                         now_ms: int | None = None,
                         origin: AppendOrigin = AppendOrigin.CLIENT, *,
                         verification_guard: VerificationGuard | None = None,
                         require_verification: bool = False) -> LogAppendInfo:
        """Validate ``records`` (one or more v2 batches), assign offsets, append.

        Raises CorruptRecordError (bad CRC, truncated batch), RecordTooLargeError (batch
        over max.message.bytes), InvalidRecordError (not magic 2, bad counts, control batch
        or missing key from a client) or InvalidTimestampError; for batches with a producer
        id from a client, OutOfOrderSequenceError or InvalidProducerEpochError.  A retried
        batch (a duplicate of one of its producer's last 5) writes nothing: the result has
        the original batch's offsets and ``num_batches == 0``.  A ``bytearray`` or writable
        ``memoryview`` argument is rewritten in place and written as it is; ``bytes`` are
        copied once.

        ``require_verification`` (KIP-890 part 1): a client's transactional batch whose
        producer has no open transaction here needs ``verification_guard`` to be the guard
        still held for that producer, else InvalidTxnStateError and nothing is written.
        """
        buf = records if isinstance(records, bytearray) or (
            isinstance(records, memoryview) and not records.readonly) else bytearray(records)
        now = self._time.milliseconds() if now_ms is None else now_ms
        cfg = self._local.config
        headers = validate_leader_batches(buf, cfg, now, origin)
        log_append = cfg.log_append_time and origin != AppendOrigin.COORDINATOR
        if log_append:
            for pos, _ in headers:
                set_log_append_time(buf, pos, now)
        with self._lock:
            self._check_open()
            first = offset = self._local.log_end_offset
            entries: list[AppendedBatch] = []
            max_ts, off_of_max, count = -1, first, 0
            # made for the first batch with a producer id (none: no producer state to touch)
            producers: ProducerStateAnalysis | None = None
            for pos, h in headers:
                last = offset + h.last_offset_delta
                ts = now if log_append else h.max_timestamp
                if h.producer_id >= 0:
                    if producers is None:
                        producers = ProducerStateAnalysis(
                            self._producer_state, self._txns, origin, verification_guard,
                            require_verification)
                    dup = producers.analyze(buf, pos, h, offset, last, ts)
                    if dup is not None:
                        return self._duplicate_append_info(h.producer_id, dup, log_append,
                                                           leader_epoch)
                set_base_offset(buf, pos, offset)
                set_partition_leader_epoch(buf, pos, leader_epoch)
                entries.append(AppendedBatch(pos, h.size, last, ts))
                if ts > max_ts:
                    max_ts, off_of_max = ts, last
                count += h.records_count
                offset = last + 1
            if entries:
                if leader_epoch >= 0:
                    # the cache would not change when its latest entry is this epoch
                    # starting at or below here (the common case: no entry made)
                    latest = self._epoch_cache.latest_entry
                    if latest is None or latest.epoch != leader_epoch \
                            or first < latest.start_offset:
                        self._epoch_cache.assign(leader_epoch, first)
                self._maybe_roll(len(buf), max_ts, offset - 1, first, now)
                self._local.append(buf, entries, offset - 1)
                if producers is not None:
                    producers.update(headers, self._log_start_offset)
                self._producer_state.update_map_end_offset(offset)
            info = LogAppendInfo(first, offset - 1, max_ts, off_of_max,
                                 now if log_append else -1, self._log_start_offset, count,
                                 len(entries), len(buf), leader_epoch)
            need_flush = offset - self._local.recovery_point >= cfg.flush_messages
        if need_flush:
            self.flush()
        return info

    def _duplicate_append_info(self, producer_id: int, dup: BatchMetadata, log_append: bool,
                               leader_epoch: int) -> LogAppendInfo:
        """The answer to a retried batch: its original offsets, nothing written.  The
        timestamp is what the original append reported (the append time on LogAppendTime
        topics, else -1)."""
        log.debug("%s-%d: duplicate batch of producer %d (offsets %d..%d) not appended",
                  self.topic, self.partition, producer_id, dup.first_offset, dup.last_offset)
        return LogAppendInfo(dup.first_offset, dup.last_offset, dup.timestamp, dup.last_offset,
                             dup.timestamp if log_append else -1, self._log_start_offset, 0, 0,
                             0, leader_epoch)

    @reports_io_errors("follower append")
    def append_as_follower(self, records: bytes | bytearray | memoryview,
                           now_ms: int | None = None) -> LogAppendInfo:
        """Append batches whose offsets are already assigned (replication).  A trailing
        partial batch is ignored; the first offset must be >= the log end offset."""
        now = self._time.milliseconds() if now_ms is None else now_ms
        fb = analyze_follower_batches(records)
        with self._lock:
            self._check_open()
            if not fb.entries:
                return LogAppendInfo(-1, -1, -1, -1, -1, self._log_start_offset, 0, 0, 0)
            end = self._local.log_end_offset
            if fb.first_offset < end:
                raise InvalidRecordError(f"follower append at offset {fb.first_offset} is "
                                         f"below the log end offset {end}")
            data = memoryview(records)[:fb.valid_bytes] if fb.valid_bytes < len(records) \
                else records
            batches = [(h, end_txn_marker(data, pos) if h.is_control else None)
                       for pos, h in iter_batches(data)]
            headers = [h for h, _ in batches]
            cache = self._epoch_cache
            if cache.assign_entries((EpochEntry(h.partition_leader_epoch, h.base_offset)
                                     for h in headers if h.partition_leader_epoch >= 0),
                                    flush=False):
                cache.flush()
            self._maybe_roll(fb.valid_bytes, fb.max_timestamp, fb.last_offset,
                             fb.first_offset, now)
            self._local.append(data, fb.entries, fb.last_offset)
            self._producer_state.replay(batches, self._txns.index_completed)
            self._producer_state.update_map_end_offset(self._local.log_end_offset)
            self._update_first_unstable_offset()
            return LogAppendInfo(fb.first_offset, fb.last_offset, fb.max_timestamp,
                                 fb.offset_of_max_timestamp, -1, self._log_start_offset,
                                 fb.num_records, len(fb.entries), fb.valid_bytes,
                                 fb.last_leader_epoch)

    # ------------------------------------------------------------------ rolling
    def _maybe_roll(self, size: int, max_ts: int, max_offset: int, first_offset: int,
                    now: int) -> LogSegment:
        if self._local.should_roll(size, max_ts, max_offset, first_offset, now):
            return self._roll(first_offset, now)
        return self._local.active_segment

    @reports_io_errors("segment roll")
    def roll(self, now_ms: int | None = None) -> LogSegment:
        """Start a new active segment at the log end (no-op if the active one is empty)."""
        with self._lock:
            self._check_open()
            now = self._time.milliseconds() if now_ms is None else now_ms
            return self._roll(self._local.log_end_offset, now)

    def _roll(self, new_base: int, now: int) -> LogSegment:
        before = self._local.active_segment
        seg = self._local.roll(new_base, now)
        if seg is not before:
            # The snapshot offset is the new segment's base, so recovering from this
            # segment on can start from it (no fsync here: a lost or torn snapshot is only
            # skipped).
            self._producer_state.update_map_end_offset(seg.base_offset)
            self._producer_state.take_snapshot()
        return seg

    # ------------------------------------------------------------------ reads
    def read(self, fetch_offset: int, max_bytes: int,
             isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK,
             min_one_message: bool = True, *, max_offset: int | None = None) -> FetchDataInfo:
        """Batches from the one holding ``fetch_offset``, at most ``max_bytes`` (but the
        first batch whole with ``min_one_message``), never past the bound: the log end for
        LOG_END, the high watermark otherwise, or ``max_offset`` when given.

        Raises OffsetOutOfRangeError unless log start <= fetch_offset <= log end.
        """
        with self._lock:
            self._check_open()
            end = self._local.log_end_offset
            if fetch_offset == end:
                active = self._local.active_segment
                return FetchDataInfo.empty(end, active.base_offset, active.size)
            if fetch_offset < self._log_start_offset or fetch_offset > end:
                raise OffsetOutOfRangeError(
                    f"offset {fetch_offset} is out of range for {self.topic}-{self.partition}: "
                    f"[{self._log_start_offset}, {end}]")
            if max_offset is None:
                if isolation == FetchIsolation.LOG_END:
                    max_offset = end
                elif isolation == FetchIsolation.TXN_COMMITTED:
                    max_offset = self.last_stable_offset
                else:
                    max_offset = self._high_watermark
            if max_offset >= end:
                bound = self._local.offset_metadata(end)
            elif max_offset == self._high_watermark:
                if self._hw_metadata is None or \
                        self._hw_metadata.message_offset != self._high_watermark:
                    self._hw_metadata = self._local.offset_metadata(self._high_watermark)
                bound = self._hw_metadata
            else:
                # an LSO below the HW: the same cache, for consumers waiting at an open
                # transaction
                if self._lso_metadata is None or \
                        self._lso_metadata.message_offset != max_offset:
                    self._lso_metadata = self._local.offset_metadata(max_offset)
                bound = self._lso_metadata
            if fetch_offset >= bound.message_offset:
                return FetchDataInfo.empty(fetch_offset)
            return self._local.read(fetch_offset, max_bytes, bound, min_one_message)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int
                                     ) -> list[AbortedTxn]:
        """The aborted transactions overlapping [start_offset, upper_bound_offset), from
        the ``.txnindex`` of the segments from the one holding ``start_offset`` (Java
        ``UnifiedLog.collectAbortedTransactions``)."""
        with self._lock:
            self._check_open()
            return self._txns.collect_aborted_transactions(start_offset, upper_bound_offset)

    def fetch_upper_bound_offset(self, info: FetchDataInfo, bound: int) -> int:
        """An offset past every record ``info`` holds (Kafka's fallback: the next
        segment's base, else ``bound``), for ``collect_aborted_transactions``."""
        with self._lock:
            return self._txns.fetch_upper_bound_offset(info, bound)

    def read_all_bytes(self, fetch_offset: int | None = None) -> bytes:
        """Every byte from ``fetch_offset`` (default: log start) to the log end; for tools
        and tests, not for the fetch path."""
        out = []
        with self._lock:
            offset = self._log_start_offset if fetch_offset is None else fetch_offset
            while offset < self._local.log_end_offset:
                info = self.read(offset, 1 << 30, FetchIsolation.LOG_END)
                if not info.length:
                    break
                data = info.read()
                out.append(data)
                last = None
                for _, h in iter_batches(data):
                    last = h
                if last is None:
                    break
                offset = last.next_offset
        return b"".join(out)

    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: -2 earliest, -4 earliest local, -1 latest (log end), -3 the record
        with the largest timestamp; otherwise the first record with timestamp >= it."""
        with self._lock:
            self._check_open()
            if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
                # the first entry's epoch, if it covers the log start (Kafka's check)
                first = self._epoch_cache.earliest_entry
                epoch = first.epoch if first is not None and \
                    first.start_offset <= self._log_start_offset else -1
                return TimestampAndOffset(-1, self._log_start_offset, epoch)
            if timestamp == LATEST_TIMESTAMP:
                return TimestampAndOffset(-1, self._local.log_end_offset,
                                          self._epoch_cache.latest_epoch)
            if timestamp == MAX_TIMESTAMP:
                return self._local.offset_of_max_timestamp(self._log_start_offset)
            if timestamp < 0:
                return None
            return self._local.find_offset_by_timestamp(timestamp, self._log_start_offset)

    # ------------------------------------------------------------------ truncation
    @reports_io_errors("truncation")
    def truncate_to(self, offset: int) -> bool:
        """Remove every record at or after ``offset`` (replication: a follower cutting a
        divergent tail).  Returns False if there was nothing to remove."""
        with self._lock:
            self._check_open()
            if offset >= self._local.log_end_offset:
                # An entry at the log end can still go: a leader that recorded its epoch
                # start and wrote nothing before losing leadership (Kafka does the same).
                self._epoch_cache.truncate_from_end(self._local.log_end_offset)
                return False
            if offset < self._log_start_offset:
                self.truncate_fully_and_start_at(offset)
                return True
            self._local.truncate_to(offset)
            # the log may end below ``offset`` (a batch straddling it goes whole)
            self._epoch_cache.truncate_from_end(self._local.log_end_offset)
            self._after_truncation()
            rebuild_producer_state(self._producer_state, self._local.segments,
                                   self._log_start_offset, self._local.log_end_offset,
                                   self._time.milliseconds())
            self._update_first_unstable_offset()
            return True

    @reports_io_errors("truncation")
    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and start an empty log at ``new_offset``."""
        with self._lock:
            self._check_open()
            self._local.truncate_fully_and_start_at(new_offset)
            self._log_start_offset = new_offset
            self._epoch_cache.clear_and_flush()
            self._producer_state.truncate_fully_and_start_at(new_offset)
            self._after_truncation()
            self._update_first_unstable_offset()

    def _after_truncation(self) -> None:
        self._high_watermark = min(max(self._high_watermark, self._log_start_offset),
                                   self._local.log_end_offset)
        self._hw_metadata = self._lso_metadata = None

    # ------------------------------------------------------------------ deletion
    @reports_io_errors("delete records")
    def delete_records_before(self, offset: int, now_ms: int | None = None) -> int:
        """DeleteRecords: move the log start offset to ``offset`` (-1 = high watermark) and
        delete segments entirely below it.  Returns the new log start offset (low watermark)."""
        with self._lock:
            self._check_open()
            if offset == -1:
                offset = self._high_watermark
            if offset < 0 or offset > self._high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot move the log start offset of {self.topic}-{self.partition} to "
                    f"{offset}: the high watermark is {self._high_watermark}")
            if offset > self._log_start_offset:
                log.info("%s-%d: log start offset %d -> %d (delete records)", self.topic,
                         self.partition, self._log_start_offset, offset)
                self._log_start_offset = offset
                self._hw_metadata = self._lso_metadata = None
                self._epoch_cache.truncate_from_start(offset)
                self._producer_state.on_log_start_offset_incremented(offset)
                self._update_first_unstable_offset()
                self._delete_segments(lambda seg, nxt: nxt.base_offset <= self._log_start_offset,
                                      "log start offset", now_ms)
            return self._log_start_offset

    @reports_io_errors("retention")
    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Retention: delete closed segments past retention.ms (by their largest timestamp)
        or beyond retention.bytes, and those below the log start offset.  The active
        segment is never deleted, nor anything at or above the high watermark.  Returns the
        number of segments deleted."""
        now = self._time.milliseconds() if now_ms is None else now_ms
        with self._lock:
            if self._closed or self.offline:
                return 0
            cfg = self._local.config
            deleted = 0
            if cfg.delete:
                if cfg.retention_ms >= 0:
                    deleted += self._delete_segments(
                        lambda seg, nxt: now - seg.largest_timestamp > cfg.retention_ms,
                        f"retention.ms {cfg.retention_ms}", now)
                if cfg.retention_bytes >= 0:
                    excess = self._local.size - cfg.retention_bytes

                    def over_size(seg: LogSegment, nxt: LogSegment) -> bool:
                        nonlocal excess
                        if excess - seg.size >= 0:
                            excess -= seg.size
                            return True
                        return False

                    if excess > 0:
                        deleted += self._delete_segments(
                            over_size, f"retention.bytes {cfg.retention_bytes}", now)
            deleted += self._delete_segments(
                lambda seg, nxt: nxt.base_offset <= self._log_start_offset,
                "log start offset", now)
            self.delete_pending_segments(now)
            return deleted

    def _delete_segments(self, predicate: Callable[[LogSegment, LogSegment], bool],
                         reason: str, now_ms: int | None) -> int:
        now = self._time.milliseconds() if now_ms is None else now_ms
        victims = self._local.deletable_prefix(predicate, self._high_watermark)
        if not victims:
            return 0
        doomed = self._local.remove_oldest(victims)
        first_base = self._local.segments[0].base_offset
        if first_base > self._log_start_offset:
            self._log_start_offset = first_base
            self._epoch_cache.truncate_from_start(first_base)
        self._hw_metadata = self._lso_metadata = None
        self._producer_state.on_log_start_offset_incremented(self._log_start_offset)
        self._update_first_unstable_offset()
        self._producer_state.delete_snapshots_before(first_base)
        self._local.schedule_delete(doomed, now, reason)
        return victims

    def delete_pending_segments(self, now_ms: int | None = None, force: bool = False) -> int:
        """Remove the files of deleted segments whose file.delete.delay.ms has passed."""
        now = self._time.milliseconds() if now_ms is None else now_ms
        with self._lock:
            due = self._local.pop_due_deletes(now, force)
        for seg in due:
            seg.delete()
        return len(due)

    def replace_segments(self, new: LogSegment, old: list[LogSegment], now_ms: int) -> bool:
        """Cleaner: swap ``old`` (consecutive segments, not the active one) for ``new``,
        whose files carry the ``.swap`` suffix.  False if the log changed meanwhile."""
        with self._lock:
            if self._closed or not old or not self._local.replace_segments(new, old, now_ms):
                return False
            self._hw_metadata = self._lso_metadata = None
            return True

    def segment_stats(self) -> list[tuple[LogSegment, int, int]]:
        """(segment, size, largest timestamp) of every segment, read under the lock (for
        the cleaner, which runs outside it)."""
        with self._lock:
            return [(s, s.size, s.largest_timestamp) for s in self._local.segments]

    # ------------------------------------------------------------------ flush / close
    @reports_io_errors("flush")
    def flush(self, upto: int | None = None) -> None:
        """fsync every segment holding offsets in [recovery point, ``upto``) (default: the
        log end), then move the recovery point to ``upto``."""
        with self._lock:
            if self._closed:
                return
            end = self._local.log_end_offset
            upto = end if upto is None else min(upto, end)
            if upto <= self._local.recovery_point:
                return
            todo, dir_dirty = self._local.segments_to_flush(upto)
        timer = self.flush_timer
        if timer is None:
            self._local.sync(todo, dir_dirty)
        else:
            start = perf_counter()
            self._local.sync(todo, dir_dirty)
            timer.update((perf_counter() - start) * 1000.0)
        with self._lock:
            self._local.mark_flushed(upto, self._time.milliseconds())

    def close(self, sync: bool = False) -> None:
        """Write a producer state snapshot at the log end and close every segment; with
        ``sync`` the snapshot and the active segment's final index entries are fsync'd
        first (LogManager.shutdown flushes the data before)."""
        self._close(sync, snapshot=True)

    def _close(self, sync: bool, snapshot: bool) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self.offline:
                # Write nothing more to a dir that failed: the next start recovers it.
                self._local.close_handlers()
                return
            try:
                if snapshot:
                    try:
                        self._producer_state.update_map_end_offset(self._local.log_end_offset)
                        self._producer_state.take_snapshot(sync=sync)
                    except OSError:
                        log.exception("%s-%d: producer snapshot at close failed", self.topic,
                                      self.partition)
                    try:
                        self._epoch_cache.flush()
                    except KafkaStorageError:
                        log.exception("%s-%d: leader epoch checkpoint at close failed",
                                      self.topic, self.partition)
            except BaseException:
                self._local.close(sync=False)
                raise
            self._local.close(sync)

    @property
    def closed(self) -> bool:
        return self._closed

    def rename_dir(self, new_dir: str) -> None:
        """Close and move the directory (topic deletion)."""
        with self._lock:
            self._close(False, snapshot=False)
            self._local.rename_dir(new_dir)
            self._producer_state.rename_dir(new_dir)
            self._epoch_cache.rename_dir(new_dir)

    def delete(self) -> None:
        """Close and remove the whole directory."""
        with self._lock:
            self._close(False, snapshot=False)
            self._epoch_cache.clear()
            self._local.delete_dir()

