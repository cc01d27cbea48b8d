"""The producer state of one partition (Java: ``ProducerStateManager``): producer id ->
``ProducerStateEntry``, with its snapshot files.

Persistence, as in Kafka: snapshot files (format in ``producer_snapshot.py``) hold the
state of every producer as of an offset (the log end when written).  They are written when
a segment rolls (snapshot offset = the new segment's base) and on close, the latest
``MAX_RETAINED_SNAPSHOTS`` are kept, and snapshots below the first segment's base go with
retention.  Loading (``log_loader.rebuild_producer_state``) reads the latest valid snapshot
at or below the log end and replays the batch headers from there to the log end; snapshots
above the log end (a crash truncated the log) or below the log start are deleted first.  A
torn or damaged snapshot is logged, deleted and skipped, and the next older snapshot (or a
replay from the log start) is used instead.

Expiry: ``remove_expired_producers(now_ms)`` drops producers without an open transaction
whose last batch timestamp is ``producer.id.expiration.ms`` (1 day) old; the log manager
calls it from its periodic cleanup, and expired producers are skipped when a snapshot loads.

Transactions (Java: ``ongoingTxns``/``unreplicatedTxns``): the open transactions by first
offset, and those a marker completed whose marker the high watermark does not cover yet.
The smallest first offset over both is the *first unstable offset*; the log's last stable
offset (LSO) is min(it, high watermark), so a read_committed consumer sees a transaction
only once its marker is committed.  ``update`` adds the transactions an append started,
``complete_txn`` moves one from open to unreplicated, ``on_high_watermark_updated`` drops
the unreplicated ones whose marker is below the high watermark.  Open transactions are
rebuilt on load from the entries' ``current_txn_first_offset`` (snapshot) and the replay;
unreplicated ones are not kept across a reload (as in Kafka).

Verification (KIP-890 part 1, Java: ``VerificationStateEntry``/``VerificationGuard``): a
transactional batch of a producer with no open transaction here is written only after
the transaction coordinator confirmed that the partition is in the producer's
transaction.  The leader takes a ``VerificationGuard`` before asking and hands it to the
append; a transactional batch or marker of that producer clears the guard, so an answer
that arrives after a marker (the transaction it verified is over) no longer matches and
the append is refused (the ABA case: verify, abort, new transaction, stale "yes").  Once
the first batch is in, the open transaction itself (``current_txn_first_offset``) is the
proof and later batches skip the coordinator.

Not thread-safe: the owning ``Log`` calls everything under its lock.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterable

from millrace.common.errors import InvalidTxnStateError
from millrace.record.batch import BatchHeader
from millrace.record.control import EndTransactionMarker
from millrace.storage.info import AppendOrigin
from millrace.storage.producer_snapshot import (
    SNAPSHOT_SUFFIX,
    TMP_SUFFIX,
    CorruptSnapshotError,
    offset_from_snapshot_name,
    read_snapshot,
    snapshot_file_name,
    write_snapshot,
)
from millrace.storage.producer_state import (
    ProducerAppendInfo,
    ProducerState,
    ProducerStateEntry,
)
from millrace.storage.transaction_index import CompletedTxn

log = logging.getLogger("millrace.storage")

DEFAULT_PRODUCER_ID_EXPIRATION_MS = 24 * 3600 * 1000  # producer.id.expiration.ms
MAX_RETAINED_SNAPSHOTS = 3


class VerificationGuard:
    """A unique token for one verification in flight (compared by identity)."""

    __slots__ = ("producer_id",)

    def __init__(self, producer_id: int) -> None:
        self.producer_id = producer_id

    def __repr__(self) -> str:
        return f"VerificationGuard(producer_id={self.producer_id}, id={id(self):#x})"


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
        # first offset -> producer id
        self._ongoing_txns: dict[int, int] = {}
        # first offset -> (producer id, marker offset)
        self._unreplicated_txns: dict[int, tuple[int, int]] = {}
        self._snapshots: list[int] = self._scan_snapshots()  # offsets, ascending
        # producer id -> the guard of a transaction verification in flight (KIP-890)
        self._verification_guards: dict[int, VerificationGuard] = {}

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
        for first_offset in append_info.started_transactions:
            self._ongoing_txns[first_offset] = pid

    # ------------------------------------------------------------------ verification
    def has_ongoing_transaction(self, producer_id: int) -> bool:
        entry = self._producers.get(producer_id)
        return entry is not None and entry.current_txn_first_offset >= 0

    def maybe_create_verification_guard(self, producer_id: int) -> VerificationGuard:
        """The guard of ``producer_id``'s verification in flight, made if there is none."""
        guard = self._verification_guards.get(producer_id)
        if guard is None:
            guard = self._verification_guards[producer_id] = VerificationGuard(producer_id)
        return guard

    def verification_guard(self, producer_id: int) -> VerificationGuard | None:
        return self._verification_guards.get(producer_id)

    def clear_verification_guard(self, producer_id: int) -> None:
        """A transactional batch or marker of ``producer_id`` was written: the transaction
        is open here (its first offset is known) or over, either way the guard is spent."""
        self._verification_guards.pop(producer_id, None)

    # ------------------------------------------------------------------ transactions
    def complete_txn(self, completed: CompletedTxn) -> None:
        """A marker (already written) ended ``completed``: it stays unstable until the
        high watermark passes its marker."""
        pid = self._ongoing_txns.pop(completed.first_offset, None)
        if pid != completed.producer_id:
            log.warning("%s: completed transaction %s was not open", self.topic_partition,
                        completed)
            if pid is not None:
                self._ongoing_txns[completed.first_offset] = pid
            return
        self._unreplicated_txns[completed.first_offset] = (completed.producer_id,
                                                           completed.last_offset)

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        if not self._unreplicated_txns:  # every high-watermark move asks
            return
        done = [first for first, (_, last) in self._unreplicated_txns.items()
                if last < high_watermark]
        for first in done:
            del self._unreplicated_txns[first]

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open or unreplicated transaction."""
        if not self._ongoing_txns and not self._unreplicated_txns:
            return None
        return min(min(self._ongoing_txns, default=1 << 63),
                   min(self._unreplicated_txns, default=1 << 63))

    def first_undecided_offset(self) -> int | None:
        """The first offset of the oldest open transaction."""
        return min(self._ongoing_txns, default=None)

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO once ``completed`` is no longer open: the first offset of the oldest
        other open transaction, else the offset after its marker (the value its
        ``.txnindex`` entry records)."""
        others = [first for first, pid in self._ongoing_txns.items()
                  if pid != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    @property
    def ongoing_txns(self) -> dict[int, int]:
        """First offset -> producer id of each open transaction (do not modify)."""
        return self._ongoing_txns

    def _rebuild_ongoing_txns(self) -> None:
        self._ongoing_txns = {e.current_txn_first_offset: pid
                              for pid, e in self._producers.items()
                              if e.current_txn_first_offset >= 0}
        self._unreplicated_txns.clear()

    def update_map_end_offset(self, offset: int) -> None:
        self._last_map_offset = offset

    def load_producer_entry(self, entry: ProducerStateEntry) -> None:
        self._producers[entry.producer_id] = entry
        if entry.current_txn_first_offset >= 0:
            self._ongoing_txns[entry.current_txn_first_offset] = entry.producer_id

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

    def replay(self, batches: Iterable[tuple[BatchHeader, EndTransactionMarker | None]],
               on_completed: Callable[[CompletedTxn], None] | None = None) -> int:
        """Rebuild state from stored batches (offsets already assigned; each control
        batch with the marker it holds): no checks, as for replication.  A transaction a
        marker completes goes to ``on_completed`` (the caller indexes aborted ones) with
        the state as of that marker, then to ``complete_txn``.  Returns the number of
        producer batches applied."""
        pending: dict[int, ProducerAppendInfo] = {}
        n = 0
        for h, marker in batches:
            if h.producer_id < 0:
                continue
            info = pending.get(h.producer_id)
            if info is None:
                info = pending[h.producer_id] = self.prepare_update(h.producer_id,
                                                                    AppendOrigin.REPLICATION)
            try:
                txn = info.append(h, h.base_offset, h.last_offset, h.max_timestamp, marker)
            except InvalidTxnStateError as e:  # a replica never refuses what the log holds
                log.warning("%s: %s", self.topic_partition, e)
                txn = None
            n += 1
            if txn is not None:  # the state as of the marker, then the completion
                for info in pending.values():
                    self.update(info)
                pending.clear()
                if on_completed is not None:
                    on_completed(txn)
                self.complete_txn(txn)
        for info in pending.values():
            self.update(info)
        return n

    def clear(self) -> None:
        self._verification_guards.clear()
        self._producers.clear()
        self._ongoing_txns.clear()
        self._unreplicated_txns.clear()

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
        self.clear()
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
            self.clear()
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
