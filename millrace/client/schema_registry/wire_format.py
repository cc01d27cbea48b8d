"""The Confluent wire format: how a schema id travels in front of a key or value.

Every record value (or key) written by a schema-registry serializer starts::

    byte 0      magic byte, 0
    bytes 1..4  schema id, int32 big-endian (the registry's global id)
    bytes 5..   the payload:
                  AVRO      the datum in Avro binary encoding, no container, no schema
                  JSON      the document as UTF-8 JSON
                  PROTOBUF  the message-index array, then the protobuf message bytes

The message-index array says which message of the schema's file the bytes are: the path
of indexes from the file's top-level messages down through nested ones (``[0]`` is the
first top-level message, ``[1, 2]`` the third message nested in the second).  It is
written as zigzag varints: the count, then each index -- except that ``[0]``, by far the
most common, is written as the single byte 0 (a count of zero means ``[0]``).

Pure functions over bytes; no I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from millrace.client.errors import SerializationError

MAGIC_BYTE = 0
HEADER_SIZE = 5  # magic byte + schema id
_HEADER = struct.Struct(">bI")
_MAX_INDEXES = 100_000  # a sanity bound on a message-index array's count (corrupt input)


def header(schema_id: int) -> bytes:
    """The 5 bytes in front of a payload written with ``schema_id``."""
    return _HEADER.pack(MAGIC_BYTE, schema_id)


def split(data: bytes) -> tuple[int, memoryview]:
    """``(schema id, payload)`` of a framed key or value; ``SerializationError`` when the
    bytes are too short or the magic byte is not 0."""
    if len(data) < HEADER_SIZE:
        raise SerializationError(
            f"{len(data)} bytes is too short for the schema registry wire format (a magic "
            f"byte 0 and a 4-byte schema id before the payload); was it written by a "
            f"schema-registry serializer?")
    magic, schema_id = _HEADER.unpack_from(data)
    if magic != MAGIC_BYTE:
        raise SerializationError(
            f"unknown magic byte {data[0]:#04x}: the schema registry wire format starts "
            f"with 0; was it written by a schema-registry serializer?")
    return schema_id, memoryview(data)[HEADER_SIZE:]


def _zigzag_varint(out: bytearray, value: int) -> None:
    n = (value << 1) ^ (value >> 63)
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def encode_message_indexes(indexes: Sequence[int]) -> bytes:
    """The message-index array as it follows the schema id (``[0]`` -> ``b"\\x00"``)."""
    if not indexes:
        raise ValueError("a message-index array names at least one message")
    if list(indexes) == [0]:
        return b"\x00"
    out = bytearray()
    _zigzag_varint(out, len(indexes))
    for i in indexes:
        _zigzag_varint(out, i)
    return bytes(out)


def _read_zigzag_varint(data: memoryview, pos: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        if pos >= len(data):
            raise SerializationError("the protobuf message-index array is truncated")
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return (n >> 1) ^ -(n & 1), pos
        shift += 7
        if shift > 63:
            raise SerializationError("a varint of the protobuf message-index array is too long")


def decode_message_indexes(payload: memoryview) -> tuple[list[int], memoryview]:
    """``(indexes, message bytes)`` from a protobuf payload (what follows the schema id)."""
    count, pos = _read_zigzag_varint(payload, 0)
    if count == 0:
        return [0], payload[pos:]
    if count < 0 or count > _MAX_INDEXES:
        raise SerializationError(f"the protobuf message-index array claims {count} indexes")
    indexes = []
    for _ in range(count):
        i, pos = _read_zigzag_varint(payload, pos)
        if i < 0:
            raise SerializationError(f"negative message index {i} in the protobuf "
                                     "message-index array")
        indexes.append(i)
    return indexes, payload[pos:]
