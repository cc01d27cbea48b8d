"""The leader epoch cache of one partition (Java: ``LeaderEpochFileCache`` over
``LeaderEpochCheckpointFile``): for every leader epoch that wrote to this log, the offset of
its first record.

Why (KIP-101, KIP-279): after a leader change a follower must cut the records it has that
the new leader does not, and only those.  Truncating to its high watermark loses records
the old leader had already committed (the watermark reaches followers one fetch late), and
keeping everything lets two replicas hold different records at one offset after two quick
failovers.  So each replica records where each epoch began, and a follower asks the leader
"where does my latest epoch end in your log?" (OffsetForLeaderEpoch, ``end_offset_for``)
and truncates to that.

The entries ``(epoch, start_offset)`` are kept in order, both fields strictly increasing:

    epoch start                         end_offset_for(e, log_end=250)
      0     0     <- earliest           e=0 -> (0, 100)    the next epoch's start
      2   100                           e=1 -> (0, 100)    largest epoch <= 1, then the same
      5   180     <- latest             e=5 -> (5, 250)    the latest epoch ends at the LEO
                                        e=6 -> (-1, -1)    unknown: UNDEFINED
                                        e=-1 -> (-1, -1)

Kafka's rules, kept exactly:

* ``assign(epoch, start)``: negative values are refused (ValueError).  The same epoch as the
  latest entry at an offset at or after its start changes nothing (the epoch goes on).
  Anything else appends the entry after dropping, from the end, every entry whose epoch is
  >= ``epoch`` or whose start is >= ``start`` — so an older epoch or an offset that goes
  backwards replaces the conflicting tail instead of being ignored (a new leader records
  (epoch, LEO) before writing anything, KAFKA-7415; a follower then appends the leader's
  batches over it).
* ``end_offset_for(e, log_end)``: ``e`` = -1 gives (-1, -1); the latest epoch gives
  (e, log_end); otherwise the largest epoch <= ``e`` with the start of the first epoch
  above ``e`` — and when ``e`` is below every known epoch, ``e`` itself with the first
  entry's start (the older epochs were deleted with the start of the log: the follower
  must not keep anything before the leader's first epoch).  An ``e`` above every entry
  gives (-1, -1).
* ``truncate_from_end(end)`` (follower truncation, log recovery): entries starting at or
  after ``end`` go.
* ``truncate_from_start(start)`` (retention, DeleteRecords): entries starting at or before
  ``start`` go, except that the last of them comes back starting at ``start`` — the first
  entry is clipped, never dropped, so the epoch of the first record stays known.
* ``epoch_for_offset(o)``: the epoch of the entry starting at ``o``, else of the last entry
  starting before it; -1 if there is none.

The file ``leader-epoch-checkpoint`` in the partition dir::

    0          <- format version
    2          <- number of entries
    0 0        <- "<epoch> <start offset>", oldest first
    2 100

It is rewritten (temp file, fsync, rename; ``checkpoint.py``) on every change, before the
change is acknowledged, so the file never lacks an entry the log relies on; loading
(``log_loader.py``) trims entries past the log end and before the log start, which a crash
between a truncation and its rewrite could leave.  A malformed file raises
``CorruptCheckpointError`` naming it.

Thread-safe: every method holds ``_lock`` (writes included, so the file always ends up with
the latest state).  The owning ``Log`` calls it under its own lock too; the replica layer
may call ``assign`` directly when this broker becomes leader.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable
from typing import NamedTuple

from millrace.common.errors import KafkaStorageError
from millrace.storage.checkpoint import CheckpointFile

log = logging.getLogger("millrace.storage")

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    """A leader epoch and the offset of its first record (Java: ``EpochEntry``)."""

    epoch: int
    start_offset: int


class _EpochEntryFormatter:
    """"<epoch> <start offset>" lines; a negative value makes the line malformed."""

    def to_line(self, entry: EpochEntry) -> str:
        return f"{entry.epoch} {entry.start_offset}"

    def from_line(self, line: str) -> EpochEntry | None:
        parts = line.split()
        if len(parts) != 2:
            return None
        try:
            entry = EpochEntry(int(parts[0]), int(parts[1]))
        except ValueError:
            return None
        return entry if entry.epoch >= 0 and entry.start_offset >= 0 else None


class LeaderEpochCheckpointFile(CheckpointFile[EpochEntry]):
    """``<partition dir>/leader-epoch-checkpoint``: ``write(entries)`` / ``read()``."""

    def __init__(self, path: str) -> None:
        super().__init__(path, _EpochEntryFormatter())

    @staticmethod
    def in_dir(dir: str) -> LeaderEpochCheckpointFile:
        return LeaderEpochCheckpointFile(os.path.join(dir, LEADER_EPOCH_CHECKPOINT))


class LeaderEpochFileCache:
    """One partition's (epoch, start offset) entries, backed by its checkpoint file (see
    the module docstring for the rules).

    ``entries`` given: start from them (the file is not read, and is rewritten by the next
    ``flush`` if they are not empty); otherwise the file is read, each entry assigned in
    turn as Kafka does (CorruptCheckpointError if malformed).
    """

    def __init__(self, checkpoint: LeaderEpochCheckpointFile, topic_partition: str = "",
                 entries: Iterable[EpochEntry] | None = None) -> None:
        self.checkpoint = checkpoint
        self.topic_partition = topic_partition
        self._lock = threading.RLock()
        self._entries: list[EpochEntry] = []  # guarded by _lock
        self._dirty = False  # guarded by _lock: changes not yet in the file
        given = checkpoint.read() if entries is None else list(entries)
        for e in given:
            self._assign(EpochEntry(e.epoch, e.start_offset))
        # the file differs from memory: it held conflicting entries, or others were given
        self._dirty = self._entries != given if entries is None else bool(self._entries)

    def __repr__(self) -> str:
        return f"LeaderEpochFileCache({self.topic_partition}, {self.entries()})"

    # ------------------------------------------------------------------ reads
    def entries(self) -> list[EpochEntry]:
        """A copy of the entries, oldest first."""
        with self._lock:
            return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def latest_entry(self) -> EpochEntry | None:
        with self._lock:
            return self._entries[-1] if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        with self._lock:
            return self._entries[0] if self._entries else None

    @property
    def latest_epoch(self) -> int:
        """The newest epoch with an entry; -1 (UNDEFINED_EPOCH) if there is none."""
        with self._lock:
            return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    def epoch_entry(self, epoch: int) -> EpochEntry | None:
        with self._lock:
            return next((e for e in self._entries if e.epoch == epoch), None)

    def previous_epoch(self, epoch: int) -> int:
        """The largest epoch below ``epoch`` with an entry; -1 if there is none."""
        with self._lock:
            return next((e.epoch for e in reversed(self._entries) if e.epoch < epoch),
                        UNDEFINED_EPOCH)

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch the record at ``offset`` belongs to by the entries (the last one
        starting at or before it); -1 if every entry starts after it."""
        with self._lock:
            found = UNDEFINED_EPOCH
            for e in self._entries:
                if e.start_offset > offset:
                    break
                found = e.epoch
            return found

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch <= ``requested_epoch``, the start offset of
        the next epoch), (requested, ``log_end_offset``) for the latest epoch, (-1, -1)
        when undefined; see the module docstring for the exact cases."""
        with self._lock:
            undefined = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
            if requested_epoch == UNDEFINED_EPOCH or not self._entries:
                return undefined
            if self._entries[-1].epoch == requested_epoch:
                return requested_epoch, log_end_offset
            higher = next((i for i, e in enumerate(self._entries) if e.epoch > requested_epoch),
                          None)
            if higher is None:
                return undefined
            start = self._entries[higher].start_offset
            if higher == 0:
                return requested_epoch, start
            return self._entries[higher - 1].epoch, start

    # ------------------------------------------------------------------ changes
    def assign(self, epoch: int, start_offset: int, *, flush: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset`` (module docstring: the rules);
        True if the entries changed.  The file is rewritten before returning unless
        ``flush`` is False (then call ``flush()``)."""
        with self._lock:
            changed = self._assign(EpochEntry(epoch, start_offset))
            if changed and flush:
                self.flush()
            return changed

    def assign_entries(self, entries: Iterable[EpochEntry], *, flush: bool = True) -> bool:
        """``assign`` each entry in turn, then rewrite the file once."""
        with self._lock:
            changed = False
            for e in entries:
                changed = self._assign(EpochEntry(e.epoch, e.start_offset)) or changed
            if changed and flush:
                self.flush()
            return changed

    def _assign(self, entry: EpochEntry) -> bool:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"invalid leader epoch entry {entry} for {self.topic_partition}")
        latest = self._entries[-1] if self._entries else None
        if latest is not None and latest.epoch == entry.epoch and \
                entry.start_offset >= latest.start_offset:
            return False
        removed: list[EpochEntry] = []
        while self._entries and (self._entries[-1].epoch >= entry.epoch or
                                 self._entries[-1].start_offset >= entry.start_offset):
            removed.append(self._entries.pop())
        self._entries.append(entry)
        self._dirty = True
        if len(removed) > 1 or (removed and removed[0].start_offset != entry.start_offset):
            log.warning("%s: new epoch entry %s replaced conflicting entries %s",
                        self.topic_partition, tuple(entry), [tuple(e) for e in removed])
        return True

    def truncate_from_end(self, end_offset: int, *, flush: bool = True) -> bool:
        """Drop the entries starting at or after ``end_offset``; True if any went."""
        with self._lock:
            if end_offset < 0:
                return False
            n = len(self._entries)
            while self._entries and self._entries[-1].start_offset >= end_offset:
                self._entries.pop()
            if len(self._entries) == n:
                return False
            self._dirty = True
            log.debug("%s: epoch entries from offset %d dropped, %d left",
                      self.topic_partition, end_offset, len(self._entries))
            if flush:
                self.flush()
            return True

    def truncate_from_start(self, start_offset: int, *, flush: bool = True) -> bool:
        """Drop the entries starting at or before ``start_offset`` but put the last of them
        back starting at ``start_offset``; True if the entries changed."""
        with self._lock:
            k = 0
            while k < len(self._entries) and self._entries[k].start_offset <= start_offset:
                k += 1
            if k == 0:
                return False
            first = EpochEntry(self._entries[k - 1].epoch, start_offset)
            if k == 1 and self._entries[0] == first:
                return False
            self._entries[:k] = [first]
            self._dirty = True
            if flush:
                self.flush()
            return True

    def clear_and_flush(self) -> None:
        """Forget every entry and write the empty file (the log was emptied)."""
        with self._lock:
            self._entries.clear()
            self._dirty = True
            self.flush()

    def clear(self) -> None:
        """Forget every entry without touching the file (the log is being deleted)."""
        with self._lock:
            self._entries.clear()
            self._dirty = False

    def flush(self, force: bool = False) -> None:
        """Rewrite the file if the entries changed since the last write (always with
        ``force``).  KafkaStorageError (naming the file) if it cannot be written; the
        change stays pending."""
        with self._lock:
            if not (self._dirty or force):
                return
            try:
                self.checkpoint.write(self._entries)
            except OSError as e:
                raise KafkaStorageError(
                    f"cannot write leader epoch checkpoint {self.checkpoint.path}: {e}") from e
            self._dirty = False

    def rename_dir(self, new_dir: str) -> None:
        """The partition dir moved (topic deletion): the file moved with it."""
        with self._lock:
            self.checkpoint = LeaderEpochCheckpointFile.in_dir(new_dir)
