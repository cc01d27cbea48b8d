"""Record batches (message format v2), legacy message sets, control records, compression.

Sans-I/O: everything here works on ``bytes``/``bytearray``/``memoryview``.  See each module
for its byte layout and Java counterpart.
"""

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
from millrace.record.compression import (
    DEFAULT_MAX_DECOMPRESSED,
    CompressionType,
    compress,
    decompress,
)
from millrace.record.control import (
    ControlRecordType,
    build_end_txn_marker,
    parse_control_record,
    parse_end_txn_marker_value,
)
from millrace.record.legacy import LegacyRecordBatch, iter_legacy_records
from millrace.record.memory_records import AnyRecordBatch, MemoryRecords

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED",
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "AnyRecordBatch",
    "BatchHeader",
    "CompressionType",
    "ControlRecordType",
    "LegacyRecordBatch",
    "MemoryRecords",
    "Record",
    "RecordBatch",
    "RecordBatchBuilder",
    "TimestampType",
    "build_end_txn_marker",
    "compress",
    "compute_crc",
    "decompress",
    "iter_batches",
    "iter_legacy_records",
    "parse_control_record",
    "parse_end_txn_marker_value",
    "read_header",
    "set_base_offset",
    "set_last_offset",
    "set_log_append_time",
    "set_partition_leader_epoch",
    "validate_batch",
]
