"""``__consumer_offsets`` key/value layouts and coordinator placement."""

from __future__ import annotations

import struct

import pytest

from millrace.broker.group import GroupCoordinator, partition_for
from millrace.broker.group.group_metadata_manager import java_string_hash
from millrace.broker.group.records import (
    GroupKey,
    GroupValue,
    MemberRecord,
    OffsetAndMetadata,
    OffsetKey,
    UnknownRecordVersion,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)
from millrace.common.errors import ProtocolDecodeError
from tests.unit.broker.group.groupgen import CONFIG


def s(text: str) -> bytes:
    """STRING: int16 length + UTF-8 (written out by hand, independent of the codec)."""
    return len(text.encode()).to_bytes(2, "big") + text.encode()


# ---------------------------------------------------------------------- exact bytes
def test_offset_commit_key_bytes() -> None:
    assert encode_offset_key("grp", "topic", 7) == (
        b"\x00\x01"                      # key version 1: offset commit
        b"\x00\x03grp" b"\x00\x05topic"  # group, topic
        b"\x00\x00\x00\x07")             # partition


def test_offset_commit_value_v3_bytes() -> None:
    value = OffsetAndMetadata(offset=1234, leader_epoch=5, metadata="md",
                              commit_timestamp=1_700_000_000_000)
    assert encode_offset_value(value) == (
        b"\x00\x03"                                  # value version 3
        b"\x00\x00\x00\x00\x00\x00\x04\xd2"          # offset 1234
        b"\x00\x00\x00\x05"                          # leader epoch 5
        b"\x00\x02md"                                # metadata
        b"\x00\x00\x01\x8b\xcf\xe5\x68\x00")         # commit timestamp 1_700_000_000_000


def test_offset_commit_value_v1_bytes_when_it_expires() -> None:
    value = OffsetAndMetadata(7, -1, "", 1000, 2000)
    assert encode_offset_value(value) == (
        b"\x00\x01" + struct.pack(">q", 7) + s("") + struct.pack(">qq", 1000, 2000))


def test_group_key_and_value_v3_bytes() -> None:
    assert encode_group_key("grp") == b"\x00\x02\x00\x03grp"
    value = GroupValue("consumer", 4, "range", "m-1", 99, [
        MemberRecord("m-1", None, "cli", "/1.2.3.4", 300, 45, b"\x01", b"\x02\x03")])
    assert encode_group_value(value) == (
        b"\x00\x03" + s("consumer") + struct.pack(">i", 4) + s("range") + s("m-1")
        + struct.pack(">q", 99) + struct.pack(">i", 1)
        + s("m-1") + b"\xff\xff" + s("cli") + s("/1.2.3.4") + struct.pack(">ii", 300, 45)
        + struct.pack(">i", 1) + b"\x01" + struct.pack(">i", 2) + b"\x02\x03")
    empty = GroupValue("consumer", 5, None, None, None, [])
    assert encode_group_value(empty) == (b"\x00\x03" + s("consumer") + struct.pack(">i", 5)
                                         + b"\xff\xff\xff\xff" + struct.pack(">q", -1)
                                         + struct.pack(">i", 0))


# ---------------------------------------------------------------------- round trips
def test_round_trips() -> None:
    assert decode_key(encode_offset_key("g", "t", 3)) == OffsetKey("g", "t", 3)
    assert decode_key(encode_group_key("g")) == GroupKey("g")
    for value in (OffsetAndMetadata(5, 2, "x", 10), OffsetAndMetadata(5, -1, "", 10, 20)):
        assert decode_offset_value(encode_offset_value(value)) == value
    group = GroupValue("consumer", 9, "range", "a", 123, [
        MemberRecord("a", "inst", "c", "/h", 1, 2, b"s", b"a"),
        MemberRecord("b", None, "c", "/h", 3, 4, b"", b"")])
    assert decode_group_value(encode_group_value(group)) == group


def test_decodes_older_and_flexible_versions() -> None:
    assert decode_key(b"\x00\x00" + s("g") + s("t") + b"\x00\x00\x00\x01") == (
        OffsetKey("g", "t", 1))
    v0 = b"\x00\x00" + struct.pack(">q", 8) + s("m") + struct.pack(">q", 77)
    assert decode_offset_value(v0) == OffsetAndMetadata(8, -1, "m", 77, None)
    v2 = b"\x00\x02" + struct.pack(">q", 8) + s("m") + struct.pack(">q", 77)
    assert decode_offset_value(v2) == OffsetAndMetadata(8, -1, "m", 77, None)
    # v4: compact string (length+1 as uvarint) and an empty tagged-field section
    v4 = b"\x00\x04" + struct.pack(">qi", 8, 2) + b"\x02m" + struct.pack(">q", 77) + b"\x00"
    assert decode_offset_value(v4) == OffsetAndMetadata(8, 2, "m", 77, None)
    g0 = (b"\x00\x00" + s("consumer") + struct.pack(">i", 1) + s("range") + s("a")
          + struct.pack(">i", 1) + s("a") + s("c") + s("/h") + struct.pack(">i", 30)
          + struct.pack(">i", 1) + b"s" + struct.pack(">i", 1) + b"x")
    assert decode_group_value(g0) == GroupValue("consumer", 1, "range", "a", None, [
        MemberRecord("a", None, "c", "/h", 30, 30, b"s", b"x")])


def test_malformed_and_unknown_records() -> None:
    with pytest.raises(UnknownRecordVersion):
        decode_key(b"\x00\x05" + s("g"))
    with pytest.raises(ProtocolDecodeError):
        decode_key(b"\x00")
    with pytest.raises(ProtocolDecodeError):
        decode_offset_value(encode_offset_value(OffsetAndMetadata(1, 1, "", 1))[:-1])
    with pytest.raises(ProtocolDecodeError):
        decode_offset_value(encode_offset_value(OffsetAndMetadata(1, 1, "", 1)) + b"\x00")
    # Replay skips what it cannot read instead of failing the whole partition.
    coord = GroupCoordinator(CONFIG, 1)
    coord.load(0, [(b"\x00\x05" + s("g"), b"??"), (b"\x00", b""),
                   (encode_offset_key("g", "t", 0), encode_offset_value(
                       OffsetAndMetadata(3, -1, "", 1)))], 0)
    assert coord.group("g") is not None and coord.group("g").offsets[("t", 0)].offset == 3  # type: ignore[union-attr]


def test_decoding_byte_by_byte_prefixes_always_fails_cleanly() -> None:
    data = encode_group_value(GroupValue("consumer", 1, "range", "a", 5, [
        MemberRecord("a", "i", "c", "/h", 1, 2, b"s", b"x")]))
    for n in range(len(data)):
        with pytest.raises(ProtocolDecodeError):
            decode_group_value(data[:n])


# ---------------------------------------------------------------------- placement
def test_partition_for_matches_kafka() -> None:
    assert java_string_hash("test") == 3556498
    assert partition_for("test", 50) == 48
    assert java_string_hash("") == 0 and partition_for("", 50) == 0
    # hashCode is Integer.MIN_VALUE: Kafka's Utils.abs maps it to 0
    assert java_string_hash("polygenelubricants") == -(1 << 31)
    assert partition_for("polygenelubricants", 7) == 0
    # negative hash -> absolute value; non-BMP characters hash as two UTF-16 units
    name = "orders-consumer"
    expected = 0
    for ch in name:                               # unbounded, then cut to int32
        expected = expected * 31 + ord(ch)
    expected = struct.unpack(">i", struct.pack(">I", expected % (1 << 32)))[0]
    assert java_string_hash(name) == expected < 0
    assert partition_for(name, 50) == -expected % 50 == 40
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00


def test_loading_later_group_records_replaces_earlier_ones() -> None:
    gen1 = GroupValue("consumer", 1, "range", "a", 10, [
        MemberRecord("a", None, "c", "/h", 100, 200, b"range-sub", b"A1"),
        MemberRecord("b", None, "c", "/h", 100, 200, b"range-sub", b"B1")])
    gen2 = GroupValue("consumer", 2, "roundrobin", "a", 20, [
        MemberRecord("a", "i-a", "c2", "/h2", 300, 400, b"rr-sub", b"A2")])
    coord = GroupCoordinator(CONFIG, 1)
    coord.load(0, [(encode_group_key("g"), encode_group_value(gen1)),
                   (encode_group_key("g"), encode_group_value(gen2))], 1000)
    g = coord.group("g")
    assert g is not None and g.generation_id == 2 and g.protocol_name == "roundrobin"
    assert list(g.members) == ["a"] and g.static_members == {"i-a": "a"}
    a = g.members["a"]
    assert (a.metadata("roundrobin"), a.assignment, a.client_id, a.session_timeout_ms) == (
        b"rr-sub", b"A2", "c2", 400)
    assert a.heartbeat_deadline_ms == 1400
    coord.load(0, [(encode_group_key("g"), None)], 2000)      # tombstone: gone
    assert coord.group("g") is None
