"""Legacy v0/v1 message sets (hand-built from the documented layout) and MemoryRecords."""

from __future__ import annotations

import struct

import pytest

from millrace.common.errors import CorruptBatchError
from millrace.record.batch import Record, RecordBatch, TimestampType
from millrace.record.compression import CompressionType, compress, xxh32
from millrace.record.legacy import LegacyRecordBatch, iter_legacy_records
from millrace.record.memory_records import MemoryRecords
from tests.unit.record.recordgen import build, legacy_message

COMPRESSED = [c for c in CompressionType if c != CompressionType.NONE]


def test_v0_message_set() -> None:
    data = legacy_message(5, b"k", b"v", magic=0) + legacy_message(6, None, None, magic=0)
    assert list(iter_legacy_records(data)) == [
        Record(5, -1, b"k", b"v", ()),
        Record(6, -1, None, None, ()),
    ]
    batch = LegacyRecordBatch(data)
    batch.validate()
    assert (batch.magic, batch.base_offset, batch.last_offset, batch.next_offset) == (0, 5, 5, 6)
    assert batch.timestamp_type == TimestampType.NO_TIMESTAMP_TYPE
    assert batch.size == len(data) // 2 + 1  # the first message: 12 + 4+1+1+4+1+4+1
    assert not batch.is_control and batch.producer_id == -1


def test_v1_message_set_timestamps() -> None:
    create = legacy_message(1, b"a", b"b", timestamp=1234)
    append = legacy_message(2, b"c", b"", timestamp=5678, attributes=0x08)
    assert list(iter_legacy_records(create + append)) == [
        Record(1, 1234, b"a", b"b", ()),
        Record(2, 5678, b"c", b"", ()),
    ]
    assert LegacyRecordBatch(create).timestamp_type == TimestampType.CREATE_TIME
    assert LegacyRecordBatch(append).timestamp_type == TimestampType.LOG_APPEND_TIME


def _inner(magic: int, first_offset: int) -> bytes:
    return b"".join(
        legacy_message(first_offset + i, b"key%d" % i, b"value%d" % i, magic=magic,
                       timestamp=1000 + i)
        for i in range(3)
    )


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.name)
def test_v1_wrapper_has_relative_inner_offsets(codec: CompressionType) -> None:
    wrapper = legacy_message(102, None, compress(codec, _inner(1, 0)), attributes=int(codec),
                             timestamp=1002)
    batch = LegacyRecordBatch(wrapper)
    batch.validate()
    assert batch.compression == codec
    assert (batch.base_offset, batch.last_offset) == (100, 102)
    assert list(batch.records()) == [
        Record(100 + i, 1000 + i, b"key%d" % i, b"value%d" % i, ()) for i in range(3)
    ]


def test_v1_wrapper_with_log_append_time_overrides_inner_timestamps() -> None:
    wrapper = legacy_message(2, None, compress(CompressionType.GZIP, _inner(1, 0)),
                             attributes=1 | 0x08, timestamp=99_999)
    assert [r.timestamp for r in iter_legacy_records(wrapper)] == [99_999] * 3


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.name)
def test_v0_wrapper_has_absolute_inner_offsets(codec: CompressionType) -> None:
    payload = compress(codec, _inner(0, 40))
    if codec == CompressionType.LZ4:  # Kafka 0.8/0.9 wrote a broken header checksum
        broken = bytearray(payload)
        broken[6] = (xxh32(payload[:6]) >> 8) & 0xFF
        payload = bytes(broken)
    wrapper = legacy_message(42, None, payload, magic=0, attributes=int(codec))
    assert [(r.offset, r.timestamp, r.key) for r in iter_legacy_records(wrapper)] == [
        (40, -1, b"key0"), (41, -1, b"key1"), (42, -1, b"key2")]


def test_crc_checks() -> None:
    data = bytearray(legacy_message(1, b"k", b"value"))
    data[-1] ^= 1
    with pytest.raises(CorruptBatchError, match="CRC"):
        LegacyRecordBatch(data).validate()
    assert not LegacyRecordBatch(data).is_valid()
    inner = bytearray(_inner(1, 0))
    inner[-1] ^= 1
    wrapper = legacy_message(2, None, compress(CompressionType.GZIP, bytes(inner)), attributes=1)
    LegacyRecordBatch(wrapper).validate()  # outer CRC is fine
    with pytest.raises(CorruptBatchError, match="CRC"):
        LegacyRecordBatch(wrapper).record_list()


@pytest.mark.parametrize(
    ("wrapper", "reason"),
    [
        (legacy_message(0, None, None, attributes=1), "null value"),
        (legacy_message(0, None, compress(CompressionType.GZIP, b""), attributes=1), "no messages"),
        (legacy_message(0, None, compress(CompressionType.GZIP, legacy_message(
            0, None, compress(CompressionType.GZIP, _inner(1, 0)), attributes=1)), attributes=1),
         "contains a compressed"),
        (legacy_message(0, None, compress(CompressionType.GZIP, _inner(1, 0)[:-1]),
                        attributes=1), "bad size|truncated"),
        (legacy_message(0, b"k", b"v", magic=7), "magic 7"),
        (legacy_message(0, b"k", b"v")[:-1] + b"vv", "extra bytes"),
    ],
)
def test_malformed_legacy(wrapper: bytes, reason: str) -> None:
    if wrapper[16] == 7:
        with pytest.raises(CorruptBatchError, match=reason):
            LegacyRecordBatch(wrapper)
        return
    if reason == "extra bytes":
        fixed = bytearray(wrapper)
        struct.pack_into(">i", fixed, 8, len(wrapper) - 12)
        with pytest.raises(CorruptBatchError, match=reason):
            LegacyRecordBatch(bytes(fixed))
        return
    with pytest.raises(CorruptBatchError, match=reason):
        LegacyRecordBatch(wrapper).record_list()


def test_key_length_beyond_the_message() -> None:
    data = bytearray(legacy_message(0, b"key", b"v", magic=0))
    struct.pack_into(">i", data, 18, 1 << 30)
    with pytest.raises(CorruptBatchError, match="key length"):
        LegacyRecordBatch(data)


def test_legacy_walk_stops_at_a_partial_entry() -> None:
    data = legacy_message(1, b"a", b"b") + legacy_message(2, b"c", b"d")
    first = len(data) // 2
    for cut in range(len(data) + 1):
        got = [r.offset for r in iter_legacy_records(data[:cut])]
        assert got == ([1, 2] if cut == len(data) else [1] if cut >= first else [])
    with pytest.raises(CorruptBatchError, match="below the minimum"):
        list(iter_legacy_records(struct.pack(">qi", 0, 3) + b"\x00" * 20))


# ------------------------------------------------------------------ MemoryRecords
def test_memory_records_mixes_formats() -> None:
    v1 = legacy_message(0, b"old", b"v1", timestamp=10)
    v2 = build([(20, b"new", b"v2", [("h", b"1")])], CompressionType.SNAPPY, base_offset=1)
    v0 = legacy_message(2, b"older", b"v0", magic=0)
    records = MemoryRecords(v1 + v2 + v0 + v2[:30])
    batches = list(records.batches())
    assert [type(b) for b in batches] == [LegacyRecordBatch, RecordBatch, LegacyRecordBatch]
    assert [b.magic for b in batches] == [1, 2, 0]
    assert [(b.base_offset, b.last_offset) for b in batches] == [(0, 0), (1, 1), (2, 2)]
    assert list(records.records()) == [
        Record(0, 10, b"old", b"v1", ()),
        Record(1, 20, b"new", b"v2", (("h", b"1"),)),
        Record(2, -1, b"older", b"v0", ()),
    ]
    assert records.valid_bytes() == len(v1 + v2 + v0)
    assert len(records) == len(v1 + v2 + v0) + 30


def test_memory_records_valid_bytes_stops_at_a_bad_crc() -> None:
    good = build([(1, b"k", b"v", [])])
    bad = bytearray(good)
    bad[-1] ^= 1
    assert MemoryRecords(good + bytes(bad) + good).valid_bytes() == len(good)


def test_memory_records_rejects_unknown_magic_and_short_v2() -> None:
    data = bytearray(legacy_message(0, b"k", b"v"))
    data[16] = 3
    with pytest.raises(CorruptBatchError, match="magic 3"):
        list(MemoryRecords(data).batches())
    short = bytearray(legacy_message(0, b"k", b"v" * 20))  # length 43 < 49
    short[16] = 2
    with pytest.raises(CorruptBatchError, match="below the minimum"):
        list(MemoryRecords(bytes(short) + b"\x00" * 20).batches())
