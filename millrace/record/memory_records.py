"""A buffer of concatenated batches of any magic, as read from a log or a fetch response.

Java counterpart: ``org.apache.kafka.common.record.MemoryRecords`` (``batches()``,
``records()``, ``validBytes()``), with ``ByteBufferLogInputStream``'s walking rules: an entry is
``offset int64, length int32, …`` whatever its magic, the magic byte sits at offset 16 for every
format, a trailing partial entry ends the walk silently (fetch responses may be cut mid-batch),
and a length below the smallest legacy message is corruption.

``batches()`` yields ``RecordBatch`` (magic 2) or ``LegacyRecordBatch`` (magic 0/1, one per
top-level message); both offer ``base_offset``, ``last_offset``, ``next_offset``, ``size``,
``magic``, ``compression``, ``is_control``, ``is_transactional``, ``producer_id``,
``validate()`` and ``records()``.  Broker code that only accepts v2 uses ``batch.iter_batches``.
"""

from __future__ import annotations

from collections.abc import Iterator

from millrace.common.errors import CorruptBatchError
from millrace.record.batch import HEADER_SIZE, LOG_OVERHEAD, MAGIC_OFFSET, Record, RecordBatch
from millrace.record.compression import DEFAULT_MAX_DECOMPRESSED
from millrace.record.legacy import LegacyRecordBatch, next_entry

__all__ = ["AnyRecordBatch", "MemoryRecords"]

AnyRecordBatch = RecordBatch | LegacyRecordBatch
_Buffer = bytes | bytearray | memoryview


class MemoryRecords:
    """Read-only view over concatenated record batches (v0, v1 and v2 may be mixed)."""

    __slots__ = ("_buf",)

    def __init__(self, buf: _Buffer) -> None:
        self._buf = buf

    def __len__(self) -> int:
        return len(self._buf)

    def batches(self) -> Iterator[AnyRecordBatch]:
        """Each complete batch in order; CRCs are not checked (call ``validate()``)."""
        buf = self._buf
        pos, end = 0, len(buf)
        while True:
            size = next_entry(buf, pos, end)
            if size is None:
                return
            magic = buf[pos + MAGIC_OFFSET]
            if magic == 2:
                if size < HEADER_SIZE:
                    raise CorruptBatchError(f"record batch at position {pos} has length "
                                            f"{size - LOG_OVERHEAD}, below the minimum "
                                            f"{HEADER_SIZE - LOG_OVERHEAD}")
                batch: AnyRecordBatch = RecordBatch(buf, pos)
            elif magic in (0, 1):
                batch = LegacyRecordBatch(buf, pos)
            else:
                raise CorruptBatchError(f"unknown magic {magic} at position {pos}")
            yield batch
            pos += size

    def records(
        self, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED, *, include_control: bool = False
    ) -> Iterator[Record]:
        """Records of every batch in order, skipping control batches unless asked."""
        for batch in self.batches():
            if batch.is_control and not include_control:
                continue
            yield from batch.records(max_decompressed)

    def valid_bytes(self) -> int:
        """Bytes covered by complete batches whose CRC checks out, up to the first bad one."""
        total = 0
        for batch in self.batches():
            if not batch.is_valid():
                break
            total += batch.size
        return total
