"""Zig-zag variable-length integers, as used inside v2 records.

Java counterpart: ``org.apache.kafka.common.utils.ByteUtils`` (``writeVarint``/``readVarint``,
``writeVarlong``/``readVarlong``, ``sizeOfVarint``/``sizeOfVarlong``).

Encoding (protobuf style): zig-zag map the signed value to an unsigned one
(0→0, -1→1, 1→2, -2→3 …), then emit 7 bits per byte, least significant group first, the high
bit of each byte saying "more follows".  A varint carries an int32 and takes at most 5 bytes, a
varlong an int64 and at most 10.  Decoders here are strict: over-long encodings and values that
do not fit the declared width raise ``CorruptBatchError``; running off the end of the buffer
does too (never ``IndexError``).

Writers append to a caller-owned ``bytearray`` so a whole record batch is encoded into a single
buffer with no intermediate ``bytes`` objects.
"""

from __future__ import annotations

from millrace.common.errors import CorruptBatchError

__all__ = [
    "INT32_MAX",
    "INT32_MIN",
    "INT64_MAX",
    "INT64_MIN",
    "decode_varint",
    "decode_varlong",
    "encode_varint",
    "encode_varlong",
    "size_of_varint",
    "size_of_varlong",
    "write_varint",
    "write_varlong",
]

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

_Buffer = bytes | bytearray | memoryview


def write_varint(out: bytearray, value: int) -> None:
    """Append ``value`` (an int32) as a zig-zag varint."""
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"varint out of int32 range: {value}")
    v = (value << 1) ^ (value >> 31)
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def write_varlong(out: bytearray, value: int) -> None:
    """Append ``value`` (an int64) as a zig-zag varlong."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"varlong out of int64 range: {value}")
    v = (value << 1) ^ (value >> 63)
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def encode_varint(value: int) -> bytes:
    out = bytearray()
    write_varint(out, value)
    return bytes(out)


def encode_varlong(value: int) -> bytes:
    out = bytearray()
    write_varlong(out, value)
    return bytes(out)


def size_of_varint(value: int) -> int:
    """Bytes ``write_varint(value)`` would produce."""
    v = ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF
    return (max(v.bit_length(), 1) + 6) // 7


def size_of_varlong(value: int) -> int:
    """Bytes ``write_varlong(value)`` would produce."""
    v = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    return (max(v.bit_length(), 1) + 6) // 7


def _decode(buf: _Buffer, pos: int, max_bytes: int, bits: int, what: str) -> tuple[int, int]:
    raw = 0
    shift = 0
    i = pos
    limit = pos + max_bytes
    try:
        while True:
            b = buf[i]
            i += 1
            raw |= (b & 0x7F) << shift
            if b < 0x80:
                break
            if i == limit:
                raise CorruptBatchError(f"{what} at position {pos} is longer than {max_bytes} bytes")
            shift += 7
    except IndexError:
        raise CorruptBatchError(f"{what} at position {pos} runs past the end of the buffer") from None
    if raw >> bits:
        raise CorruptBatchError(f"{what} at position {pos} does not fit in {bits} bits")
    return (raw >> 1) ^ -(raw & 1), i


def decode_varint(buf: _Buffer, pos: int) -> tuple[int, int]:
    """Read a zig-zag varint (int32) at ``pos``; returns ``(value, next_pos)``."""
    if pos < len(buf):
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
    return _decode(buf, pos, 5, 32, "varint")


def decode_varlong(buf: _Buffer, pos: int) -> tuple[int, int]:
    """Read a zig-zag varlong (int64) at ``pos``; returns ``(value, next_pos)``."""
    if pos < len(buf):
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
    return _decode(buf, pos, 10, 64, "varlong")
