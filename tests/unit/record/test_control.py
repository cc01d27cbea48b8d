"""Transaction markers: the control batch layout and its key/value parsing."""

from __future__ import annotations

import pytest

from millrace.common.errors import CorruptBatchError
from millrace.record.batch import RecordBatch, TimestampType, validate_batch
from millrace.record.compression import CompressionType
from millrace.record.control import (
    ControlRecordType,
    build_end_txn_marker,
    end_txn_marker_key,
    end_txn_marker_value,
    parse_control_record,
    parse_end_txn_marker_value,
)
from millrace.record.memory_records import MemoryRecords


@pytest.mark.parametrize("committed", [True, False])
def test_end_txn_marker_round_trip(committed: bool) -> None:
    data = build_end_txn_marker(4000, 7, committed, coordinator_epoch=12,
                                timestamp=1_700_000_000_123, base_offset=55,
                                partition_leader_epoch=3)
    header = validate_batch(data, check_offsets=True)
    assert header.is_control and header.is_transactional
    assert header.compression == CompressionType.NONE
    assert header.timestamp_type == TimestampType.CREATE_TIME
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4000, 7, -1)
    assert (header.base_offset, header.partition_leader_epoch, header.records_count) == (55, 3, 1)
    (record,) = RecordBatch(data).records()
    assert (record.offset, record.timestamp) == (55, 1_700_000_000_123)
    assert record.key == (b"\x00\x00\x00\x01" if committed else b"\x00\x00\x00\x00")
    assert record.value == b"\x00\x00\x00\x00\x00\x0c"
    expected = ControlRecordType.COMMIT if committed else ControlRecordType.ABORT
    assert parse_control_record(record.key) is expected
    assert parse_end_txn_marker_value(record.value) == 12
    # consumers skip control batches unless asked
    assert list(MemoryRecords(data).records()) == []
    assert len(list(MemoryRecords(data).records(include_control=True))) == 1


def test_key_and_value_helpers() -> None:
    assert end_txn_marker_key(True) == b"\x00\x00\x00\x01"
    assert end_txn_marker_value(-1) == b"\x00\x00\xff\xff\xff\xff"


def test_parse_control_record() -> None:
    assert parse_control_record(b"\x00\x00\x00\x02") is ControlRecordType.LEADER_CHANGE
    assert parse_control_record(b"\x00\x01\x00\x00trailing") is ControlRecordType.ABORT
    assert parse_control_record(b"\x00\x00\x00\x63") is ControlRecordType.UNKNOWN
    for bad in (None, b"", b"\x00\x00\x00"):
        with pytest.raises(CorruptBatchError, match="4 bytes"):
            parse_control_record(bad)
    with pytest.raises(CorruptBatchError, match="version"):
        parse_control_record(b"\xff\xff\x00\x00")


def test_parse_end_txn_marker_value() -> None:
    assert parse_end_txn_marker_value(b"\x00\x01\x00\x00\x00\x05") == 5  # newer version: read
    for bad in (None, b"\x00\x00\x00\x00\x00"):
        with pytest.raises(CorruptBatchError, match="6 bytes"):
            parse_end_txn_marker_value(bad)
    with pytest.raises(CorruptBatchError, match="version"):
        parse_end_txn_marker_value(b"\x80\x00\x00\x00\x00\x00")
