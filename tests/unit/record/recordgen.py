"""Shared test helpers: hypothesis strategies for records, hand-made batches."""

from __future__ import annotations

import struct

from crc32c import crc32c
from hypothesis import strategies as st

from millrace.record.batch import Record, RecordBatchBuilder
from millrace.record.compression import CompressionType

Header = tuple[str, bytes | None]
RecordSpec = tuple[int, bytes | None, bytes | None, list[Header]]

headers_st = st.lists(
    st.tuples(st.text(max_size=12), st.none() | st.binary(max_size=20)), max_size=4
)
record_st = st.tuples(
    st.integers(0, 1 << 45),
    st.none() | st.binary(max_size=80),
    st.none() | st.binary(max_size=300),
    headers_st,
)
records_st = st.lists(record_st, min_size=1, max_size=40)
codec_st = st.sampled_from(list(CompressionType))


def build(
    specs: list[RecordSpec], codec: CompressionType = CompressionType.NONE, **kwargs: object
) -> bytes:
    builder = RecordBatchBuilder(compression=codec, **kwargs)  # type: ignore[arg-type]
    for timestamp, key, value, headers in specs:
        builder.append(timestamp, key, value, headers)
    return builder.build()


def expected(specs: list[RecordSpec], base_offset: int = 0) -> list[Record]:
    return [Record(base_offset + i, ts, k, v, tuple(h)) for i, (ts, k, v, h) in enumerate(specs)]


_HEADER = struct.Struct(">qiibIhiqqqhii")


def raw_batch(
    records: bytes,
    count: int,
    *,
    attributes: int = 0,
    last_offset_delta: int | None = None,
    base_timestamp: int = 1000,
    max_timestamp: int = 1000,
) -> bytes:
    """A batch around hand-encoded ``records`` bytes, with a correct CRC."""
    out = bytearray(61) + records
    _HEADER.pack_into(
        out, 0, 0, len(out) - 12, -1, 2, 0, attributes,
        count - 1 if last_offset_delta is None else last_offset_delta,
        base_timestamp, max_timestamp, -1, -1, -1, count,
    )
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def fix_crc(batch: bytearray, pos: int = 0) -> None:
    (length,) = struct.unpack_from(">i", batch, pos + 8)
    struct.pack_into(">I", batch, pos + 17, crc32c(bytes(batch[pos + 21 : pos + 12 + length])))


_LEGACY = struct.Struct(">qiIbb")


def legacy_message(
    offset: int,
    key: bytes | None,
    value: bytes | None,
    *,
    magic: int = 1,
    attributes: int = 0,
    timestamp: int = 0,
) -> bytes:
    """One v0/v1 log entry, from the documented layout (CRC-32/IEEE over magic..end)."""
    import zlib

    body = bytearray([magic & 0xFF, attributes])
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for part in (key, value):
        if part is None:
            body += struct.pack(">i", -1)
        else:
            body += struct.pack(">i", len(part)) + part
    crc = zlib.crc32(body)
    return struct.pack(">qiI", offset, len(body) + 4, crc) + bytes(body)
