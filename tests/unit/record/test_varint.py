"""Zig-zag varints: known encodings, round trips, strict decoding of bad input."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from millrace.common.errors import CorruptBatchError
from millrace.record.varint import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    size_of_varint,
    size_of_varlong,
    write_varint,
)

KNOWN = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (-2, "03"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (300, "d804"),
    (INT32_MAX, "feffffff0f"),
    (INT32_MIN, "ffffffff0f"),
]


@pytest.mark.parametrize(("value", "hexed"), KNOWN)
def test_known_varint_encodings(value: int, hexed: str) -> None:
    assert encode_varint(value).hex() == hexed
    assert decode_varint(bytes.fromhex(hexed), 0) == (value, len(hexed) // 2)
    assert size_of_varint(value) == len(hexed) // 2


def test_known_varlong_extremes() -> None:
    assert encode_varlong(INT64_MAX).hex() == "feffffffffffffffff01"
    assert encode_varlong(INT64_MIN).hex() == "ffffffffffffffffff01"
    assert decode_varlong(bytes.fromhex("ffffffffffffffffff01"), 0) == (INT64_MIN, 10)


@given(st.integers(INT32_MIN, INT32_MAX))
def test_varint_round_trip(value: int) -> None:
    encoded = encode_varint(value)
    assert len(encoded) == size_of_varint(value) <= 5
    assert decode_varint(b"\xaa" + encoded + b"\x01", 1) == (value, 1 + len(encoded))
    # a varint is also a valid varlong
    assert decode_varlong(encoded, 0) == (value, len(encoded))


@given(st.integers(INT64_MIN, INT64_MAX))
def test_varlong_round_trip(value: int) -> None:
    encoded = encode_varlong(value)
    assert len(encoded) == size_of_varlong(value) <= 10
    assert decode_varlong(encoded, 0) == (value, len(encoded))
    for cut in range(len(encoded)):  # every strict prefix is an error, never IndexError
        with pytest.raises(CorruptBatchError):
            decode_varlong(encoded[:cut], 0)


def test_write_appends_to_buffer() -> None:
    out = bytearray(b"x")
    write_varint(out, 300)
    write_varint(out, -1)
    assert bytes(out) == b"x\xd8\x04\x01"


@pytest.mark.parametrize("value", [INT32_MAX + 1, INT32_MIN - 1])
def test_varint_range_is_enforced(value: int) -> None:
    with pytest.raises(ValueError, match="int32"):
        encode_varint(value)


@pytest.mark.parametrize("value", [INT64_MAX + 1, INT64_MIN - 1])
def test_varlong_range_is_enforced(value: int) -> None:
    with pytest.raises(ValueError, match="int64"):
        encode_varlong(value)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "past the end"),
        (b"\x80", "past the end"),
        (b"\xff\xff\xff\xff", "past the end"),
        (b"\x80\x80\x80\x80\x80\x00", "longer than 5"),
        (b"\xff\xff\xff\xff\x1f", "32 bits"),
    ],
)
def test_bad_varints(data: bytes, reason: str) -> None:
    with pytest.raises(CorruptBatchError, match=reason):
        decode_varint(data, 0)


def test_bad_varlongs() -> None:
    with pytest.raises(CorruptBatchError, match="longer than 10"):
        decode_varlong(b"\x80" * 10 + b"\x00", 0)
    with pytest.raises(CorruptBatchError, match="64 bits"):
        decode_varlong(b"\xff" * 9 + b"\x03", 0)
