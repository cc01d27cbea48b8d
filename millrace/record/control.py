"""Control records: the transaction markers a partition leader writes (COMMIT / ABORT).

Java counterparts: ``org.apache.kafka.common.record.ControlRecordType``,
``EndTransactionMarker`` and ``MemoryRecords.withEndTransactionMarker``.

A control batch has attributes isControl + isTransactional, no compression, CreateTime,
the transaction's producerId/epoch, baseSequence -1 and exactly one record::

    key    version int16 (0) | type int16 (0 ABORT, 1 COMMIT; 2-6 are KRaft-internal)
    value  version int16 (0) | coordinatorEpoch int32        (end-transaction markers)

Consumers never hand control records to the application; in read_committed mode an ABORT
marker ends the aborted transaction's range.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

from millrace.common.errors import CorruptBatchError
from millrace.record.batch import (
    NO_PARTITION_LEADER_EPOCH,
    NO_SEQUENCE,
    RecordBatch,
    RecordBatchBuilder,
)

__all__ = [
    "ControlRecordType",
    "EndTransactionMarker",
    "build_end_txn_marker",
    "end_txn_marker_key",
    "end_txn_marker_value",
    "parse_control_record",
    "parse_end_txn_marker_value",
    "read_end_txn_marker",
]

CURRENT_CONTROL_RECORD_KEY_VERSION = 0
CURRENT_END_TXN_MARKER_VERSION = 0

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class ControlRecordType(IntEnum):
    UNKNOWN = -1
    ABORT = 0
    COMMIT = 1
    # KRaft-internal types, listed so they parse by name:
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


def end_txn_marker_key(committed: bool) -> bytes:
    record_type = ControlRecordType.COMMIT if committed else ControlRecordType.ABORT
    return _KEY.pack(CURRENT_CONTROL_RECORD_KEY_VERSION, record_type)


def end_txn_marker_value(coordinator_epoch: int) -> bytes:
    return _VALUE.pack(CURRENT_END_TXN_MARKER_VERSION, coordinator_epoch)


def build_end_txn_marker(
    producer_id: int,
    producer_epoch: int,
    committed: bool,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A complete control batch holding one COMMIT or ABORT marker."""
    builder = RecordBatchBuilder(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
        is_transactional=True,
        is_control=True,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
    )
    builder.append(timestamp, end_txn_marker_key(committed),
                   end_txn_marker_value(coordinator_epoch))
    return builder.build()


def parse_control_record(key: bytes | None) -> ControlRecordType:
    """The type in a control record's key (``UNKNOWN`` for a type id this code lacks)."""
    if key is None or len(key) < _KEY.size:
        raise CorruptBatchError(f"control record key needs {_KEY.size} bytes, got "
                                f"{0 if key is None else len(key)}")
    version, type_id = _KEY.unpack_from(key)
    if version < 0:
        raise CorruptBatchError(f"invalid control record key version {version}")
    try:
        return ControlRecordType(type_id)
    except ValueError:
        return ControlRecordType.UNKNOWN


def parse_end_txn_marker_value(value: bytes | None) -> int:
    """The coordinator epoch in an end-transaction marker's value."""
    if value is None or len(value) < _VALUE.size:
        raise CorruptBatchError(f"end transaction marker value needs {_VALUE.size} bytes, got "
                                f"{0 if value is None else len(value)}")
    version, coordinator_epoch = _VALUE.unpack_from(value)
    if version < 0:
        raise CorruptBatchError(f"invalid end transaction marker version {version}")
    return int(coordinator_epoch)


class EndTransactionMarker(NamedTuple):
    """What a COMMIT or ABORT control record says (Java ``EndTransactionMarker``)."""

    committed: bool
    coordinator_epoch: int


def read_end_txn_marker(buf: bytes | bytearray | memoryview, pos: int = 0
                        ) -> EndTransactionMarker | None:
    """The end-transaction marker in the control batch at ``pos`` of ``buf``; None for a
    control batch of another type (KRaft's) or without records.  Raises CorruptBatchError
    for a control record whose key or value is malformed."""
    for record in RecordBatch(buf, pos).records():
        kind = parse_control_record(record.key)
        if kind not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            return None
        return EndTransactionMarker(kind is ControlRecordType.COMMIT,
                                    parse_end_txn_marker_value(record.value))
    return None
