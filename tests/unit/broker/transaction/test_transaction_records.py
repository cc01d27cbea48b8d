"""``__transaction_state`` key/value layouts: exact bytes, round trips, bad input."""

from __future__ import annotations

import pytest

from millrace.broker.transaction.records import (
    TransactionLogValue,
    UnknownTxnRecordVersion,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from millrace.common.errors import ProtocolDecodeError

VALUE = TransactionLogValue(producer_id=5, producer_epoch=1, transaction_timeout_ms=60000,
                            transaction_status=1,
                            partitions=(("a", 0), ("a", 1), ("b", 2)),
                            last_update_timestamp_ms=100, start_timestamp_ms=90)


def test_key_bytes() -> None:
    assert encode_key("tx") == b"\x00\x00" b"\x00\x02tx"
    assert decode_key(b"\x00\x00\x00\x02tx") == "tx"


def test_value_v0_bytes() -> None:
    assert encode_value(VALUE, empty=False) == (
        b"\x00\x00"                              # value version 0
        b"\x00\x00\x00\x00\x00\x00\x00\x05"      # producer id
        b"\x00\x01"                              # producer epoch
        b"\x00\x00\xea\x60"                      # timeout 60000
        b"\x01"                                  # status Ongoing
        b"\x00\x00\x00\x02"                      # 2 topics
        b"\x00\x01a" b"\x00\x00\x00\x02" b"\x00\x00\x00\x00" b"\x00\x00\x00\x01"
        b"\x00\x01b" b"\x00\x00\x00\x01" b"\x00\x00\x00\x02"
        b"\x00\x00\x00\x00\x00\x00\x00\x64"      # last update 100
        b"\x00\x00\x00\x00\x00\x00\x00\x5a")     # start 90


def test_empty_state_writes_null_partitions() -> None:
    data = encode_value(VALUE, empty=True)
    assert data[17:21] == b"\xff\xff\xff\xff"
    assert decode_value(data).partitions == ()


def test_value_v1_flexible_round_trip() -> None:
    data = encode_value(VALUE, empty=False, version=1)
    assert data[:2] == b"\x00\x01"
    assert data[17:18] == b"\x03"               # compact array: 2 topics + 1
    assert data[-1:] == b"\x00"                 # empty tagged fields
    assert decode_value(data) == VALUE


def test_unknown_versions_and_truncation() -> None:
    with pytest.raises(UnknownTxnRecordVersion):
        decode_key(b"\x00\x01\x00\x02tx")
    with pytest.raises(UnknownTxnRecordVersion):
        decode_value(b"\x00\x02" + encode_value(VALUE, empty=False)[2:])
    with pytest.raises(ProtocolDecodeError):
        decode_value(b"\x00")
    data = encode_value(VALUE, empty=False)
    for cut in range(2, len(data)):
        with pytest.raises(ProtocolDecodeError):
            decode_value(data[:cut])
