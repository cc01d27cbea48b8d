"""Per-partition producer state for idempotence (Java: ``ProducerStateManager``,
``ProducerStateEntry``, ``ProducerAppendInfo``, ``BatchMetadata``).

Each partition log keeps, per producer id, the producer epoch and the metadata of the
producer's last 5 appended batches (first/last sequence, first/last offset, max
timestamp), so that a retried batch is recognised and answered with its original offsets
instead of being written twice.  Rules on an append from a client (see
``ProducerAppendInfo``; reference: kafka-protocol.md section 8.1):

1. same epoch and [base sequence, last sequence] equal to one of the cached batches: a
   duplicate; the log writes nothing and answers with the original batch's offsets
   (``ProducerStateEntry.find_duplicate_batch``, checked by ``Log.append_as_leader``);
2. epoch lower than the stored one: INVALID_PRODUCER_EPOCH (47);
3. a new, higher epoch: the first sequence must be 0, else OUT_OF_ORDER_SEQUENCE_NUMBER (45);
4. same epoch: base sequence = last sequence + 1 (0 after int32 max), else 45;
5. no state for the producer (new, expired or deleted by retention): any sequence.

Appends from replication and the broker's coordinators update the state without checks.
State changes only after the append reached the segment (``update``).

Persistence, as in Kafka: ``<20-digit offset>.snapshot`` files in the partition dir hold the
state of every producer as of that offset (the log end when written).  They are written when
a segment rolls (snapshot offset = the new segment's base) and on close, the latest
``MAX_RETAINED_SNAPSHOTS`` are kept, and snapshots below the first segment's base go with
retention.  Loading (``log_loader.rebuild_producer_state``) reads the latest valid snapshot
at or below the log end and replays the batch headers from there to the log end; snapshots
above the log end (a crash truncated the log) or below the log start are deleted first.

Snapshot format (own, version 1; big-endian)::

    magic "MRPS" | version int16 | crc32c uint32 of everything after it |
    offset int64 | producer count int32 | producers...
    producer: id int64 | epoch int16 | coordinator epoch int32 | last timestamp int64 |
              current txn first offset int64 | batch count int8 | batches...
    batch:    last sequence int32 | last offset int64 | offset delta int32 | timestamp int64

Unlike Kafka's (which keeps only the last batch per producer) it keeps all 5 cached
batches, so every retry the live broker would recognise is still recognised after a
restart.  A file is written to ``.tmp`` and renamed; a torn or damaged one fails its
length or CRC check (``CorruptSnapshotError``), is logged, deleted and skipped, and the
next older snapshot (or a replay from the log start) is used instead.

Expiry: ``remove_expired_producers(now_ms)`` drops producers without an open transaction
whose last batch timestamp is ``producer.id.expiration.ms`` (1 day) old; the log manager
calls it from its periodic cleanup, and expired producers are skipped when a snapshot loads.

Not thread-safe: the owning ``Log`` calls everything under its lock.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from crc32c import crc32c

from millrace.common.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    MillraceError,
    OutOfOrderSequenceError,
)
from millrace.record.batch import NO_PRODUCER_EPOCH, NO_SEQUENCE, NO_TIMESTAMP, BatchHeader
from millrace.storage.checkpoint import fsync_dir
from millrace.storage.info import AppendOrigin

log = logging.getLogger("millrace.storage")

NUM_BATCHES_TO_RETAIN = 5
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 24 * 3600 * 1000  # producer.id.expiration.ms
MAX_RETAINED_SNAPSHOTS = 3
SNAPSHOT_SUFFIX = ".snapshot"
TMP_SUFFIX = ".tmp"
INT32_MAX = (1 << 31) - 1

_MAGIC = b"MRPS"
_VERSION = 1
_HEAD = struct.Struct(">4shI")       # magic, version, crc
_BODY_HEAD = struct.Struct(">qi")    # offset, producer count
_PRODUCER = struct.Struct(">qhiqqb")  # id, epoch, coordinator epoch, last ts, txn first, n
_BATCH = struct.Struct(">iqiq")      # last seq, last offset, offset delta, timestamp


class CorruptSnapshotError(MillraceError):
    """A producer snapshot file that cannot be trusted (torn, damaged, wrong version)."""


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def offset_from_snapshot_name(name: str) -> int | None:
    if not name.endswith(SNAPSHOT_SUFFIX):
        return None
    stem = name[: -len(SNAPSHOT_SUFFIX)]
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``sequence - decrement`` with int32 wrap-around (Java ``DefaultRecordBatch``)."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class BatchMetadata(NamedTuple):
    """What is remembered of one appended batch (Java ``BatchMetadata``)."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class ProducerState(NamedTuple):
    """One active producer of a partition, as DescribeProducers reports it (Java
    ``DescribeProducersResponseData.ProducerState``)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


@dataclass(eq=True)
class ProducerStateEntry:
    """The state of one producer id on one partition: its epoch and its last 5 batches,
    oldest first."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = NO_TIMESTAMP
    current_txn_first_offset: int = -1  # -1: no open transaction
    batch_metadata: deque[BatchMetadata] = field(default_factory=deque)

    @staticmethod
    def empty(producer_id: int) -> ProducerStateEntry:
        return ProducerStateEntry(producer_id)

    @property
    def is_empty(self) -> bool:
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        return self.batch_metadata[0].first_offset if self.batch_metadata else -1

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    def with_producer_id(self, producer_id: int) -> ProducerStateEntry:
        """A copy with everything but the batches (what an append starts from)."""
        return ProducerStateEntry(producer_id, self.producer_epoch, self.coordinator_epoch,
                                  self.last_timestamp, self.current_txn_first_offset)

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(self.producer_id, self.producer_epoch, self.coordinator_epoch,
                                  self.last_timestamp, self.current_txn_first_offset,
                                  deque(self.batch_metadata))

    def add_batch(self, producer_epoch: int, last_seq: int, last_offset: int, offset_delta: int,
                  timestamp: int) -> None:
        self.maybe_update_producer_epoch(producer_epoch)
        self._add_batch_metadata(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def maybe_update_producer_epoch(self, producer_epoch: int) -> bool:
        """A new epoch forgets the batches of the old one."""
        if self.producer_epoch != producer_epoch:
            self.batch_metadata.clear()
            self.producer_epoch = producer_epoch
            return True
        return False

    def _add_batch_metadata(self, batch: BatchMetadata) -> None:
        if len(self.batch_metadata) == NUM_BATCHES_TO_RETAIN:
            self.batch_metadata.popleft()
        self.batch_metadata.append(batch)

    def update(self, next_entry: ProducerStateEntry) -> None:
        """Fold in the result of an append (``ProducerAppendInfo.updated_entry``)."""
        self.maybe_update_producer_epoch(next_entry.producer_epoch)
        for b in next_entry.batch_metadata:
            self._add_batch_metadata(b)
        self.coordinator_epoch = next_entry.coordinator_epoch
        self.current_txn_first_offset = next_entry.current_txn_first_offset
        self.last_timestamp = next_entry.last_timestamp

    def find_duplicate_batch(self, producer_epoch: int, base_sequence: int,
                             last_sequence: int) -> BatchMetadata | None:
        """The cached batch a retried batch duplicates, if any (same epoch, same range)."""
        if producer_epoch != self.producer_epoch:
            return None
        return self.batch_with_sequence_range(base_sequence, last_sequence)

    def batch_with_sequence_range(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for b in self.batch_metadata:
            if b.last_seq == last_seq and b.first_seq == first_seq:
                return b
        return None


class ProducerAppendInfo:
    """Checks and accumulates the batches of one producer in one append, starting from the
    producer's state after the last successful append (``current_entry``).  Nothing is
    changed in the manager until ``ProducerStateManager.update``."""

    __slots__ = ("current_entry", "origin", "producer_id", "topic_partition", "updated_entry")

    def __init__(self, topic_partition: str, producer_id: int,
                 current_entry: ProducerStateEntry, origin: AppendOrigin) -> None:
        self.topic_partition = topic_partition
        self.producer_id = producer_id
        self.current_entry = current_entry
        self.origin = origin
        self.updated_entry = current_entry.with_producer_id(producer_id)

    def append(self, header: BatchHeader, first_offset: int, last_offset: int,
               timestamp: int) -> None:
        """One batch at [first_offset, last_offset] whose stored max timestamp is
        ``timestamp``; raises the Kafka error for a client batch that breaks a rule."""
        if header.is_control:
            self.append_end_txn_marker(header.producer_epoch, timestamp)
        else:
            self.append_data_batch(header.producer_epoch, header.base_sequence,
                                   header.last_sequence, timestamp, first_offset, last_offset,
                                   header.is_transactional)

    def append_data_batch(self, epoch: int, first_seq: int, last_seq: int, timestamp: int,
                          first_offset: int, last_offset: int, is_transactional: bool) -> None:
        if self.origin == AppendOrigin.CLIENT:
            self._check_producer_epoch(epoch, first_offset)
            self._check_sequence(epoch, first_seq, first_offset)
        elif epoch < self.updated_entry.producer_epoch:
            log.warning("%s: epoch %d of producer %d at offset %d is older than the last seen "
                        "epoch %d (%s append)", self.topic_partition, epoch, self.producer_id,
                        first_offset, self.updated_entry.producer_epoch, self.origin.name)
        entry = self.updated_entry
        entry.add_batch(epoch, last_seq, last_offset, last_offset - first_offset, timestamp)
        if entry.current_txn_first_offset >= 0 and not is_transactional:
            raise InvalidTxnStateError(
                f"Expected transactional write from producer {self.producer_id} at offset "
                f"{first_offset} in partition {self.topic_partition}")
        if entry.current_txn_first_offset < 0 and is_transactional:
            entry.current_txn_first_offset = first_offset

    def append_end_txn_marker(self, epoch: int, timestamp: int,
                              coordinator_epoch: int | None = None) -> None:
        """A transaction marker (control batch): ends the producer's open transaction.
        The coordinator epoch is kept unless given (the record is not decoded here)."""
        entry = self.updated_entry
        entry.maybe_update_producer_epoch(epoch)
        if coordinator_epoch is not None:
            entry.coordinator_epoch = coordinator_epoch
        entry.current_txn_first_offset = -1
        entry.last_timestamp = timestamp

    def _check_producer_epoch(self, epoch: int, offset: int) -> None:
        current = self.updated_entry.producer_epoch
        if epoch < current:
            raise InvalidProducerEpochError(
                f"Epoch of producer {self.producer_id} at offset {offset} in "
                f"{self.topic_partition} is {epoch}, which is smaller than the last seen "
                f"epoch {current}")

    def _check_sequence(self, epoch: int, first_seq: int, offset: int) -> None:
        updated, current = self.updated_entry, self.current_entry
        if epoch != updated.producer_epoch:
            if first_seq != 0 and updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"Invalid sequence number for new epoch of producer {self.producer_id} at "
                    f"offset {offset} in partition {self.topic_partition}: {epoch} (request "
                    f"epoch), {first_seq} (seq. number), {updated.producer_epoch} (current "
                    "producer epoch)")
            return
        if not updated.is_empty:
            last_seq = updated.last_seq
        elif epoch == current.producer_epoch:
            last_seq = current.last_seq
        else:
            last_seq = NO_SEQUENCE
        # no epoch known (state deleted with the log or expired): any sequence is accepted
        if current.producer_epoch != NO_PRODUCER_EPOCH and not in_sequence(last_seq, first_seq):
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for producer {self.producer_id} at offset "
                f"{offset} in partition {self.topic_partition}: {first_seq} (incoming seq. "
                f"number), {last_seq} (current end sequence number)")

    def to_entry(self) -> ProducerStateEntry:
        return self.updated_entry


class ProducerStateManager:
    """Producer id -> ``ProducerStateEntry`` for one partition, with its snapshot files.

    ``map_end_offset`` is the log offset up to which the state reflects the log (the log
    end offset after every append, replay or truncation)."""

    def __init__(self, log_dir: str,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                 topic_partition: str | None = None) -> None:
        self.dir = log_dir
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.topic_partition = topic_partition or os.path.basename(log_dir)
        self._producers: dict[int, ProducerStateEntry] = {}
        self._last_map_offset = 0
        self._last_snap_offset = 0
        self._snapshots: list[int] = self._scan_snapshots()  # offsets, ascending

    def _scan_snapshots(self) -> list[int]:
        offsets = []
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return []
        for name in names:
            if name.endswith(SNAPSHOT_SUFFIX + TMP_SUFFIX):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(self.dir, name))
                continue
            off = offset_from_snapshot_name(name)
            if off is not None:
                offsets.append(off)
        return sorted(offsets)

    # ------------------------------------------------------------------ state
    @property
    def map_end_offset(self) -> int:
        return self._last_map_offset

    @property
    def is_empty(self) -> bool:
        return not self._producers

    @property
    def producers(self) -> dict[int, ProducerStateEntry]:
        """The live map (read it under the log's lock; do not modify)."""
        return self._producers

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def active_producers(self) -> list[ProducerState]:
        """Every producer with state, for DescribeProducers."""
        return [ProducerState(pid, e.producer_epoch, e.last_seq, e.last_timestamp,
                              e.coordinator_epoch, e.current_txn_first_offset)
                for pid, e in sorted(self._producers.items())]

    def prepare_update(self, producer_id: int, origin: AppendOrigin) -> ProducerAppendInfo:
        current = self._producers.get(producer_id) or ProducerStateEntry.empty(producer_id)
        return ProducerAppendInfo(self.topic_partition, producer_id, current, origin)

    def update(self, append_info: ProducerAppendInfo) -> None:
        """Apply a checked append (after it reached the log)."""
        pid = append_info.producer_id
        if pid < 0:
            raise ValueError(f"invalid producer id {pid}")
        updated = append_info.to_entry()
        current = self._producers.get(pid)
        if current is not None:
            current.update(updated)
        else:
            self._producers[pid] = updated

    def update_map_end_offset(self, offset: int) -> None:
        self._last_map_offset = offset

    def load_producer_entry(self, entry: ProducerStateEntry) -> None:
        self._producers[entry.producer_id] = entry

    def is_producer_expired(self, now_ms: int, entry: ProducerStateEntry) -> bool:
        return (entry.current_txn_first_offset < 0
                and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms)

    def remove_expired_producers(self, now_ms: int) -> int:
        """Forget producers idle for producer.id.expiration.ms; returns how many."""
        expired = [pid for pid, e in self._producers.items()
                   if self.is_producer_expired(now_ms, e)]
        for pid in expired:
            del self._producers[pid]
        if expired:
            log.info("%s: expired %d producer id(s)", self.topic_partition, len(expired))
        return len(expired)

    def replay(self, headers: Iterable[BatchHeader]) -> int:
        """Rebuild state from stored batches (offsets already assigned): no checks, as
        for replication.  Returns the number of producer batches applied."""
        pending: dict[int, ProducerAppendInfo] = {}
        n = 0
        for h in headers:
            if h.producer_id < 0:
                continue
            info = pending.get(h.producer_id)
            if info is None:
                info = pending[h.producer_id] = self.prepare_update(h.producer_id,
                                                                    AppendOrigin.REPLICATION)
            try:
                info.append(h, h.base_offset, h.last_offset, h.max_timestamp)
            except InvalidTxnStateError as e:  # a replica never refuses what the log holds
                log.warning("%s: %s", self.topic_partition, e)
            n += 1
        for info in pending.values():
            self.update(info)
        return n

    def clear(self) -> None:
        self._producers.clear()

    # ------------------------------------------------------------------ snapshots
    def snapshot_offsets(self) -> list[int]:
        return list(self._snapshots)

    @property
    def latest_snapshot_offset(self) -> int | None:
        return self._snapshots[-1] if self._snapshots else None

    @property
    def oldest_snapshot_offset(self) -> int | None:
        return self._snapshots[0] if self._snapshots else None

    @property
    def last_snapshot_offset(self) -> int:
        """Offset of the snapshot the state was last written to or loaded from."""
        return self._last_snap_offset

    def snapshot_path(self, offset: int) -> str:
        return os.path.join(self.dir, snapshot_file_name(offset))

    def take_snapshot(self, sync: bool = False) -> str:
        """Write the state as of ``map_end_offset`` and prune old snapshots.  With ``sync``
        the file and the directory are fsync'd.  Returns the path written."""
        offset = self._last_map_offset
        path = self.snapshot_path(offset)
        write_snapshot(path, offset, self._producers.values(), sync=sync)
        if offset not in self._snapshots:
            self._snapshots.append(offset)
            self._snapshots.sort()
        self._last_snap_offset = offset
        self._prune_snapshots()
        return path

    def _prune_snapshots(self) -> None:
        while len(self._snapshots) > MAX_RETAINED_SNAPSHOTS:
            self._delete_snapshot(self._snapshots[0])

    def _delete_snapshot(self, offset: int) -> None:
        with contextlib.suppress(ValueError):
            self._snapshots.remove(offset)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.snapshot_path(offset))

    def delete_snapshots_before(self, offset: int) -> None:
        for off in [o for o in self._snapshots if o < offset]:
            self._delete_snapshot(off)

    def delete_snapshots_after(self, offset: int) -> None:
        for off in [o for o in self._snapshots if o > offset]:
            self._delete_snapshot(off)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """The log was emptied and restarts at ``offset``: no state, no snapshots."""
        self._producers.clear()
        for off in list(self._snapshots):
            self._delete_snapshot(off)
        self._last_map_offset = self._last_snap_offset = offset

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """Records below the log start are gone; the state of their producers stays in
        memory (as in Kafka) until the producers expire or the log is reloaded."""
        if self._last_map_offset < log_start_offset:
            self._last_map_offset = log_start_offset

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now_ms: int,
                            *, force: bool = False) -> None:
        """Drop snapshots outside [log start, log end] and, unless the state already ends
        at the log end (and ``force`` is not set), reload it from the latest valid snapshot.
        The caller then replays the log from ``map_end_offset`` to the log end."""
        for off in [o for o in self._snapshots
                    if o > log_end_offset or o < log_start_offset]:
            self._delete_snapshot(off)
        if force or log_end_offset != self._last_map_offset:
            self._producers.clear()
            self._load_from_snapshot(log_start_offset, now_ms)
        else:
            self.on_log_start_offset_incremented(log_start_offset)

    def _load_from_snapshot(self, log_start_offset: int, now_ms: int) -> None:
        while self._snapshots:
            offset = self._snapshots[-1]
            path = self.snapshot_path(offset)
            try:
                entries = read_snapshot(path, offset)
            except (CorruptSnapshotError, OSError) as e:
                log.warning("%s: ignoring producer snapshot %s: %s", self.topic_partition,
                            path, e)
                self._delete_snapshot(offset)
                continue
            for entry in entries:
                if not self.is_producer_expired(now_ms, entry):
                    self.load_producer_entry(entry)
            self._last_snap_offset = self._last_map_offset = offset
            log.debug("%s: loaded %d producer(s) from snapshot %s", self.topic_partition,
                      len(self._producers), path)
            return
        self._last_snap_offset = self._last_map_offset = log_start_offset

    def rename_dir(self, new_dir: str) -> None:
        self.dir = new_dir


# ---------------------------------------------------------------------- snapshot files
def encode_snapshot(offset: int, entries: Iterable[ProducerStateEntry]) -> bytes:
    items = list(entries)
    body = bytearray(_BODY_HEAD.pack(offset, len(items)))
    for e in items:
        body += _PRODUCER.pack(e.producer_id, e.producer_epoch, e.coordinator_epoch,
                               e.last_timestamp, e.current_txn_first_offset,
                               len(e.batch_metadata))
        for b in e.batch_metadata:
            body += _BATCH.pack(b.last_seq, b.last_offset, b.offset_delta, b.timestamp)
    return _HEAD.pack(_MAGIC, _VERSION, crc32c(body)) + bytes(body)


def decode_snapshot(data: bytes, expected_offset: int | None = None
                    ) -> list[ProducerStateEntry]:
    if len(data) < _HEAD.size + _BODY_HEAD.size:
        raise CorruptSnapshotError(f"{len(data)} bytes is too short for a snapshot")
    magic, version, crc = _HEAD.unpack_from(data, 0)
    if magic != _MAGIC:
        raise CorruptSnapshotError(f"bad magic {magic!r}")
    if version != _VERSION:
        raise CorruptSnapshotError(f"unsupported snapshot version {version}")
    body = memoryview(data)[_HEAD.size:]
    if crc32c(body) != crc:
        raise CorruptSnapshotError("CRC mismatch (torn or damaged file)")
    offset, count = _BODY_HEAD.unpack_from(body, 0)
    if expected_offset is not None and offset != expected_offset:
        raise CorruptSnapshotError(f"snapshot holds offset {offset}, its name says "
                                   f"{expected_offset}")
    pos = _BODY_HEAD.size
    out = []
    try:
        for _ in range(count):
            pid, epoch, coord, ts, txn, n = _PRODUCER.unpack_from(body, pos)
            pos += _PRODUCER.size
            if not 0 <= n <= NUM_BATCHES_TO_RETAIN:
                raise CorruptSnapshotError(f"producer {pid} has {n} batches")
            batches: deque[BatchMetadata] = deque()
            for _ in range(n):
                batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                pos += _BATCH.size
            out.append(ProducerStateEntry(pid, epoch, coord, ts, txn, batches))
    except struct.error:
        raise CorruptSnapshotError(f"snapshot ends inside producer {len(out)} of "
                                   f"{count}") from None
    if pos != len(body):
        raise CorruptSnapshotError(f"{len(body) - pos} trailing bytes")
    return out


def write_snapshot(path: str, offset: int, entries: Iterable[ProducerStateEntry], *,
                   sync: bool = False) -> None:
    """Write to ``<path>.tmp`` and rename over ``path``; with ``sync`` the data and the
    rename are made durable."""
    data = encode_snapshot(offset, entries)
    tmp = path + TMP_SUFFIX
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(os.path.dirname(os.path.abspath(path)))


def read_snapshot(path: str, expected_offset: int | None = None) -> list[ProducerStateEntry]:
    with open(path, "rb") as f:
        data = f.read()
    return decode_snapshot(data, expected_offset)

