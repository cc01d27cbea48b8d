"""Opening a partition directory (Java: ``LogLoader``): clean up, recover, find the log end.

Steps, in order:

1. Remove leftovers of interrupted operations: ``*.deleted`` (segments retention or the
   cleaner had already dropped), ``*.cleaned`` (a cleaner output never swapped in) and
   index files without a ``.log``.
2. Finish interrupted cleaner swaps: a ``<base>.log.swap`` is a complete, fsync'd cleaned
   segment; the old segments it replaces (bases in its offset range) are deleted and it is
   renamed to ``<base>.log`` (its indexes are rebuilt).
3. Open every ``<base>.log``; a segment with a missing ``.index`` or ``.timeindex`` is
   rebuilt from its log.  Other index damage is found by ``LogSegment``'s sanity check on
   first use (forced here for the active segment) and repaired the same way.
4. After an unclean shutdown (no clean-shutdown marker), every segment from the one holding
   the recovery point onward is recovered batch by batch.  If one had to be truncated, the
   segments after it are deleted: nothing after a corrupt byte is trusted, and offsets must
   stay contiguous.
5. The log end offset is read from the last segment; the log start offset is the larger of
   the checkpointed one and the first segment's base.
6. Producer state (idempotence, see ``producer_state_manager.py``): snapshots above the log end
   (recovery truncated the log) or below the log start are deleted, the latest valid
   snapshot is loaded and the batch headers from its offset to the log end are replayed;
   if that replayed anything, a snapshot at the log end is written so the next load is
   immediate.  ``Log.truncate_to`` runs the same ``rebuild_producer_state``.  Aborted
   transactions: the ``.txnindex`` of every recovered segment was emptied in step 4
   (a kill -9 can leave it behind or ahead of its log); snapshots above the first
   recovered offset are dropped so the replay covers every recovered marker, and each
   aborted transaction whose marker lies at or after it is indexed again in its marker's
   segment, with the LSO of that moment (Java: ``LogSegment.recover`` with the producer
   state).
7. Leader epoch cache (``leader_epoch_cache.py``): read ``leader-epoch-checkpoint``; after an
   unclean shutdown the recovered batches add the epochs newer than its latest (Kafka's
   recovery rule), then entries at or past the log end go and the first entry is clipped
   to the log start (a crash can leave a truncation unwritten).  A missing file (a log
   written before the cache existed) or a corrupt one is rebuilt from the
   ``partition_leader_epoch`` of every batch; the result is written if it differs from
   the file.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from millrace.record.batch import BatchHeader
from millrace.record.control import EndTransactionMarker, read_end_txn_marker
from millrace.storage.checkpoint import CorruptCheckpointError
from millrace.storage.config import LogConfig
from millrace.storage.leader_epoch_cache import (
    EpochEntry,
    LeaderEpochCheckpointFile,
    LeaderEpochFileCache,
)
from millrace.storage.producer_state_manager import ProducerStateManager
from millrace.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    file_name,
)
from millrace.storage.transaction_index import TXN_INDEX_SUFFIX, CompletedTxn

log = logging.getLogger("millrace.storage")

_TP_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


def parse_topic_partition_name(name: str) -> tuple[str, int]:
    """``"orders-3"`` -> ``("orders", 3)``; ValueError if the name is not ``<topic>-<n>``."""
    m = _TP_DIR.match(name)
    if m is None or "." in m.group("partition"):
        raise ValueError(f"{name!r} is not a <topic>-<partition> directory name")
    return m.group("topic"), int(m.group("partition"))


def log_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


@dataclass
class LoadedLog:
    segments: list[LogSegment]
    next_offset: int
    log_start_offset: int
    truncated_bytes: int
    leader_epoch_cache: LeaderEpochFileCache


def _base_of(name: str, suffix: str) -> int | None:
    if not name.endswith(suffix):
        return None
    stem = name[: -len(suffix)]
    if len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem)


def _unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def load_log(dir: str, config: LogConfig, *, recovery_point: int, log_start_offset: int,
             had_clean_shutdown: bool, now_ms: int,
             producer_state: ProducerStateManager | None = None) -> LoadedLog:
    names = sorted(os.listdir(dir))
    # 1. leftovers
    for name in names:
        if name.endswith(DELETED_SUFFIX) or name.endswith(CLEANED_SUFFIX):
            log.info("%s: removing leftover file %s", dir, name)
            _unlink(os.path.join(dir, name))
    names = sorted(os.listdir(dir))
    # 2. interrupted swaps
    swaps = sorted(b for n in names if (b := _base_of(n, LOG_SUFFIX + SWAP_SUFFIX)) is not None)
    for base in swaps:
        _complete_swap(dir, base, config, now_ms)
    names = sorted(os.listdir(dir))
    for name in names:
        if name.endswith(SWAP_SUFFIX):  # index .swap files: their segment is rebuilt
            _unlink(os.path.join(dir, name))
    # 3. open segments; orphan indexes go
    bases = sorted(b for n in names if (b := _base_of(n, LOG_SUFFIX)) is not None)
    present = set(bases)
    for name in names:
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            b = _base_of(name, suffix)
            if b is not None and b not in present:
                log.info("%s: removing orphan index %s", dir, name)
                _unlink(os.path.join(dir, name))
    segments: list[LogSegment] = []
    truncated = 0
    recovered_from: int | None = None  # first offset of the segments recovered
    emptied = False  # every segment deleted: the epochs are gone with them
    try:
        for base in bases:
            missing = [s for s in (INDEX_SUFFIX, TIME_INDEX_SUFFIX)
                       if not os.path.exists(os.path.join(dir, file_name(base, s)))]
            seg = LogSegment(dir, base, config, now_ms=now_ms, create=False)
            segments.append(seg)
            if missing:
                log.warning("%s: %s missing for segment %d; rebuilding", dir, " and ".join(missing),
                            base)
                truncated += seg.recover()
        # 4. unclean shutdown: recover everything from the recovery point's segment
        if not had_clean_shutdown and segments:
            start = 0
            for i, seg in enumerate(segments):
                if seg.base_offset <= recovery_point:
                    start = i
            if recovery_point < segments[start].base_offset:
                start = 0
            log.info("%s: recovering %d segment(s) from offset %d after an unclean shutdown",
                     dir, len(segments) - start, segments[start].base_offset)
            recovered_from = segments[start].base_offset
            for i in range(start, len(segments)):
                segments[i].txn_index.reset()
                cut = segments[i].recover()
                truncated += cut
                if cut and i + 1 < len(segments):
                    dropped = segments[i + 1:]
                    del segments[i + 1:]
                    for seg in dropped:
                        log.warning("%s: deleting segment %d after a corrupt one", dir,
                                    seg.base_offset)
                        truncated += seg.size
                        seg.delete()
                    break
        # 5. end offsets
        if segments:
            next_offset = max(segments[-1].read_next_offset(), segments[-1].base_offset)
            start_offset = max(log_start_offset, segments[0].base_offset)
            if start_offset > next_offset:
                log.warning("%s: log start offset %d is past the log end %d; starting empty "
                            "at %d", dir, start_offset, next_offset, start_offset)
                for seg in segments:
                    seg.delete()
                segments = []
                emptied = True
        if not segments:
            start_offset = max(log_start_offset, 0)
            segments = [LogSegment(dir, start_offset, config, now_ms=now_ms, create=True)]
            next_offset = start_offset
        # 6. producer state
        if producer_state is not None:
            rebuild_producer_state(producer_state, segments, start_offset, next_offset, now_ms,
                                   force=True, rebuild_txn_index_from=recovered_from)
        # 7. leader epochs
        epochs = load_leader_epoch_cache(dir, segments, start_offset, next_offset,
                                         recovered_from=recovered_from, emptied=emptied)
    except BaseException:
        for seg in segments:
            seg.close_handlers()
        raise
    return LoadedLog(segments, next_offset, start_offset, truncated, epochs)


def load_leader_epoch_cache(dir: str, segments: Sequence[LogSegment], log_start_offset: int,
                            log_end_offset: int, *, recovered_from: int | None = None,
                            emptied: bool = False) -> LeaderEpochFileCache:
    """The partition's leader epoch cache, consistent with its segments (step 7)."""
    checkpoint = LeaderEpochCheckpointFile.in_dir(dir)
    name = os.path.basename(dir)
    rebuild = corrupt = False
    try:
        cache = LeaderEpochFileCache(checkpoint, name)
        rebuild = not os.path.exists(checkpoint.path)
    except CorruptCheckpointError as e:
        log.warning("%s; rebuilding it from the batches", e)
        cache = LeaderEpochFileCache(checkpoint, name, entries=[])
        rebuild = corrupt = True
    if emptied:
        cache.clear_and_flush()
        return cache
    replay_from = log_start_offset if rebuild else recovered_from
    if replay_from is not None and replay_from < log_end_offset:
        latest = cache.latest_epoch
        found = []
        for h in _headers_between(segments, replay_from, log_end_offset):
            if h.partition_leader_epoch > latest:
                latest = h.partition_leader_epoch
                found.append(EpochEntry(latest, h.base_offset))
        if rebuild and found:
            log.info("%s: rebuilt %d leader epoch entries from the batches", dir, len(found))
        cache.assign_entries(found, flush=False)
    cache.truncate_from_end(log_end_offset, flush=False)
    cache.truncate_from_start(log_start_offset, flush=False)
    cache.flush(force=corrupt)
    return cache


def rebuild_producer_state(producer_state: ProducerStateManager, segments: Sequence[LogSegment],
                           log_start_offset: int, log_end_offset: int, now_ms: int, *,
                           force: bool = False,
                           rebuild_txn_index_from: int | None = None) -> int:
    """Bring ``producer_state`` to ``log_end_offset``: drop out-of-range snapshots, reload
    the latest valid one (unless the state already ends there and ``force`` is not set),
    replay the batches after it.  With ``rebuild_txn_index_from`` (the first recovered
    offset, whose segments' ``.txnindex`` were emptied) the replay starts at or below it
    and indexes the aborted transactions whose marker is at or after it.  Returns the
    number of producer batches replayed."""
    psm = producer_state
    if rebuild_txn_index_from is not None:
        psm.delete_snapshots_after(rebuild_txn_index_from)
        force = True
    psm.truncate_and_reload(log_start_offset, log_end_offset, now_ms, force=force)
    start = psm.map_end_offset
    replayed = 0
    if start < log_end_offset:
        log.info("%s: rebuilding producer state from offset %d to %d", psm.topic_partition,
                 start, log_end_offset)
        marker_segment: dict[int, LogSegment] = {}  # marker offset -> its segment

        def batches() -> Iterator[tuple[BatchHeader, EndTransactionMarker | None]]:
            for seg, pos, h in _batches_between(segments, start, log_end_offset):
                marker = None
                if h.is_control:
                    marker = _read_marker(seg, pos, h)
                    marker_segment[h.base_offset] = seg
                yield h, marker

        def index(txn: CompletedTxn) -> None:
            seg = marker_segment.pop(txn.last_offset, None)
            if (rebuild_txn_index_from is not None and seg is not None
                    and txn.last_offset >= rebuild_txn_index_from):
                seg.update_txn_index(txn, psm.last_stable_offset(txn))

        replayed = psm.replay(batches(), index)
    psm.update_map_end_offset(log_end_offset)
    if start != log_end_offset:
        psm.take_snapshot()
    return replayed


def _read_marker(seg: LogSegment, pos: int, header: BatchHeader
                 ) -> EndTransactionMarker | None:
    try:
        return read_end_txn_marker(seg.batch_at(pos)[1])
    except Exception as e:  # recovery checked the CRC: only a malformed record is left
        log.warning("%s: unreadable control batch at offset %d: %s", seg.path,
                    header.base_offset, e)
        return None


def _headers_between(segments: Sequence[LogSegment], start: int, end: int
                     ) -> Iterator[BatchHeader]:
    """Headers of the batches holding offsets in [start, end), in offset order."""
    for _, _, h in _batches_between(segments, start, end):
        yield h


def _batches_between(segments: Sequence[LogSegment], start: int, end: int
                     ) -> Iterator[tuple[LogSegment, int, BatchHeader]]:
    """(segment, position, header) of the batches holding offsets in [start, end), in
    offset order."""
    for i, seg in enumerate(segments):
        seg_end = segments[i + 1].base_offset if i + 1 < len(segments) else end
        if seg_end <= start or seg.base_offset >= end:
            continue
        pos = 0
        if seg.base_offset < start:
            found = seg.translate_offset(start)
            if found is None:
                continue
            pos = found[0]
        for p, h in seg.iter_batches(pos):
            if h.base_offset >= end:
                break
            if h.last_offset >= start:
                yield seg, p, h


def _complete_swap(dir: str, base: int, config: LogConfig, now_ms: int) -> None:
    swap = LogSegment(dir, base, config, now_ms=now_ms, suffix=SWAP_SUFFIX, create=False)
    try:
        swap.recover()
        end = swap.read_next_offset()
        for name in os.listdir(dir):
            b = _base_of(name, LOG_SUFFIX)
            if b is not None and (b == base or base <= b < end):
                log.info("%s: deleting segment %d replaced by an interrupted cleaning", dir, b)
                for s in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                    _unlink(os.path.join(dir, file_name(b, s)))
        swap.change_file_suffixes(SWAP_SUFFIX, "")
        log.info("%s: completed interrupted swap of segment %d", dir, base)
    finally:
        swap.close()
