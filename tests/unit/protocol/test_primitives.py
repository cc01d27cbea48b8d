"""Wire primitives: property tests, and hostile lengths that must fail before allocating."""

from __future__ import annotations

import struct
import tracemalloc
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from millrace.common.errors import ProtocolDecodeError
from millrace.protocol import API, ApiKey
from millrace.protocol import primitives as p

FAST = settings(max_examples=150, deadline=None)

uvarint32 = st.integers(min_value=0, max_value=2**32 - 1)
text = st.text(max_size=60)
blobs = st.binary(max_size=80)


# ---------------------------------------------------------------- unsigned varint
@FAST
@given(uvarint32)
def test_uvarint_round_trip(value: int) -> None:
    out = bytearray()
    p.write_uvarint(out, value)
    assert len(out) == p.uvarint_size(value) <= 5
    assert p.read_uvarint(bytes(out), 0) == (value, len(out))
    # Every byte but the last has the continuation bit.
    assert all(b & 0x80 for b in out[:-1]) and not out[-1] & 0x80


@pytest.mark.parametrize(("value", "encoded"), [
    (0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"), (300, b"\xac\x02"),
    (16383, b"\xff\x7f"), (16384, b"\x80\x80\x01"), (2**31 - 1, b"\xff\xff\xff\xff\x07"),
    (2**32 - 1, b"\xff\xff\xff\xff\x0f"),
])
def test_uvarint_known_encodings(value: int, encoded: bytes) -> None:
    out = bytearray()
    p.write_uvarint(out, value)
    assert bytes(out) == encoded
    assert p.read_uvarint(encoded + b"tail", 0) == (value, len(encoded))


@FAST
@given(uvarint32, st.binary(max_size=4))
def test_uvarint_reads_at_an_offset(value: int, head: bytes) -> None:
    out = bytearray(head)
    p.write_uvarint(out, value)
    assert p.read_uvarint(bytes(out), len(head)) == (value, len(out))


def test_uvarint_longer_than_5_bytes_is_refused() -> None:
    with pytest.raises(ProtocolDecodeError, match="longer than 5 bytes"):
        p.read_uvarint(b"\x80\x80\x80\x80\x80\x01", 0)
    with pytest.raises(ProtocolDecodeError, match="longer than 5 bytes"):
        p.read_uvarint(b"\xff" * 1000, 0)


@pytest.mark.parametrize("data", [b"", b"\x80", b"\xff\xff", b"\x80\x80\x80\x80"])
def test_truncated_uvarint_is_refused(data: bytes) -> None:
    with pytest.raises(ProtocolDecodeError):
        p.read_uvarint(data, 0)


# ---------------------------------------------------------------- strings
@FAST
@given(text)
def test_string_round_trip(value: str) -> None:
    out = bytearray()
    p.write_string(out, value)
    raw = value.encode()
    assert bytes(out) == struct.pack(">h", len(raw)) + raw
    assert p.read_string(bytes(out), 0) == (value, len(out))


@FAST
@given(st.none() | text)
def test_nullable_string_round_trip(value: str | None) -> None:
    out = bytearray()
    p.write_nullable_string(out, value)
    if value is None:
        assert bytes(out) == b"\xff\xff"
    assert p.read_nullable_string(bytes(out), 0) == (value, len(out))


@FAST
@given(text)
def test_compact_string_round_trip(value: str) -> None:
    out = bytearray()
    p.write_compact_string(out, value)
    raw = value.encode()
    assert p.read_uvarint(bytes(out), 0)[0] == len(raw) + 1
    assert p.read_compact_string(bytes(out), 0) == (value, len(out))


@FAST
@given(st.none() | text)
def test_compact_nullable_string_round_trip(value: str | None) -> None:
    out = bytearray()
    p.write_compact_nullable_string(out, value)
    if value is None:
        assert bytes(out) == b"\x00"
    assert p.read_compact_nullable_string(bytes(out), 0) == (value, len(out))


def test_null_is_refused_where_not_nullable() -> None:
    with pytest.raises(ProtocolDecodeError):
        p.read_string(b"\xff\xff", 0)
    with pytest.raises(ProtocolDecodeError):
        p.read_compact_string(b"\x00", 0)
    with pytest.raises(ProtocolDecodeError):
        p.read_bytes(b"\xff\xff\xff\xff", 0)
    with pytest.raises(ProtocolDecodeError):
        p.read_compact_bytes(b"\x00", 0)
    with pytest.raises(ProtocolDecodeError, match="length -2"):
        p.read_nullable_string(b"\xff\xfe", 0)
    with pytest.raises(ProtocolDecodeError, match="length -2"):
        p.read_nullable_bytes(b"\xff\xff\xff\xfe", 0)
    # records keep Kafka's rule: any negative length is null
    assert p.read_records(b"\xff\xff\xff\xf9", 0) == (None, 4)
    assert p.read_records(b"\x00\x00\x00\x02ab", 0) == (b"ab", 6)
    with pytest.raises(ValueError, match="too long"):
        p.write_string(bytearray(), "x" * 0x8000, "topic")
    with pytest.raises(ValueError, match="'topic'"):
        p.write_string(bytearray(), None, "topic")  # type: ignore[arg-type]


@pytest.mark.parametrize(("reader", "data"), [
    (p.read_string, b"\x7f\xffabc"),
    (p.read_nullable_string, b"\x00\x05abcd"),
    (p.read_compact_string, b"\xff\xff\xff\xff\x07abc"),
    (p.read_compact_nullable_string, b"\x06abcd"),
    (p.read_bytes, b"\x7f\xff\xff\xffabc"),
    (p.read_nullable_bytes, b"\x00\x00\x00\x05abcd"),
    (p.read_records, b"\x00\x00\x00\x05abcd"),
    (p.read_compact_bytes, b"\xff\xff\xff\xff\x07abc"),
    (p.read_compact_nullable_bytes, b"\x06abcd"),
])
def test_length_claiming_more_than_remains_is_refused(reader: Callable[[bytes, int], Any],
                                                      data: bytes) -> None:
    with pytest.raises(ProtocolDecodeError, match=r"only \d+ remain"):
        reader(data, 0)


@pytest.mark.parametrize("raw", [b"\xff", b"\xc3", b"\xed\xa0\x80", b"ok\x80"])
def test_invalid_utf8_is_refused(raw: bytes) -> None:
    with pytest.raises(ProtocolDecodeError, match="UTF-8"):
        p.read_string(struct.pack(">h", len(raw)) + raw, 0)
    with pytest.raises(ProtocolDecodeError, match="UTF-8"):
        p.read_compact_nullable_string(bytes([len(raw) + 1]) + raw, 0)


# ---------------------------------------------------------------- bytes
@FAST
@given(blobs)
def test_bytes_round_trip(value: bytes) -> None:
    for write, read in ((p.write_bytes, p.read_bytes),
                        (p.write_nullable_bytes, p.read_nullable_bytes),
                        (p.write_compact_bytes, p.read_compact_bytes),
                        (p.write_compact_nullable_bytes, p.read_compact_nullable_bytes)):
        out = bytearray(b"@")
        write(out, value)
        assert read(bytes(out), 1) == (value, len(out))


def test_null_bytes_round_trip() -> None:
    for write, read, encoded in ((p.write_nullable_bytes, p.read_nullable_bytes, b"\xff" * 4),
                                 (p.write_compact_nullable_bytes,
                                  p.read_compact_nullable_bytes, b"\x00")):
        out = bytearray()
        write(out, None)
        assert bytes(out) == encoded
        assert read(encoded, 0) == (None, len(encoded))


# ---------------------------------------------------------------- uuid, bool
@FAST
@given(st.uuids())
def test_uuid_round_trip(value: uuid.UUID) -> None:
    out = bytearray()
    p.write_uuid(out, value)
    assert bytes(out) == value.bytes  # high 64 bits first, big-endian
    assert p.read_uuid(bytes(out), 0) == (value, 16)


def test_short_uuid_and_bool_are_refused() -> None:
    with pytest.raises(ProtocolDecodeError):
        p.read_uuid(bytes(15), 0)
    with pytest.raises(ProtocolDecodeError):
        p.read_bool(b"", 0)
    assert p.read_bool(b"\x02", 0) == (True, 1)  # any non-zero is true
    assert p.read_bool(b"\x00", 0) == (False, 1)


# ---------------------------------------------------------------- arrays
ArrayCodec = API[ApiKey.DELETE_GROUPS].request  # groups_names: []string
OffsetsCodec = API[ApiKey.LIST_OFFSETS].response  # old_style_offsets: []int64 at v0 only


@settings(max_examples=100, deadline=None)
@given(st.lists(text, max_size=5), st.integers(min_value=0, max_value=2))
def test_string_array_round_trip(names: list[str], version: int) -> None:
    body = ArrayCodec.cls(groups_names=names)
    data = ArrayCodec.encode(body, version)
    if version < 2:
        assert data[:4] == struct.pack(">i", len(names))
    else:
        assert p.read_uvarint(data, 0)[0] == len(names) + 1
    assert ArrayCodec.decode(data, version).groups_names == names


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(min_value=-(2**31), max_value=2**31 - 1), max_size=8),
       st.sampled_from([0, 1, 2, 3]))
def test_int32_array_round_trip(ids: list[int], version: int) -> None:
    codec = API[ApiKey.CREATE_PARTITIONS].request
    cls = codec.cls
    body = cls(topics=[cls.CreatePartitionsTopic(name="t", count=3, assignments=[
        cls.CreatePartitionsTopic.CreatePartitionsAssignment(broker_ids=ids)])])
    assert codec.decode(codec.encode(body, version), version) == body


def test_array_null_only_where_nullable() -> None:
    codec = API[ApiKey.METADATA].request
    assert codec.decode(b"\xff\xff\xff\xff", 1).topics is None  # nullable from v1
    with pytest.raises(ProtocolDecodeError, match="length -1"):
        codec.decode(b"\xff\xff\xff\xff", 0)
    assert codec.decode(b"\x00" * 5, 9).topics is None  # compact null
    with pytest.raises(ProtocolDecodeError, match="is null"):
        ArrayCodec.decode(b"\x00\x00", 2)


@pytest.mark.parametrize(("version", "frame"), [
    (1, b"\x7f\xff\xff\xff" + bytes(6)),   # int32 count 2**31 - 1
    (2, b"\x80\x80\x80\x80\x08" + bytes(5)),  # compact count 2**31 (uvarint 2**31 + 1)
])
def test_ten_byte_frame_claiming_2_31_elements_fails_fast(version: int, frame: bytes) -> None:
    assert len(frame) == 10
    tracemalloc.start()
    try:
        with pytest.raises(ProtocolDecodeError, match=r"claims \d+ elements"):
            ArrayCodec.decode(frame, version)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1024 * 1024


def test_fixed_width_array_longer_than_frame_fails_fast() -> None:
    # CreatePartitions v0: one assignment whose broker_ids claims 10 int32s (40 bytes):
    # fewer elements than bytes remain, but more bytes than remain once the width counts.
    codec = API[ApiKey.CREATE_PARTITIONS].request
    data = (b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x00\x03" + b"\x00\x00\x00\x01"
            + b"\x00\x00\x00\x0a" + bytes(8) + b"\x00\x00\x00\x00" + b"\x00")
    tracemalloc.start()
    try:
        with pytest.raises(ProtocolDecodeError, match="needs 40 bytes, only 13 remain"):
            codec.decode(data, 0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1024 * 1024


@pytest.mark.parametrize("claim", [2**31 - 1, 2**20, 7])
def test_string_claiming_more_bytes_than_the_frame_fails_fast(claim: int) -> None:
    codec = API[ApiKey.SASL_HANDSHAKE].request  # mechanism: string
    data = struct.pack(">h", min(claim, 2**15 - 1)) + b"PLAIN"
    with pytest.raises(ProtocolDecodeError, match="only 5 remain"):
        codec.decode(data, 1)
    codec = API[ApiKey.SASL_AUTHENTICATE].request  # auth_bytes: bytes
    tracemalloc.start()
    try:
        with pytest.raises(ProtocolDecodeError, match="only 3 remain"):
            codec.decode(struct.pack(">i", claim) + b"abc", 0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1024 * 1024


def test_tagged_field_size_beyond_frame_is_refused() -> None:
    with pytest.raises(ProtocolDecodeError, match="tagged field 9"):
        p.skip_tagged_field(b"\x09\xff\xff\xff\x07abc", 0)
    assert p.skip_tagged_field(b"\x09\x03abc", 0) == (9, 2, 5)
