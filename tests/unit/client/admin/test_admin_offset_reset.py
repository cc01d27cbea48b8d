"""The rules of kafka-consumer-groups --reset-offsets, one partition at a time."""

from __future__ import annotations

import datetime as dt

import pytest

from millrace.client.admin import IllegalArgumentError, OffsetResetSpec, TopicPartition
from millrace.client.admin.offset_reset import PartitionOffsets, reset_offset

TP = TopicPartition("t", 0)
KNOWN = PartitionOffsets(earliest=10, latest=50, committed=30, by_timestamp=42)


@pytest.mark.parametrize(("spec", "expected"), [
    (OffsetResetSpec.to_earliest(), 10),
    (OffsetResetSpec.to_latest(), 50),
    (OffsetResetSpec.to_current(), 30),
    (OffsetResetSpec.to_offset(20), 20),
    (OffsetResetSpec.to_offset(5), 10),        # below the log start: clamped up
    (OffsetResetSpec.to_offset(99), 50),       # past the log end: clamped down
    (OffsetResetSpec.shift_by(-5), 25),
    (OffsetResetSpec.shift_by(-100), 10),
    (OffsetResetSpec.shift_by(100), 50),
    (OffsetResetSpec.to_datetime(1_700_000_000_000), 42),
])
def test_new_offset(spec: OffsetResetSpec, expected: int) -> None:
    assert reset_offset(spec, TP, KNOWN) == expected


def test_datetime_after_the_last_record_goes_to_the_end() -> None:
    known = PartitionOffsets(0, 7, None, -1)
    assert reset_offset(OffsetResetSpec.to_datetime(1), TP, known) == 7


def test_without_a_committed_offset() -> None:
    known = PartitionOffsets(0, 7)
    assert reset_offset(OffsetResetSpec.to_current(), TP, known) == 7
    with pytest.raises(IllegalArgumentError, match="no committed offset"):
        reset_offset(OffsetResetSpec.shift_by(1), TP, known)


def test_spec_construction() -> None:
    with pytest.raises(IllegalArgumentError):
        OffsetResetSpec.to_offset(-1)
    when = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)
    spec = OffsetResetSpec.to_datetime(when)
    assert spec.value == 1_714_564_800_000 and spec.needs_timestamp_lookup
    assert str(spec) == "to-datetime 2024-05-01T12:00:00.000+00:00"
    assert OffsetResetSpec.shift_by(-2).needs_committed
    assert str(OffsetResetSpec.to_earliest()) == "to-earliest"
