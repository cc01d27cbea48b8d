"""One record inside a v2 batch: encoding, strict decoding, size bounds.

Java counterpart: ``org.apache.kafka.common.record.DefaultRecord``.

Byte layout (varints are zig-zag, see ``varint.py``)::

    length          varint   bytes that follow
    attributes      int8     unused, 0
    timestampDelta  varlong  relative to the batch's baseTimestamp
    offsetDelta     varint   relative to the batch's baseOffset
    keyLength       varint   -1 = null key
    key             bytes
    valueLength     varint   -1 = null value (a tombstone)
    value           bytes
    headerCount     varint
    headers         headerKeyLength varint, UTF-8 key (never null),
                    headerValueLength varint (-1 = null), value

There is no per-record CRC in v2; the batch CRC covers everything.  The decoder checks every
length against the bytes really left in the record (and the record against the batch) before
slicing, so hostile input raises ``CorruptBatchError`` and never allocates beyond its size.
Single-byte varints (the common case) are decoded inline: this loop is the consumer hot path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from millrace.common.errors import CorruptBatchError
from millrace.record.varint import decode_varint, decode_varlong, write_varint, write_varlong

__all__ = ["Record", "decode_records", "encode_record", "record_size_upper_bound"]

MIN_RECORD_SIZE = 7  # length, attributes, ts delta, offset delta, key/value lengths, headers
_MAX_RECORD_OVERHEAD = 5 + 1 + 10 + 5 + 5 + 5 + 5  # every varint at its widest


@dataclass(slots=True)
class Record:
    """One record as a consumer sees it (offset and timestamp already made absolute)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


def record_size_upper_bound(
    key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]] = ()
) -> int:
    """Most bytes one record with this key/value/headers can take inside a batch."""
    size = _MAX_RECORD_OVERHEAD + (len(key) if key is not None else 0)
    size += len(value) if value is not None else 0
    for header_key, header_value in headers:
        size += 10 + len(header_key.encode()) + (len(header_value) if header_value else 0)
    return size


def encode_record(
    out: bytearray,
    scratch: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]],
) -> int:
    """Append one record to ``out`` (``scratch`` is reusable working space); returns its size."""
    s = scratch
    s.clear()
    s.append(0)  # record attributes (unused)
    if 0 <= timestamp_delta < 64:
        s.append(timestamp_delta << 1)
    else:
        write_varlong(s, timestamp_delta)
    if 0 <= offset_delta < 64:
        s.append(offset_delta << 1)
    else:
        write_varint(s, offset_delta)
    if key is None:
        s.append(1)
    else:
        n = len(key)
        if n < 64:
            s.append(n << 1)
        else:
            write_varint(s, n)
        s += key
    if value is None:
        s.append(1)
    else:
        n = len(value)
        if n < 64:
            s.append(n << 1)
        else:
            write_varint(s, n)
        s += value
    if headers:
        write_varint(s, len(headers))
        for header_key, header_value in headers:
            encoded = header_key.encode()
            write_varint(s, len(encoded))
            s += encoded
            if header_value is None:
                s.append(1)
            else:
                write_varint(s, len(header_value))
                s += header_value
    else:
        s.append(0)
    size = len(s)
    if size < 64:
        out.append(size << 1)
        size += 1
    else:
        before = len(out)
        write_varint(out, size)
        size += len(out) - before
    out += s
    return size


def decode_records(
    data: bytes, pos: int, end: int, count: int, base_offset: int, base_timestamp: int,
    append_time: int | None,
) -> list[Record]:
    """Decode ``count`` records filling ``data[pos:end]`` exactly.

    Offsets become ``base_offset + offsetDelta``; timestamps ``base_timestamp + delta``, or
    ``append_time`` for every record when the batch is LogAppendTime.
    """
    if count < 0 or count > (end - pos) // MIN_RECORD_SIZE:
        raise CorruptBatchError(f"record batch claims {count} records in {end - pos} bytes")
    out: list[Record] = []
    append = out.append
    dvi = decode_varint
    dvl = decode_varlong
    i = pos
    try:
        for _ in range(count):
            b = data[i]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                i += 1
            elif data[i + 1] < 0x80:  # two bytes, still inline
                b = (b & 0x7F) | (data[i + 1] << 7)
                length = (b >> 1) ^ -(b & 1)
                i += 2
            else:
                length, i = dvi(data, i)
            rec_end = i + length
            if length < MIN_RECORD_SIZE - 1 or rec_end > end:
                raise CorruptBatchError(f"record at position {i} claims {length} bytes, "
                                        f"{end - i} left")
            i += 1  # record attributes (unused)
            b = data[i]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                i += 1
            elif data[i + 1] < 0x80:  # two bytes, still inline
                b = (b & 0x7F) | (data[i + 1] << 7)
                ts_delta = (b >> 1) ^ -(b & 1)
                i += 2
            else:
                ts_delta, i = dvl(data, i)
            b = data[i]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                i += 1
            elif data[i + 1] < 0x80:  # two bytes, still inline
                b = (b & 0x7F) | (data[i + 1] << 7)
                offset_delta = (b >> 1) ^ -(b & 1)
                i += 2
            else:
                offset_delta, i = dvi(data, i)
            b = data[i]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                i += 1
            elif data[i + 1] < 0x80:  # two bytes, still inline
                b = (b & 0x7F) | (data[i + 1] << 7)
                n = (b >> 1) ^ -(b & 1)
                i += 2
            else:
                n, i = dvi(data, i)
            if n < 0:
                if n != -1:
                    raise CorruptBatchError(f"invalid key length {n}")
                key = None
            elif n > rec_end - i:
                raise CorruptBatchError(f"key length {n} exceeds the record")
            else:
                key = data[i : i + n]
                i += n
            b = data[i]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                i += 1
            elif data[i + 1] < 0x80:  # two bytes, still inline
                b = (b & 0x7F) | (data[i + 1] << 7)
                n = (b >> 1) ^ -(b & 1)
                i += 2
            else:
                n, i = dvi(data, i)
            if n < 0:
                if n != -1:
                    raise CorruptBatchError(f"invalid value length {n}")
                value = None
            elif n > rec_end - i:
                raise CorruptBatchError(f"value length {n} exceeds the record")
            else:
                value = data[i : i + n]
                i += n
            b = data[i]
            if b == 0:
                headers: list[tuple[str, bytes | None]] = []
                i += 1
            else:
                headers, i = _decode_headers(data, i, rec_end)
            if i != rec_end:
                raise CorruptBatchError(f"record declared {length} bytes but used "
                                        f"{length + i - rec_end}")
            append(Record(base_offset + offset_delta,
                          base_timestamp + ts_delta if append_time is None else append_time,
                          key, value, headers))
    except IndexError:
        raise CorruptBatchError("record runs past the end of the batch") from None
    if i != end:
        raise CorruptBatchError(f"{end - i} bytes left over after {count} records")
    return out


def _decode_headers(
    data: bytes, i: int, rec_end: int
) -> tuple[list[tuple[str, bytes | None]], int]:
    count, i = decode_varint(data, i)
    if count < 0 or count > (rec_end - i) // 2:
        raise CorruptBatchError(f"invalid header count {count}")
    headers: list[tuple[str, bytes | None]] = []
    append = headers.append
    for _ in range(count):
        b = data[i]
        if b < 0x80:
            n = (b >> 1) ^ -(b & 1)
            i += 1
        else:
            n, i = decode_varint(data, i)
        if n < 0 or n > rec_end - i:
            raise CorruptBatchError(f"invalid header key length {n}")
        try:
            name = data[i : i + n].decode()
        except UnicodeDecodeError:
            raise CorruptBatchError("header key is not valid UTF-8") from None
        i += n
        b = data[i]
        if b < 0x80:
            n = (b >> 1) ^ -(b & 1)
            i += 1
        else:
            n, i = decode_varint(data, i)
        if n < 0:
            if n != -1:
                raise CorruptBatchError(f"invalid header value length {n}")
            append((name, None))
        elif n > rec_end - i:
            raise CorruptBatchError(f"header value length {n} exceeds the record")
        else:
            append((name, data[i : i + n]))
            i += n
    return headers, i
