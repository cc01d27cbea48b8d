"""The producer state snapshot file (Java: ``ProducerStateManager.writeSnapshot`` /
``readSnapshot``): ``<20-digit offset>.snapshot`` in the partition dir holds the state of
every producer as of that offset.

Format (own, version 1; big-endian)::

    magic "MRPS" | version int16 | crc32c uint32 of everything after it |
    offset int64 | producer count int32 | producers...
    producer: id int64 | epoch int16 | coordinator epoch int32 | last timestamp int64 |
              current txn first offset int64 | batch count int8 | batches...
    batch:    last sequence int32 | last offset int64 | offset delta int32 | timestamp int64

Unlike Kafka's (which keeps only the last batch per producer) it keeps all 5 cached
batches, so every retry the live broker would recognise is still recognised after a
restart.  A file is written to ``.tmp`` and renamed; a torn or damaged one fails its
length or CRC check (``CorruptSnapshotError``); ``ProducerStateManager`` then logs,
deletes and skips it.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections import deque
from collections.abc import Iterable

from crc32c import crc32c

from millrace.common.errors import MillraceError
from millrace.storage.checkpoint import fsync_dir
from millrace.storage.producer_state import (
    NUM_BATCHES_TO_RETAIN,
    BatchMetadata,
    ProducerStateEntry,
)

SNAPSHOT_SUFFIX = ".snapshot"
TMP_SUFFIX = ".tmp"

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
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        with contextlib.suppress(OSError):  # never leave a half-written temp file
            os.unlink(tmp)
        raise
    os.replace(tmp, path)
    if sync:
        fsync_dir(os.path.dirname(os.path.abspath(path)))


def read_snapshot(path: str, expected_offset: int | None = None) -> list[ProducerStateEntry]:
    with open(path, "rb") as f:
        data = f.read()
    return decode_snapshot(data, expected_offset)
