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

Two implementations: the pure-Python functions here (``py_*``) are the reference; the
optional C extension ``millrace.record._speedups`` (built by ``setup.py`` when a compiler
is there; ``MILLRACE_NO_SPEEDUPS=1`` turns it off) provides the same functions with the
same bytes, objects and errors.  ``encode_record``, ``decode_records`` and
``decode_records_as`` are whichever is in use; ``SPEEDUPS`` says which.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from millrace.common.errors import CorruptBatchError
from millrace.record.varint import (
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    write_varint,
)

__all__ = [
    "RECORD_FIELDS",
    "SPEEDUPS",
    "Record",
    "decode_records",
    "decode_records_as",
    "encode_record",
    "py_decode_record_run",
    "py_decode_records",
    "py_decode_records_as",
    "py_encode_record",
    "record_size_upper_bound",
]

MIN_RECORD_SIZE = 7  # length, attributes, ts delta, offset delta, key/value lengths, headers
_MAX_RECORD_OVERHEAD = 5 + 1 + 10 + 5 + 5 + 5 + 5  # every varint at its widest


@dataclass(slots=True)
class Record:
    """One record as a consumer sees it (offset and timestamp already made absolute)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def record_size_upper_bound(
    key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]] = ()
) -> int:
    """Most bytes one record with this key/value/headers can take inside a batch."""
    size = _MAX_RECORD_OVERHEAD + (len(key) if key is not None else 0)
    size += len(value) if value is not None else 0
    for header_key, header_value in headers:
        size += 10 + len(header_key.encode()) + (len(header_value) if header_value else 0)
    return size


# Zig-zag varints of 0 .. 16383 -- the lengths, deltas and sizes of nearly every record.
_VARINT = [encode_varint(i) for i in range(1 << 14)]
_TABLE = len(_VARINT)
_ATTRIBUTES_AND_DELTA = [b"\x00" + v for v in _VARINT]  # attributes + timestamp delta
_NULL = b"\x01"  # varint -1: a null key, value or header value


def py_encode_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]],
) -> int:
    """Append one record to ``out``; returns its size."""
    varint = _VARINT
    if 0 <= timestamp_delta < _TABLE:
        head = _ATTRIBUTES_AND_DELTA[timestamp_delta]
    else:
        head = b"\x00" + encode_varlong(timestamp_delta)
    delta = varint[offset_delta] if 0 <= offset_delta < _TABLE else encode_varint(offset_delta)
    if key is None:
        key_length, key = _NULL, b""
    else:
        n = len(key)
        key_length = varint[n] if n < _TABLE else encode_varint(n)
    if value is None:
        value_length, value = _NULL, b""
    else:
        n = len(value)
        value_length = varint[n] if n < _TABLE else encode_varint(n)
    record = b"".join((head, delta, key_length, key, value_length, value,
                       _encode_headers(headers) if headers else b"\x00"))
    size = len(record)
    length = varint[size] if size < _TABLE else encode_varint(size)
    out += length
    out += record
    return len(length) + size


def _encode_headers(headers: Sequence[tuple[str, bytes | None]]) -> bytes:
    out = bytearray(encode_varint(len(headers)))
    for header_key, header_value in headers:
        encoded = str.encode(header_key)  # TypeError (as in C) for a non-str key
        write_varint(out, len(encoded))
        out += encoded
        if header_value is None:
            out += _NULL
        else:
            write_varint(out, len(header_value))
            out += header_value
    return bytes(out)


def py_decode_records(
    data: bytes, pos: int, end: int, count: int, base_offset: int, base_timestamp: int,
    append_time: int | None,
) -> list[Record]:
    """Decode ``count`` records filling ``data[pos:end]`` exactly.

    Offsets become ``base_offset + offsetDelta``; timestamps ``base_timestamp + delta``, or
    ``append_time`` for every record when the batch is LogAppendTime.
    """
    return py_decode_record_run(data, pos, end, count, base_offset, base_timestamp,
                                append_time, count)[0]


def py_decode_record_run(
    data: bytes, pos: int, end: int, count: int, base_offset: int, base_timestamp: int,
    append_time: int | None, max_records: int,
) -> tuple[list[Record], int]:
    """Decode the next ``min(count, max_records)`` of the ``count`` records left in
    ``data[pos:end]``; returns them and the position after them.

    A batch can so be decoded a run at a time (the consumer decodes what one ``poll``
    hands out, so the objects die young instead of filling the garbage collector's
    oldest generation).  The run that reaches the last record checks that the records
    end exactly at ``end``.
    """
    if pos < 0 or end > len(data):
        raise ValueError(f"records span [{pos}, {end}) is outside the {len(data)}-byte buffer")
    if count < 0 or count > (end - pos) // MIN_RECORD_SIZE:
        raise CorruptBatchError(f"record batch claims {count} records in {end - pos} bytes")
    if max_records < 0:
        raise ValueError(f"max_records must be >= 0, got {max_records}")
    out: list[Record] = []
    append = out.append
    dvi = decode_varint
    dvl = decode_varlong
    i = pos
    run = min(count, max_records)
    try:
        for _ in range(run):
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
                headers: tuple[tuple[str, bytes | None], ...] = ()
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
    if run == count and i != end:
        raise CorruptBatchError(f"{end - i} bytes left over after {count} records")
    return out, i


def _decode_headers(
    data: bytes, i: int, rec_end: int
) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
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
    return tuple(headers), i


RECORD_FIELDS = ("offset", "timestamp", "key", "value", "headers", None, None)
"""``decode_records_as`` fields that make ``Record`` objects."""


def py_decode_records_as(
    cls: type[Any], fields: tuple[str | None, ...], constants: tuple[Any, ...], data: bytes,
    pos: int, end: int, count: int, base_offset: int, base_timestamp: int,
    append_time: int | None, max_records: int,
) -> tuple[list[Any], int]:
    """``py_decode_record_run`` straight into objects of a caller's class.

    Each object is made with ``cls.__new__(cls)`` (``__init__`` is not called) and gets
    its attributes set: ``fields[0:7]`` name the attributes receiving the offset,
    timestamp, key, value, headers, key size and value size (-1 for null) -- ``None``
    skips one -- and ``fields[7:]`` receive ``constants`` in order.  The consumer builds
    its ``ConsumerRecord`` objects this way, with no intermediate ``Record``.
    """
    if len(fields) < 7 or len(fields) - 7 != len(constants):
        raise ValueError("fields needs 7 per-record names plus one per constant")
    records, next_pos = py_decode_record_run(data, pos, end, count, base_offset,
                                             base_timestamp, append_time, max_records)
    new = cast(Callable[[type[Any]], Any], cls.__new__)
    out = []
    for r in records:
        obj = new(cls)
        key, value = r.key, r.value
        values = (r.offset, r.timestamp, key, value, r.headers,
                  -1 if key is None else len(key), -1 if value is None else len(value),
                  *constants)
        for name, v in zip(fields, values):
            if name is not None:
                setattr(obj, name, v)
        out.append(obj)
    return out, next_pos


try:
    from millrace.record import _speedups
except ImportError:  # no compiler at install time, or MILLRACE_NO_SPEEDUPS set
    _speedups = None  # type: ignore[assignment]

SPEEDUPS = _speedups is not None

encode_record: Callable[..., int]
decode_records_as: Callable[..., tuple[list[Any], int]]
if _speedups is not None:
    encode_record = _speedups.encode_record
    decode_records_as = _speedups.decode_records_as
    _decode_as = _speedups.decode_records_as

    def decode_records(
        data: bytes, pos: int, end: int, count: int, base_offset: int, base_timestamp: int,
        append_time: int | None,
    ) -> list[Record]:
        """Decode ``count`` records filling ``data[pos:end]`` exactly (see ``py_decode_records``)."""
        return _decode_as(Record, RECORD_FIELDS, (), data, pos, end, count, base_offset,
                          base_timestamp, append_time, count)[0]
else:
    encode_record = py_encode_record
    decode_records_as = py_decode_records_as
    decode_records = py_decode_records
