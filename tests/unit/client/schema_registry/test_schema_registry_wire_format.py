"""The Confluent wire format: the 5-byte header and protobuf message indexes."""

from __future__ import annotations

import pytest

from millrace.client.errors import SerializationError
from millrace.client.schema_registry.wire_format import (
    decode_message_indexes,
    encode_message_indexes,
    header,
    split,
)


def test_header_is_magic_zero_and_a_big_endian_id() -> None:
    assert header(1) == b"\x00\x00\x00\x00\x01"
    assert header(0x01020304) == b"\x00\x01\x02\x03\x04"
    assert header(2**31 - 1) == b"\x00\x7f\xff\xff\xff"


def test_split_returns_the_id_and_the_payload() -> None:
    schema_id, payload = split(header(258) + b"payload")
    assert schema_id == 258
    assert bytes(payload) == b"payload"
    schema_id, payload = split(header(7))  # an empty payload (an Avro record of no fields)
    assert (schema_id, bytes(payload)) == (7, b"")


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x00\x00\x01"])
def test_split_rejects_what_is_shorter_than_a_header(data: bytes) -> None:
    with pytest.raises(SerializationError, match="too short"):
        split(data)


@pytest.mark.parametrize("magic", [1, 0x7B, 0xFF])
def test_split_rejects_a_magic_byte_other_than_zero(magic: int) -> None:
    with pytest.raises(SerializationError, match=f"unknown magic byte {magic:#04x}"):
        split(bytes([magic]) + b"\x00\x00\x00\x01{}")


@pytest.mark.parametrize(("indexes", "encoded"), [
    ([0], b"\x00"),              # the common case: one byte
    ([1], b"\x02\x02"),          # count 1, index 1 (zigzag)
    ([0, 0], b"\x04\x00\x00"),   # the first message nested in the first
    ([1, 2], b"\x04\x02\x04"),
    ([64], b"\x02\x80\x01"),     # zigzag 128: a two-byte varint
])
def test_message_indexes_encode_and_decode(indexes: list[int], encoded: bytes) -> None:
    assert encode_message_indexes(indexes) == encoded
    decoded, rest = decode_message_indexes(memoryview(encoded + b"msg"))
    assert decoded == indexes
    assert bytes(rest) == b"msg"


def test_a_count_of_zero_means_the_first_message() -> None:
    assert decode_message_indexes(memoryview(b"\x00"))[0] == [0]


@pytest.mark.parametrize("encoded", [b"", b"\x04\x02", b"\x02\x80", b"\x02\xff\xff"])
def test_truncated_message_indexes_raise(encoded: bytes) -> None:
    with pytest.raises(SerializationError, match="truncated"):
        decode_message_indexes(memoryview(encoded))


def test_a_negative_count_or_index_raises() -> None:
    with pytest.raises(SerializationError, match="claims -1 indexes"):
        decode_message_indexes(memoryview(b"\x01"))
    with pytest.raises(SerializationError, match="negative message index"):
        decode_message_indexes(memoryview(b"\x02\x01"))
    with pytest.raises(SerializationError, match="too long"):
        decode_message_indexes(memoryview(b"\x02" + b"\xff" * 12))
