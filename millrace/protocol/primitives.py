"""Kafka's primitive wire types: readers and writers.

Readers take ``(buf, pos)`` and return ``(value, new_pos)``; ``buf`` is the whole frame
(``bytes``), so every length read off the wire is checked against ``len(buf) - pos``
*before* anything is sliced or allocated: a frame that claims 2**31 array elements or a
2 GiB string fails at once with ``ProtocolDecodeError``.

Writers append to a ``bytearray``.  Layouts (big-endian throughout):

    INT8/16/32/64, UINT16, FLOAT64    fixed width, two's complement / IEEE-754
    UNSIGNED_VARINT                   7 bits a byte, low group first, MSB = more follows
    STRING / NULLABLE_STRING          int16 length (-1 = null) + UTF-8
    BYTES / NULLABLE_BYTES            int32 length (-1 = null) + bytes
    ARRAY                             int32 count (-1 = null) + elements
    COMPACT_*                         unsigned varint (length + 1, 0 = null) + data
    UUID                              16 bytes
    TAGGED_FIELDS                     uvarint count, then (uvarint tag, uvarint size, bytes)
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from millrace.common.errors import ProtocolDecodeError

# What the readers read: a frame as bytes (clients) or as a view of the broker's receive
# buffer (protocol.framing.FrameReader).
Buf = bytes | memoryview

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")


def short(what: str, need: int, have: int) -> ProtocolDecodeError:
    return ProtocolDecodeError(f"{what}: needs {need} bytes, only {have} remain")


# ---------------------------------------------------------------- unsigned varint
def read_uvarint(buf: Buf, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    n = len(buf)
    while True:
        if pos >= n:
            raise short("unsigned varint", 1, 0)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise ProtocolDecodeError("unsigned varint longer than 5 bytes")


def write_uvarint(out: bytearray, value: int) -> None:
    if value < 0x80:
        out.append(value)
        return
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def uvarint_size(value: int) -> int:
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


# ---------------------------------------------------------------- lengths
def _check(buf: Buf, pos: int, length: int, what: str) -> None:
    if length > len(buf) - pos:
        raise short(what, length, len(buf) - pos)


def read_len16(buf: Buf, pos: int) -> tuple[int, int]:
    return INT16.unpack_from(buf, pos)[0], pos + 2


def read_len32(buf: Buf, pos: int) -> tuple[int, int]:
    return INT32.unpack_from(buf, pos)[0], pos + 4


def read_clen(buf: Buf, pos: int) -> tuple[int, int]:
    """Compact length: returns N (uvarint N+1), -1 for null."""
    n, pos = read_uvarint(buf, pos)
    return n - 1, pos


# ---------------------------------------------------------------- strings
def _decode_str(buf: Buf, pos: int, n: int) -> str:
    _check(buf, pos, n, "string")
    try:
        return bytes(buf[pos:pos + n]).decode("utf-8")
    except UnicodeDecodeError as e:
        raise ProtocolDecodeError(f"string is not valid UTF-8: {e}") from None


def read_string(buf: Buf, pos: int) -> tuple[str, int]:
    n = INT16.unpack_from(buf, pos)[0]
    if n < 0:
        raise ProtocolDecodeError(f"non-nullable string has length {n}")
    return _decode_str(buf, pos + 2, n), pos + 2 + n


def read_nullable_string(buf: Buf, pos: int) -> tuple[str | None, int]:
    n = INT16.unpack_from(buf, pos)[0]
    if n < 0:
        if n != -1:
            raise ProtocolDecodeError(f"string length {n}")
        return None, pos + 2
    return _decode_str(buf, pos + 2, n), pos + 2 + n


def read_compact_string(buf: Buf, pos: int) -> tuple[str, int]:
    n, pos = read_clen(buf, pos)
    if n < 0:
        raise ProtocolDecodeError("non-nullable compact string is null")
    return _decode_str(buf, pos, n), pos + n


def read_compact_nullable_string(buf: Buf, pos: int) -> tuple[str | None, int]:
    n, pos = read_clen(buf, pos)
    if n < 0:
        return None, pos
    return _decode_str(buf, pos, n), pos + n


def _enc(value: str, field: str) -> bytes:
    if value is None:
        raise ValueError(f"field {field!r} is not nullable in this version but is None")
    data = value.encode("utf-8")
    if len(data) > 0x7FFF:
        raise ValueError(f"field {field!r}: string of {len(data)} bytes is too long")
    return data


def write_string(out: bytearray, value: str, field: str = "") -> None:
    data = _enc(value, field)
    out += INT16.pack(len(data))
    out += data


def write_nullable_string(out: bytearray, value: str | None, field: str = "") -> None:
    if value is None:
        out += b"\xff\xff"
        return
    write_string(out, value, field)


def write_compact_string(out: bytearray, value: str, field: str = "") -> None:
    data = _enc(value, field)
    write_uvarint(out, len(data) + 1)
    out += data


def write_compact_nullable_string(out: bytearray, value: str | None, field: str = "") -> None:
    if value is None:
        out.append(0)
        return
    write_compact_string(out, value, field)


# ---------------------------------------------------------------- bytes
def read_bytes(buf: Buf, pos: int) -> tuple[bytes, int]:
    n = INT32.unpack_from(buf, pos)[0]
    if n < 0:
        raise ProtocolDecodeError(f"non-nullable bytes has length {n}")
    _check(buf, pos + 4, n, "bytes")
    return bytes(buf[pos + 4:pos + 4 + n]), pos + 4 + n


def read_nullable_bytes(buf: Buf, pos: int) -> tuple[bytes | None, int]:
    n = INT32.unpack_from(buf, pos)[0]
    if n < 0:
        if n != -1:
            raise ProtocolDecodeError(f"bytes length {n}")
        return None, pos + 4
    _check(buf, pos + 4, n, "bytes")
    return bytes(buf[pos + 4:pos + 4 + n]), pos + 4 + n


def read_records(buf: Buf, pos: int) -> tuple[Buf | None, int]:
    """A non-flexible ``records`` field: as Kafka reads it, any negative length is null.
    A slice of ``buf``: from a ``memoryview`` (the broker's receive buffer) a view, so
    record batches travel to the log uncopied."""
    n = INT32.unpack_from(buf, pos)[0]
    if n < 0:
        return None, pos + 4
    _check(buf, pos + 4, n, "records")
    return buf[pos + 4:pos + 4 + n], pos + 4 + n


def read_compact_records(buf: Buf, pos: int) -> tuple[Buf | None, int]:
    """A flexible ``records`` field (nullable, compact length)."""
    n, pos = read_clen(buf, pos)
    if n < 0:
        return None, pos
    _check(buf, pos, n, "records")
    return buf[pos:pos + n], pos + n


def read_compact_bytes(buf: Buf, pos: int) -> tuple[bytes, int]:
    n, pos = read_clen(buf, pos)
    if n < 0:
        raise ProtocolDecodeError("non-nullable compact bytes is null")
    _check(buf, pos, n, "bytes")
    return bytes(buf[pos:pos + n]), pos + n


def read_compact_nullable_bytes(buf: Buf, pos: int) -> tuple[bytes | None, int]:
    n, pos = read_clen(buf, pos)
    if n < 0:
        return None, pos
    _check(buf, pos, n, "bytes")
    return bytes(buf[pos:pos + n]), pos + n


def _bytes_len(value: Any, field: str) -> int:
    if value is None:
        raise ValueError(f"field {field!r} is not nullable in this version but is None")
    return len(value)


def write_bytes(out: bytearray, value: Any, field: str = "") -> None:
    out += INT32.pack(_bytes_len(value, field))
    out += value


def write_nullable_bytes(out: bytearray, value: Any, field: str = "") -> None:
    if value is None:
        out += b"\xff\xff\xff\xff"
        return
    write_bytes(out, value, field)


def write_compact_bytes(out: bytearray, value: Any, field: str = "") -> None:
    write_uvarint(out, _bytes_len(value, field) + 1)
    out += value


def write_compact_nullable_bytes(out: bytearray, value: Any, field: str = "") -> None:
    if value is None:
        out.append(0)
        return
    write_compact_bytes(out, value, field)


# ---------------------------------------------------------------- uuid, bool
def read_uuid(buf: Buf, pos: int) -> tuple[uuid.UUID, int]:
    _check(buf, pos, 16, "uuid")
    return uuid.UUID(bytes=bytes(buf[pos:pos + 16])), pos + 16


def write_uuid(out: bytearray, value: uuid.UUID) -> None:
    out += value.bytes


def read_bool(buf: Buf, pos: int) -> tuple[bool, int]:
    if pos >= len(buf):
        raise short("bool", 1, 0)
    return buf[pos] != 0, pos + 1


# ---------------------------------------------------------------- array headers
def read_array_len(buf: Buf, pos: int, nullable: bool, what: str) -> tuple[int, int]:
    """int32 element count; checked against the bytes left (each element >= 1 byte)."""
    n = INT32.unpack_from(buf, pos)[0]
    pos += 4
    if n < 0:
        if n == -1 and nullable:
            return -1, pos
        raise ProtocolDecodeError(f"array {what!r} has length {n}")
    if n > len(buf) - pos:
        raise ProtocolDecodeError(
            f"array {what!r} claims {n} elements but only {len(buf) - pos} bytes remain")
    return n, pos


def read_compact_array_len(buf: Buf, pos: int, nullable: bool, what: str) -> tuple[int, int]:
    n, pos = read_uvarint(buf, pos)
    n -= 1
    if n < 0:
        if nullable:
            return -1, pos
        raise ProtocolDecodeError(f"non-nullable array {what!r} is null")
    if n > len(buf) - pos:
        raise ProtocolDecodeError(
            f"array {what!r} claims {n} elements but only {len(buf) - pos} bytes remain")
    return n, pos


def skip_tagged_field(buf: Buf, pos: int) -> tuple[int, int, int]:
    """Read one tagged field's (tag, start, end) and check its size fits."""
    tag, pos = read_uvarint(buf, pos)
    size, pos = read_uvarint(buf, pos)
    _check(buf, pos, size, f"tagged field {tag}")
    return tag, pos, pos + size
