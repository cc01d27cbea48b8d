"""The aborted-transaction index of one segment (Java: ``TransactionIndex``, ``AbortedTxn``,
``CompletedTxn``, ``TxnIndexSearchResult``).

``<base>.txnindex`` beside ``<base>.log`` lists the transactions aborted by an ABORT
marker stored in that segment (the segment holding the *marker*, so a transaction may
begin in an earlier segment), in the order of their markers.  Entries (Kafka's layout,
big-endian, 34 bytes, no header)::

    version int16 (0) | producerId int64 | firstOffset int64 | lastOffset int64 |
    lastStableOffset int64

``firstOffset`` is the transaction's first data offset, ``lastOffset`` the offset of its
ABORT marker, ``lastStableOffset`` the partition's LSO once the marker was written (the
first offset of the oldest other open transaction, else ``lastOffset + 1``).

A read_committed fetch from offset F returning data below U asks every segment from the
one holding F for the aborted transactions overlapping [F, U) (``lastOffset >= F`` and
``firstOffset < U``); the search stops at the first entry whose ``lastStableOffset`` is
at or past U: no transaction aborted later can have started below U.

The file is created on the first append (most segments have no aborted transaction and
no file).  Entries are written with ``pwrite`` when the marker is appended and fsync'd
with the segment; a torn trailing entry is ignored on load (recovery of an uncleanly
closed segment rebuilds its index from the log anyway: ``log_loader.py``).  Truncation
cuts the entries whose ``lastOffset`` is at or after the new log end.

Not thread-safe: the owning ``Log`` calls it under its lock (reads included).
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
from typing import NamedTuple

log = logging.getLogger("millrace.storage")

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
CURRENT_VERSION = 0


class CompletedTxn(NamedTuple):
    """A transaction ended by a marker at ``last_offset`` (Java ``CompletedTxn``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class AbortedTxn(NamedTuple):
    """One entry of a ``.txnindex`` (Java ``AbortedTxn``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(CURRENT_VERSION, self.producer_id, self.first_offset,
                           self.last_offset, self.last_stable_offset)


class TxnIndexSearchResult(NamedTuple):
    aborted_transactions: list[AbortedTxn]
    is_complete: bool


def decode_entries(data: bytes, path: str = "<txnindex>") -> list[AbortedTxn]:
    """The entries of a ``.txnindex`` file's bytes; a torn trailing entry is dropped with a
    warning, an entry of an unknown version raises ValueError."""
    whole = len(data) - len(data) % ENTRY_SIZE
    if whole != len(data):
        log.warning("%s: ignoring %d trailing bytes (a torn entry)", path, len(data) - whole)
    out = []
    for pos in range(0, whole, ENTRY_SIZE):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        if version != CURRENT_VERSION:
            raise ValueError(f"{path}: entry at position {pos} has version {version}")
        out.append(AbortedTxn(pid, first, last, lso))
    return out


class TransactionIndex:
    """The aborted transactions of one segment (see the module docstring)."""

    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._fd = -1
        self._entries: list[AbortedTxn] | None = None  # loaded on first use
        self._size = 0  # bytes of whole entries in the file

    # ------------------------------------------------------------------ reading
    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            try:
                with open(self.path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                data = b""
            try:
                self._entries = decode_entries(data, self.path)
            except ValueError as e:
                log.warning("%s; ignoring the index from there", e)
                self._entries = []
            self._size = len(self._entries) * ENTRY_SIZE
        return self._entries

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int
                             ) -> TxnIndexSearchResult:
        """The aborted transactions overlapping [fetch_offset, upper_bound_offset), and
        whether no later segment can add any."""
        found = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    # ------------------------------------------------------------------ writing
    def append(self, txn: AbortedTxn) -> None:
        """Add an entry; markers come in offset order, so ``last_offset`` must grow."""
        entries = self.entries
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise ValueError(f"{self.path}: aborted transaction ending at {txn.last_offset} "
                             f"after one ending at {entries[-1].last_offset}")
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            if os.fstat(self._fd).st_size != self._size:  # a torn tail goes first
                os.ftruncate(self._fd, self._size)
        data = txn.encode()
        os.pwrite(self._fd, data, self._size)
        self._size += len(data)
        entries.append(txn)

    def truncate_to(self, offset: int) -> None:
        """Forget the transactions whose marker is at or after ``offset``."""
        entries = self.entries
        keep = len(entries)
        while keep and entries[keep - 1].last_offset >= offset:
            keep -= 1
        if keep == len(entries):
            return
        del entries[keep:]
        self._size = keep * ENTRY_SIZE
        self._cut_file()

    def reset(self) -> None:
        """Empty the index (its segment is being recovered and rebuilds it)."""
        self._entries = []
        self._size = 0
        self._cut_file()

    def _cut_file(self) -> None:
        if self._fd >= 0:
            os.ftruncate(self._fd, self._size)
        elif os.path.exists(self.path):
            with open(self.path, "r+b") as f:
                f.truncate(self._size)

    def flush(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)

    # ------------------------------------------------------------------ file lifecycle
    def rename(self, new_path: str) -> None:
        if os.path.exists(self.path):
            os.replace(self.path, new_path)
        self.path = new_path

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        self.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
