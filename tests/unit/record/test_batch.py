"""RecordBatch v2: layout, builder → reader round trips, validation, in-place rewrites."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from millrace.common.errors import CorruptBatchError
from millrace.record import batch as b
from millrace.record.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    Record,
    RecordBatch,
    RecordBatchBuilder,
    TimestampType,
    compute_crc,
    iter_batches,
    read_header,
    set_base_offset,
    set_last_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    validate_batch,
)
from millrace.record.compression import CompressionType
from tests.unit.record.recordgen import (
    RecordSpec,
    build,
    codec_st,
    expected,
    raw_batch,
    records_st,
)

CODECS = list(CompressionType)
SPECS: list[RecordSpec] = [
    (1_700_000_000_000, b"key-0", b"value-0", []),
    (1_700_000_000_005, None, b"no key", [("trace", b"abc"), ("empty", b""), ("null", None)]),
    (1_699_999_999_990, b"tombstone", None, []),  # earlier than the base: negative delta
    (1_700_000_000_001, b"", b"", [("ü-ñicode", b"\x00\xff")]),
    (1_700_000_000_002, None, None, []),
]


def test_crc32c_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283


def test_layout_constants() -> None:
    assert (HEADER_SIZE, LOG_OVERHEAD) == (61, 12)
    assert (b.BASE_OFFSET_OFFSET, b.LENGTH_OFFSET, b.PARTITION_LEADER_EPOCH_OFFSET) == (0, 8, 12)
    assert (b.MAGIC_OFFSET, b.CRC_OFFSET, b.ATTRIBUTES_OFFSET) == (16, 17, 21)
    assert (b.LAST_OFFSET_DELTA_OFFSET, b.BASE_TIMESTAMP_OFFSET, b.MAX_TIMESTAMP_OFFSET) == (
        23, 27, 35)
    assert (b.PRODUCER_ID_OFFSET, b.PRODUCER_EPOCH_OFFSET, b.BASE_SEQUENCE_OFFSET) == (43, 51, 53)
    assert (b.RECORDS_COUNT_OFFSET, b.RECORDS_OFFSET) == (57, 61)


def test_header_bytes_at_documented_offsets() -> None:
    data = build(SPECS, CompressionType.GZIP, producer_id=77, producer_epoch=3,
                 base_sequence=10, is_transactional=True, base_offset=500,
                 partition_leader_epoch=9)
    u = struct.unpack_from
    assert u(">q", data, 0)[0] == 500
    assert u(">i", data, 8)[0] == len(data) - 12
    assert u(">i", data, 12)[0] == 9
    assert data[16] == 2
    assert u(">I", data, 17)[0] == crc32c(data[21:])
    assert u(">h", data, 21)[0] == 0x10 | 1  # transactional + gzip
    assert u(">i", data, 23)[0] == len(SPECS) - 1
    assert u(">q", data, 27)[0] == SPECS[0][0]  # the first record's timestamp
    assert u(">q", data, 35)[0] == max(s[0] for s in SPECS)
    assert u(">q", data, 43)[0] == 77
    assert u(">h", data, 51)[0] == 3
    assert u(">i", data, 53)[0] == 10
    assert u(">i", data, 57)[0] == len(SPECS)


def test_known_record_encoding() -> None:
    builder = RecordBatchBuilder()
    assert builder.append(1000, b"k", b"v") == 9
    assert builder.append(1001, None, b"", [("h", None)]) == 10
    data = builder.build()
    assert data[61:] == (b"\x10\x00\x00\x00\x02k\x02v\x00"
                         b"\x12\x00\x02\x02\x01\x00\x02\x02h\x01")


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_round_trip_every_codec(codec: CompressionType) -> None:
    data = build(SPECS, codec, base_offset=42)
    batch = RecordBatch(data)
    batch.validate()
    assert batch.compression == codec
    assert batch.header.compression == codec
    assert (batch.base_offset, batch.last_offset, batch.next_offset) == (42, 46, 47)
    assert batch.size == len(data) == batch.header.size
    assert batch.timestamp_type == TimestampType.CREATE_TIME
    assert not batch.is_control and not batch.is_transactional
    assert list(batch.records()) == expected(SPECS, 42)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_large_values(codec: CompressionType) -> None:
    big = bytes(range(256)) * 4096  # 1 MiB
    specs: list[RecordSpec] = [(5, b"k" * 1000, big, [("h" * 300, big[:70_000])]), (6, None, big, [])]
    data = build(specs, codec)
    assert RecordBatch(data).record_list() == expected(specs)


@settings(max_examples=60, deadline=None)
@given(specs=records_st, codec=codec_st, base_offset=st.integers(0, 1 << 40))
def test_random_batches_round_trip(
    specs: list[RecordSpec], codec: CompressionType, base_offset: int
) -> None:
    data = build(specs, codec, base_offset=base_offset)
    header = validate_batch(data, check_offsets=True)
    assert header.records_count == len(specs)
    assert RecordBatch(data).record_list() == expected(specs, base_offset)
    assert RecordBatch(bytearray(data)).record_list() == expected(specs, base_offset)
    assert RecordBatch(memoryview(b"pad" + data), 3).record_list() == expected(specs, base_offset)


def test_many_records_multibyte_deltas() -> None:
    specs: list[RecordSpec] = [(10**12 + i * 1000, b"k%d" % i, b"v" * (i % 200), [])
                               for i in range(20_000)]
    data = build(specs, CompressionType.LZ4)
    assert RecordBatch(data).record_list() == expected(specs)


def test_log_append_time_builder() -> None:
    data = build(SPECS, timestamp_type=TimestampType.LOG_APPEND_TIME)
    batch = RecordBatch(data)
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert {r.timestamp for r in batch.records()} == {batch.max_timestamp}


def test_builder_sizes() -> None:
    builder = RecordBatchBuilder()
    assert builder.estimated_size_in_bytes() == HEADER_SIZE
    total = HEADER_SIZE
    for ts, key, value, headers in SPECS:
        bound = RecordBatchBuilder.estimate_size_in_bytes(key, value, headers)
        size = builder.append(ts, key, value, headers)
        assert HEADER_SIZE + size <= bound
        total += size
        assert builder.estimated_size_in_bytes() == total
    assert builder.record_count == len(SPECS)
    assert len(builder.build()) == total
    assert builder.has_room_for(b"k", b"v", [], total + 100)
    assert not builder.has_room_for(b"k", b"v" * 100, [], total + 100)
    assert RecordBatchBuilder().has_room_for(b"k", b"v" * 1000, [], 10)


def test_build_is_cached_and_append_after_build_works() -> None:
    builder = RecordBatchBuilder(compression=CompressionType.ZSTD)
    builder.append(1, b"a", b"b")
    first = builder.build()
    assert builder.build() is first
    builder.append(2, b"c", b"d")
    second = builder.build()
    assert len(RecordBatch(second).record_list()) == 2
    builder.set_producer_state(5, 1, 100, True)
    third = RecordBatch(builder.build())
    third.validate()
    assert (third.producer_id, third.producer_epoch, third.header.base_sequence) == (5, 1, 100)
    assert third.is_transactional


def test_append_with_offset_leaves_gaps_like_the_cleaner_needs() -> None:
    builder = RecordBatchBuilder(base_offset=100, compression=CompressionType.GZIP)
    builder.append_with_offset(100, 1, b"a", b"1")
    builder.append_with_offset(103, 2, b"b", b"2")
    builder.append(3, b"c", b"3")  # continues at 104
    with pytest.raises(ValueError, match="not above"):
        builder.append_with_offset(104, 4, b"d", b"4")
    with pytest.raises(ValueError, match="negative timestamp"):
        builder.append_with_offset(110, -7, b"d", b"4")
    builder.append(5, b"e", b"5")  # the failed calls left no trace: 105
    data = builder.build()
    header = validate_batch(data)
    assert (header.records_count, header.last_offset_delta, header.last_offset) == (4, 5, 105)
    assert [r.offset for r in RecordBatch(data).records()] == [100, 103, 104, 105]
    with pytest.raises(CorruptBatchError, match="lastOffsetDelta"):
        validate_batch(data, check_offsets=True)


def test_empty_builder_builds_a_valid_empty_batch() -> None:
    data = RecordBatchBuilder().build()
    header = validate_batch(data)
    assert (header.records_count, header.last_offset_delta, header.base_timestamp) == (0, -1, -1)
    assert RecordBatch(data).record_list() == []
    with pytest.raises(CorruptBatchError, match="count"):
        validate_batch(data, check_offsets=True)


def test_builder_rejects_bad_input() -> None:
    builder = RecordBatchBuilder()
    with pytest.raises(ValueError, match="negative timestamp"):
        builder.append(-5, b"k", b"v")
    with pytest.raises(ValueError):
        RecordBatchBuilder(timestamp_type=TimestampType.NO_TIMESTAMP_TYPE)
    builder.append(-1, b"k", b"v")  # NO_TIMESTAMP is allowed
    assert builder.record_count == 1


def test_last_sequence_wraps_like_java() -> None:
    data = build([(1, None, b"x", [])] * 5, producer_id=1, producer_epoch=0,
                 base_sequence=2**31 - 2)
    header = read_header(data)
    assert header.last_sequence == 2
    assert read_header(build([(1, None, b"x", [])] * 3)).last_sequence == -1
    assert read_header(build([(1, None, b"x", [])] * 3, producer_id=1, producer_epoch=0,
                             base_sequence=7)).last_sequence == 9


def test_header_flags() -> None:
    header = BatchHeader(0, 49, -1, 2, 0, 0x08 | 0x20 | 0x40 | 4, 0, 0, 0, -1, -1, -1, 1)
    assert header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert header.is_control and header.has_delete_horizon and not header.is_transactional
    assert header.compression == CompressionType.ZSTD


# ------------------------------------------------------------------ corrupt input
def test_read_header_errors() -> None:
    data = build(SPECS)
    with pytest.raises(CorruptBatchError, match="61 bytes"):
        read_header(data[:60])
    with pytest.raises(CorruptBatchError, match="61 bytes"):
        read_header(data, len(data) - 10)
    legacy = bytearray(data)
    legacy[16] = 1
    with pytest.raises(CorruptBatchError, match="magic 1"):
        read_header(legacy)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_every_flipped_crc_covered_byte_is_detected(codec: CompressionType) -> None:
    data = build(SPECS, codec)
    for i in range(b.ATTRIBUTES_OFFSET, len(data)):
        bad = bytearray(data)
        bad[i] ^= 0x01
        with pytest.raises(CorruptBatchError):
            validate_batch(bad)
    stored = bytearray(data)
    stored[b.CRC_OFFSET] ^= 0xFF
    with pytest.raises(CorruptBatchError, match="CRC mismatch"):
        RecordBatch(stored).validate()
    assert not RecordBatch(stored).is_valid()


def test_bytes_outside_the_crc_do_not_matter() -> None:
    data = bytearray(build(SPECS))
    data[0:8] = b"\x01" * 8
    data[12:16] = b"\x02" * 4
    validate_batch(data)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_truncated_batches(codec: CompressionType) -> None:
    data = build(SPECS, codec)
    for cut in range(len(data)):
        prefix = data[:cut]
        with pytest.raises(CorruptBatchError):
            RecordBatch(prefix).record_list()
        with pytest.raises(CorruptBatchError):
            validate_batch(prefix)
        assert list(iter_batches(prefix)) == []  # a partial batch is not an error here


def test_trailing_garbage_is_not_part_of_the_batch() -> None:
    data = build(SPECS)
    batch = RecordBatch(data + b"garbage that follows")
    batch.validate()
    assert batch.record_list() == expected(SPECS)
    assert bytes(batch.buffer) == data


def _record(body: bytes) -> bytes:
    from millrace.record.varint import encode_varint

    return encode_varint(len(body)) + body


GOOD = _record(b"\x00\x00\x00\x02k\x02v\x00")


@pytest.mark.parametrize(
    ("records", "count", "reason"),
    [
        (GOOD, 2, "claims 2 records"),
        (GOOD + GOOD, 1, "left over"),
        (GOOD + GOOD[:-1], 2, "past the end|claims"),
        (b"\xfe\xff\xff\xff\x07" + b"\x00" * 10, 1, "claims"),  # huge record length
        (b"\x01" + b"\x00" * 8, 1, "claims -1 bytes"),
        (_record(b"\x00\x00\x00\xfe\xff\xff\xff\x07\x02v\x00"), 1, "key length"),
        (_record(b"\x00\x00\x00\x03\x02v\x00"), 1, "invalid key length -2"),
        (_record(b"\x00\x00\x00\x01\x40v\x00"), 1, "value length"),
        (_record(b"\x00\x00\x00\x01\x05\x00"), 1, "invalid value length -3"),
        (_record(b"\x00\x00\x00\x01\x01\x7e" + b"\x00" * 4), 1, "header count"),
        (_record(b"\x00\x00\x00\x01\x01\x02\x01\x00"), 1, "header key length"),
        (_record(b"\x00\x00\x00\x01\x01\x02\x04\xff\xfe\x00"), 1, "UTF-8"),
        (_record(b"\x00\x00\x00\x01\x01\x02\x02h\x20"), 1, "header value length"),
        (_record(b"\x00\x00\x00\x01\x01\x00\x00"), 1, "declared"),  # one byte too many
        (_record(b"\x00\x00\xff\xff\xff\xff\x1f\x01\x01\x00"), 1, "32 bits"),
        (_record(b"\x00" + b"\xff" * 10 + b"\x00\x01\x01\x00"), 1, "longer than 10"),
    ],
)
def test_malformed_records(records: bytes, count: int, reason: str) -> None:
    data = raw_batch(records, count)
    assert compute_crc(data) == read_header(data).crc  # only the decoder can notice
    with pytest.raises(CorruptBatchError, match=reason):
        RecordBatch(data).record_list()


def test_huge_record_count_is_refused_without_allocating() -> None:
    data = raw_batch(GOOD, 2**31 - 1)
    with pytest.raises(CorruptBatchError, match="claims"):
        RecordBatch(data).record_list()
    with pytest.raises(CorruptBatchError, match="claims"):
        validate_batch(data)
    with pytest.raises(CorruptBatchError, match="negative"):
        validate_batch(raw_batch(GOOD, -1, last_offset_delta=0))


def test_unknown_codec_and_short_length() -> None:
    with pytest.raises(CorruptBatchError, match="codec id 6"):
        validate_batch(raw_batch(GOOD, 1, attributes=6))
    with pytest.raises(CorruptBatchError, match="codec id 7"):
        RecordBatch(raw_batch(GOOD, 1, attributes=7)).record_list()
    short = bytearray(raw_batch(GOOD, 1))
    struct.pack_into(">i", short, 8, 40)
    with pytest.raises(CorruptBatchError, match="below the minimum"):
        validate_batch(short)
    with pytest.raises(CorruptBatchError, match="below the minimum"):
        RecordBatch(short).record_list()


def test_check_offsets() -> None:
    data = raw_batch(GOOD, 1, last_offset_delta=5)  # a compacted batch
    assert validate_batch(data).last_offset_delta == 5
    with pytest.raises(CorruptBatchError, match="lastOffsetDelta"):
        validate_batch(data, check_offsets=True)


# ------------------------------------------------------------------ iteration
def test_iter_batches_walks_concatenated_batches_and_stops_at_a_partial_one() -> None:
    batches = [build(SPECS[:n], codec, base_offset=10 * n)
               for n, codec in zip(range(1, 4), CODECS, strict=False)]
    stream = b"".join(batches)
    starts = [0, len(batches[0]), len(batches[0]) + len(batches[1])]
    walked = list(iter_batches(stream))
    assert [pos for pos, _ in walked] == starts
    assert [h.base_offset for _, h in walked] == [10, 20, 30]
    for cut in range(len(stream) + 1):  # fed byte by byte
        complete = [s for s, data in zip(starts, batches) if s + len(data) <= cut]
        assert [pos for pos, _ in iter_batches(stream[:cut])] == complete
    assert [p for p, _ in iter_batches(stream, starts[1])] == starts[1:]


def test_iter_batches_rejects_nonsense_lengths_and_legacy_data() -> None:
    data = build(SPECS)
    bad = data + struct.pack(">qi", 0, 10) + b"\x00" * 20
    with pytest.raises(CorruptBatchError, match="below the minimum"):
        list(iter_batches(bad))
    negative = struct.pack(">qi", 0, -1)
    with pytest.raises(CorruptBatchError):
        list(iter_batches(negative))
    legacy = struct.pack(">qiIbb", 0, 14, 0, 1, 0) + b"\xff" * 8
    with pytest.raises(CorruptBatchError, match="legacy"):
        list(iter_batches(legacy))


# ------------------------------------------------------------------ broker rewrites
@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_offset_and_epoch_rewrites_keep_the_crc(codec: CompressionType) -> None:
    data = bytearray(b"\xee" * 7 + build(SPECS, codec))
    set_base_offset(data, 7, 1000)
    set_partition_leader_epoch(data, 7, 12)
    header = validate_batch(data, 7, check_offsets=True)
    assert (header.base_offset, header.partition_leader_epoch) == (1000, 12)
    assert [r.offset for r in RecordBatch(data, 7).records()] == list(range(1000, 1005))
    with memoryview(data) as view:
        set_last_offset(view, 7, 2004)
    assert read_header(data, 7).base_offset == 2000
    assert compute_crc(data, 7) == read_header(data, 7).crc


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_set_log_append_time(codec: CompressionType) -> None:
    data = bytearray(build(SPECS, codec, is_transactional=True, producer_id=1,
                           producer_epoch=0, base_sequence=0))
    set_log_append_time(data, 0, 1_800_000_000_000)
    header = validate_batch(data)
    assert header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert header.is_transactional and header.compression == codec
    assert header.max_timestamp == 1_800_000_000_000
    assert {r.timestamp for r in RecordBatch(data).records()} == {1_800_000_000_000}
    again = bytearray(data)
    set_log_append_time(again, 0, 1_800_000_000_000)
    assert again == data


def test_compute_crc_errors() -> None:
    with pytest.raises(CorruptBatchError):
        compute_crc(b"\x00" * 30)
    with pytest.raises(CorruptBatchError):
        compute_crc(build(SPECS)[:-1])


def test_record_repr_and_equality() -> None:
    rec = Record(1, 2, b"k", None)
    assert rec.headers == () and rec == Record(1, 2, b"k", None, ())
    assert "RecordBatch(base_offset=0" in repr(RecordBatch(build(SPECS)))
